import { Type, type Static } from 'typebox';
import { FreeObject, Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';
import { MAX_BODY_LENGTH, MAX_TITLE_LENGTH } from '../tickets/schemas.js';

export const LIST_LIMIT_MAX = 100;

export const RecurringParams = Type.Object({
  brandId: Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' }),
  recurringId: Type.String({ minLength: 1, maxLength: 64 }),
});

const Priority = Type.Union([Type.Literal('low'), Type.Literal('normal'), Type.Literal('medium'), Type.Literal('high'), Type.Literal('urgent')], {
  description: 'The priority of each ticket it opens',
});
const Id = Type.String({ minLength: 1, maxLength: 64 });
const Timezone = Type.String({ minLength: 1, maxLength: 64, description: 'An IANA time zone such as Europe/Paris (400 invalid_timezone otherwise)' });
const Frequency = Type.Union([Type.Literal('daily'), Type.Literal('weekly'), Type.Literal('monthly'), Type.Literal('yearly')], {
  description: 'daily, weekly (dayOfWeek), monthly (dayOfMonth), yearly (month and dayOfMonth)',
});
const DayOfWeek = Type.Integer({ minimum: 0, maximum: 6, description: 'weekly: 0 = Sunday … 6 = Saturday' });
const DayOfMonth = Type.Integer({ minimum: 1, maximum: 31, description: "monthly, yearly: a day the month lacks runs on the month's last day" });
const Month = Type.Integer({ minimum: 1, maximum: 12, description: 'yearly: 1 = January; default the month of the day it is set, in its time zone' });
const TimeOfDay = Type.String({ pattern: PATTERNS.timeOfDay, description: 'HH:mm, 24-hour, in timezone' });
const SkipWeekends = Type.Boolean({ description: 'A run on a Saturday or Sunday (in timezone) moves to the next Monday' });

export const ScheduleIn = Type.Object(
  {
    frequency: Frequency,
    dayOfWeek: Type.Optional(Nullable(DayOfWeek)),
    dayOfMonth: Type.Optional(Nullable(DayOfMonth)),
    month: Type.Optional(Nullable(Month)),
    timeOfDay: TimeOfDay,
    timezone: Timezone,
    skipWeekends: Type.Optional(SkipWeekends),
  },
  { additionalProperties: false, description: 'A calendar schedule; the day fields its frequency does not use are ignored' },
);

export const ScheduleOut = Type.Object({
  frequency: Frequency,
  dayOfWeek: Type.Optional(DayOfWeek),
  dayOfMonth: Type.Optional(DayOfMonth),
  month: Type.Optional(Month),
  timeOfDay: TimeOfDay,
  timezone: Type.String(),
  skipWeekends: Type.Boolean(),
});

const CronExpr = Type.String({
  minLength: 1,
  maxLength: 200,
  description: 'Five fields (minute hour day-of-month month day-of-week), evaluated in timezone; L and # as cron-parser takes them, no H (400 invalid_cron)',
});

export const RecurringTicketOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('recurring_ticket'),
  brandId: Type.String(),
  accountId: Type.String(),
  title: Type.String(),
  body: Nullable(Type.String()),
  priority: Nullable(Type.String()),
  assigneeId: Nullable(Type.String()),
  categoryId: Nullable(Type.String()),
  tags: Type.Array(Type.String(), { description: 'Tag ids or names, as given: names are found or created when a ticket is opened' }),
  customFields: FreeObject(),
  schedule: Type.Union([ScheduleOut, Type.Null()], { description: 'null when cronExpr decides' }),
  cronExpr: Nullable(Type.String()),
  timezone: Type.String({ description: "The schedule's time zone, or the cron expression's" }),
  enabled: Type.Boolean({ description: 'false: paused' }),
  nextRunAt: Timestamp,
  lastRunAt: Nullable(Timestamp),
  lastTicketId: Nullable(Type.String()),
  runCount: Type.Integer({ description: 'Tickets it opened (on schedule and by POST …/run)' }),
  failCount: Type.Integer({ description: 'Scheduled runs that failed since the last ticket it opened' }),
  lastError: Nullable(Type.String({ description: 'Why the last failed run failed; null once a run succeeds' })),
  createdBy: Nullable(Type.String({ description: 'The member (session) or API key that created it' })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const template = {
  body: Type.Optional(Nullable(Type.String({ maxLength: MAX_BODY_LENGTH }))),
  priority: Type.Optional(Nullable(Priority)),
  assigneeId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, description: 'An active member who may see the brand (400 invalid_assignee)' }))),
  categoryId: Type.Optional(Nullable(Id)),
  tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 50, description: 'Tag ids (tag_…, each the brand’s) or names' })),
  customFields: Type.Optional(FreeObject({ description: "The tickets' customFields; checked against the brand's ticket schema" })),
  schedule: Type.Optional(ScheduleIn),
  cronExpr: Type.Optional(CronExpr),
  timezone: Type.Optional(Timezone),
  enabled: Type.Optional(Type.Boolean({ description: 'false: paused (the same as POST …/pause); true: as POST …/resume' })),
};

const Title = Type.String({ minLength: 1, maxLength: MAX_TITLE_LENGTH, pattern: PATTERNS.notBlank, description: 'Stored trimmed' });

export const CreateRecurringBody = Type.Object(
  { title: Title, ...template },
  { additionalProperties: false, description: 'Exactly one of schedule and cronExpr (400 invalid_schedule); cronExpr needs timezone' },
);

export const UpdateRecurringBody = Type.Object(
  { title: Type.Optional(Title), ...template },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'Any subset; null clears body, priority, assigneeId, categoryId. schedule or cronExpr replaces the rule; timezone alone moves it to another zone',
  },
);

export const RecurringListQuery = Type.Object(
  {
    status: Type.Optional(Type.Union([Type.Literal('all'), Type.Literal('active'), Type.Literal('paused')], { description: 'active: enabled; paused: not; default all' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIST_LIMIT_MAX, description: `1-${LIST_LIMIT_MAX}, default ${LIST_LIMIT_MAX}` })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, description: 'Rows to skip, default 0' })),
    sortBy: Type.Optional(Type.Union([Type.Literal('nextRunAt'), Type.Literal('createdAt'), Type.Literal('title')], { description: 'Default nextRunAt' })),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  },
  { additionalProperties: false },
);

export const RecurringListOut = Type.Object({
  data: Type.Array(RecurringTicketOut),
  total: Type.Integer({ description: 'Every recurring ticket of the brand with this status, whatever limit and offset' }),
});

export type ScheduleInput = Static<typeof ScheduleIn>;
export type ScheduleView = Static<typeof ScheduleOut>;
export type RecurringTicketView = Static<typeof RecurringTicketOut>;
export type CreateRecurringInput = Static<typeof CreateRecurringBody>;
export type UpdateRecurringInput = Static<typeof UpdateRecurringBody>;
export type RecurringListInput = Static<typeof RecurringListQuery>;
export type RecurringListView = Static<typeof RecurringListOut>;
