import { EventEmitter } from 'node:events';
import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX, normalizeBrandId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { hashSecret, randomBase62 } from '../../core/secrets.js';
import { part, type Services } from '../../core/services.js';
import { Listener, notify } from '../../core/notify.js';
import type { ApiKeyIdentity } from '../../core/auth.js';
import * as audit from '../../core/audit.js';
import { assertBrandsExist } from '../../core/brand.js';
import { ApiKey } from './model.js';
import type { ApiKeyView, ApiKeyWithSecretView, CreateApiKeyInput, UpdateScopeInput } from './schemas.js';

const SECRET_FORMAT = /^sk_(live|test)_[0-9A-Za-z]{43}$/;
/** lastUsedAt is kept to the minute: at most one write per key per minute, off the request path. */
const LAST_USED_RESOLUTION_MS = 60_000;

export function toView(row: ApiKey): ApiKeyView {
  return {
    id: row.id,
    object: 'api_key',
    name: row.name,
    keyPreview: row.keyPreview,
    prefix: row.keyPreview,
    livemode: row.livemode,
    allBrands: row.allBrands,
    brandIds: row.allBrands ? [] : row.brandIds,
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
    expiresAt: row.expiresAt?.toISOString() ?? null,
    createdAt: row.createdAt.toISOString(),
  };
}

/**
 * allBrands defaults to true unless brandIds are given (an empty list limits to nothing, it never
 * widens); the brands must exist in this scope. `ws_` and `br_` spellings of one brand count once.
 */
async function resolveScope(ctx: TenantCtx, input: { allBrands?: boolean; brandIds?: string[] }) {
  const brandIds = [...new Set((input.brandIds ?? []).map(normalizeBrandId))];
  const allBrands = input.allBrands ?? input.brandIds === undefined;
  if (allBrands && brandIds.length > 0) {
    throw badRequest('Give either allBrands: true or a list of brandIds, not both', [{ field: 'brandIds', message: 'must be empty when allBrands is true' }]);
  }
  if (!allBrands && brandIds.length === 0) {
    throw badRequest('A key limited to brands needs at least one brand id', [{ field: 'brandIds', message: 'must list at least one brand' }]);
  }
  await assertBrandsExist(ctx, brandIds);
  return { allBrands, brandIds };
}

/**
 * Audit entries of keys are account-level (brandId null). They name the key by id, name and
 * display prefix; the secret and its hash never go into an entry.
 */
function keyFact(row: ApiKey, event: string, changes?: audit.Change[], metadata: Record<string, unknown> = {}): audit.AuditFact {
  return { brandId: null, entityType: 'api_key', entityId: row.id, event, changes, metadata: { name: row.name, prefix: row.keyPreview, ...metadata } };
}

/** Creates a key in the caller's mode. The secret is returned here and never again. */
export async function create(ctx: TenantCtx, input: CreateApiKeyInput): Promise<ApiKeyWithSecretView> {
  return withTx(ctx, async (tx) => insertKey(tx, input.name, await resolveScope(tx, input)));
}

async function insertKey(ctx: TenantCtx, name: string | undefined, scope: { allBrands: boolean; brandIds: string[] }, rotatedFrom?: string): Promise<ApiKeyWithSecretView> {
  const secret = `sk_${ctx.livemode ? 'live' : 'test'}_${randomBase62()}`;
  const row = await ApiKey.query(ctx.db).insertAndFetch({
    id: newId(ID_PREFIX.apiKey),
    ...scopeOf(ctx),
    name: name ?? `${ctx.livemode ? 'Live' : 'Test'} key`,
    secretHash: hashSecret(secret),
    keyPreview: `${secret.slice(0, 8)}…${secret.slice(-4)}`,
    ...scope,
  });
  await audit.record(ctx, keyFact(row, 'api_key.created', undefined, { ...scope, ...(rotatedFrom ? { rotatedFrom } : {}) }));
  return { ...toView(row), key: secret };
}

function activeKeys(ctx: TenantCtx) {
  return ApiKey.scoped(ctx)
    .whereNull('revokedAt')
    .where((q) => q.whereNull('expiresAt').orWhere('expiresAt', '>', ctx.db.fn.now()));
}

/** Locks the row when in a transaction, so concurrent rotations of one key serialize. */
async function requireActive(ctx: TenantCtx, keyId: string): Promise<ApiKey> {
  const query = activeKeys(ctx).findById(keyId);
  const row = await (ctx.db.isTransaction ? query.forUpdate() : query);
  if (!row) throw notFound('API key');
  return row;
}

