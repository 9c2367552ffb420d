import type { Knex } from 'knex';
import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import { eachAtOnce } from '../core/each-at-once.js';
import { HttpError } from '../core/errors.js';
import { sameTenant, tenantScope } from '../core/model.js';
import { candidateBounds, hoursOf, momentSql, momentsSelect, type Moments } from '../domains/rules/durations.js';
import { stateCopy, type CompiledRule } from '../domains/rules/engine.js';
import * as firings from '../domains/rules/firings.js';
import * as rules from '../domains/rules/service.js';
import * as statuses from '../domains/statuses/service.js';
import * as tickets from '../domains/tickets/service.js';
import { applyRuleChanges, type RuleOutcome } from './ticket-update.js';
import { fireChecked, fireTriggers, stateOfView, subjectOf, brandWorkingTime, type ReferenceChecks } from './triggers.js';

/**
 * Automations: a brand's time rules, which the dispatcher runs every minute (decision 0097).
 *
 * For each brand with enabled automations, each automation in position order:
 * 1. its candidates, read without a lock from one index: the brand's live tickets that are not
 *    closed, of the statuses its conditions allow, within the bounds its duration conditions put
 *    on their moments (domains/rules/durations.ts), less those it fired on since they last changed;
 * 2. the candidates in batches, two at once, each one transaction in the account: locked (FOR
 *    UPDATE SKIP LOCKED: another dispatcher's batch, or a person's change, holds the rest), its
 *    firings read again under the lock, every condition evaluated in memory on each ticket as it is now, then
 *    the changes written set-wise (flows/ticket-update.ts applyRuleChanges) with their audit
 *    entries, events, side effects and the firings recorded (domains/rules/firings.ts), so an
 *    automation fires once on a ticket until that ticket changes again, whatever the number of
 *    dispatchers.
 * The brand's triggers run on what an automation changed (ticket.updated), in the same transaction.
 */

export interface AutomationRunOptions {
  /** The clock (ms). */
  now: () => number;
  /** True once the dispatcher stops: no new batch starts. */
  stopping?: () => boolean;
  /** Tickets per transaction (default BATCH). */
  batchSize?: number;
  /** A ticket an automation could not be applied to (what it would set does not fit the brand): left until it changes. */
  onFailure?: (failure: { accountId: string; brandId: string; ruleId: string; ticketId: string; error: string }) => void;
}

export interface AutomationStats {
  /** Tickets an automation fired on. */
  fired: number;
  /** Tickets an automation could not be applied to. */
  failed: number;
}

/** Tickets per transaction: their writes are set-wise, so a batch costs about what one ticket does. */
const BATCH = 500;
/** Batches at once: a batch is mostly the database writing its tickets' rows and indexes, on one core each. */
const BATCHES_AT_ONCE = 2;
/** An automation's candidates per sweep at most; the rest are read by the next sweep. */
const MAX_CANDIDATES = 200_000;

/** The dispatcher's job: every enabled automation of every brand, once. */
export async function runAutomations(base: BaseCtx, options: AutomationRunOptions): Promise<AutomationStats> {
  const stats: AutomationStats = { fired: 0, failed: 0 };
  for (const b of await firings.automatedBrands(base)) {
    if (options.stopping?.()) break;
    await sweepBrand(tenantCtx(base, b.accountId, b.livemode), b.brandId, options, stats);
  }
  return stats;
}

async function sweepBrand(ctx: TenantCtx, brandId: string, options: AutomationRunOptions, stats: AutomationStats): Promise<void> {
  const brand = await requireBrand(ctx, brandId);
  const { automations } = await rules.rulesOf(ctx, brand);
  if (!automations.length) return;
  const keys = (await statuses.list(ctx, brand.id)).map((s) => s.key);
  for (const rule of automations) {
    const now = options.now();
    const query = candidateQuery(ctx, brand.id, rule, keys, now);
    if (!query) continue;
    const ids = (await query).rows.map((r: { id: string }) => r.id);
    const checks: ReferenceChecks = new Map();
    const size = options.batchSize ?? BATCH;
    const batches = Array.from({ length: Math.ceil(ids.length / size) }, (_, i) => ids.slice(i * size, (i + 1) * size));
    await eachAtOnce(batches, BATCHES_AT_ONCE, async (batch) => {
      // Stopping, or the automation found naming something deleted (and disabled): no more batches.
      if (options.stopping?.() || checks.get(rule.id)) return;
      await fireOnEach(ctx, brand.id, rule.id, batch, { now, checks, options, stats });
    });
  }
}

/**
 * The automation's candidate tickets (null: no status it allows exists): see the file comment.
 * `statusKeys`: the brand's. Read from the index of the moment bounded, by status (the migration).
 */
