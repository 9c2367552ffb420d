import type { Knex } from 'knex';
import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { setLocalLockTimeout } from '../../core/citus.js';
import { accountScope, sameTenant, tenantScope } from '../../core/model.js';

/**
 * Ticket counts kept as tickets change (migration 20261125020000, decision 0053): per brand, UTC
 * day and status, tickets created that day and tickets resolved that day with their resolution
 * time. Every statement that writes tickets appends its difference to ticket_count_changes
 * (core/ticket-writes.ts); the dispatcher rolls those into ticket_counts every tick; readers sum both.
 */

/** ticket_counts' day for the sums of a brand and status over every day: what all-time reads read. */
const EVERY_DAY = '-infinity';

/** The lock of the roll-up, also taken (waiting) by ticketd_rebuild_ticket_counts(). */
const LOCK = 'ticketd:ticket-counts';
/** Changes moved per transaction: a backlog (no dispatcher for a while) goes in steps, none holding locks for long. */
const BATCH = 10_000;
/** At most this many batches a tick; what is left waits for the next one (readers count it meanwhile). */
const MAX_BATCHES = 200;
/** How long a batch waits for a lock (a brand being deleted) before it is left to the next tick. */
const LOCK_WAIT = '200ms';
const LOCK_NOT_AVAILABLE = '55P03';

const KEY = 'account_id, livemode, brand_id, day, status';

/** Accounts with changes to move, looked at per tick (a look-out without locks, across accounts). */
const ACCOUNTS_PER_TICK = 200;

/**
 * Moves committed changes into ticket_counts; returns how many changes it moved. One process at a
 * time (a transaction-level advisory lock, tried: another dispatcher already rolling up is left to
 * it). A look-out finds the accounts with changes, without locks; then each account's changes go in
 * batches of their own, each batch one statement that names the account on every table (on Citus
 * it runs on the account's worker, and no statement locks rows of two accounts: decision 0089):
 * the changes deleted, summed per key and added to their rows, so readers see them in one table or
 * the other, never both or neither; the every-day rows take them too. Changes of a brand that is
 * gone are dropped; the brands counted are locked first (KEY SHARE, as the foreign key check would)
 * and only their changes move, so a brand deleted meanwhile is either gone or waits, and never
 * fails the insert. Rows that come to zero are deleted.
 *
 * The only lock it can wait for is a brand's deletion. An account's deletion removes several
 * brands in an order of its own, so the two could wait on each other: the roll-up gives up after
 * LOCK_WAIT (under PostgreSQL's default 1 s deadlock_timeout) and leaves that account's batch to
 * the next tick.
 */
export async function rollUp(ctx: BaseCtx): Promise<number> {
  const { rows } = (await ctx.db.raw('select distinct account_id from ticket_count_changes limit ?', [ACCOUNTS_PER_TICK])) as { rows: { account_id: string }[] };
  let total = 0;
  let batches = 0;
  for (const { account_id: accountId } of rows) {
    while (batches < MAX_BATCHES) {
      batches++;
      let moved: number | null;
      try {
        moved = await withTx(ctx, (tx) => rollUpBatch(tx, accountId));
      } catch (err) {
        if ((err as { code?: string }).code === LOCK_NOT_AVAILABLE) break;
        throw err;
      }
      if (moved === null) return total;
      total += moved;
      if (moved < BATCH) break;
    }
  }
  return total;
}

