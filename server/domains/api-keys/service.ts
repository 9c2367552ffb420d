import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX, normalizeBrandId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { hashSecret, randomBase62 } from '../../core/secrets.js';
import { part, type Services } from '../../core/services.js';
import { credentialCacheOf, credentialsChanged, CREDENTIAL_CHANNELS, startCredentialCache, type CacheEntry, type CredentialCache } from '../../core/credential-cache.js';
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
  const row = await ApiKey.query(ctx.db)
    .insert({
      id: newId(ID_PREFIX.apiKey),
      ...scopeOf(ctx),
      name: name ?? `${ctx.livemode ? 'Live' : 'Test'} key`,
      secretHash: hashSecret(secret),
      keyPreview: `${secret.slice(0, 8)}…${secret.slice(-4)}`,
      ...scope,
    })
    .returning('*');
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
    const row = (await ApiKey.scoped(tx)
      .findById(keyId)
      .patch({ ...scope, updatedAt: new Date(ctx.services.now()) })
      .returning('*')
      .first())!;
    const changes = audit.changesBetween(toView(before), toView(row), ['allBrands', 'brandIds']);
    if (changes.length) await audit.record(tx, keyFact(row, 'api_key.updated', changes));
    await keysChanged(tx, [keyId]);
    return toView(row);
  });
  return view;
}

/** Revoked keys stop working on the next request, in this process and (through NOTIFY) in every other. */
export async function revoke(ctx: TenantCtx, keyId: string): Promise<{ success: true; id: string; revokedAt: string }> {
  const now = new Date(ctx.services.now());
  await withTx(ctx, async (tx) => {
    // Compare and set: of two concurrent revokes, one succeeds and the other finds nothing (404).
    const revoked = (await activeKeys(tx).findById(keyId).patch({ revokedAt: now, updatedAt: now }).returning('*').first()) as unknown as ApiKey | undefined;
    if (!revoked) throw notFound('API key');
    await audit.record(tx, keyFact(revoked, 'api_key.revoked'));
    await keysChanged(tx, [keyId]);
  });
  return { success: true, id: keyId, revokedAt: now.toISOString() };
}

/** Issues a new key with the same name and scope; the old one stops now or after the grace period. */
export async function rotate(ctx: TenantCtx, keyId: string, graceMinutes = 0): Promise<{ newKey: ApiKeyWithSecretView; oldKey: ApiKeyView }> {
  const result = await withTx(ctx, async (tx) => {
    const old = await requireActive(tx, keyId);
    if (old.expiresAt) throw conflict(`API key ${keyId} was already rotated; it stops working at ${old.expiresAt.toISOString()}`, 'key_already_rotated');
    // The scope is copied as it is: deleting a brand may have left a limited key with no brand.
    const newKey = await insertKey(tx, old.name, { allBrands: old.allBrands, brandIds: old.allBrands ? [] : [...old.brandIds] }, old.id);
    const now = new Date(ctx.services.now());
    const patch = graceMinutes > 0 ? { expiresAt: new Date(now.getTime() + graceMinutes * 60_000), updatedAt: now } : { revokedAt: now, updatedAt: now };
    const oldKey = (await ApiKey.scoped(tx).findById(keyId).patch(patch).returning('*').first())!;
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
 * gone to every process's cache once it commits (the rows go with the account).
 */
export async function forgetAccount(ctx: TenantCtx): Promise<string[]> {
  const ids = (await ApiKey.query(ctx.db).where('apiKeys.accountId', ctx.accountId).select('id')).map((k) => k.id);
  await keysChanged(ctx, ids);
  return ids;
}

/**
 * API-key cache (core/credential-cache.ts): authentication answers from memory for CACHE_TTL_MS
 * after one database read. Every change that can end or narrow a key (revoke, scope change,
 * rotation, brand deletion) sends NOTIFY KEYS_CHANNEL with the key id in its transaction.
 */
export const KEYS_CHANNEL = CREDENTIAL_CHANNELS.apiKeys;
export const CACHE_TTL_MS = 30_000;

interface CachedKey extends CacheEntry {
  keyId: string;
  identity: ApiKeyIdentity;
  expiresAt: number | null;
  lastUsedAt: number;
}
export type ApiKeyCache = CredentialCache<CachedKey>;

/** Inside the change's transaction: every process forgets these keys once it commits. */
async function keysChanged(ctx: BaseCtx, keyIds: readonly string[]): Promise<void> {
  await credentialsChanged(ctx, 'apiKeys', keyIds);
}

/** When this process last wrote each key's lastUsedAt. */
const lastUsedWritesPart = part('apiKeys.lastUsedWrites', () => new Map<string, number>());

/** Starts the cache authenticate() answers from (the API does; without it every request reads the database); it closes with the services. */
export function startKeyCache(services: Services, ttlMs = CACHE_TTL_MS): ApiKeyCache {
  return startCredentialCache<CachedKey>(services, 'apiKeys', ttlMs);
}

export function keyCacheOf(services: Services): ApiKeyCache | null {
  return credentialCacheOf<CachedKey>(services, 'apiKeys');
}

/** The API-key authenticator used by every authenticated route: memory, else one indexed read; no write. */
export async function authenticate(services: Services, secret: string): Promise<ApiKeyIdentity | null> {
  if (!SECRET_FORMAT.test(secret)) return null;
  const hash = hashSecret(secret);
  const { db } = services;
  const cache = keyCacheOf(services);
  const lastUsedWrites = services.get(lastUsedWritesPart);
  let now = services.now();
  let entry = (await cache?.lookup(hash, now)) ?? null;
  if (!entry) {
    const token = cache?.token() ?? 0;
    const row = await ApiKey.query(db).findOne({ secretHash: hash });
    now = services.now();
    if (!row || row.revokedAt || (row.expiresAt && row.expiresAt.getTime() <= now)) return null;
    if (row.livemode !== secret.startsWith('sk_live_')) return null;
    entry = {
      tags: [row.id],
      keyId: row.id,
      identity: { keyId: row.id, name: row.name, accountId: row.accountId, livemode: row.livemode, brandScope: { allBrands: row.allBrands, brandIds: row.brandIds } },
      expiresAt: row.expiresAt?.getTime() ?? null,
      lastUsedAt: row.lastUsedAt?.getTime() ?? 0,
      cachedUntil: now + (cache?.ttl ?? 0),
    };
    cache?.set(hash, entry, token);
  }
  // A rotated key's grace period ends by the clock, cached or not.
  if (entry.expiresAt !== null && entry.expiresAt <= now) return null;

  const lastWrite = Math.max(entry.lastUsedAt, lastUsedWrites.get(entry.keyId) ?? 0);
  if (now - lastWrite >= LAST_USED_RESOLUTION_MS) {
    const keyId = entry.keyId;
    lastUsedWrites.set(keyId, now);
    // In the key's tenant: on Citus, by the id alone it would ask every shard.
    ApiKey.scoped({ db, accountId: entry.identity.accountId, livemode: entry.identity.livemode })
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
