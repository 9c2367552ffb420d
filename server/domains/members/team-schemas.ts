import { Type, type Static } from 'typebox';
import { EmailAddress, Nullable } from '../../core/schemas.js';

/**
 * Team management by signed-in members (`/v1/auth/members…`, accept-invite, transfer-ownership), in
 * the shapes the hosted product's dashboard sends and reads.
 */

const Role = (options: { description?: string } = {}) => Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member')], options);
const Id = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });
/** As an API key's brand scope takes them (ws_… accepted). */
const BrandIds = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 500, uniqueItems: true });

export const BrandAssignment = Type.Object({
  allBrands: Type.Boolean({ description: 'Every brand, present and future (owners and admins see every brand whatever is stored)' }),
  brandIds: Type.Array(Type.String(), { description: 'The assigned brands when allBrands is false (empty otherwise)' }),
});

export const TeamMemberOut = Type.Object({
  id: Type.String({ description: 'The member id: valid as assigneeId, and the invite id of a pending member' }),
  email: Type.String(),
  firstName: Type.Optional(Type.String()),
  lastName: Type.Optional(Type.String()),
  role: Role(),
  status: Type.Union([Type.Literal('active'), Type.Literal('pending')]),
  sentAt: Type.Optional(Type.String({ format: 'date-time', description: 'Pending: when the latest invitation was sent' })),
  expiresAt: Type.Optional(Type.String({ format: 'date-time', description: 'Pending: when the latest invitation stops working' })),
  brandAssignment: BrandAssignment,
  avatarUrl: Type.Optional(Nullable(Type.String())),
});

export const TeamList = Type.Object({
  members: Type.Array(TeamMemberOut, { description: 'Active members' }),
  invites: Type.Array(TeamMemberOut, { description: 'Pending members (invited, not accepted yet)' }),
});

export const TeamListQuery = Type.Object({
  brandId: Type.Optional(Id('Only those who can work in this brand (owners, admins, all-brand members and those assigned to it)')),
});

export const MemberParams = Type.Object({ memberId: Id('A member id (`mem_…`), or the id of a pending invite') });

export const InviteBody = Type.Object(
  {
    email: EmailAddress('The address to invite'),
    role: Type.Union([Type.Literal('admin'), Type.Literal('member')]),
    allBrands: Type.Optional(Type.Boolean({ description: 'Default: true unless brandIds are given' })),
    brandIds: Type.Optional(BrandIds),
  },
  { additionalProperties: false },
);

export const UpdateMemberBody = Type.Object(
  { role: Role({ description: "owner (by the owner only) transfers ownership to an active member; the owner's own role changes only that way" }) },
  { additionalProperties: false },
);

export const TransferOwnershipBody = Type.Object({ newOwnerId: Id('An active member of the organization') }, { additionalProperties: false });

export const AcceptInviteBody = Type.Object({ inviteId: Id('The `org_invite` of the invitation link (the pending member id)') }, { additionalProperties: false });

export const BrandAssignmentsBody = Type.Object(
  { allBrands: Type.Boolean(), brandIds: Type.Optional(BrandIds) },
  { additionalProperties: false, description: 'brandIds must be empty (or absent) when allBrands is true' },
);

export const BrandAssignmentsOut = Type.Object({
  memberId: Type.String(),
  ...BrandAssignment.properties,
  availableBrands: Type.Array(Type.Object({ id: Type.String(), name: Type.String() }), { description: 'The live brands the caller may assign' }),
});

export const Done = Type.Object({ success: Type.Literal(true), message: Type.String() });
export const InviteSent = Type.Object({ ...Done.properties, memberId: Type.String({ description: 'The pending member: the invite id' }) });
export const InviteAccepted = Type.Object({
  success: Type.Literal(true),
  organizationId: Type.String({ description: 'The organization (account) joined' }),
  memberId: Type.String({ description: 'The member in that organization' }),
});

export type TeamMemberView = Static<typeof TeamMemberOut>;
export type TeamListView = Static<typeof TeamList>;
export type InviteInput = Static<typeof InviteBody>;
export type BrandAssignmentsInput = Static<typeof BrandAssignmentsBody>;
export type BrandAssignmentsView = Static<typeof BrandAssignmentsOut>;
