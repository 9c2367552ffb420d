import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import type { SqlFragment } from '../../core/db.js';
import { accountScope, sameTenant, tenantScope } from '../../core/model.js';

/**
 * Rules' firedCount and lastFiredAt (migration 20261203020000): a write that fired rules appends a
 * tally naming them; the dispatcher moves tallies into the rules' rows every tick; reads add the
 * tallies not moved yet.
 */

/** Tallies moved per transaction: a backlog goes in steps, none holding rule rows for long. */
const BATCH = 10_000;
/** Accounts with tallies looked at per tick (a look-out without locks, across accounts). */
const ACCOUNTS_PER_TICK = 200;
/** Two dispatchers: one rolls up, the other leaves it (a transaction-level advisory lock, tried). */
const LOCK = 'ticketd:rule-firing-tallies';

/**
 * An INSERT of one tally per brand from `rows`, a subquery of (account_id, livemode, brand_id,
 * rule_id, fired_at) rows, a rule once per ticket it fired on. The id is drawn from the column's
 * sequence by name, as the ticket counts' are (a Citus worker's shard has no identity of its own).
 */
export function insertTalliesSql(rows: string): string {
  return `insert into rule_firing_tallies (account_id, livemode, brand_id, id, rule_ids, fired_at) overriding system value
    select f.account_id, f.livemode, f.brand_id, nextval('rule_firing_tallies_id_seq'), array_agg(f.rule_id), max(f.fired_at)
    from ${rows} as f group by f.account_id, f.livemode, f.brand_id`;
}

/**
 * The tally of firings of the brand's rules (each id once per ticket it fired on), for a statement
 * that also writes their audit entries; `when`: a condition of that statement (none: always).
 */
export function tallyStatement(tx: TenantCtx, brandId: string, ruleIds: readonly string[], when?: SqlFragment): SqlFragment {
  return {
    sql: insertTalliesSql(
      `(select ?::text as account_id, ?::boolean as livemode, ?::text as brand_id, x.rule_id, ?::timestamptz as fired_at from unnest(?::text[]) as x (rule_id)${when ? ` where ${when.sql}` : ''})`,
    ),
    bindings: [tx.accountId, tx.livemode, brandId, new Date(tx.services.now()), [...ruleIds], ...(when?.bindings ?? [])],
  };
}

export interface Pending {
  count: number;
  lastFiredAt: Date;
}

/** The firings of the brand's rules not rolled up yet, by rule id. */
export async function pendingOf(ctx: TenantCtx, brandId: string): Promise<Map<string, Pending>> {
  const { rows } = (await ctx.db.raw(
    `select x.id, count(*)::int as n, max(t.fired_at) as last
    from rule_firing_tallies t cross join unnest(t.rule_ids) as x (id)
    where ? and t.brand_id = ? group by x.id`,
    [tenantScope(ctx, 't'), brandId],
  )) as { rows: { id: string; n: number; last: Date }[] };
  return new Map(rows.map((r) => [r.id, { count: r.n, lastFiredAt: new Date(r.last) }]));
}

/**
 * Moves committed tallies into the rules' rows; returns how many tallies it moved. Each account's
 * go in batches, each batch one statement naming the account on every table (on Citus it runs on
 * the account's worker): the tallies deleted, summed per rule and added to its row, so readers see
 * a firing in one place or the other, never both or neither. Tallies of rules that are gone are
 * dropped with the rest.
 */
export async function rollUp(ctx: BaseCtx): Promise<number> {
  const { rows } = (await ctx.db.raw('select distinct account_id from rule_firing_tallies limit ?', [ACCOUNTS_PER_TICK])) as { rows: { account_id: string }[] };
  let total = 0;
  for (const { account_id: accountId } of rows) {
    for (;;) {
      const moved = await withTx(ctx, (tx) => rollUpBatch(tx, accountId));
      if (moved === null) return total;
      total += moved;
      if (moved < BATCH) break;
    }
  }
  return total;
}

async function rollUpBatch(tx: BaseCtx, accountId: string): Promise<number | null> {
  const lock = (await tx.db.raw('select pg_try_advisory_xact_lock(hashtext(?)) as got', [LOCK])) as { rows: { got: boolean }[] };
  if (!lock.rows[0]!.got) return null;
  const account = (alias: string) => accountScope(tenantCtx(tx, accountId, true), alias);
  const { rows } = (await tx.db.raw(
    `with moved as (
       delete from rule_firing_tallies d where ? and d.id in (select c.id from rule_firing_tallies c where ? order by c.id limit ?)
       returning d.account_id, d.livemode, d.brand_id, d.rule_ids, d.fired_at),
     per_rule as (
       select m.account_id, m.livemode, m.brand_id, x.id, count(*)::int as n, max(m.fired_at) as last
       from moved m cross join unnest(m.rule_ids) as x (id) group by m.account_id, m.livemode, m.brand_id, x.id),
     counted as (
       update rules r set fired_count = r.fired_count + p.n, last_fired_at = greatest(r.last_fired_at, p.last)
       from per_rule p where ? and ${sameTenant('r', 'p')} and r.brand_id = p.brand_id and r.id = p.id)
     select count(*)::int as moved from moved`,
    [account('d'), account('c'), BATCH, account('r')],
  )) as { rows: { moved: number }[] };
  return rows[0]!.moved;
}
