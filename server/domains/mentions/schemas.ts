import { Type, type Static } from 'typebox';
import { Nullable, Timestamp } from '../../core/schemas.js';

/** An unread mention as the dashboard's notification bell reads it. */
export const MentionOut = Type.Object({
  id: Type.String(),
  ticketId: Type.String(),
  brandId: Type.String(),
  commentId: Type.String(),
  ticketNumber: Type.Integer(),
  ticketTitle: Type.String(),
  brandName: Type.String(),
  ticketPrefix: Type.String(),
  mentionedBy: Nullable(Type.String({ description: 'Display name of whoever wrote the comment' })),
  createdAt: Timestamp,
});
export type MentionView = Static<typeof MentionOut>;

export const UnreadMentions = Type.Array(MentionOut, { description: "The caller's unacknowledged mentions, newest first (at most 100)" });

export const MentionParams = Type.Object({ mentionId: Type.String({ minLength: 1, maxLength: 64 }) });
export const MentionTicketParams = Type.Object({ ticketId: Type.String({ minLength: 1, maxLength: 64 }) });

export const AckOut = Type.Object({
  success: Type.Literal(true),
  acknowledged: Type.Integer({ description: 'How many mentions this call acknowledged (0 when already acknowledged)' }),
});
