import { createHash, timingSafeEqual } from 'node:crypto';
import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { withTx } from '../../core/context.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { conflict, notFound } from '../../core/errors.js';
import { normalizeBrandId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { keyringPart, type SealContext, type SealedColumn } from '../../core/sealed.js';
import { CommerceStore, type CommercePlatform, type StoreStatus } from './model.js';
import type { StoreView } from './store-schemas.js';

/**
 * A brand's connected online stores (see the commerce migration): the sealed access token, the
 * SHA-256 of the secret its notifications carry, the platform's hook ids, and the bookkeeping of
 * its syncs. Talking to the store is the flows' (flows/commerce-stores.ts, flows/commerce-sync.ts),
 * never inside a transaction here.
 *
 * A sync is claimed by a lease (sync_lease_until, a value only its holder knows): each page's
 * rows commit with the cursor and a renewed lease, on the condition that the lease is still the
 * one it holds, so a sync whose lease ran out (its process stalled or died) writes nothing more
 * once another has taken the store over.
 */

export const SEALED_SECRETS: readonly SealedColumn[] = [{ table: 'commerce_stores', column: 'access_token', purpose: 'commerce_store.access_token' }];
const TOKEN_SEAL = (accountId: string): SealContext => ({ purpose: SEALED_SECRETS[0]!.purpose, accountId });

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
const MAX_ERROR_LENGTH = 1_000;
const clipError = (message: string) => (message.length > MAX_ERROR_LENGTH ? `${message.slice(0, MAX_ERROR_LENGTH - 1)}…` : message);

export function toView(row: CommerceStore): StoreView {
  return {
    id: row.id,
    brandId: row.brandId,
    name: row.name,
    platform: row.platform,
    storeUrl: row.storeUrl,
    storeId: row.storeHash,
    status: row.status,
    lastSyncAt: iso(row.lastSyncAt),
    errorMessage: row.errorMessage,
    errorCount: row.errorCount,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

const ofBrand = (ctx: TenantCtx, brandId: string) => CommerceStore.scoped(ctx).where('commerceStores.brandId', normalizeBrandId(brandId));

/**
 * The brand's stores, oldest first: asked on every ticket and contact page, so one read on the
 * brand's index (commerce_stores_store_unique) and nothing else; the brand was checked before the
 * request got here (core/auth.ts).
 */
export async function list(ctx: TenantCtx, brandId: string): Promise<StoreView[]> {
  const rows = await ofBrand(ctx, brandId).orderBy('commerceStores.id');
  return rows.map(toView);
}

export async function requireStore(ctx: TenantCtx, brandId: string, storeId: string, lock = false): Promise<CommerceStore> {
  const query = ofBrand(ctx, brandId).where('commerceStores.id', storeId).first();
  const row = await (lock ? query.forUpdate() : query);
  if (!row) throw notFound('Store');
  return row;
}

export async function get(ctx: TenantCtx, brandId: string, storeId: string): Promise<CommerceStore> {
  const brand = await requireBrand(ctx, brandId);
  return requireStore(ctx, brand.id, storeId);
}

/** The brand's connection of that store, if there is one. */
export async function findByHash(ctx: TenantCtx, brandId: string, platform: CommercePlatform, storeHash: string): Promise<CommerceStore | null> {
  return (await ofBrand(ctx, brandId).where({ platform, storeHash }).first()) ?? null;
}

/** The access token, opened to call the store (the process that calls only). */
export async function tokenOf(ctx: BaseCtx, row: Pick<CommerceStore, 'accountId' | 'accessToken'>): Promise<string> {
  return ctx.services.get(keyringPart).open(row.accessToken, TOKEN_SEAL(row.accountId));
}

export async function sealToken(ctx: TenantCtx, token: string): Promise<string> {
  return ctx.services.get(keyringPart).seal(token, TOKEN_SEAL(ctx.accountId));
}

export const secretHash = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('hex');

/** Whether `secret` is the one the store's notifications were registered with (constant time). */
export function secretMatches(row: Pick<CommerceStore, 'notifySecretHash'>, secret: string | undefined): boolean {
  if (!row.notifySecretHash || !secret) return false;
  const given = Buffer.from(secretHash(secret), 'hex');
  const stored = Buffer.from(row.notifySecretHash, 'hex');
  return given.length === stored.length && timingSafeEqual(given, stored);
}

export interface Connection {
  id: string;
  platform: CommercePlatform;
  storeHash: string;
  name: string;
  storeUrl: string | null;
  /** Sealed. */
  accessToken: string;
  notifySecretHash: string;
  hookIds: string[];
}

/**
 * The store connected to the brand (its credentials checked by the caller), due a sync now. A
 * store the brand had connected already takes the new token, secret and hooks, keeps its orders,
 * and goes on from where its sync was; `replaced` then names the hooks it had.
 */
export async function saveConnection(ctx: TenantCtx, brandId: string, c: Connection): Promise<{ store: StoreView; created: boolean; replacedHookIds: string[] }> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const now = new Date(tx.services.now());
    const before = await ofBrand(tx, brand.id).where({ platform: c.platform, storeHash: c.storeHash }).forUpdate().first();
    const fields = {
      name: c.name,
      storeUrl: c.storeUrl,
      accessToken: c.accessToken,
      notifySecretHash: c.notifySecretHash,
      hookIds: c.hookIds,
      // Synced before (a reconnect keeps its orders): ACTIVE; never: PENDING_SETUP until its first sync ends.
      status: (before?.syncedThrough ? 'ACTIVE' : 'PENDING_SETUP') as StoreStatus,
      errorMessage: null,
      errorCount: 0,
      nextSyncAt: now,
      syncLeaseUntil: null,
      updatedAt: now,
    };
    let row: CommerceStore;
    if (before) {
      [row] = (await ofBrand(tx, brand.id).where('commerceStores.id', before.id).patch(fields).returning('*')) as unknown as CommerceStore[];
    } else {
      // Another connect of the same store may have inserted it since the read: that one stands.
      const [inserted] = (await tx
        .db(CommerceStore.tableName)
        .insert({ ...scopeOf(tx), id: c.id, brandId: brand.id, platform: c.platform, storeHash: c.storeHash, ...fields, hookIds: JSON.stringify(c.hookIds) })
        .onConflict(['accountId', 'livemode', 'brandId', 'platform', 'storeHash'])
        .ignore()
        .returning('id')) as { id: string }[];
      if (!inserted) throw conflict('This store is being connected to the brand by another request right now: try again', 'store_connecting');
      row = (await ofBrand(tx, brand.id).where('commerceStores.id', inserted.id).first())!;
    }
    await audit.record(tx, {
      brandId: brand.id,
      entityType: 'commerce_store',
      entityId: row!.id,
      event: before ? 'commerce_store.reconnected' : 'commerce_store.connected',
      metadata: { platform: c.platform, storeId: c.storeHash, name: c.name },
    });
    return { store: toView(row!), created: !before, replacedHookIds: before?.hookIds ?? [] };
  });
}

