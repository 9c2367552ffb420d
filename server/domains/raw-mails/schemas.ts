import { Type, type Static } from 'typebox';

export const RawMailOut = Type.Object({
  id: Type.String(),
  ticketId: Type.String(),
  commentId: Type.Union([Type.String(), Type.Null()], { description: 'The comment the message became; null for the message that opened the ticket' }),
  messageId: Type.String(),
  size: Type.Integer(),
  sha256: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: Type.String({ format: 'date-time', description: 'When the dispatcher deletes it (rawMailRetentionDays)' }),
});
export type RawMailView = Static<typeof RawMailOut>;

export const TicketRawMailsParams = Type.Object({ brandId: Type.String(), ticketId: Type.String() });
export const TicketRawMailParams = Type.Object({ brandId: Type.String(), ticketId: Type.String(), rawMailId: Type.String() });