/**
 * Active keys of this account and mode, newest first. Revoked and expired keys are left out. A key
 * limited to some brands sees only the keys that reach no further than it does (limited to brands
 * among its own): never a wider key, nor the brands it cannot see.
 */
export async function list(ctx: TenantCtx): Promise<ApiKeyView[]> {
  const q = activeKeys(ctx).orderBy('id', 'desc');
  if (!ctx.brandScope.allBrands) q.where('allBrands', false).whereRaw('brand_ids <@ ?::text[]', [[...ctx.brandScope.brandIds]]);
  return (await q).map(toView);
}

export async function updateScope(ctx: TenantCtx, keyId: string, input: UpdateScopeInput): Promise<ApiKeyView> {
  const view = await withTx(ctx, async (tx) => {
    const before = await requireActive(tx, keyId);
    const scope = await resolveScope(tx, input);
    const row = await ApiKey.scoped(tx).patchAndFetchById(keyId, { ...scope, updatedAt: new Date() });
    const changes = audit.changesBetween(toView(before), toView(row), ['allBrands', 'brandIds']);
    if (changes.length) await audit.record(tx, keyFact(row, 'api_key.updated', changes));
    await keysChanged(tx, [keyId]);
    return toView(row);
  });
  dropCached(ctx.services, [keyId]);
  return view;
}

/** Revoked keys stop working on the next request, in this process and (through NOTIFY) in every other. */
export async function revoke(ctx: TenantCtx, keyId: string): Promise<{ success: true; id: string; revokedAt: string }> {
  const now = new Date();
  await withTx(ctx, async (tx) => {
    // Compare and set: of two concurrent revokes, one succeeds and the other finds nothing (404).
    const revoked = (await activeKeys(tx).findById(keyId).patch({ revokedAt: now, updatedAt: now }).returning('*')) as unknown as ApiKey | undefined;
    if (!revoked) throw notFound('API key');
    await audit.record(tx, keyFact(revoked, 'api_key.revoked'));
    await keysChanged(tx, [keyId]);
  });
  dropCached(ctx.services, [keyId]);
  return { success: true, id: keyId, revokedAt: now.toISOString() };
}

/** Issues a new key with the same name and scope; the old one stops now or after the grace period. */
export async function rotate(ctx: TenantCtx, keyId: string, graceMinutes = 0): Promise<{ newKey: ApiKeyWithSecretView; oldKey: ApiKeyView }> {
  const result = await withTx(ctx, async (tx) => {
    const old = await requireActive(tx, keyId);
    if (old.expiresAt) throw conflict(`API key ${keyId} was already rotated; it stops working at ${old.expiresAt.toISOString()}`, 'key_already_rotated');
    // The scope is copied as it is: deleting a brand may have left a limited key with no brand.
    const newKey = await insertKey(tx, old.name, { allBrands: old.allBrands, brandIds: old.allBrands ? [] : [...old.brandIds] }, old.id);
    const now = new Date();
    const patch = graceMinutes > 0 ? { expiresAt: new Date(now.getTime() + graceMinutes * 60_000), updatedAt: now } : { revokedAt: now, updatedAt: now };
    const oldKey = await ApiKey.scoped(tx).patchAndFetchById(keyId, patch);
    // With a grace period the key is revoked later, by the clock (revokeExpired records that).
    await audit.record(
      tx,
      graceMinutes > 0
        ? keyFact(oldKey, 'api_key.updated', [{ field: 'expiresAt', from: null, to: oldKey.expiresAt!.toISOString() }], { rotatedTo: newKey.id })
        : keyFact(oldKey, 'api_key.revoked', undefined, { rotatedTo: newKey.id }),
    );
    await keysChanged(tx, [keyId]);
    return { newKey, oldKey: toView(oldKey) };
  });
  dropCached(ctx.services, [keyId]);
  return result;
}

/** Drops a deleted brand from every key's scope, inside the brand delete transaction. */
export async function forgetBrand(ctx: TenantCtx, brandId: string): Promise<void> {
  const changed = await ApiKey.scoped(ctx).whereRaw('? = any(brand_ids)', [brandId]).orderBy('id').forUpdate();
  if (!changed.length) return;
  await ApiKey.scoped(ctx)
    .whereIn(
      'id',
      changed.map((k) => k.id),
    )
    .patch({ brandIds: ctx.db.raw('array_remove(brand_ids, ?)', [brandId]) as unknown as string[] });
  await audit.recordMany(
    ctx,
    changed.map((k) => keyFact(k, 'api_key.updated', [{ field: 'brandIds', from: k.brandIds, to: k.brandIds.filter((id) => id !== brandId) }], { reason: 'brand_deleted' })),
  );
  await keysChanged(
    ctx,
    changed.map((k) => k.id),
  );
}

