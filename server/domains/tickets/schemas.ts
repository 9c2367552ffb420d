import { Type, type Static } from 'typebox';
import { PageOf, PageQuery } from '../../core/pagination.js';
import { BrandParams, EmailAddress, FreeObject, Metadata, Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';
import { WatcherInput } from '../watchers/schemas.js';

export const PRIORITIES = ['low', 'normal', 'medium', 'high', 'urgent'] as const;
export const SOURCES = ['api', 'web', 'email', 'slack', 'sms', 'discord', 'instagram', 'twitter', 'whatsapp', 'custom'] as const;
export const MAX_TITLE_LENGTH = 500;
export const MAX_BODY_LENGTH = 100_000;
export const MAX_SEARCH_LENGTH = 500;

const Priority = Type.Union([Type.Literal('low'), Type.Literal('normal'), Type.Literal('medium'), Type.Literal('high'), Type.Literal('urgent')], {
  description: 'low < normal < medium < high < urgent',
});
const Source = Type.Union(SOURCES.map((s) => Type.Literal(s)));
const Id = Type.String({ minLength: 1, maxLength: 64 });
const Email = EmailAddress('Stored trimmed and lower-cased');
export const Link = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2048 }),
    title: Type.Optional(Nullable(Type.String({ maxLength: 500 }))),
    type: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
  },
  { additionalProperties: false },
);
const AnyObject = FreeObject();
export const CLOSE_REASONS = ['no_response', 'out_of_scope', 'customer_left', 'duplicate'] as const;
export const CloseReason = Type.Union(
  CLOSE_REASONS.map((r) => Type.Literal(r)),
  { description: 'Why the ticket was closed; kept independent of status' },
);
const DueAt = Type.String({ format: 'date-time', description: 'ISO date-time (stored to the millisecond); null clears' });

export const TicketOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('ticket'),
  brandId: Type.String(),
  ticketNumber: Type.Integer(),
  title: Type.String(),
  body: Nullable(Type.String()),
  status: Type.String(),
  statusRef: Nullable(Type.Object({ id: Type.String(), key: Type.String(), name: Type.String(), color: Type.String() })),
  priority: Nullable(Type.String()),
  assigneeId: Nullable(Type.String()),
  createdBy: Nullable(Type.String()),
  customerId: Nullable(Type.String()),
  customer: Nullable(
    Type.Object({
      id: Type.String(),
      email: Type.String(),
      name: Nullable(Type.String()),
      avatarUrl: Nullable(Type.String()),
      companyId: Nullable(Type.String()),
      company: Nullable(Type.Object({ id: Type.String(), name: Type.String() })),
    }),
  ),
  categoryId: Nullable(Type.String()),
  category: Nullable(Type.Object({ id: Type.String(), name: Type.String(), color: Type.String() })),
  tags: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), color: Type.String() })),
  links: Type.Array(Type.Object({ url: Type.String(), title: Type.Optional(Nullable(Type.String())), type: Type.Optional(Nullable(Type.String())) })),
  customFields: Type.Unknown(),
  metadata: AnyObject,
  source: Type.String(),
  sourceId: Nullable(Type.String()),
  sourceData: Nullable(AnyObject),
  commentCount: Type.Integer(),
  attachmentCount: Type.Integer(),
  isSpam: Type.Boolean(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  deletedAt: Nullable(Timestamp),
  mergedIntoId: Nullable(Type.String()),
  closeReason: Nullable(CloseReason),
  dueAt: Nullable(Timestamp),
  legalHold: Type.Boolean({ description: 'Under legal hold: no retention deletes or anonymizes the ticket or removes its attachments or raw mail' }),
});

