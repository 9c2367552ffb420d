import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { isPgError, PG } from '../core/db.js';
import { scopeOf } from '../core/model.js';
import type { CommerceStore } from '../domains/commerce/model.js';
import { upsertOrders, upsertProducts } from '../domains/commerce/order-writes.js';
import * as stores from '../domains/commerce/stores.js';
import { StoreFailed, StoreRefused, type CommerceConnector, type StoreCredentials } from '../integrations/commerce.js';
import { connectorOf, credentialsOf } from './commerce-stores.js';
import { eachAtOnce } from '../core/each-at-once.js';

/**
 * The dispatcher's syncs of connected stores: a store due (connect and POST …/sync make it due
 * now; a finished sync makes it due again after commerceSyncMinutes) is claimed with a lease and
 * read page by page: its orders, then its products. The first sync reads everything (orders by
 * id); later ones what was modified since the last one finished (min_date_modified), a safety net
 * under the store's notifications.
 *
 * Each page is one transaction: its rows upserted on the platform's ids, the cursor moved past it
 * and the lease renewed, on the condition that the lease is still this sync's. A process that dies
 * loses at most the page it was writing; once its lease runs out, the next sync goes on from the
 * cursor, and writing a page again adds no row. The store is never called inside a transaction.
 */

/** Where a sync is (commerce_stores.sync_cursor). */
interface Cursor {
  mode: 'full' | 'incremental';
  phase: 'orders' | 'products';
  /** The next page to read (1-based). */
  page: number;
  /** When the sync began: once it ends, everything modified before then is known. */
  startedAt: string;
  /** incremental: what was modified from this instant on. */
  since?: string;
}

export interface StoreSyncOptions {
  /** The clock (ms). */
  now: () => number;
  /** True once the dispatcher stops: the sync in progress stops after its page, the store is given back. */
  stopping?: () => boolean;
  /** Stores synced at once. */
  concurrency?: number;
  /** Orders (and products) asked for a page; the platform's largest by default. */
  pageSize?: number;
  /** Tests only: called in each page's transaction (its rows and cursor written, not committed), with the pages this run has written before it. */
  beforeCommit?: (store: CommerceStore, pagesBefore: number) => Promise<void>;
}

export interface StoreSyncStats {
  /** Syncs that reached their end. */
  synced: number;
  /** Syncs that failed (recorded on the store: ERROR, or DISCONNECTED when the token was refused). */
  failed: number;
  /** Orders and products written (a row written twice counts twice). */
  orders: number;
  products: number;
}

/** Thrown by a beforeCommit hook: the page's transaction rolls back and the sync stops where it was. */
export class SyncInterrupted extends Error {}
class LeaseLost extends Error {}

/** How long a claim holds; renewed with every page, so only a stalled or dead sync loses it. */
const LEASE_MS = 3 * 60_000;
/** How far back an incremental sync starts before the last one's start (clocks of ticketd and the store differ). */
const OVERLAP_MS = 5 * 60_000;
/** A failed sync is tried again after 1, 2, 4… minutes, at most an hour. */
const RETRY_FIRST_MS = 60_000;
const RETRY_MAX_MS = 3_600_000;
const SCAN_BATCH = 32;
const PAGE_SIZE = 250;

function freshCursor(row: CommerceStore, now: number): Cursor {
  const startedAt = new Date(now).toISOString();
  if (!row.syncedThrough) return { mode: 'full', phase: 'orders', page: 1, startedAt };
  return { mode: 'incremental', phase: 'orders', page: 1, startedAt, since: new Date(new Date(row.syncedThrough).getTime() - OVERLAP_MS).toISOString() };
}

function cursorOf(row: CommerceStore, now: number): Cursor {
  const c = row.syncCursor as Partial<Cursor> | null;
  if (c && (c.mode === 'full' || c.mode === 'incremental') && (c.phase === 'orders' || c.phase === 'products') && Number.isInteger(c.page) && c.page! >= 1 && c.startedAt) {
    return c as Cursor;
  }
  return freshCursor(row, now);
}

type Outcome = 'synced' | 'failed' | 'skipped';

/**
 * Every store due now, over every account, a few at once, until none is left (or every one left
 * is another dispatcher's right now, or the dispatcher stops).
 */
export async function syncDue(base: BaseCtx, options: StoreSyncOptions): Promise<StoreSyncStats> {
  const stats: StoreSyncStats = { synced: 0, failed: 0, orders: 0, products: 0 };
  while (!options.stopping?.()) {
    const due = await stores.dueBatch(base, new Date(options.now()), SCAN_BATCH);
    if (!due.length) break;
    const outcomes = await eachAtOnce(due, options.concurrency ?? 2, (d) => (options.stopping?.() ? Promise.resolve<Outcome>('skipped') : syncOne(base, d, options, stats)));
    stats.synced += outcomes.filter((o) => o === 'synced').length;
    stats.failed += outcomes.filter((o) => o === 'failed').length;
    if (outcomes.every((o) => o === 'skipped')) break;
  }
  return stats;
}