/** One batch of the account's changes in the transaction of tx; null when another roll-up holds the lock. */
async function rollUpBatch(tx: BaseCtx, accountId: string): Promise<number | null> {
  const lock = await tx.db.raw('select pg_try_advisory_xact_lock(hashtext(?)) as got', [LOCK]);
  if (!(lock as { rows: { got: boolean }[] }).rows[0]!.got) return null;
  await setLocalLockTimeout(tx, LOCK_WAIT);
  // The brands with changes, locked first by a statement of their own (a lock inside the statement
  // below makes Citus plan it in steps, which it then fails); only their changes move.
  const account = (alias: string) => accountScope(tenantCtx(tx, accountId, true), alias);
  const kept = (
    (await tx.db.raw(
      `select b.livemode, b.id from brands b
      where ? and exists (select 1 from ticket_count_changes x where ${sameTenant('x', 'b')} and x.brand_id = b.id)
      order by b.livemode, b.id for key share`,
      [account('b')],
    )) as { rows: { livemode: boolean; id: string }[] }
  ).rows;
  const result = await tx.db.raw(
    `with kept as (
       select * from jsonb_to_recordset(?::jsonb) as k (livemode boolean, id text)),
     moved as (
       delete from ticket_count_changes d where ? and d.id in (
         select c.id from ticket_count_changes c where ? and (c.livemode, c.brand_id) in (select livemode, id from kept) limit ?)
       returning ${KEY}, created, resolved, resolution_seconds),
     gone as (
       delete from ticket_count_changes g where ?
         and not exists (select 1 from brands b where ${sameTenant('b', 'g')} and b.id = g.brand_id)),
     summed as (
       select m.account_id, m.livemode, m.brand_id, m.day, m.status, sum(m.created) as created, sum(m.resolved) as resolved, sum(m.resolution_seconds) as resolution_seconds
       from moved m
       group by m.account_id, m.livemode, m.brand_id, m.day, m.status),
     added as (
       insert into ticket_counts (${KEY}, created, resolved, resolution_seconds)
       select ${KEY}, created, resolved, resolution_seconds from summed
       union all
       select account_id, livemode, brand_id, '${EVERY_DAY}'::date, status, sum(created), sum(resolved), sum(resolution_seconds)
       from summed group by account_id, livemode, brand_id, status
       on conflict (${KEY}) do update set
         created = ticket_counts.created + excluded.created,
         resolved = ticket_counts.resolved + excluded.resolved,
         resolution_seconds = ticket_counts.resolution_seconds + excluded.resolution_seconds
       returning ${KEY}, created, resolved, resolution_seconds)
     select (select count(*) from moved)::int as moved,
       (select coalesce(json_agg(json_build_object('account_id', account_id, 'livemode', livemode, 'brand_id', brand_id, 'day', day, 'status', status)), '[]')
        from added where created = 0 and resolved = 0 and resolution_seconds = 0) as zero`,
    [JSON.stringify(kept), account('d'), account('c'), BATCH, account('g')],
  );
  const row = (result as { rows: { moved: number; zero: unknown[] }[] }).rows[0]!;
  if (row.zero.length) {
    await tx.db.raw(
      `delete from ticket_counts k using json_to_recordset(?::json) as z (account_id text, livemode boolean, brand_id text, day date, status text)
       where ? and ${sameTenant('k', 'z')} and k.brand_id = z.brand_id and k.day = z.day and k.status = z.status
         and k.created = 0 and k.resolved = 0 and k.resolution_seconds = 0`,
      [JSON.stringify(row.zero), account('k')],
    );
  }
  return row.moved;
}

/**
 * The counts of the brands given, as a subquery `(…)` of (brand_id, day, status, created,
 * resolved, resolution_seconds) rows to bind where the text says `?`: the rolled-up rows and the
 * changes not rolled up yet, which a key may hold several of (sum them). Days from `from` to `to`
 * (YYYY-MM-DD, both included); without `from`, every day, from the every-day rows. Read within
 * one statement, the two tables are one snapshot: a roll-up committing meanwhile neither hides a
 * change nor counts it twice.
 */
export function countsOf(ctx: TenantCtx, brandIds: string[], days: { from?: string; to?: string } = {}): Knex.Raw {
  const part = (table: string, everyDay: string) => {
    const bounds = [days.from !== undefined ? ' and k.day >= ?::date' : everyDay, days.to !== undefined ? ' and k.day <= ?::date' : ''].join('');
    return ctx.db.raw(`select k.brand_id, k.day, k.status, k.created, k.resolved, k.resolution_seconds from ${table} k where ? and k.brand_id = any(?::text[])${bounds}`, [
      tenantScope(ctx, 'k'),
      brandIds,
      ...[days.from, days.to].filter((d) => d !== undefined),
    ]);
  };
  // The every-day rows fall before any `from`; the changes have none.
  return ctx.db.raw('(? union all ?)', [part('ticket_counts', ` and k.day = '${EVERY_DAY}'`), part('ticket_count_changes', '')]);
}

/** The brand's live, non-spam tickets by status now, as the kept counts say: one read for any number of status filters. */
export async function countsByStatus(ctx: TenantCtx, brandId: string): Promise<Map<string, number>> {
  const { rows } = (await ctx.db.raw('select k.status, coalesce(sum(k.created), 0) as n from ? k group by k.status', [countsOf(ctx, [brandId])])) as {
    rows: { status: string; n: string }[];
  };
  return new Map(rows.map((r) => [r.status, Number(r.n)]));
}

/** The tickets in these statuses (null: in any) of counts by status. */
export const countInStatuses = (byStatus: ReadonlyMap<string, number>, statuses: readonly string[] | null): number =>
  [...byStatus].reduce((sum, [status, n]) => (statuses === null || statuses.includes(status) ? sum + n : sum), 0);

/**
 * A brand being deleted: the changes its tickets' deletion has just appended go in the same
 * transaction (the roll-up would drop them later), so nothing of the brand is left behind.
 */
export async function forgetBrand(ctx: TenantCtx, brandId: string): Promise<void> {
  await ctx.db.raw('delete from ticket_count_changes k where ? and k.brand_id = ?', [tenantScope(ctx, 'k'), brandId]);
}
