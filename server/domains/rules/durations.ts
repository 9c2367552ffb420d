import type { WorkingTime } from '../../core/working-time.js';
import type { Subject } from './engine.js';
import { DURATION_FIELDS, type Condition, type Conditions, type DurationField } from './schemas.js';

/**
 * Automations' durations: the moment of a ticket each one counts from (or, for hoursUntilDue, to),
 * its hours in calendar or business time, and what an automation's conditions say of those
 * moments in SQL terms, so its candidate tickets are read from an index (flows/automations.ts)
 * before every condition is evaluated exactly in memory.
 */

const HOUR_MS = 3_600_000;

/** Each duration's moment as SQL over the tickets row `alias`. A ticket from before status_changed_at was kept counts from its last update (the migration). */
const MOMENT_SQL: Record<DurationField, (alias: string) => string> = {
  hoursSinceCreated: (t) => `${t}.created_at`,
  hoursSinceUpdated: (t) => `${t}.updated_at`,
  hoursSinceStatusChanged: (t) => `coalesce(${t}.status_changed_at, ${t}.updated_at)`,
  hoursSinceResolved: (t) => `${t}.resolved_at`,
  hoursSinceCustomerMessage: (t) => `${t}.last_customer_message_at`,
  hoursSinceAgentReply: (t) => `${t}.last_agent_reply_at`,
  hoursUntilDue: (t) => `${t}.due_at`,
};

export const momentSql = (field: DurationField, alias: string) => MOMENT_SQL[field](alias);

/** Every moment of a ticket, as a select list over `alias` (each named as its duration). */
export const momentsSelect = (alias: string) => DURATION_FIELDS.map((f) => `${momentSql(f, alias)} as "${f}"`).join(', ');

/** A ticket's moments (null: it has none, or none was recorded). */
export type Moments = Record<DurationField, Date | string | null>;

/**
 * The hours of each duration of a ticket at `now`: since its moment, or until it (hoursUntilDue,
 * negative once past); business hours count only the brand's working time. Null without a moment.
 */
export function hoursOf(moments: Moments, now: number, working: WorkingTime): NonNullable<Subject['hours']> {
  return (field, business) => {
    const value = moments[field];
    if (value === null) return null;
    const moment = new Date(value).getTime();
    const [from, to] = field === 'hoursUntilDue' ? [now, moment] : [moment, now];
    if (!business) return (to - from) / HOUR_MS;
    const hours = to >= from ? working.between(from, to) : -working.between(to, from);
    return hours / 3600;
  };
}

/**
 * What an automation's `all` conditions say of the tickets it can match, for its candidate query:
 * the statuses (lower-cased; null: any but `excluded`) and the bounds on moments. Every bound holds
 * for every ticket that matches (business hours never exceed calendar hours, so a business
 * duration of at least N hours is a calendar one of at least N), so the query may return more
 * tickets than match, never fewer. `any` conditions bound nothing.
 */
export interface CandidateBounds {
  statuses: string[] | null;
  excluded: string[];
  bounds: MomentBound[];
}

/** The moment is known and, when `at` is given, at or before it (`<=`) or at or after it (`>=`). */
export interface MomentBound {
  field: DurationField;
  op: '<=' | '>=' | 'known';
  at?: number;
}

const isDuration = (field: string): field is DurationField => (DURATION_FIELDS as readonly string[]).includes(field);
const COMPARISONS = ['gt', 'gte', 'lt', 'lte'];

/** A number as the engine compares it (a numeric string counts), or null. */
function numberOf(v: unknown): number | null {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return null;
}

const textValues = (c: Condition) => (Array.isArray(c.value) ? c.value : [c.value]).filter((v): v is string => typeof v === 'string').map((v) => v.toLowerCase());

/** The bound a duration condition puts on its moment, if one holds for calendar and business hours alike. */
function boundOf(c: Condition & { field: DurationField }, now: number): MomentBound {
  const known: MomentBound = { field: c.field, op: 'known' };
  const n = numberOf(c.value);
  if (n === null) return known;
  const atLeast = c.operator === 'gt' || c.operator === 'gte';
  if (c.field !== 'hoursUntilDue') {
    // Hours since: at least N means the moment is at least N hours back. At most N bounds it the
    // other way in calendar hours only (a weekend may hold many calendar hours and no business ones).
    if (atLeast) return { field: c.field, op: '<=', at: now - n * HOUR_MS };
    return c.businessHours ? known : { field: c.field, op: '>=', at: now - n * HOUR_MS };
  }
  // Hours until due: business hours have the calendar hours' sign and are no more of them.
  if (atLeast) return !c.businessHours || n >= 0 ? { field: c.field, op: '>=', at: now + n * HOUR_MS } : known;
  return !c.businessHours || n <= 0 ? { field: c.field, op: '<=', at: now + n * HOUR_MS } : known;
}

/** The statuses both allow (null: any). */
const intersect = (allowed: Set<string> | null, values: readonly string[]) => new Set(values.filter((v) => allowed === null || allowed.has(v)));

export function candidateBounds(conditions: Conditions, now: number): CandidateBounds {
  let statuses: Set<string> | null = null;
  const excluded = new Set<string>();
  const bounds: MomentBound[] = [];
  for (const c of conditions.all ?? []) {
    if (c.field === 'status') {
      if (c.operator === 'is') statuses = intersect(statuses, typeof c.value === 'string' ? [c.value.toLowerCase()] : []);
      else if (c.operator === 'in') statuses = intersect(statuses, textValues(c));
      else if (c.operator === 'is_not' || c.operator === 'not_in') for (const v of textValues(c)) excluded.add(v);
      continue;
    }
    if (!isDuration(c.field) || !(COMPARISONS.includes(c.operator) || c.operator === 'present')) continue;
    // resolved_at is kept for resolved and closed tickets alone, and automations skip closed ones.
    if (c.field === 'hoursSinceResolved') statuses = intersect(statuses, ['resolved']);
    bounds.push(c.operator === 'present' ? { field: c.field, op: 'known' } : boundOf(c as Condition & { field: DurationField }, now));
  }
  return { statuses: statuses && [...statuses], excluded: [...excluded], bounds };
}