export const CreateTicketBody = Type.Object(
  {
    title: Type.String({ minLength: 1, maxLength: MAX_TITLE_LENGTH, pattern: PATTERNS.notBlank, description: 'Stored trimmed' }),
    body: Type.Optional(Nullable(Type.String({ maxLength: MAX_BODY_LENGTH }))),
    customerEmail: Type.Optional(Nullable(Email)),
    customerName: Type.Optional(Nullable(Type.String({ maxLength: 200 }))),
    status: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'A status key of the brand (system or custom); default open' })),
    priority: Type.Optional(Nullable(Priority)),
    assigneeId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, description: 'A member id from GET /v1/accounts/me/members' }))),
    createdBy: Type.Optional(Nullable(Type.String({ maxLength: 200 }))),
    categoryId: Type.Optional(Nullable(Id)),
    tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 50, description: 'Tag ids (tag_…) or names; unknown names create tags' })),
    links: Type.Optional(Type.Array(Link, { maxItems: 50 })),
    customFields: Type.Optional(
      Type.Unknown({ description: 'Any JSON (at most 64 KB serialized, depth 10: 400 custom_fields_too_large); validated when the brand has a ticket schema' }),
    ),
    metadata: Type.Optional(Metadata),
    source: Type.Optional(Source),
    sourceId: Type.Optional(Nullable(Type.String({ maxLength: 500 }))),
    sourceData: Type.Optional(Nullable(AnyObject)),
    notifyCustomer: Type.Optional(
      Type.Boolean({ description: "Mail the customer (customerEmail) the brand's confirmation, its autoresponse text, from the brand's address; default false" }),
    ),
    attachmentIds: Type.Optional(
      Type.Array(Id, {
        maxItems: 50,
        description:
          'Pending attachments (uploaded via …/attachments/pending) to link to the new ticket; each must be UPLOADED and not on a ticket yet, else 400 invalid_attachments',
      }),
    ),
    closeReason: Type.Optional(Nullable(CloseReason)),
    dueAt: Type.Optional(Nullable(DueAt)),
    watchers: Type.Optional(Type.Array(WatcherInput, { maxItems: 50, description: 'Members to add as watchers (each a member of the account)' })),
  },
  { additionalProperties: false },
);

export const IdempotencyHeaders = Type.Object({
  'x-idempotency-key': Type.Optional(
    Type.String({ minLength: 1, maxLength: 255, description: 'Same key and body within 24 h returns the first ticket (200); another body is a 409' }),
  ),
});

export const TicketParams = Type.Object({
  ...BrandParams.properties,
  ticketId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const UpdateTicketBody = Type.Object(
  {
    title: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TITLE_LENGTH, pattern: PATTERNS.notBlank, description: 'Stored trimmed' })),
    body: Type.Optional(Nullable(Type.String({ maxLength: MAX_BODY_LENGTH }))),
    status: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'A status key of the brand (system or custom)' })),
    priority: Type.Optional(Nullable(Priority)),
    assigneeId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, description: 'A member id; null unassigns' }))),
    categoryId: Type.Optional(Nullable(Id)),
    tags: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 50, description: 'Full replacement: tag ids (tag_…) or names; unknown names create tags' }),
    ),
    links: Type.Optional(Type.Array(Link, { maxItems: 50 })),
    customFields: Type.Optional(Type.Unknown({ description: 'Replaces the stored value; same limits and validation as on create' })),
    metadata: Type.Optional(Metadata),
    isSpam: Type.Optional(Type.Boolean({ description: 'Sets the flag only; POST …/spam also blocks the sender' })),
    closeReason: Type.Optional(Nullable(CloseReason)),
    dueAt: Type.Optional(Nullable(DueAt)),
    legalHold: Type.Optional(Type.Boolean({ description: 'Sets or lifts the legal hold; takes an owner, an admin or an API key (403 insufficient_role for a member)' })),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const TICKET_SORTS = ['createdAt', 'updatedAt', 'priority', 'ticketNumber', 'title', 'status', 'customer', 'company', 'assignee', 'category', 'dueAt'] as const;
const CommaList = (description: string) => Type.String({ minLength: 1, maxLength: 1000, description });

