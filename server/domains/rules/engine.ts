import { canonicalJson } from '../../core/idempotency.js';
import { emailDomain } from '../../core/text.js';
import { CUSTOM_FIELD_PREFIX, PRIORITIES, type Action, type Condition, type Conditions, type DurationField, type RuleKind, type TriggerEvent } from './schemas.js';

/**
 * The rules engine, in memory and free of I/O: rules are compiled once per brand revision into
 * predicates, and run on the ticket as it will be. The flows that write tickets fold what the rules
 * changed into their own write (flows/triggers.ts, flows/automations.ts).
 */

/** A ticket as rules see it. Tags are lower-cased names. */
export interface TicketState {
  title: string;
  body: string | null;
  status: string;
  priority: string | null;
  assigneeId: string | null;
  categoryId: string | null;
  tags: string[];
  source: string | null;
  customerEmail: string | null;
  customFields: Record<string, unknown>;
  isSpam: boolean;
}

export interface CommentFacts {
  isInternal: boolean;
  authorType: string;
  body: string;
}

/** What a rule is evaluated on. */
export interface Subject {
  /** The ticket before the change; null while it is created (every field it has then changed). */
  before: TicketState | null;
  comment: CommentFacts | null;
  /** Whether now is inside the brand's business hours (always, when it has none). */
  withinBusinessHours(): boolean;
  /** Automations: hours since (or until) a moment of the ticket, null when it has no such moment. */
  hours?(field: DurationField, business: boolean): number | null;
}

export interface CompiledRule {
  id: string;
  kind: RuleKind;
  name: string;
  position: number;
  on: readonly TriggerEvent[];
  conditions: { all: Condition[]; any: Condition[] };
  actions: readonly Action[];
  /** Each condition as a predicate, in the same order as conditions.all and conditions.any. */
  all: readonly Predicate[];
  any: readonly Predicate[];
}

type Predicate = (state: TicketState, subject: Subject) => boolean;

export interface RuleRow {
  id: string;
  /** Default: trigger. */
  kind?: RuleKind;
  name: string;
  position: number;
  onEvents?: readonly string[];
  conditions: Conditions;
  actions: readonly Action[];
}

export function compile(row: RuleRow): CompiledRule {
  const all = row.conditions.all ?? [];
  const any = row.conditions.any ?? [];
  return {
    id: row.id,
    kind: row.kind ?? 'trigger',
    name: row.name,
    position: row.position,
    on: (row.onEvents ?? []) as TriggerEvent[],
    conditions: { all, any },
    actions: row.actions,
    all: all.map(predicate),
    any: any.map(predicate),
  };
}

export function matches(rule: CompiledRule, state: TicketState, subject: Subject): boolean {
  return rule.all.every((p) => p(state, subject)) && (rule.any.length === 0 || rule.any.some((p) => p(state, subject)));
}

/** Each condition's result, for a dry run. */
export function explain(rule: CompiledRule, state: TicketState, subject: Subject) {
  const each = (conditions: Condition[], predicates: readonly Predicate[]) => conditions.map((c, i) => ({ ...c, result: predicates[i]!(state, subject) }));
  return { matched: matches(rule, state, subject), conditions: { all: each(rule.conditions.all, rule.all), any: each(rule.conditions.any, rule.any) } };
}

/** A condition's field on a ticket (and its event). */
function reader(field: string, businessHours: boolean): (state: TicketState, subject: Subject) => unknown {
  if (field.startsWith(CUSTOM_FIELD_PREFIX)) {
    const key = field.slice(CUSTOM_FIELD_PREFIX.length);
    return (s) => s.customFields[key] ?? null;
  }
  switch (field) {
    case 'customerDomain':
      return (s) => (s.customerEmail ? emailDomain(s.customerEmail) : null);
    case 'comment.isInternal':
      return (_, subject) => subject.comment?.isInternal ?? null;
    case 'comment.authorType':
      return (_, subject) => subject.comment?.authorType ?? null;
    case 'comment.body':
      return (_, subject) => subject.comment?.body ?? null;
    case 'withinBusinessHours':
      return (_, subject) => subject.withinBusinessHours();
    case 'hoursSinceCreated':
    case 'hoursSinceUpdated':
    case 'hoursSinceStatusChanged':
    case 'hoursSinceResolved':
    case 'hoursSinceCustomerMessage':
    case 'hoursSinceAgentReply':
    case 'hoursUntilDue':
      return (_, subject) => subject.hours?.(field, businessHours) ?? null;
    default:
      return (s) => (s as unknown as Record<string, unknown>)[field] ?? null;
  }
}

