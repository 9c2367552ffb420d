import { Type, type Static, type TSchema } from 'typebox';
import { Nullable, Timestamp } from '../../core/schemas.js';

/**
 * The wire shapes of triggers, automations and the conditions and actions they share with macros.
 * The names are the API's (docs/api.md, "Rules"): clients rely on them.
 */

/** What a condition may test on any rule. */
export const TICKET_CONDITION_FIELDS = [
  'title',
  'body',
  'status',
  'priority',
  'assigneeId',
  'categoryId',
  'tags',
  'source',
  'customerEmail',
  'customerDomain',
  'comment.isInternal',
  'comment.authorType',
  'comment.body',
  'withinBusinessHours',
] as const;
/** What only an automation's condition may test: hours since (or until) a moment of the ticket. */
export const DURATION_FIELDS = [
  'hoursSinceCreated',
  'hoursSinceUpdated',
  'hoursSinceStatusChanged',
  'hoursSinceResolved',
  'hoursSinceCustomerMessage',
  'hoursSinceAgentReply',
  'hoursUntilDue',
] as const;
export type DurationField = (typeof DURATION_FIELDS)[number];
/** A custom field is tested as `field.<key>`. */
export const CUSTOM_FIELD_PREFIX = 'field.';
const FIELD_KEY = '[A-Za-z0-9_-]{1,64}';

export const OPERATORS = [
  'is',
  'is_not',
  'in',
  'not_in',
  'contains',
  'not_contains',
  'starts_with',
  'ends_with',
  'includes',
  'gt',
  'gte',
  'lt',
  'lte',
  'present',
  'absent',
  'changed',
  'changed_to',
  'changed_from',
] as const;
export type Operator = (typeof OPERATORS)[number];

export const TRIGGER_EVENTS = ['ticket.created', 'ticket.updated', 'comment.created'] as const;
export type TriggerEvent = (typeof TRIGGER_EVENTS)[number];

export const PRIORITIES = ['low', 'normal', 'medium', 'high', 'urgent'] as const;

/** Triggers run on a ticket's events, automations on time. */
export type RuleKind = 'trigger' | 'automation';

const literals = <T extends readonly string[]>(values: T, options: { description?: string } = {}) =>
  Type.Union(
    values.map((v) => Type.Literal(v)),
    options,
  );

/** A value a condition compares with: text, a number, a flag, null, or a list of those. */
const Scalar = Type.Union([Type.String({ maxLength: 2000 }), Type.Number(), Type.Boolean(), Type.Null()]);
const ConditionValue = Type.Union([Scalar, Type.Array(Scalar, { maxItems: 200 })]);

const conditionOf = (fields: readonly string[]) =>
  Type.Object(
    {
      field: Type.String({
        pattern: `^(${fields.map((f) => f.replace('.', '\\.')).join('|')}|field\\.${FIELD_KEY})$`,
        description: `One of ${fields.join(', ')}, or field.<key> for a custom field`,
      }),
      operator: literals(OPERATORS),
      value: Type.Optional(ConditionValue),
      businessHours: Type.Optional(Type.Boolean({ description: 'Durations only: count the brand’s business hours instead of calendar hours' })),
    },
    { additionalProperties: false },
  );
export const TriggerCondition = conditionOf(TICKET_CONDITION_FIELDS);
export const AutomationCondition = conditionOf([...TICKET_CONDITION_FIELDS, ...DURATION_FIELDS]);
export type Condition = Static<typeof AutomationCondition>;

const MAX_CONDITIONS = 50;
const conditionsOf = <T extends TSchema>(condition: T) =>
  Type.Object(
    {
      all: Type.Optional(Type.Array(condition, { maxItems: MAX_CONDITIONS, description: 'Every one must hold' })),
      any: Type.Optional(Type.Array(condition, { maxItems: MAX_CONDITIONS, description: 'At least one must hold (none listed: no such test)' })),
    },
    { additionalProperties: false },
  );
export const TriggerConditions = conditionsOf(TriggerCondition);
export const AutomationConditions = conditionsOf(AutomationCondition);
export interface Conditions {
  all?: Condition[];
  any?: Condition[];
}

const Id = Type.String({ minLength: 1, maxLength: 64 });
const Template = (description: string) => Type.String({ minLength: 1, maxLength: 20_000, description: `${description} (a Liquid template)` });
const TagList = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 50, description: 'Tag names (or tag ids)' });
const action = <T extends string, V extends TSchema>(type: T, value: V) => Type.Object({ type: Type.Literal(type), value }, { additionalProperties: false });
const MailCustomer = Type.Object({ subject: Template('The subject'), body: Template('The text') }, { additionalProperties: false });
const MailMembers = Type.Object(
  {
    to: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: 50, description: 'Member ids; absent: the assignee' })),
    subject: Template('The subject'),
    body: Template('The text'),
  },
  { additionalProperties: false },
);

