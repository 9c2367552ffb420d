import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { withTx } from '../../core/context.js';
import type { Change } from '../../core/audit.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { badRequest, notFound } from '../../core/errors.js';
import { canonicalJson } from '../../core/idempotency.js';
import { ID_PREFIX, newId, normalizeBrandId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { RecurringTicket } from './model.js';
import { cronProblem, isValidTimezone, monthIn, nextRunAfter, type Rule, type Schedule } from './schedule.js';
import {
  LIST_LIMIT_MAX,
  type CreateRecurringInput,
  type RecurringListInput,
  type RecurringListView,
  type RecurringTicketView,
  type ScheduleInput,
  type UpdateRecurringInput,
} from './schemas.js';

/**
 * A brand's recurring tickets (see the recurring_tickets migration): the template, its rule
 * (schedule.ts), and the bookkeeping of its runs. Opening the tickets is ticket create's, through
 * flows/recurring-tickets.ts, which also checks what the template names and the plan.
 */

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
/** A run's error as the tenant reads it: a sentence, not a dump. */
const MAX_ERROR_LENGTH = 1_000;

export function toView(row: RecurringTicket): RecurringTicketView {
  return {
    id: row.id,
    object: 'recurring_ticket',
    brandId: row.brandId,
    accountId: row.accountId,
    title: row.title,
    body: row.body,
    priority: row.priority,
    assigneeId: row.assigneeId,
    categoryId: row.categoryId,
    tags: row.tags,
    customFields: row.customFields,
    schedule: row.schedule,
    cronExpr: row.cronExpr,
    timezone: row.timezone,
    enabled: row.enabled,
    nextRunAt: row.nextRunAt.toISOString(),
    lastRunAt: iso(row.lastRunAt),
    lastTicketId: row.lastTicketId,
    runCount: row.runCount,
    failCount: row.failCount,
    lastError: row.lastError,
    createdBy: row.createdBy,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

export function ruleOf(row: Pick<RecurringTicket, 'schedule' | 'cronExpr' | 'timezone'>): Rule {
  return row.schedule ? { schedule: row.schedule } : { cronExpr: row.cronExpr!, timezone: row.timezone };
}

/** When it is due next, counting from `now` (a run missed several times is due once, then at its first future time). */
export function nextRunOf(row: Pick<RecurringTicket, 'schedule' | 'cronExpr' | 'timezone'>, now: Date): Date {
  return nextRunAfter(ruleOf(row), now);
}

const invalidSchedule = (message: string, field: string, why: string, code = 'invalid_schedule') => badRequest(message, [{ field, message: why }], code);

function checkTimezone(timezone: string, field: string): string {
  const name = timezone.trim();
  if (!isValidTimezone(name))
    throw invalidSchedule(`${field} must be an IANA time zone such as Europe/Paris, not "${timezone}"`, field, 'is not an IANA time zone', 'invalid_timezone');
  return name;
}

/** A schedule as stored: the day fields its frequency uses (a yearly one without a month takes the month it is now in its zone). */
function checkSchedule(input: ScheduleInput, now: Date): Schedule {
  const timezone = checkTimezone(input.timezone, 'schedule.timezone');
  const required = (field: 'dayOfWeek' | 'dayOfMonth'): number => {
    const value = input[field];
    if (value == null)
      throw invalidSchedule(`schedule.${field} is required for a ${input.frequency} schedule`, `schedule.${field}`, `is required for a ${input.frequency} schedule`);
    return value;
  };
  const days =
    input.frequency === 'weekly'
      ? { dayOfWeek: required('dayOfWeek') }
      : input.frequency === 'monthly'
        ? { dayOfMonth: required('dayOfMonth') }
        : input.frequency === 'yearly'
          ? { dayOfMonth: required('dayOfMonth'), month: input.month ?? monthIn(timezone, now) }
          : {};
  return { frequency: input.frequency, ...days, timeOfDay: input.timeOfDay, timezone, skipWeekends: input.skipWeekends ?? false };
}

interface StoredRule {
  schedule: Schedule | null;
  cronExpr: string | null;
  timezone: string;
}

/**
 * The rule a create or an update asks for, checked (400 otherwise); null when an update leaves it
 * alone. Exactly one of schedule and cronExpr; cronExpr comes with timezone (on an update, the
 * current one stays); with a schedule, a timezone beside it must be the schedule's. On an update,
 * timezone alone moves the current rule to that zone.
 */
function ruleFrom(given: Pick<CreateRecurringInput, 'schedule' | 'cronExpr' | 'timezone'>, current: StoredRule | null, now: Date): StoredRule | null {
  const { schedule, cronExpr, timezone } = given;
  if (schedule && cronExpr !== undefined) throw invalidSchedule('Give either schedule or cronExpr, not both', 'cronExpr', 'may not be given with schedule');
  if (schedule) {
    if (timezone !== undefined && timezone.trim() !== schedule.timezone.trim())
      throw invalidSchedule('timezone differs from schedule.timezone: a schedule keeps its time zone in schedule.timezone', 'timezone', 'must be schedule.timezone');
    const checked = checkSchedule(schedule, now);
    return { schedule: checked, cronExpr: null, timezone: checked.timezone };
  }
  if (cronExpr !== undefined) {
    const zone = timezone ?? current?.timezone;
    if (zone === undefined) throw invalidSchedule('timezone is required with cronExpr (an IANA time zone such as Europe/Paris)', 'timezone', 'is required with cronExpr');
    const name = checkTimezone(zone, 'timezone');
    const expr = cronExpr.trim().replace(/\s+/g, ' ');
    const problem = cronProblem(expr, name);
    if (problem) throw invalidSchedule(`cronExpr is not a usable cron expression: ${problem}`, 'cronExpr', problem, 'invalid_cron');
    return { schedule: null, cronExpr: expr, timezone: name };
  }
  if (!current) throw invalidSchedule('A recurring ticket needs schedule (a calendar schedule) or cronExpr (with timezone)', 'schedule', 'is required (or cronExpr)');
  if (timezone === undefined) return null;
  const name = checkTimezone(timezone, 'timezone');
  return current.schedule ? { schedule: { ...current.schedule, timezone: name }, cronExpr: null, timezone: name } : { ...current, timezone: name };
}

type Template = Pick<RecurringTicket, 'title' | 'body' | 'priority' | 'assigneeId' | 'categoryId' | 'tags' | 'customFields'>;

/** The template fields an input sets (undefined: left alone). */
function templateOf(input: UpdateRecurringInput): Partial<Template> {
  return {
    title: input.title?.trim(),
    body: input.body,
    priority: input.priority,
    assigneeId: input.assigneeId,
    categoryId: input.categoryId,
    tags: input.tags ? [...new Set(input.tags.map((t) => t.trim()))] : undefined,
    customFields: input.customFields,
  };
}

const ofBrand = (ctx: TenantCtx, brandId: string) => RecurringTicket.scoped(ctx).where('recurringTickets.brandId', brandId);

export async function requireRecurring(ctx: TenantCtx, brandId: string, id: string, lock = false): Promise<RecurringTicket> {
  const query = ofBrand(ctx, normalizeBrandId(brandId)).findById(id);
  const row = await (lock ? query.forUpdate() : query);
  if (!row) throw notFound('Recurring ticket');
  return row;
}

export async function get(ctx: TenantCtx, brandId: string, id: string): Promise<RecurringTicketView> {
  const brand = await requireBrand(ctx, brandId);
  return toView(await requireRecurring(ctx, brand.id, id));
}

const SORT_SQL: Readonly<Record<NonNullable<RecurringListInput['sortBy']>, string>> = { nextRunAt: 'next_run_at', createdAt: 'created_at', title: 'lower(title)' };

/** The brand's recurring tickets with their count; default the next due first. */
export async function list(ctx: TenantCtx, brandId: string, query: RecurringListInput): Promise<RecurringListView> {
  const brand = await requireBrand(ctx, brandId);
  const rows = ofBrand(ctx, brand.id);
  if (query.status === 'active') rows.where('enabled', true);
  if (query.status === 'paused') rows.where('enabled', false);
  const order = query.order ?? 'asc';
  const [counted, page] = await Promise.all([
    rows.clone().count({ n: '*' }).first() as unknown as Promise<{ n: string }>,
    rows
      .orderByRaw(`${SORT_SQL[query.sortBy ?? 'nextRunAt']} ${order}, id ${order}`)
      .limit(query.limit ?? LIST_LIMIT_MAX)
      .offset(query.offset ?? 0),
  ]);
  return { data: page.map(toView), total: Number(counted.n) };
}

/** A new recurring ticket, due at its first time after now. The flow has checked what its template names. */
export async function create(ctx: TenantCtx, brandId: string, input: CreateRecurringInput): Promise<RecurringTicketView> {
  const now = new Date(ctx.services.now());
  const rule = ruleFrom(input, null, now)!;
  const template = templateOf(input);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = (await RecurringTicket.query(tx.db)
      .insert({
        id: newId(ID_PREFIX.recurringTicket),
        ...scopeOf(tx),
        brandId: brand.id,
        title: template.title!,
        body: template.body ?? null,
        priority: template.priority ?? null,
        assigneeId: template.assigneeId ?? null,
        categoryId: template.categoryId ?? null,
        tags: template.tags ?? [],
        customFields: template.customFields ?? {},
        ...rule,
        enabled: input.enabled ?? true,
        nextRunAt: nextRunOf(rule, now),
        createdBy: tx.actor.id,
      })
      .returning('*')) as unknown as RecurringTicket;
    await audit.record(tx, {
      brandId: brand.id,
      entityType: 'recurring_ticket',
      entityId: row.id,
      event: 'recurring_ticket.created',
      metadata: { title: row.title, nextRunAt: row.nextRunAt.toISOString() },
    });
    return toView(row);
  });
}

type Settings = Template & StoredRule & Pick<RecurringTicket, 'enabled'>;

/**
 * Changes any of its fields. A new rule, or enabling a paused one, moves nextRunAt to the first
 * time after now; the audit entry lists the changes.
 */
export async function update(ctx: TenantCtx, brandId: string, id: string, input: UpdateRecurringInput): Promise<RecurringTicketView> {
  const now = new Date(ctx.services.now());
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const current = await requireRecurring(tx, brand.id, id, true);
    const given: Partial<Settings> = { ...templateOf(input), ...ruleFrom(input, current, now), enabled: input.enabled };
    const changes: Change[] = [];
    const patch: Partial<Settings> = {};
    for (const [field, value] of Object.entries(given) as [keyof Settings, Settings[keyof Settings]][]) {
      // Compared canonically: jsonb hands keys back in an order of its own.
      if (value === undefined || canonicalJson(value) === canonicalJson(current[field])) continue;
      changes.push({ field, from: current[field], to: value });
      Object.assign(patch, { [field]: value });
    }
    if (!changes.length) return toView(current);
    const reschedule = patch.schedule !== undefined || patch.cronExpr !== undefined || patch.timezone !== undefined || patch.enabled === true;
    const row = await patchRow(tx, current, { ...patch, ...(reschedule ? { nextRunAt: nextRunOf({ ...current, ...patch }, now) } : {}), updatedAt: now });
    await audit.record(tx, { brandId: brand.id, entityType: 'recurring_ticket', entityId: row.id, event: 'recurring_ticket.updated', changes });
    return toView(row);
  });
}