/**
 * Account deletion, inside its transaction: every key of the account, both modes, is announced
 * gone to every process's cache (the rows go with the account). Returns their ids for forgetCached.
 */
export async function forgetAccount(ctx: TenantCtx): Promise<string[]> {
  const ids = (await ApiKey.query(ctx.db).where('apiKeys.accountId', ctx.accountId).select('id')).map((k) => k.id);
  await keysChanged(ctx, ids);
  return ids;
}

/** After the commit of a change that ended keys: this process's cache forgets them at once. */
export function forgetCached(services: Services, keyIds: readonly string[]): void {
  dropCached(services, keyIds);
}

/**
 * API-key cache: authentication answers from memory for CACHE_TTL_MS after one database read.
 * Every change that can end or narrow a key (revoke, scope change, rotation, brand deletion) sends
 * NOTIFY KEYS_CHANNEL with the key id in its transaction; each process LISTENs and drops the entry
 * when the change commits. The process that made the change drops it itself right after its commit,
 * so the very next request it serves sees the change. While the LISTEN connection is down the cache
 * is emptied and bypassed (every request reads the database) until it is back.
 */
export const KEYS_CHANNEL = 'ticketd_api_keys';
export const CACHE_TTL_MS = 30_000;
const CACHE_MAX_ENTRIES = 10_000;

interface CachedKey {
  keyId: string;
  identity: ApiKeyIdentity;
  expiresAt: number | null;
  lastUsedAt: number;
  cachedUntil: number;
}

/** Sends the NOTIFY for changed keys inside the change's transaction. */
async function keysChanged(ctx: BaseCtx, keyIds: readonly string[]): Promise<void> {
  await notify(ctx.db, KEYS_CHANNEL, keyIds);
}

export class ApiKeyCache {
  private readonly byHash = new Map<string, CachedKey>();
  private readonly hashById = new Map<string, string>();
  /** Bumped by every drop: a read that started before a drop must not store what it read. */
  private generation = 0;
  readonly events = new EventEmitter();
  readonly stats = { hits: 0, misses: 0, drops: 0 };

  constructor(
    private readonly listener: Listener,
    private readonly ttlMs: number,
  ) {
    listener.on('notification', (_channel: string, keyId: string) => this.drop([keyId]));
    listener.on('up', () => {
      this.clear();
      this.events.emit('up');
    });
    listener.on('down', () => {
      this.clear();
      this.events.emit('down');
    });
  }

  /** Serving from memory only while notifications can reach us. */
  get live(): boolean {
    return this.listener.live;
  }

  get(hash: string, now: number): CachedKey | null {
    if (!this.live) return null;
    const entry = this.byHash.get(hash);
    if (!entry) return null;
    if (entry.cachedUntil <= now) {
      // Plain expiry, not an invalidation: no generation bump, so concurrent reads of other keys still cache.
      this.byHash.delete(hash);
      this.hashById.delete(entry.keyId);
      return null;
    }
    return entry;
  }

  token(): number {
    return this.generation;
  }

  set(hash: string, entry: CachedKey, token: number): void {
    if (!this.live || token !== this.generation) return;
    if (this.byHash.size >= CACHE_MAX_ENTRIES) this.clear();
    this.byHash.set(hash, entry);
    this.hashById.set(entry.keyId, hash);
  }

  drop(keyIds: readonly string[]): void {
    this.generation++;
    for (const keyId of keyIds) {
      const hash = this.hashById.get(keyId);
      this.hashById.delete(keyId);
      if (hash) this.byHash.delete(hash);
      this.stats.drops++;
      this.events.emit('drop', keyId);
    }
  }

  clear(): void {
    this.generation++;
    this.byHash.clear();
    this.hashById.clear();
  }

  get size(): number {
    return this.byHash.size;
  }

  /** Resolves once every notification committed before the call has been applied. */
  sync(): Promise<void> {
    return this.listener.sync();
  }

  get ttl(): number {
    return this.ttlMs;
  }

  close(): Promise<void> {
    this.clear();
    return this.listener.close();
  }
}