/** Deletes the store; its orders, their links to tickets and its products go with it (foreign keys). Returns the row as it was. */
export async function remove(ctx: TenantCtx, brandId: string, storeId: string): Promise<CommerceStore> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await requireStore(tx, brand.id, storeId, true);
    await ofBrand(tx, brand.id).where('commerceStores.id', row.id).delete();
    await audit.record(tx, {
      brandId: brand.id,
      entityType: 'commerce_store',
      entityId: row.id,
      event: 'commerce_store.disconnected',
      metadata: { platform: row.platform, storeId: row.storeHash, name: row.name },
    });
    return row;
  });
}

/** Makes the store due a sync now (the dispatcher takes it up); a store that refused its token needs a new one first (409). */
export async function requestSync(ctx: TenantCtx, brandId: string, storeId: string): Promise<StoreView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await requireStore(tx, brand.id, storeId, true);
    if (row.status === 'DISCONNECTED') {
      throw conflict(`The store refused its access token (${row.errorMessage ?? 'no reason given'}): connect it again with a new one`, 'store_disconnected');
    }
    const now = new Date(tx.services.now());
    const [updated] = (await ofBrand(tx, brand.id).where('commerceStores.id', row.id).patch({ nextSyncAt: now, updatedAt: now }).returning('*')) as unknown as CommerceStore[];
    await audit.record(tx, { brandId: brand.id, entityType: 'commerce_store', entityId: row.id, event: 'commerce_store.sync_requested', metadata: { name: row.name } });
    return toView(updated!);
  });
}

// ---------------------------------------------------------------------------------------------
// Notifications: the store is found by the account and id its notification URL names.

/** The store a notification names: by its account and id (one tenant's rows), whatever its mode. */
export async function findNotified(base: BaseCtx, accountId: string, storeId: string): Promise<CommerceStore | null> {
  return (await CommerceStore.query(base.db).where({ accountId, id: storeId }).first()) ?? null;
}

/** A notification's order could not be fetched: the store is due a sync now, which reads it. */
export async function markDue(ctx: TenantCtx, row: CommerceStore): Promise<void> {
  await one(ctx, row)
    .whereNot('status', 'DISCONNECTED')
    .patch({ nextSyncAt: new Date(ctx.services.now()) });
}

// ---------------------------------------------------------------------------------------------
// The dispatcher's syncs (flows/commerce-sync.ts).

const one = (ctx: TenantCtx, row: Pick<CommerceStore, 'brandId' | 'id'>) => ofBrand(ctx, row.brandId).where('commerceStores.id', row.id);