export const TicketListQuery = Type.Object(
  {
    status: Type.Optional(CommaList('Comma-separated status keys; `active` = open,pending; `all` = no filter')),
    priority: Type.Optional(Type.Union([...PRIORITIES.map((p) => Type.Literal(p)), Type.Literal('all')], { description: 'Exact priority; `all` = no filter' })),
    assigneeId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'A member id; `unassigned` or `null` = no assignee; `all` = no filter' })),
    customerId: Type.Optional(Id),
    customerEmail: Type.Optional(Type.String({ minLength: 1, maxLength: 320, description: "Resolved to the brand's contact with this email (normalized); none = empty list" })),
    companyId: Type.Optional(Id),
    createdBy: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    createdAfter: Type.Optional(Type.String({ format: 'date-time', description: 'created_at > this instant' })),
    createdBefore: Type.Optional(Type.String({ format: 'date-time', description: 'created_at < this instant' })),
    hasAttachments: Type.Optional(Type.Boolean()),
    overdue: Type.Optional(Type.Boolean({ description: 'true: dueAt has passed and the ticket is not resolved or closed; false: every other ticket' })),
    dueBefore: Type.Optional(Type.String({ format: 'date-time', description: 'due_at < this instant (tickets without a dueAt are left out)' })),
    dueAfter: Type.Optional(Type.String({ format: 'date-time', description: 'due_at > this instant (tickets without a dueAt are left out)' })),
    isSpam: Type.Optional(Type.Boolean({ description: 'Omitted: spam is excluded; true: only spam; false: only non-spam' })),
    categoryId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'A category id; `null` = uncategorized; `all` = no filter' })),
    tagIds: Type.Optional(CommaList('Comma-separated tag ids; the ticket must have ALL of them (at most 20)')),
    search: Type.Optional(
      Type.String({
        maxLength: MAX_SEARCH_LENGTH,
        description:
          "Full-text search over title, body and the customer's name and email: every word must match, the last one as a prefix; case and accents are ignored. Text that looks like an email or its start (one token of at most 254 characters: one `@` after something, or letters and digits joined by single `.`, `_`, `+` or `-` with at least one `.`, `_` or `+`, such as `ann.lee1`) matches its words whole, or a customer whose email starts with it. Without `sort`, results come by relevance (the newest 200 matches ranked, older ones after them, newest first); text without a letter or digit does not filter",
      }),
    ),
    sort: Type.Optional(
      Type.Union(
        TICKET_SORTS.map((s) => Type.Literal(s)),
        {
          description:
            'Default createdAt (relevance when searching); priority sorts by rank (none < low < normal < medium < high < urgent); relation sorts by the related name; dueAt puts tickets without one last in asc, first in desc',
        },
      ),
    ),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { default: 'desc' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);

/** The export's query: the list's filters (not its page, sort or order), the format, and whether comments come too. */
export const TicketExportQuery = Type.Object(
  {
    ...Type.Omit(TicketListQuery, ['sort', 'order', 'limit', 'cursor']).properties,
    format: Type.Optional(
      Type.Union([Type.Literal('ndjson'), Type.Literal('csv')], {
        default: 'ndjson',
        description: "ndjson (default): one ticket a line, as the list shows it; csv: the ticket's flat fields under a fixed header",
      }),
    ),
    comments: Type.Optional(Type.Boolean({ default: false, description: 'NDJSON only: each ticket with `comments`, its live comments oldest first' })),
    watchers: Type.Optional(Type.Boolean({ default: false, description: 'NDJSON only: each ticket with `watchers`, as the watcher list gives them' })),
    after: Type.Optional({ ...Id, description: "Only the tickets after this ticket id in the export's order: an export cut short is taken up after the last ticket received" }),
  },
  { additionalProperties: false },
);

export const TicketPage = PageOf(TicketOut);

export type TicketView = Static<typeof TicketOut>;
export type UpdateTicketInput = Static<typeof UpdateTicketBody>;
export type TicketListInput = Static<typeof TicketListQuery>;
export type TicketExportInput = Static<typeof TicketExportQuery>;
export type CreateTicketInput = Static<typeof CreateTicketBody>;
