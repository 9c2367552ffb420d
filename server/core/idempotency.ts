import { createHash } from 'node:crypto';
import type { BaseCtx, TenantCtx } from './context.js';
import type { SqlFragment } from './db.js';
import { conflict } from './errors.js';

/**
 * `X-Idempotency-Key` for any create (tickets, comments, …): one row per (account, mode, key) in
 * idempotency_keys, holding the fingerprint of the request and the id of what it created.
 *
 * The fingerprint covers method, route and the body as canonical JSON, so the same key sent to
 * another route (a comment key reused for a ticket, another ticket's comments) is another request:
 * a 409, never the other resource.
 */

export const IDEMPOTENCY_TTL_HOURS = 24;

/** JSON with object keys sorted at every level: the same body always has the same text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** Route with ids normalized by the caller (e.g. `/brands/br_…/tickets`), so path aliases are one request. */
export function requestFingerprint(method: string, route: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method}\n${route}\n${canonicalJson(body)}`)
    .digest('hex');
}

export type Claim = { claimed: true } | { claimed: false; resourceId: string };

/**
 * Claims `key` for a request that is about to create `resourceId`, or answers with what an earlier
 * identical request created. The claim is an insert in the caller's transaction, so a failed
 * request releases its key; an expired key is taken over. A concurrent request with the same key
 * waits on the uncommitted row and then sees the committed resource id. A live row with another
 * fingerprint is a 409 `idempotency_key_reused`.
 */
export async function claim(ctx: TenantCtx, key: string, fingerprint: string, resourceId: string, what = 'request'): Promise<Claim> {
  if (!ctx.db.isTransaction) throw new Error('idempotency.claim must run inside the transaction of the create');
  // Twice at most: the row we conflicted with may be purged (it expired) before we read it.
  for (let attempt = 0; attempt < 2; attempt++) {
    const { sql, bindings } = claimStatement(ctx, key, fingerprint, resourceId);
    const claimed = (await ctx.db.raw(sql, bindings as never[])) as { rows: unknown[] };
    if (claimed.rows.length) return { claimed: true };
    const existing = (await ctx.db('idempotency_keys').where({ accountId: ctx.accountId, livemode: ctx.livemode, key }).first('fingerprint', 'resourceId')) as
      | { fingerprint: string; resourceId: string | null }
      | undefined;
    if (!existing) continue;
    if (existing.fingerprint !== fingerprint || !existing.resourceId) {
      throw conflict(`This X-Idempotency-Key was already used with a different request; use a new key for a new ${what}`, 'idempotency_key_reused');
    }
    return { claimed: false, resourceId: existing.resourceId };
  }
  throw conflict('This X-Idempotency-Key is being reused right now; retry the request', 'idempotency_key_reused');
}

/**
 * The claim's INSERT for the rows of `source` (SQL yielding key, fingerprint and resource_id),
 * returning each key it claimed (a key a live row holds is left out): for claim, one row; for
 * ticket create's statement, the keys of its requests that passed their checks. The keys in
 * `source` must be distinct (one statement cannot claim a key twice).
 */
export function claimRowsStatement(ctx: TenantCtx, source: SqlFragment, at: Date = new Date(ctx.services.now())): SqlFragment {
  return { sql: claimRowsSql(source.sql, { account: '?', livemode: '?', at: '?' }), bindings: [ctx.accountId, ctx.livemode, at, at, ...source.bindings] };
}

/**
 * claimRowsStatement's text, with SQL expressions for the tenant and the claim's instant (`at`,
 * written twice): placeholders of the statement it goes into.
 */
export function claimRowsSql(source: string, given: { account: string; livemode: string; at: string }): string {
  // The instant is bound, not now(): a distributed table's conflict predicate may call only IMMUTABLE functions.
  return `insert into idempotency_keys (account_id, livemode, key, fingerprint, resource_id, created_at, expires_at)
      select ${given.account}, ${given.livemode}, claim_source.key, claim_source.fingerprint, claim_source.resource_id, ${given.at}::timestamptz,
        ${given.at}::timestamptz + make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})
      from (${source}) claim_source
      on conflict (account_id, livemode, key) do update
        set fingerprint = excluded.fingerprint, resource_id = excluded.resource_id, created_at = excluded.created_at, expires_at = excluded.expires_at
        where idempotency_keys.expires_at <= excluded.created_at
      returning key`;
}

function claimStatement(ctx: TenantCtx, key: string, fingerprint: string, resourceId: string): SqlFragment {
  return claimRowsStatement(ctx, { sql: 'select ?::text as key, ?::text as fingerprint, ?::text as resource_id', bindings: [key, fingerprint, resourceId] });
}

/**
 * Deletes expired keys, at most `batchSize` rows per statement (each its own short transaction),
 * so a large backlog never holds locks for long. Stops after `maxBatches`; the next run
 * continues. Returns the number of keys deleted. No row lock ahead of the delete (on a cluster
 * distributed by account, a locking read across accounts is refused): the delete tests the
 * expiry again on each row it reaches, so a key a request took over meanwhile (waited for, a
 * request's transaction is short) has a new expiry and stays.
 */
export async function purgeExpired(ctx: BaseCtx, { batchSize = 1000, maxBatches = 50 } = {}): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const result = (await ctx.db.raw(
      `
      delete from idempotency_keys where (account_id, livemode, key) in (
        select account_id, livemode, key from idempotency_keys where expires_at < now() limit ?)
      and expires_at < now()`,
      [batchSize],
    )) as { rowCount: number | null };
    const n = result.rowCount ?? 0;
    total += n;
    if (n < batchSize) break;
  }
  return total;
}