export type Due = Pick<CommerceStore, 'accountId' | 'livemode' | 'id'>;

/**
 * The scan: stores due a sync at `now` over every account, the longest due first, on the partial
 * index commerce_stores_due_idx. Nothing is locked; each is claimed in its own account (claim).
 */
export async function dueBatch(base: BaseCtx, now: Date, limit: number): Promise<Due[]> {
  return CommerceStore.query(base.db)
    .whereRaw(`status <> 'DISCONNECTED'`)
    .where('nextSyncAt', '<=', now)
    .where((q) => q.whereNull('syncLeaseUntil').orWhere('syncLeaseUntil', '<', now))
    .orderBy('nextSyncAt')
    .limit(limit)
    .select('accountId', 'livemode', 'id');
}

/**
 * The store, claimed for a sync until `leaseUntil` (SYNCING), if it is still due and no live
 * lease holds it; null otherwise. One conditional update: no lock outlives it.
 */
export async function claim(ctx: TenantCtx, id: string, now: Date, leaseUntil: Date): Promise<CommerceStore | null> {
  const [row] = (await CommerceStore.scoped(ctx)
    .where('commerceStores.id', id)
    .whereNot('status', 'DISCONNECTED')
    .where('nextSyncAt', '<=', now)
    .where((q) => q.whereNull('syncLeaseUntil').orWhere('syncLeaseUntil', '<', now))
    .patch({ status: 'SYNCING', syncLeaseUntil: leaseUntil, updatedAt: now })
    .returning('*')) as unknown as CommerceStore[];
  return row ?? null;
}

/** Saves the sync's place with its page and renews the lease; false when the lease is no longer `held` (another sync has the store). */
export async function advance(tx: TenantCtx, row: CommerceStore, held: Date, cursor: Record<string, unknown>, leaseUntil: Date): Promise<boolean> {
  const moved = await one(tx, row).where('syncLeaseUntil', held).patch({ syncCursor: cursor, syncLeaseUntil: leaseUntil });
  return moved > 0;
}

/** The sync is done: everything modified up to `syncedThrough` is known; due again at `nextSyncAt`. */
export async function finish(ctx: TenantCtx, row: CommerceStore, held: Date, syncedThrough: Date, nextSyncAt: Date): Promise<boolean> {
  const now = new Date(ctx.services.now());
  const done = await one(ctx, row).where('syncLeaseUntil', held).patch({
    status: 'ACTIVE',
    syncCursor: null,
    syncedThrough,
    lastSyncAt: now,
    nextSyncAt,
    syncLeaseUntil: null,
    errorMessage: null,
    errorCount: 0,
    updatedAt: now,
  });
  return done > 0;
}

/**
 * The sync failed. `refused`: the store refused the token, DISCONNECTED (no more syncs until it
 * is connected again); otherwise ERROR, due again at `retryAt`. Its place is kept: the next sync
 * goes on from there.
 */
export async function recordFailure(ctx: TenantCtx, row: CommerceStore, held: Date, failure: { refused: boolean; message: string; retryAt: Date }): Promise<void> {
  await one(ctx, row)
    .where('syncLeaseUntil', held)
    .patch({
      status: failure.refused ? 'DISCONNECTED' : 'ERROR',
      errorMessage: clipError(failure.message),
      errorCount: CommerceStore.raw('error_count + 1') as unknown as number,
      nextSyncAt: failure.retryAt,
      syncLeaseUntil: null,
      updatedAt: new Date(ctx.services.now()),
    });
}

/** The store refused its token outside a sync (a notification's fetch): DISCONNECTED. */
export async function recordRefused(ctx: TenantCtx, row: CommerceStore, message: string): Promise<void> {
  await one(ctx, row).patch({
    status: 'DISCONNECTED',
    errorMessage: clipError(message),
    errorCount: CommerceStore.raw('error_count + 1') as unknown as number,
    updatedAt: new Date(ctx.services.now()),
  });
}

/** The sync stopped before its end (the dispatcher is stopping): given back, due at once for any dispatcher. */
export async function release(ctx: TenantCtx, row: CommerceStore, held: Date): Promise<void> {
  await one(ctx, row)
    .where('syncLeaseUntil', held)
    .patch({ syncLeaseUntil: null, nextSyncAt: new Date(ctx.services.now()) });
}

/** The brand's stores a sync may be asked of (the CLI's `stores sync BRAND`): every one not DISCONNECTED. */
export async function syncable(ctx: TenantCtx, brandId: string): Promise<CommerceStore[]> {
  const brand = await requireBrand(ctx, brandId);
  return ofBrand(ctx, brand.id).whereNot('status', 'DISCONNECTED').orderBy('commerceStores.id');
}