async function patchRow(tx: TenantCtx, row: RecurringTicket, patch: Partial<RecurringTicket>): Promise<RecurringTicket> {
  const [updated] = (await ofBrand(tx, row.brandId).where('recurringTickets.id', row.id).patch(patch).returning('*')) as unknown as RecurringTicket[];
  return updated!;
}

/** Stops its runs (its nextRunAt stays as it was); pausing a paused one changes nothing. */
export async function pause(ctx: TenantCtx, brandId: string, id: string): Promise<RecurringTicketView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const current = await requireRecurring(tx, brand.id, id, true);
    if (!current.enabled) return toView(current);
    const row = await patchRow(tx, current, { enabled: false, updatedAt: new Date(tx.services.now()) });
    await audit.record(tx, { brandId: brand.id, entityType: 'recurring_ticket', entityId: row.id, event: 'recurring_ticket.paused', metadata: { title: row.title } });
    return toView(row);
  });
}

/** Runs it again from its first time after now (the runs missed while paused are not made up); resuming an enabled one changes nothing. */
export async function resume(ctx: TenantCtx, brandId: string, id: string): Promise<RecurringTicketView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const current = await requireRecurring(tx, brand.id, id, true);
    if (current.enabled) return toView(current);
    const now = new Date(tx.services.now());
    const row = await patchRow(tx, current, { enabled: true, nextRunAt: nextRunOf(current, now), updatedAt: now });
    await audit.record(tx, {
      brandId: brand.id,
      entityType: 'recurring_ticket',
      entityId: row.id,
      event: 'recurring_ticket.resumed',
      metadata: { title: row.title, nextRunAt: row.nextRunAt.toISOString() },
    });
    return toView(row);
  });
}

