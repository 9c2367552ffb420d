import { Type, type Static } from 'typebox';
import { FreeObject, HttpUrl, Metadata, Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';

export const SLUG_PATTERN = '^[a-z0-9]+(?:-[a-z0-9]+)*$';
const Slug = Type.String({ minLength: 1, maxLength: 64, pattern: SLUG_PATTERN, description: 'Lower-case letters, digits and single hyphens; unique per account' });
const TicketPrefix = Type.String({ minLength: 1, maxLength: 10, pattern: '^[A-Za-z0-9]+$', description: 'Letters and digits; stored upper-case' });
const TicketNumberStart = Type.Integer({ minimum: 1, maximum: 1_000_000_000 });
const Email = Type.String({ format: 'email', maxLength: 320 });
const Origin = Type.String({ maxLength: 255, pattern: PATTERNS.origin, description: 'An origin such as https://app.example.com (no path, no trailing slash)' });
const TicketSchema = Nullable(FreeObject({ description: 'A JSON Schema that ticket customFields must satisfy' }));
/** Up to ten years of hours; the column is a 4-byte integer. */
const SlaHours = Type.Number({ minimum: 0, maximum: 87_600 });
const SlaByPriority = Type.Object(
  { urgent: Type.Optional(SlaHours), high: Type.Optional(SlaHours), normal: Type.Optional(SlaHours), medium: Type.Optional(SlaHours), low: Type.Optional(SlaHours) },
  { additionalProperties: false },
);
const SlaBusinessHours = Type.Object(
  {
    start: Type.String({ pattern: PATTERNS.timeOfDay }),
    end: Type.String({ pattern: PATTERNS.timeOfDay }),
    days: Type.Array(Type.Integer({ minimum: 0, maximum: 6 }), { minItems: 1, maxItems: 7, uniqueItems: true, description: 'Open weekdays, 0 = Sunday' }),
    timezone: Type.String({ minLength: 1, maxLength: 64, description: 'An IANA time zone such as Europe/Paris' }),
    holidays: Type.Optional(
      Type.Array(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }), {
        maxItems: 1000,
        uniqueItems: true,
        description: 'Closed local dates (YYYY-MM-DD): no working time counts on them',
      }),
    ),
  },
  { additionalProperties: false, description: 'Opening hours (start before end, the same day) on the given weekdays, local time' },
);

/** Up to a hundred years: longer is keeping forever, which null says. */
const RetentionDays = Nullable(Type.Integer({ minimum: 1, maximum: 36_500 }));
const Retention = Type.Object(
  {
    closedTicketsDays: Type.Optional(RetentionDays),
    rawMailDays: Type.Optional(RetentionDays),
    attachmentsDays: Type.Optional(RetentionDays),
    mode: Type.Optional(
      Type.Union([Type.Literal('delete'), Type.Literal('anonymize')], { description: 'What becomes of closed tickets past closedTicketsDays; default anonymize' }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'Days after which the dispatcher removes each kind (null or absent: kept): tickets resolved or closed (deleted, or stripped of personal data), inbound raw mail, attachments. A ticket under legal hold is never touched',
  },
);
const RetentionOut = Type.Object({
  closedTicketsDays: Nullable(Type.Integer()),
  rawMailDays: Nullable(Type.Integer()),
  attachmentsDays: Nullable(Type.Integer()),
  mode: Type.Union([Type.Literal('delete'), Type.Literal('anonymize')]),
});

/** Settings a brand's owner edits: accepted on create and update, returned on every read. */
const editable = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  slug: Slug,
  ticketPrefix: TicketPrefix,
  url: Nullable(HttpUrl),
  iconUrl: Nullable(HttpUrl),
  settings: FreeObject(),
  metadata: Metadata,
  ticketSchema: TicketSchema,
  inboundEmailEnabled: Type.Boolean(),
  autoresponseEnabled: Type.Boolean(),
  autoresponseSubject: Nullable(Type.String({ maxLength: 500 })),
  autoresponseBody: Nullable(Type.String({ maxLength: 20_000 })),
  fromName: Nullable(Type.String({ maxLength: 200 })),
  fromEmail: Nullable(Email),
  portalOrigins: Type.Array(Origin, { maxItems: 50, uniqueItems: true }),
  csatEnabled: Type.Boolean(),
  csatType: Type.Union([Type.Literal('thumbs'), Type.Literal('scale5'), Type.Literal('scale10')]),
  csatDelayMinutes: Type.Integer({ minimum: 0, maximum: 60 * 24 * 30 }),
  csatEmailSubject: Nullable(Type.String({ maxLength: 500 })),
  csatEmailBody: Nullable(Type.String({ maxLength: 20_000 })),
  slaEnabled: Type.Boolean(),
  slaDefaultHours: Nullable(Type.Integer({ minimum: 0, maximum: 87_600, description: 'Whole hours' })),
  slaByPriority: Nullable(SlaByPriority),
  slaNotifyOverdue: Type.Boolean(),
  slaBusinessHoursOnly: Type.Boolean(),
  slaBusinessHours: Nullable(SlaBusinessHours),
  slaPauseOnPending: Type.Boolean({ description: 'Time a ticket spends pending does not count: its dueAt moves on by the working time it waited' }),
};

export const BrandOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('brand'),
  accountId: Type.String(),
  livemode: Type.Boolean(),
  nextTicketNumber: Type.Integer(),
  ...editable,
  retention: Type.Union([RetentionOut, Type.Null()], { description: 'null: everything is kept' }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const optional = <T extends Record<string, import('typebox').TSchema>>(props: T) =>
  Object.fromEntries(Object.entries(props).map(([k, v]) => [k, Type.Optional(v)])) as { [K in keyof T]: import('typebox').TOptional<T[K]> };

export const CreateBrandBody = Type.Object(
  {
    ...optional(editable),
    name: editable.name,
    ticketNumberStart: Type.Optional(TicketNumberStart),
  },
  { additionalProperties: false },
);

export const UpdateBrandBody = Type.Object(
  {
    ...optional(editable),
    ticketNumberStart: Type.Optional(Type.Integer({ ...TicketNumberStart, description: 'Moves the next ticket number; must be at least the current nextTicketNumber' })),
    retention: Type.Optional(
      Type.Union([Retention, Type.Null()], {
        description: 'Replaces the whole policy; null keeps everything. Takes an owner, an admin or an API key (403 insufficient_role for a member)',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const DeleteBrandQuery = Type.Object({ confirm: Type.Optional(Type.Boolean({ description: 'true deletes; anything else previews' })) }, { additionalProperties: false });

const counts = {
  ticketCount: Type.Integer(),
  webhookCount: Type.Integer(),
  categoryCount: Type.Integer(),
  tagCount: Type.Integer(),
  statusCount: Type.Integer({ description: 'Custom statuses (system statuses are not counted)' }),
  fieldCount: Type.Integer({ description: 'Custom field definitions of every entity type' }),
  contactCount: Type.Integer(),
  companyCount: Type.Integer(),
  blockedSourceCount: Type.Integer(),
};
export const DeleteBrandResult = Type.Object({
  id: Type.String(),
  deleted: Type.Boolean({ description: 'false for a preview, true once deleted' }),
  ...counts,
  message: Type.String(),
});

export type BrandView = Static<typeof BrandOut>;
export type CreateBrandInput = Static<typeof CreateBrandBody>;
export type UpdateBrandInput = Static<typeof UpdateBrandBody>;
export type RetentionInput = Static<typeof Retention>;
export type DeleteBrandResultView = Static<typeof DeleteBrandResult>;