export function candidateQuery(ctx: TenantCtx, brandId: string, rule: CompiledRule, statusKeys: readonly string[], now: number): Knex.Raw<{ rows: { id: string }[] }> | null {
  const bounds = candidateBounds(rule.conditions, now);
  const allowed = statusKeys.filter((key) => {
    const k = key.toLowerCase();
    return k !== 'closed' && !bounds.excluded.includes(k) && (bounds.statuses === null || bounds.statuses.includes(k));
  });
  if (!allowed.length) return null;
  const conditions: string[] = [];
  const instants: Date[] = [];
  for (const b of bounds.bounds) {
    if (b.op === 'known') conditions.push(`and ${momentSql(b.field, 't')} is not null`);
    else {
      conditions.push(`and ${momentSql(b.field, 't')} ${b.op} ?`);
      instants.push(new Date(b.at!));
    }
  }
  return ctx.db.raw(
    `select t.id from tickets t
    where ? and t.brand_id = ? and t.deleted_at is null and not t.is_spam and t.status <> 'closed' and t.status = any(?::text[])
      ${conditions.join(' ')}
      and not exists (select 1 from automation_firings f
        where ${sameTenant('f', 't')} and f.rule_id = ? and f.ticket_id = t.id and f.ticket_updated_at = t.updated_at)
    limit ?`,
    [tenantScope(ctx, 't'), brandId, allowed, ...instants, rule.id, MAX_CANDIDATES],
  );
}

interface BatchRun {
  now: number;
  checks: ReferenceChecks;
  options: AutomationRunOptions;
  stats: AutomationStats;
}

/**
 * Fires the automation on a batch in one transaction. A batch refused because what the
 * automation sets does not fit one of its tickets goes again ticket by ticket; a ticket refused
 * alone is recorded as fired (reported, left until it changes). Other errors end the job: the
 * next tick runs it again.
 */
async function fireOnEach(ctx: TenantCtx, brandId: string, ruleId: string, ids: readonly string[], run: BatchRun): Promise<void> {
  try {
    const fired = await withTx(ctx, (tx) => fireOnBatch(tx, brandId, ruleId, ids, run));
    run.stats.fired += fired;
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    if (ids.length > 1) {
      for (const id of ids) await fireOnEach(ctx, brandId, ruleId, [id], run);
      return;
    }
    await withTx(ctx, (tx) => firings.record(tx, brandId, ruleId, ids, new Map(), new Date(run.now)));
    run.stats.failed += 1;
    run.options.onFailure?.({ accountId: ctx.accountId, brandId, ruleId, ticketId: ids[0]!, error: err.message });
  }
}

/** Returns the number of tickets it fired on. */
async function fireOnBatch(tx: TenantCtx, brandId: string, ruleId: string, ids: readonly string[], run: BatchRun): Promise<number> {
  const brand = await requireBrand(tx, brandId);
  // The rule as of now: edited, disabled or deleted since the sweep began, it is that one or none.
  const rule = (await rules.rulesOf(tx, brand)).automations.find((r) => r.id === ruleId);
  if (!rule) return 0;
  const moments = await lockCandidates(tx, brand.id, ids);
  if (!moments.size) return 0;
  const fired = await firings.firedOnCurrent(tx, brand.id, [...moments.keys()]);
  const todo = [...moments.keys()].filter((id) => !fired.get(id)?.includes(rule.id));
  const working = brandWorkingTime(brand);
  const outcomes: RuleOutcome[] = [];
  for (const before of await tickets.fetchViews(tx, brand.id, todo)) {
    const state = stateOfView(before);
    const unchanged = stateCopy(state);
    const subject = subjectOf(tx, brand, unchanged, null, hoursOf(moments.get(before.id)!, run.now, working), run.now);
    const own = await fireChecked(tx, brand, [rule], state, subject, run.checks);
    if (!own.length) continue;
    // What it changed is a ticket.updated: the brand's triggers run on it, as on a person's change.
    const triggered = own.some((f) => f.changes.length) ? await fireTriggers(tx, brand, state, { event: 'ticket.updated', before: unchanged, comment: null }, run.checks) : [];
    outcomes.push({ before, after: state, firings: [...own, ...triggered] });
  }
  await applyRuleChanges(tx, brand, outcomes);
  const firedOn = outcomes.map((o) => o.before.id);
  await firings.record(tx, brand.id, rule.id, firedOn, fired, new Date(run.now));
  return firedOn.length;
}

/** Locks the live, open candidates no one else holds, in id order, and reads their moments. */
async function lockCandidates(tx: TenantCtx, brandId: string, ids: readonly string[]): Promise<Map<string, Moments>> {
  const { rows } = await tx.db.raw<{ rows: (Moments & { id: string })[] }>(
    `select t.id, ${momentsSelect('t')} from tickets t
    where ? and t.brand_id = ? and t.id = any(?::text[]) and t.deleted_at is null and not t.is_spam and t.status <> 'closed'
    order by t.id for update skip locked`,
    [tenantScope(tx, 't'), brandId, [...ids]],
  );
  return new Map(rows.map((r) => [r.id, r]));
}
