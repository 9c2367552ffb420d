import { createHash, randomBytes } from 'node:crypto';
import { withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX, normalizeBrandId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import type { Db } from '../../core/db.js';
import type { ApiKeyIdentity } from '../../core/auth.js';
import * as brands from '../brands/service.js';
import { ApiKey } from './model.js';
import type { ApiKeyView, ApiKeyWithSecretView, CreateApiKeyInput, UpdateScopeInput } from './schemas.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_LENGTH = 43; // 43 base62 chars carry 256 bits
const SECRET_FORMAT = /^sk_(live|test)_[0-9A-Za-z]{43}$/;
/** lastUsedAt is kept to the minute: at most one write per key per minute, off the request path. */
const LAST_USED_RESOLUTION_MS = 60_000;

function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]; // 248 = 4 * 62: no modulo bias
    }
  }
  return out;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

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
  await brands.assertBrandsExist(ctx, brandIds);
  return { allBrands, brandIds };
}

/** Creates a key in the caller's mode. The secret is returned here and never again. */
export async function create(ctx: TenantCtx, input: CreateApiKeyInput): Promise<ApiKeyWithSecretView> {
  return insertKey(ctx, input.name, await resolveScope(ctx, input));
}

async function insertKey(ctx: TenantCtx, name: string | undefined, scope: { allBrands: boolean; brandIds: string[] }): Promise<ApiKeyWithSecretView> {
  const secret = `sk_${ctx.livemode ? 'live' : 'test'}_${randomBase62(SECRET_LENGTH)}`;
  const row = await ApiKey.query(ctx.db).insertAndFetch({
    id: newId(ID_PREFIX.apiKey),
    ...scopeOf(ctx),
    name: name ?? `${ctx.livemode ? 'Live' : 'Test'} key`,
    secretHash: hashSecret(secret),
    keyPreview: `${secret.slice(0, 8)}…${secret.slice(-4)}`,
    ...scope,
  });
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

/** Active keys of this account and mode, newest first. Revoked and expired keys are left out. */
export async function list(ctx: TenantCtx): Promise<ApiKeyView[]> {
  const rows = await activeKeys(ctx).orderBy('id', 'desc');
  return rows.map(toView);
}

export async function updateScope(ctx: TenantCtx, keyId: string, input: UpdateScopeInput): Promise<ApiKeyView> {
  return withTx(ctx, async (tx) => {
    await requireActive(tx, keyId);
    const scope = await resolveScope(tx, input);
    const row = await ApiKey.scoped(tx).patchAndFetchById(keyId, { ...scope, updatedAt: new Date() });
    return toView(row);
  });
}

/** Revoked keys stop working on the next request: authentication reads the row every time. */
export async function revoke(ctx: TenantCtx, keyId: string): Promise<{ success: true; id: string; revokedAt: string }> {
  const now = new Date();
  // Compare and set: of two concurrent revokes, one succeeds and the other finds nothing (404).
  const revoked = await activeKeys(ctx).findById(keyId).patch({ revokedAt: now, updatedAt: now });
  if (!revoked) throw notFound('API key');
  return { success: true, id: keyId, revokedAt: now.toISOString() };
}

/** Issues a new key with the same name and scope; the old one stops now or after the grace period. */
export async function rotate(ctx: TenantCtx, keyId: string, graceMinutes = 0): Promise<{ newKey: ApiKeyWithSecretView; oldKey: ApiKeyView }> {
  return withTx(ctx, async (tx) => {
    const old = await requireActive(tx, keyId);
    if (old.expiresAt) throw conflict(`API key ${keyId} was already rotated; it stops working at ${old.expiresAt.toISOString()}`, 'key_already_rotated');
    // The scope is copied as it is: deleting a brand may have left a limited key with no brand.
    const newKey = await insertKey(tx, old.name, { allBrands: old.allBrands, brandIds: old.allBrands ? [] : [...old.brandIds] });
    const now = new Date();
    const patch = graceMinutes > 0
      ? { expiresAt: new Date(now.getTime() + graceMinutes * 60_000), updatedAt: now }
      : { revokedAt: now, updatedAt: now };
    const oldKey = await ApiKey.scoped(tx).patchAndFetchById(keyId, patch);
    return { newKey, oldKey: toView(oldKey) };
  });
}

/** Drops a deleted brand from every key's scope, inside the brand delete transaction. */
export async function forgetBrand(ctx: TenantCtx, brandId: string): Promise<void> {
  await ApiKey.scoped(ctx)
    .whereRaw('? = any(brand_ids)', [brandId])
    .patch({ brandIds: ctx.db.raw('array_remove(brand_ids, ?)', [brandId]) as unknown as string[] });
}

const lastUsedWrites = new Map<string, number>();

/** The API-key authenticator used by every authenticated route: one indexed read, no write. */
export async function authenticate(db: Db, secret: string): Promise<ApiKeyIdentity | null> {
  if (!SECRET_FORMAT.test(secret)) return null;
  const row = await ApiKey.query(db).findOne({ secretHash: hashSecret(secret) });
  const now = Date.now();
  if (!row || row.revokedAt || (row.expiresAt && row.expiresAt.getTime() <= now)) return null;
  if (row.livemode !== secret.startsWith('sk_live_')) return null;

  const lastWrite = Math.max(row.lastUsedAt?.getTime() ?? 0, lastUsedWrites.get(row.id) ?? 0);
  if (now - lastWrite >= LAST_USED_RESOLUTION_MS) {
    lastUsedWrites.set(row.id, now);
    ApiKey.query(db).findById(row.id).patch({ lastUsedAt: new Date(now) }).catch(() => lastUsedWrites.delete(row.id));
  }
  return {
    keyId: row.id,
    name: row.name,
    accountId: row.accountId,
    livemode: row.livemode,
    brandScope: { allBrands: row.allBrands, brandIds: row.brandIds },
  };
}

/** Housekeeping: keys whose rotation grace period ended are marked revoked at their expiry. */
export async function revokeExpired(ctx: BaseCtx): Promise<number> {
  return ApiKey.query(ctx.db)
    .whereNull('revokedAt')
    .where('expiresAt', '<=', ctx.db.fn.now())
    .patch({ revokedAt: ctx.db.ref('expiresAt') as unknown as Date });
}

/** For administrators, who name a key by id alone: the account and mode it belongs to. */
export async function ownerOf(ctx: BaseCtx, keyId: string): Promise<{ accountId: string; livemode: boolean }> {
  const row = await ApiKey.query(ctx.db).findById(keyId).select('accountId', 'livemode');
  if (!row) throw notFound('API key');
  return { accountId: row.accountId, livemode: row.livemode };
}
