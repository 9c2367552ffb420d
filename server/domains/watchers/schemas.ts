import { Type, type Static } from 'typebox';
import { BrandParams, EmailAddress, Nullable, Timestamp } from '../../core/schemas.js';

export const WatcherOut = Type.Object({
  id: Type.String(),
  ticketId: Type.String(),
  memberId: Type.String(),
  memberEmail: Type.String(),
  memberName: Nullable(Type.String()),
  addedBy: Nullable(Type.String({ description: 'Who added the watcher (an API key id for API calls)' })),
  addedAt: Timestamp,
  notifyOnComment: Type.Boolean(),
  notifyOnStatusChange: Type.Boolean(),
});

const MemberId = Type.String({ minLength: 1, maxLength: 64, description: 'A member id from GET /v1/accounts/me/members' });
const MemberEmail = EmailAddress("Default: the member's email");
const MemberName = Nullable(Type.String({ maxLength: 200, description: "Default: the member's name" }));

/** A watcher as ticket create takes it (`watchers: [...]`). */
export const WatcherInput = Type.Object({ memberId: MemberId, memberEmail: Type.Optional(MemberEmail), memberName: Type.Optional(MemberName) }, { additionalProperties: false });

export const AddWatcherBody = Type.Object(
  {
    memberId: MemberId,
    memberEmail: Type.Optional(MemberEmail),
    memberName: Type.Optional(MemberName),
    notifyOnComment: Type.Optional(Type.Boolean({ default: true })),
    notifyOnStatusChange: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: false },
);

export const UpdateWatcherBody = Type.Object(
  { notifyOnComment: Type.Optional(Type.Boolean()), notifyOnStatusChange: Type.Optional(Type.Boolean()) },
  { additionalProperties: false, minProperties: 1 },
);

// Spelled out rather than taken from tickets/schemas.ts, which imports WatcherInput from here.
export const WatcherTicketParams = Type.Object({
  ...BrandParams.properties,
  ticketId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const WatcherParams = Type.Object({
  ...WatcherTicketParams.properties,
  memberId: Type.String({ minLength: 1, maxLength: 64, description: "The watching member's id (not the watcher id)" }),
});

export type WatcherView = Static<typeof WatcherOut>;
export type WatcherInputValue = Static<typeof WatcherInput>;
export type AddWatcherInput = Static<typeof AddWatcherBody>;
export type UpdateWatcherInput = Static<typeof UpdateWatcherBody>;
