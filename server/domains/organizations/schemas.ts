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

export const UpdateOrganizationBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 200, pattern: '\\S', description: 'Stored trimmed' }) },
  { additionalProperties: false },
);
export const UpdateOrganizationResult = Type.Object({ success: Type.Literal(true), name: Type.String() });

export const SwitchOrganizationBody = Type.Object(
  { organizationId: Type.String({ minLength: 1, maxLength: 64, description: 'An organization (account) id of GET /v1/auth/organizations' }) },
  { additionalProperties: false },
);
export const SwitchOrganizationResult = Type.Object({
  sessionToken: Type.Optional(Type.String({ description: 'The new session (`ts_…`), shown once; absent when the session came as the cookie, which is replaced instead' })),
  organizationId: Type.String(),
  orgRole: MemberRoleOut,
  expiresAt: Type.String({ format: 'date-time' }),
});

export const ConnectBody = Type.Object(
  { apiKey: Type.String({ minLength: 1, maxLength: 200, description: 'An API key (`sk_live_…` or `sk_test_…`) of this organization' }) },
  { additionalProperties: false },
);

export const DeleteAccountBody = Type.Object(
  { confirmation: Type.Optional(Type.String({ maxLength: 100, description: 'Must be exactly DELETE' })) },
  { additionalProperties: false },
);
export const DeleteAccountResult = Type.Object({
  success: Type.Literal(true),
  message: Type.String(),
  deletedBrands: Type.Array(Type.String(), { description: 'Ids of the brands deleted, both modes' }),
  deletedBrandsCount: Type.Integer(),
});

export type UpdateOrganizationResultView = Static<typeof UpdateOrganizationResult>;
export type SwitchOrganizationResultView = Static<typeof SwitchOrganizationResult>;
export type DeleteAccountResultView = Static<typeof DeleteAccountResult>;