/**
 * This process's authentication state: the cache (started by the API, which LISTENs; without it
 * every request reads the database) and when each key's last use was last written.
 */
const keyAuth = part(
  'apiKeys.auth',
  () => ({ cache: null as ApiKeyCache | null, lastUsedWrites: new Map<string, number>() }),
  (state) => state.cache?.close(),
);

/** Starts the cache authenticate() answers from; it closes with the services. */
export function startKeyCache(services: Services, ttlMs = CACHE_TTL_MS): ApiKeyCache {
  const state = services.get(keyAuth);
  state.cache ??= new ApiKeyCache(Listener.forServices(services, [KEYS_CHANNEL]).start(), ttlMs);
  return state.cache;
}

export function keyCacheOf(services: Services): ApiKeyCache | null {
  return services.get(keyAuth).cache;
}

/** After a commit: this process's cache forgets at once (others hear the NOTIFY). */
function dropCached(services: Services, keyIds: readonly string[]): void {
  services.get(keyAuth).cache?.drop(keyIds);
}

/** Lets notifications that already reached this process be applied before a cached answer is used. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The API-key authenticator used by every authenticated route: memory, else one indexed read; no write. */
export async function authenticate(services: Services, secret: string): Promise<ApiKeyIdentity | null> {
  if (!SECRET_FORMAT.test(secret)) return null;
  const hash = hashSecret(secret);
  const { db } = services;
  const { cache, lastUsedWrites } = services.get(keyAuth);
  let now = services.now();
  let entry = cache?.get(hash, now) ?? null;
  if (entry) {
    await turn();
    entry = cache!.get(hash, now);
  }
  if (entry) {
    cache!.stats.hits++;
  } else {
    const token = cache?.token() ?? 0;
    const row = await ApiKey.query(db).findOne({ secretHash: hash });
    now = services.now();
    if (!row || row.revokedAt || (row.expiresAt && row.expiresAt.getTime() <= now)) return null;
    if (row.livemode !== secret.startsWith('sk_live_')) return null;
    entry = {
      keyId: row.id,
      identity: { keyId: row.id, name: row.name, accountId: row.accountId, livemode: row.livemode, brandScope: { allBrands: row.allBrands, brandIds: row.brandIds } },
      expiresAt: row.expiresAt?.getTime() ?? null,
      lastUsedAt: row.lastUsedAt?.getTime() ?? 0,
      cachedUntil: now + (cache?.ttl ?? 0),
    };
    if (cache) {
      cache.stats.misses++;
      cache.set(hash, entry, token);
    }
  }
  // A rotated key's grace period ends by the clock, cached or not.
  if (entry.expiresAt !== null && entry.expiresAt <= now) return null;

  const lastWrite = Math.max(entry.lastUsedAt, lastUsedWrites.get(entry.keyId) ?? 0);
  if (now - lastWrite >= LAST_USED_RESOLUTION_MS) {
    const keyId = entry.keyId;
    lastUsedWrites.set(keyId, now);
    ApiKey.query(db)
      .findById(keyId)
      .patch({ lastUsedAt: new Date(now) })
      .catch(() => lastUsedWrites.delete(keyId));
  }
  return entry.identity;
}

/** Housekeeping: keys whose rotation grace period ended are marked revoked at their expiry. */
export async function revokeExpired(ctx: BaseCtx): Promise<number> {
  return withTx(ctx, async (tx) => {
    const revoked = (await ApiKey.query(tx.db)
      .whereNull('revokedAt')
      .where('expiresAt', '<=', tx.db.fn.now())
      .patch({ revokedAt: tx.db.ref('expiresAt') as unknown as Date })
      .returning('*')) as unknown as ApiKey[];
    for (const key of revoked) await audit.record(tenantCtx(tx, key.accountId, key.livemode), keyFact(key, 'api_key.revoked', undefined, { reason: 'rotation_grace_ended' }));
    // Caches already refuse these keys by the clock; the notification just frees their entries.
    await keysChanged(
      tx,
      revoked.map((k) => k.id),
    );
    return revoked.length;
  });
}

/** For administrators, who name a key by id alone: the account and mode it belongs to. */
export async function ownerOf(ctx: BaseCtx, keyId: string): Promise<{ accountId: string; livemode: boolean }> {
  const row = await ApiKey.query(ctx.db).findById(keyId).select('accountId', 'livemode');
  if (!row) throw notFound('API key');
  return { accountId: row.accountId, livemode: row.livemode };
}
