import { Type, type Static } from 'typebox';

/**
 * An organization is an account seen as its team: one account, one organization, the same id
 * (docs/decisions/0041-one-account-one-organization.md).
 */
export const OrganizationOut = Type.Object({
  id: Type.String({ description: 'The account id' }),
  name: Type.String(),
});

export const MemberRoleOut = Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member')]);

export const OrganizationMembership = Type.Object({
  ...OrganizationOut.properties,
  role: MemberRoleOut,
});

export type OrganizationView = Static<typeof OrganizationOut>;
export type OrganizationMembershipView = Static<typeof OrganizationMembership>;