/** Text compares without case; everything else as JSON. */
const fold = (v: unknown): unknown => (typeof v === 'string' ? v.toLowerCase() : Array.isArray(v) ? v.map(fold) : v);
const same = (a: unknown, b: unknown) => canonicalJson(fold(a) ?? null) === canonicalJson(fold(b) ?? null);
const listOf = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined ? [] : [v]);
const isPresent = (v: unknown) => v !== null && v !== undefined && v !== '' && !(Array.isArray(v) && v.length === 0);
const text = (v: unknown) => (v === null || v === undefined ? '' : typeof v === 'string' ? v.toLowerCase() : canonicalJson(v).toLowerCase());

/** Priorities order as their urgency; dates and numbers as themselves. */
function ordinal(field: string, v: unknown): number | null {
  if (v === null || v === undefined) return null;
  if (field === 'priority') {
    const rank = PRIORITIES.indexOf(String(v).toLowerCase() as (typeof PRIORITIES)[number]);
    return rank < 0 ? null : rank === 2 ? 1 : rank > 2 ? rank - 1 : rank; // medium ranks as normal
  }
  if (typeof v === 'number') return v;
  if (typeof v === 'string') {
    const n = Number(v);
    if (v.trim() !== '' && Number.isFinite(n)) return n;
    const t = Date.parse(v);
    return Number.isNaN(t) ? null : t;
  }
  return null;
}

function predicate(c: Condition): Predicate {
  const read = reader(c.field, c.businessHours ?? false);
  const value = c.value;
  const compare = (test: (a: number, b: number) => boolean): Predicate => {
    const b = ordinal(c.field, value);
    return (s, subject) => {
      const a = ordinal(c.field, read(s, subject));
      return a !== null && b !== null && test(a, b);
    };
  };
  const wasOf = (subject: Subject) => (subject.before ? read(subject.before, subject) : null);
  const changed = (s: TicketState, subject: Subject) => (subject.before ? !same(read(s, subject), wasOf(subject)) : isPresent(read(s, subject)));
  switch (c.operator) {
    case 'is':
      return (s, subject) => same(read(s, subject), value);
    case 'is_not':
      return (s, subject) => !same(read(s, subject), value);
    case 'in':
      return (s, subject) => listOf(value).some((v) => same(read(s, subject), v));
    case 'not_in':
      return (s, subject) => !listOf(value).some((v) => same(read(s, subject), v));
    case 'contains':
    case 'not_contains': {
      const needles = listOf(value).map(text);
      const contains: Predicate = (s, subject) => {
        const actual = read(s, subject);
        if (Array.isArray(actual)) return needles.some((n) => actual.some((a) => text(a) === n));
        return needles.some((n) => text(actual).includes(n));
      };
      return c.operator === 'contains' ? contains : (s, subject) => !contains(s, subject);
    }
    case 'starts_with':
      return (s, subject) => listOf(value).some((v) => text(read(s, subject)).startsWith(text(v)));
    case 'ends_with':
      return (s, subject) => listOf(value).some((v) => text(read(s, subject)).endsWith(text(v)));
    case 'includes': {
      // Every value listed is among the ticket's (tags): `any` is for "one of these".
      const wanted = listOf(value).map(text);
      return (s, subject) => {
        const actual = listOf(read(s, subject)).map(text);
        return wanted.every((w) => actual.includes(w));
      };
    }
    case 'gt':
      return compare((a, b) => a > b);
    case 'gte':
      return compare((a, b) => a >= b);
    case 'lt':
      return compare((a, b) => a < b);
    case 'lte':
      return compare((a, b) => a <= b);
    case 'present':
      return (s, subject) => isPresent(read(s, subject));
    case 'absent':
      return (s, subject) => !isPresent(read(s, subject));
    case 'changed':
      return changed;
    case 'changed_to':
      return (s, subject) => changed(s, subject) && same(read(s, subject), value);
    case 'changed_from':
      return (s, subject) => changed(s, subject) && same(wasOf(subject), value);
    default:
      throw new Error(`unknown operator ${String(c.operator)}`);
  }
}

