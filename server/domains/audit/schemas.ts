import { Type, type Static } from 'typebox';
import { PageOf, PageQuery } from '../../core/pagination.js';
import { BrandParams, Nullable, Timestamp } from '../../core/schemas.js';

const PerformerType = Type.Union([Type.Literal('api'), Type.Literal('user'), Type.Literal('customer'), Type.Literal('system')]);
const DateOrDateTime = (description: string) => Type.Union([Type.String({ format: 'date-time' }), Type.String({ format: 'date' })], { description });

export const AuditLogOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('audit_log'),
  brandId: Nullable(Type.String()),
  ticketId: Nullable(Type.String({ description: 'The ticket the entry belongs to (also for its comments, attachments and watchers)' })),
  event: Type.String({ description: '<entity>.<verb>: ticket.created, contact.updated, tag.merged, …' }),
  entityType: Type.String(),
  entityId: Type.String(),
  changes: Type.Record(Type.String(), Type.Object({ old: Type.Unknown(), new: Type.Unknown() }), {
    description: "What an update changed: { field: { old, new } } (the dashboard's shape); {} for creates and deletes",
  }),
  changeList: Type.Array(Type.Object({ field: Type.String(), from: Type.Unknown(), to: Type.Unknown() }), {
    description: 'The same changes as the stored ordered list of { field, from, to }',
  }),
  performedBy: Type.Object({
    type: PerformerType,
    id: Nullable(Type.String({ description: 'API key id, member id, …; null for the system' })),
    name: Nullable(Type.String({ description: "The API key's name, the member's name, or the system part (e.g. cli)" })),
    apiKeyPrefix: Type.Optional(Type.String({ description: "The API key's display prefix (as in the key list), when an API key made the change" })),
  }),
  performerType: PerformerType,
  source: Type.String({ description: 'Where the change came from: api, dashboard, portal, system (email for inbound mail)' }),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  requestId: Nullable(Type.String()),
  createdAt: Timestamp,
});

export const AuditLogListQuery = Type.Object(
  {
    entityType: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'ticket, comment, contact, tag, …' })),
    entityId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    event: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'An exact event name, e.g. ticket.updated' })),
    startDate: Type.Optional(DateOrDateTime('Entries at or after this instant (a date alone: its start, UTC)')),
    endDate: Type.Optional(DateOrDateTime('Entries at or before this instant (a date alone: the whole day, UTC)')),
    performerType: Type.Optional(PerformerType),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const TicketLogParams = Type.Object({
  ...BrandParams.properties,
  ticketId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const AuditLogPage = PageOf(AuditLogOut);

export type AuditLogView = Static<typeof AuditLogOut>;
export type AuditLogListInput = Static<typeof AuditLogListQuery>;