export const Action = Type.Union([
  action('set_status', Type.String({ minLength: 1, maxLength: 64, description: 'A status key of the brand' })),
  action('set_priority', literals(PRIORITIES)),
  action('set_category', Nullable(Id)),
  action('set_field', Type.Object({ key: Type.String({ pattern: `^${FIELD_KEY}$` }), value: Type.Unknown() }, { additionalProperties: false })),
  action('add_tags', TagList),
  action('remove_tags', TagList),
  action(
    'assign',
    Type.Union([Nullable(Id), Type.Object({ roundRobin: Type.Array(Id, { minItems: 1, maxItems: 100 }) }, { additionalProperties: false })], {
      description: 'A member id, null to unassign, or { roundRobin: [memberIds] }: the least loaded of them',
    }),
  ),
  action('add_watchers', Type.Array(Id, { minItems: 1, maxItems: 50, description: 'Member ids' })),
  action('add_note', Template('An internal note')),
  action('mail_customer', MailCustomer),
  action('mail_members', MailMembers),
  action('webhook', Id),
  action('mark_spam', Type.Optional(Type.Literal(true))),
]);
export type Action = Static<typeof Action>;
export type ActionType = Action['type'];
const MAX_ACTIONS = 50;
export const Actions = Type.Array(Action, { maxItems: MAX_ACTIONS });

const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });
const On = Type.Array(literals(TRIGGER_EVENTS), { minItems: 1, maxItems: 3, uniqueItems: true, description: 'The events it runs on' });

export const CreateTriggerBody = Type.Object(
  {
    name: Name,
    enabled: Type.Optional(Type.Boolean()),
    position: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, description: 'Default: after the last one' })),
    on: On,
    conditions: TriggerConditions,
    actions: Type.Array(Action, { minItems: 1, maxItems: MAX_ACTIONS }),
  },
  { additionalProperties: false },
);
export type CreateTriggerInput = Static<typeof CreateTriggerBody>;
export const UpdateTriggerBody = Type.Partial(CreateTriggerBody, { additionalProperties: false, minProperties: 1 });
export type UpdateTriggerInput = Static<typeof UpdateTriggerBody>;

export const CreateAutomationBody = Type.Object(
  {
    name: Name,
    enabled: Type.Optional(Type.Boolean()),
    position: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, description: 'Default: after the last one' })),
    conditions: AutomationConditions,
    actions: Type.Array(Action, { minItems: 1, maxItems: MAX_ACTIONS }),
  },
  { additionalProperties: false },
);
export type CreateAutomationInput = Static<typeof CreateAutomationBody>;
export const UpdateAutomationBody = Type.Partial(CreateAutomationBody, { additionalProperties: false, minProperties: 1 });
export type UpdateAutomationInput = Static<typeof UpdateAutomationBody>;

const ruleOut = <K extends string>(object: K, extra: Record<string, TSchema>) =>
  Type.Object({
    id: Type.String(),
    object: Type.Literal(object),
    brandId: Type.String(),
    name: Type.String(),
    enabled: Type.Boolean(),
    position: Type.Integer(),
    ...extra,
    conditions: Type.Object({ all: Type.Array(Type.Unknown()), any: Type.Array(Type.Unknown()) }),
    actions: Type.Array(Type.Unknown()),
    firedCount: Type.Integer(),
    lastFiredAt: Nullable(Timestamp),
    disabledReason: Nullable(Type.String({ description: 'Why ticketd disabled it: something it names was deleted' })),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  });
export const TriggerOut = ruleOut('trigger', { on: Type.Array(Type.String()) });
export const AutomationOut = ruleOut('automation', {});
export const TriggerListOut = Type.Object({ data: Type.Array(TriggerOut) });
export const AutomationListOut = Type.Object({ data: Type.Array(AutomationOut) });

export interface RuleView {
  id: string;
  object: 'trigger' | 'automation';
  brandId: string;
  name: string;
  enabled: boolean;
  position: number;
  on?: TriggerEvent[];
  conditions: { all: Condition[]; any: Condition[] };
  actions: Action[];
  firedCount: number;
  lastFiredAt: string | null;
  disabledReason: string | null;
  createdAt: string;
  updatedAt: string;
}

export const ReorderBody = Type.Object(
  { ids: Type.Array(Id, { minItems: 1, maxItems: 1000, uniqueItems: true, description: 'Every rule of the kind, in the new order' }) },
  { additionalProperties: false },
);
export type ReorderInput = Static<typeof ReorderBody>;

const BrandId = Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' });
export const TriggerParams = Type.Object({ brandId: BrandId, triggerId: Id });
export const AutomationParams = Type.Object({ brandId: BrandId, automationId: Id });

export const TestTriggerBody = Type.Object({ ticketId: Id }, { additionalProperties: false });
export type TestTriggerInput = Static<typeof TestTriggerBody>;
export const TestTriggerOut = Type.Object({
  matched: Type.Boolean({ description: 'Whether it would fire on the ticket as it is (as on a ticket.updated that changed nothing)' }),
  conditions: Type.Object({
    all: Type.Array(Type.Object({ field: Type.String(), operator: Type.String(), value: Type.Optional(Type.Unknown()), result: Type.Boolean() })),
    any: Type.Array(Type.Object({ field: Type.String(), operator: Type.String(), value: Type.Optional(Type.Unknown()), result: Type.Boolean() })),
  }),
  actions: Type.Array(Type.Unknown(), { description: 'The actions that would apply, in order (empty when it would not fire)' }),
});

/** At most this many enabled rules (triggers and automations together) in a brand. */
export const MAX_ENABLED_RULES = 500;
/** A rule's conditions and actions as JSON text. */
export const MAX_RULE_BYTES = 65_536;