export interface StoreSyncResult {
  storeId: string;
  name: string;
  /** synced: read to its end; failed: recorded on the store (status, errorMessage); busy: a dispatcher is syncing it now. */
  outcome: 'synced' | 'failed' | 'busy';
  orders: number;
  products: number;
  status: string;
  errorMessage: string | null;
}

/**
 * `ticketd stores sync BRAND [STORE]`: the brand's stores (or one) synced now, in this process,
 * one after the other, as the dispatcher would (each made due, claimed, read to its end).
 */
export async function syncNow(ctx: TenantCtx, brandId: string, storeId?: string): Promise<StoreSyncResult[]> {
  const targets = storeId ? [await stores.get(ctx, brandId, storeId)] : await stores.syncable(ctx, brandId);
  const results: StoreSyncResult[] = [];
  for (const target of targets) {
    await stores.requestSync(ctx, brandId, target.id);
    const stats: StoreSyncStats = { synced: 0, failed: 0, orders: 0, products: 0 };
    const outcome = await syncOne(ctx, { ...scopeOf(ctx), id: target.id }, { now: ctx.services.now }, stats);
    const after = await stores.get(ctx, brandId, target.id);
    results.push({
      storeId: target.id,
      name: after.name,
      outcome: outcome === 'skipped' ? 'busy' : outcome,
      orders: stats.orders,
      products: stats.products,
      status: after.status,
      errorMessage: after.errorMessage,
    });
  }
  return results;
}

/** One store: claimed, read to the end (or until the dispatcher stops), its outcome recorded. */
async function syncOne(base: BaseCtx, due: stores.Due, options: StoreSyncOptions, stats: StoreSyncStats): Promise<Outcome> {
  const ctx = tenantCtx(base, due.accountId, due.livemode);
  let held = new Date(options.now() + LEASE_MS);
  const row = await stores.claim(ctx, due.id, new Date(options.now()), held);
  if (!row) return 'skipped';
  try {
    const connector = await connectorOf(ctx, row.platform);
    const creds = await credentialsOf(ctx, row);
    let cursor = cursorOf(row, options.now());
    for (let pages = 0; ; pages++) {
      if (options.stopping?.()) {
        await stores.release(ctx, row, held);
        return 'skipped';
      }
      const page = await readPage(connector, creds, cursor, options.pageSize ?? PAGE_SIZE);
      const next: Cursor | null = page.more ? { ...cursor, page: cursor.page + 1 } : cursor.phase === 'orders' ? { ...cursor, phase: 'products', page: 1 } : null;
      const lease = new Date(options.now() + LEASE_MS);
      const written = await withTx(ctx, async (tx) => {
        const n = page.kind === 'orders' ? await upsertOrders(tx, row, page.orders) : await upsertProducts(tx, row, page.products);
        const kept = next
          ? await stores.advance(tx, row, held, { ...next }, lease)
          : await stores.finish(tx, row, held, new Date(cursor.startedAt), new Date(options.now() + tx.services.config.commerceSyncMinutes * 60_000));
        if (!kept) throw new LeaseLost();
        await options.beforeCommit?.(row, pages);
        return n;
      });
      stats[page.kind] += written;
      held = lease;
      if (!next) return 'synced';
      cursor = next;
    }
  } catch (err) {
    if (err instanceof LeaseLost) return 'skipped';
    if (err instanceof SyncInterrupted) return 'skipped';
    // The store was disconnected while its page was read: its orders went with it.
    if (isPgError(err, PG.foreignKeyViolation)) return 'skipped';
    return recordFailure(ctx, row, held, err, options);
  }
}

type ReadPage =
  | { kind: 'orders'; orders: Awaited<ReturnType<CommerceConnector['orders']>>['items']; more: boolean }
  | { kind: 'products'; products: Awaited<ReturnType<CommerceConnector['products']>>['items']; more: boolean };

async function readPage(connector: CommerceConnector, creds: StoreCredentials, cursor: Cursor, limit: number): Promise<ReadPage> {
  const modifiedSince = cursor.mode === 'incremental' && cursor.since ? new Date(cursor.since) : undefined;
  if (cursor.phase === 'orders') {
    const page = await connector.orders(creds, { page: cursor.page, limit, modifiedSince });
    return { kind: 'orders', orders: page.items, more: page.more };
  }
  const page = await connector.products(creds, { page: cursor.page, limit, modifiedSince });
  return { kind: 'products', products: page.items, more: page.more };
}

async function recordFailure(ctx: TenantCtx, row: CommerceStore, held: Date, err: unknown, options: StoreSyncOptions): Promise<Outcome> {
  const known = err instanceof StoreRefused || err instanceof StoreFailed;
  if (!known) ctx.services.log.error({ err, storeId: row.id }, 'a store sync failed: it is tried again later');
  const message = known ? err.message : 'The sync failed (an internal error; the server log has it)';
  const pause = Math.min(RETRY_FIRST_MS * 2 ** Math.min(row.errorCount, 20), RETRY_MAX_MS);
  await stores.recordFailure(ctx, row, held, { refused: err instanceof StoreRefused, message, retryAt: new Date(options.now() + pause) });
  return 'failed';
}