/** Deletes it (the tickets it opened stay); returns it as it was. */
export async function remove(ctx: TenantCtx, brandId: string, id: string): Promise<RecurringTicketView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await requireRecurring(tx, brand.id, id, true);
    await ofBrand(tx, brand.id).where('recurringTickets.id', row.id).delete();
    await audit.record(tx, { brandId: brand.id, entityType: 'recurring_ticket', entityId: row.id, event: 'recurring_ticket.deleted', metadata: { title: row.title } });
    return toView(row);
  });
}

export type Due = Pick<RecurringTicket, 'accountId' | 'livemode' | 'id'>;

/**
 * The dispatcher's scan: enabled recurring tickets due at `now`, over every account (the partial
 * index on next_run_at), the longest due first, leaving out `skipAccounts`. Nothing is locked:
 * each is claimed in its own run's transaction (claimDue).
 */
export async function dueBatch(base: BaseCtx, now: Date, limit: number, skipAccounts: readonly string[]): Promise<Due[]> {
  const query = RecurringTicket.query(base.db).where('enabled', true).where('nextRunAt', '<=', now).orderBy('nextRunAt').limit(limit).select('accountId', 'livemode', 'id');
  if (skipAccounts.length) query.whereNotIn('accountId', skipAccounts);
  return query;
}