/** Actions that change the ticket's own fields; the others (notes, mail, watchers, webhooks) are side effects. */
const FIELD_ACTIONS: readonly Action['type'][] = ['set_status', 'set_priority', 'set_category', 'set_field', 'add_tags', 'remove_tags', 'assign', 'mark_spam'];
export const isFieldAction = (action: Action) => FIELD_ACTIONS.includes(action.type);

export interface FieldChange {
  field: string;
  from: unknown;
  to: unknown;
}

export interface Firing {
  rule: CompiledRule;
  /** The fields its actions changed, from and to (custom fields as customFields.<key>). */
  changes: FieldChange[];
  /** Its side effects, in order, to be carried out after the fields are written. */
  sideEffects: Action[];
}

/** How a round-robin assignment picks its member (the least loaded, read by the flow); null: none of them can take it. */
export type RoundRobin = (memberIds: readonly string[], state: TicketState) => Promise<string | null>;

/** Applies a field action to `state` in place; returns what it changed. */
export async function applyFieldAction(state: TicketState, action: Action, roundRobin: RoundRobin): Promise<FieldChange[]> {
  const set = (field: keyof TicketState, to: unknown): FieldChange[] => {
    const from = state[field];
    if (same(from, to) && typeof from === typeof to) return [];
    (state as unknown as Record<string, unknown>)[field] = to;
    return [{ field, from, to }];
  };
  switch (action.type) {
    case 'set_status':
      return set('status', action.value);
    case 'set_priority':
      return set('priority', action.value);
    case 'set_category':
      return set('categoryId', action.value);
    case 'mark_spam':
      return set('isSpam', true);
    case 'assign': {
      const value = action.value;
      const to = value !== null && typeof value === 'object' ? await roundRobin(value.roundRobin, state) : value;
      if (value !== null && typeof value === 'object' && to === null) return [];
      return set('assigneeId', to);
    }
    case 'set_field': {
      const from = state.customFields[action.value.key] ?? null;
      if (canonicalJson(from) === canonicalJson(action.value.value ?? null)) return [];
      state.customFields = { ...state.customFields, [action.value.key]: action.value.value ?? null };
      return [{ field: `customFields.${action.value.key}`, from, to: action.value.value ?? null }];
    }
    case 'add_tags':
    case 'remove_tags': {
      const names = action.value.map((t) => t.trim().toLowerCase());
      const to = action.type === 'add_tags' ? [...new Set([...state.tags, ...names])] : state.tags.filter((t) => !names.includes(t));
      if (to.length === state.tags.length && to.every((t) => state.tags.includes(t))) return [];
      return set('tags', to);
    }
    default:
      return [];
  }
}

/**
 * Runs triggers on a change, as Zendesk does: in position order, each seeing what the earlier
 * ones changed, each firing at most once; when a pass changed the ticket, those that have not
 * fired are evaluated again, so at most as many passes as there are rules. `state` is changed in
 * place; the firings are returned in the order they fired.
 */
export async function runRules(rules: readonly CompiledRule[], state: TicketState, subject: Subject, roundRobin: RoundRobin): Promise<Firing[]> {
  const firings: Firing[] = [];
  const fired = new Set<string>();
  for (let pass = 0; pass <= rules.length; pass++) {
    let changedInPass = false;
    for (const rule of rules) {
      if (fired.has(rule.id) || !matches(rule, state, subject)) continue;
      fired.add(rule.id);
      const firing: Firing = { rule, changes: [], sideEffects: [] };
      for (const action of rule.actions) {
        if (isFieldAction(action)) firing.changes.push(...(await applyFieldAction(state, action, roundRobin)));
        else firing.sideEffects.push(action);
      }
      if (firing.changes.length) changedInPass = true;
      firings.push(firing);
    }
    if (!changedInPass) break;
  }
  return firings;
}

export function stateCopy(state: TicketState): TicketState {
  return { ...state, tags: [...state.tags], customFields: { ...state.customFields } };
}
