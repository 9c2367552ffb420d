import { canSeeBrand, tenantCtx, withTx, type Actor, type BaseCtx, type TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import { badRequest, HttpError } from '../core/errors.js';
import * as billing from '../domains/billing/service.js';
import * as categories from '../domains/categories/service.js';
import * as fields from '../domains/fields/service.js';
import * as members from '../domains/members/service.js';
import type { RecurringTicket } from '../domains/recurring-tickets/model.js';
import type { CreateRecurringInput, RecurringTicketView, UpdateRecurringInput } from '../domains/recurring-tickets/schemas.js';
import * as recurring from '../domains/recurring-tickets/service.js';
import * as tags from '../domains/tags/service.js';
import type { CreateTicketInput, TicketView } from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import { asFieldError, createTicket } from './ticket-create.js';
import { eachAtOnce } from '../core/each-at-once.js';

/**
 * Recurring tickets where they meet the rest: the plan's entitlement, the members, categories,
 * tags and fields their template names, and their runs, which open tickets through ticket create
 * (the ticket is the same as POST …/tickets makes, `ticket.created` webhooks included).
 *
 * A scheduled run is one transaction in the schedule's account: claim the row (FOR UPDATE SKIP
 * LOCKED, still due), create the ticket, move next_run_at on. The claim commits with the ticket
 * or not at all, so any number of dispatchers run each due time exactly once, and a process that
 * dies mid-run leaves the row due for the next one. A run that fails rolls its ticket back; a
 * second short transaction then records why and moves it on (it does not retry that time).
 */

/** 403 plan_feature_unavailable unless the account's plan includes recurring tickets. */
async function requireEntitlement(ctx: TenantCtx): Promise<void> {
  const plan = await billing.effectivePlan(ctx, await billing.current(ctx));
  if (!billing.includesRecurringTickets(plan)) {
    throw new HttpError(403, 'plan_feature_unavailable', `The ${plan.name} plan does not include recurring tickets: upgrade the plan (GET /v1/auth/plans) to use them`);
  }
}

/** Whether a member may be the assignee of the brand's tickets: active, and the brand is among theirs. */
async function maySeeBrand(ctx: TenantCtx, brandId: string, memberId: string): Promise<boolean> {
  const member = await members.sessionMember(ctx, memberId);
  return Boolean(member && canSeeBrand(member.brandScope, brandId));
}

const invalidAssignee = (assigneeId: string) =>
  badRequest(
    `assigneeId ${assigneeId} is not an active member who may see this brand; see GET /v1/auth/members?brandId=`,
    [{ field: 'assigneeId', message: 'is not an active member who may see this brand' }],
    'invalid_assignee',
  );

/** What the template names must be the brand's now (400 on the field otherwise); a run checks again, as ticket create does. */
async function checkTemplate(ctx: TenantCtx, brandId: string, input: UpdateRecurringInput): Promise<void> {
  if (input.assigneeId && !(await maySeeBrand(ctx, brandId, input.assigneeId))) throw invalidAssignee(input.assigneeId);
  if (input.categoryId) {
    const categoryId = input.categoryId;
    await asFieldError('categoryId', 'invalid_category', `categoryId ${categoryId} is not a category of this brand`, () => categories.requireCategory(ctx, brandId, categoryId));
  }
  const tagIds = (input.tags ?? []).filter((t) => tickets.TAG_ID.test(t));
  if (tagIds.length) await asFieldError('tags', 'invalid_tags', 'tags names a tag id that is not a tag of this brand', () => tags.requireTags(ctx, brandId, tagIds));
  if (input.customFields !== undefined) {
    tickets.checkCustomFieldsShape(input.customFields);
    await fields.validateCustomFields(ctx, brandId, input.customFields);
  }
}

export async function createRecurring(ctx: TenantCtx, brandId: string, input: CreateRecurringInput): Promise<RecurringTicketView> {
  const brand = await requireBrand(ctx, brandId);
  await requireEntitlement(ctx);
  await checkTemplate(ctx, brand.id, input);
  return recurring.create(ctx, brand.id, input);
}

/** Any change; enabling a paused one needs the plan's entitlement, as resume does. */
export async function updateRecurring(ctx: TenantCtx, brandId: string, id: string, input: UpdateRecurringInput): Promise<RecurringTicketView> {
  const brand = await requireBrand(ctx, brandId);
  const current = await recurring.requireRecurring(ctx, brand.id, id);
  if (input.enabled && !current.enabled) await requireEntitlement(ctx);
  await checkTemplate(ctx, brand.id, input);
  return recurring.update(ctx, brand.id, id, input);
}

/** Resuming a paused one needs the plan's entitlement; an enabled one is left as it is. */
export async function resumeRecurring(ctx: TenantCtx, brandId: string, id: string): Promise<RecurringTicketView> {
  const brand = await requireBrand(ctx, brandId);
  const current = await recurring.requireRecurring(ctx, brand.id, id);
  if (!current.enabled) await requireEntitlement(ctx);
  return recurring.resume(ctx, brand.id, id);
}

/** Opens its ticket now, in tx: what POST …/tickets would make of the template, marked as the schedule's. */
async function openTicket(tx: TenantCtx, row: RecurringTicket, scheduledFor: Date | null): Promise<TicketView> {
  if (row.assigneeId && !(await maySeeBrand(tx, row.brandId, row.assigneeId))) throw invalidAssignee(row.assigneeId);
  const { ticket } = await createTicket(tx, row.brandId, {
    title: row.title,
    body: row.body,
    priority: row.priority as CreateTicketInput['priority'],
    assigneeId: row.assigneeId,
    categoryId: row.categoryId,
    tags: row.tags,
    ...(Object.keys(row.customFields).length ? { customFields: row.customFields } : {}),
    createdBy: `recurring:${row.id}`,
    sourceId: row.id,
    sourceData: { recurringTicketId: row.id, scheduledFor: scheduledFor?.toISOString() ?? null },
  });
  return ticket;
}

/**
 * POST …/run: the ticket now (201 with it), its schedule left as it is; it counts as a run
 * (runCount, lastRunAt, lastTicketId, its failures forgotten). Paused ones run too. A failure is
 * the caller's answer, not a failed run.
 */
export async function runNow(ctx: TenantCtx, brandId: string, id: string): Promise<TicketView> {
  const brand = await requireBrand(ctx, brandId);
  await recurring.requireRecurring(ctx, brand.id, id);
  await requireEntitlement(ctx);
  return withTx(ctx, async (tx) => {
    // Its row before the brand's (the create statement's), as a scheduled run takes them: a run by
    // hand and a scheduled one at the same moment wait for each other instead of deadlocking.
    const row = await recurring.requireRecurring(tx, brand.id, id, true);
    const ticket = await openTicket(tx, row, null);
    await recurring.recordRun(tx, row, ticket.id, new Date(tx.services.now()), null);
    return ticket;
  });
}

/** Thrown by a beforeCommit hook to give a claimed run back (its transaction rolls back; nothing is recorded). */
export class RunInterrupted extends Error {}

export interface DueRunOptions {
  /** The clock (ms). */
  now: () => number;
  /** Runs at once, each in a transaction of its own. */
  concurrency: number;
  /** True once the dispatcher stops: no new run starts. */
  stopping?: () => boolean;
  /** Tests only: called in each run's transaction after its ticket and bookkeeping are written, before the commit. */
  beforeCommit?: (row: RecurringTicket) => Promise<void>;
}

export interface DueRunStats {
  created: number;
  failed: number;
}

/** How many due schedules a scan takes; each is run (or skipped) before the next scan. */
const SCAN_BATCH = 256;

/** Who opens a scheduled ticket, in the audit log: the schedule itself. */
const scheduleActor = (row: RecurringTicket): Actor => ({ type: 'system', id: row.id, name: 'Recurring ticket', source: 'automation' });

type Outcome = 'created' | 'failed' | 'skipped';

/**
 * The dispatcher's job: every recurring ticket due now, over every account, a few at once, until
 * none is left (or every one left is another process's right now). Accounts whose plan lacks the
 * entitlement are left out: their schedules stay due, and run once an upgrade restores it.
 */
export async function runDue(base: BaseCtx, options: DueRunOptions): Promise<DueRunStats> {
  const stats: DueRunStats = { created: 0, failed: 0 };
  const everyPlanIncludes = base.services.config.plans.every(billing.includesRecurringTickets);
  const entitled = new Map<string, boolean>();
  const withoutEntitlement: string[] = [];
  while (!options.stopping?.()) {
    const due = await recurring.dueBatch(base, new Date(options.now()), SCAN_BATCH, withoutEntitlement);
    if (!due.length) break;
    const runnable: recurring.Due[] = [];
    for (const d of due) {
      if (!everyPlanIncludes && !entitled.has(d.accountId)) entitled.set(d.accountId, await includesRecurring(tenantCtx(base, d.accountId, d.livemode)));
      if (everyPlanIncludes || entitled.get(d.accountId)) runnable.push(d);
      else if (!withoutEntitlement.includes(d.accountId)) withoutEntitlement.push(d.accountId);
    }
    // Two dispatchers scan alike: in their own orders they meet less on the same rows.
    const outcomes = await eachAtOnce(shuffled(runnable), options.concurrency, (d) => (options.stopping?.() ? Promise.resolve('skipped' as const) : runOne(base, d, options)));
    stats.created += outcomes.filter((o) => o === 'created').length;
    stats.failed += outcomes.filter((o) => o === 'failed').length;
    // Everything left is being run by another process (or the run stopped): the next tick looks again.
    if (runnable.length && outcomes.every((o) => o === 'skipped')) break;
  }
  return stats;
}

async function includesRecurring(ctx: TenantCtx): Promise<boolean> {
  return billing.includesRecurringTickets(await billing.effectivePlan(ctx, await billing.current(ctx)));
}

/** One scheduled run: its ticket and bookkeeping in one transaction; on failure, the failure recorded in another. */
async function runOne(base: BaseCtx, due: recurring.Due, options: DueRunOptions): Promise<Outcome> {
  const ctx = tenantCtx(base, due.accountId, due.livemode);
  const claim: { row: RecurringTicket | null } = { row: null };
  try {
    return await withTx(ctx, async (tx) => {
      const row = (claim.row = await recurring.claimDue(tx, due.id, new Date(options.now())));
      if (!row) return 'skipped';
      const ticket = await openTicket({ ...tx, actor: scheduleActor(row) }, row, row.nextRunAt);
      const at = new Date(options.now());
      await recurring.recordRun(tx, row, ticket.id, at, recurring.nextRunOf(row, at));
      await options.beforeCommit?.(row);
      return 'created';
    });
  } catch (err) {
    if (err instanceof RunInterrupted) return 'skipped';
    // Before the claim: nothing of this schedule's own went wrong (the database is away); the job fails.
    if (!claim.row) throw err;
    return (await recordFailure(ctx, claim.row, err, options)) ? 'failed' : 'skipped';
  }
}

/** Records why the run failed and moves it on, unless another process ran that time meanwhile. */
async function recordFailure(ctx: TenantCtx, failed: RecurringTicket, err: unknown, options: DueRunOptions): Promise<boolean> {
  if (!(err instanceof HttpError)) ctx.services.log.warn({ err, recurringTicketId: failed.id }, 'a recurring ticket could not open its ticket');
  const reason = err instanceof HttpError ? err.message : 'The ticket could not be created (an internal error; the server log has it)';
  return withTx(ctx, async (tx) => {
    const now = new Date(options.now());
    const row = await recurring.claimDue(tx, failed.id, now, failed.nextRunAt);
    if (!row) return false;
    await recurring.recordFailure(tx, row, reason, recurring.nextRunOf(row, now));
    return true;
  });
}

function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