/**
 * The recurring ticket, locked until the transaction ends, if it is still enabled and due at `now`
 * (and, given `occurrence`, still due for that one) and no other transaction holds it: a run in
 * another process skips it rather than wait (SKIP LOCKED), and finds it no longer due once that run
 * commits. Null otherwise.
 */
export async function claimDue(tx: TenantCtx, id: string, now: Date, occurrence?: Date): Promise<RecurringTicket | null> {
  const query = RecurringTicket.scoped(tx).where('recurringTickets.id', id).where('enabled', true).where('nextRunAt', '<=', now);
  if (occurrence) query.where('nextRunAt', occurrence);
  return (await query.forUpdate().skipLocked().first()) ?? null;
}

/** A ticket was opened: counted, its failures forgotten; nextRunAt moves when given (a scheduled run), stays for a run by hand. */
export async function recordRun(tx: TenantCtx, row: RecurringTicket, ticketId: string, at: Date, nextRunAt: Date | null): Promise<void> {
  await ofBrand(tx, row.brandId)
    .where('recurringTickets.id', row.id)
    .patch({
      runCount: RecurringTicket.raw('run_count + 1') as unknown as number,
      lastRunAt: at,
      lastTicketId: ticketId,
      failCount: 0,
      lastError: null,
      ...(nextRunAt ? { nextRunAt } : {}),
    });
}

/** A scheduled run that opened no ticket: counted with its reason, and moved on to nextRunAt. */
export async function recordFailure(tx: TenantCtx, row: RecurringTicket, error: string, nextRunAt: Date): Promise<void> {
  const lastError = error.length > MAX_ERROR_LENGTH ? `${error.slice(0, MAX_ERROR_LENGTH - 1)}…` : error;
  await ofBrand(tx, row.brandId)
    .where('recurringTickets.id', row.id)
    .patch({ failCount: RecurringTicket.raw('fail_count + 1') as unknown as number, lastError, nextRunAt });
}
