import type { Knex } from 'knex';
import { withTx, type TenantCtx } from '../../core/context.js';
import { isPgError, PG } from '../../core/db.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { isDomain, isEmail, normalizeDomain, normalizeEmail } from '../../core/text.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { blockedDomainsOf, isBlockedSql } from '../../core/blocked.js';
import { BlockedSource } from './model.js';
import type { BlockedSourceView, CreateBlockedSourceInput } from './schemas.js';

/**
 * Blocked sources of a brand: an email address, or a domain. A domain block covers the domain and
 * every subdomain of it (`example.com` blocks `a@example.com` and `a@mail.example.com`, not
 * `a@notexample.com`). The kind is inferred: a value with an @ after its first character is an
 * address; `example.com` and `@example.com` are domains.
 */

function toView(row: BlockedSource): BlockedSourceView {
  return { id: row.id, brandId: row.brandId, type: row.type, value: row.value, reason: row.reason, createdAt: row.createdAt.toISOString() };
}

/** The kind and normalized form of a value, or a 400. */
export function parseBlockedValue(raw: string): { type: 'email' | 'domain'; value: string } {
  const trimmed = raw.trim();
  if (trimmed.indexOf('@') > 0) {
    const value = normalizeEmail(trimmed);
    if (isEmail(value)) return { type: 'email', value };
  } else {
    const value = normalizeDomain(trimmed);
    if (isDomain(value)) return { type: 'domain', value };
  }
  throw badRequest(
    'value must be an email address (name@example.com) or a domain (example.com or @example.com)',
    [{ field: 'value', message: 'is not an email address or a domain' }],
    'invalid_blocked_source',
  );
}

export async function create(ctx: TenantCtx, brandId: string, input: CreateBlockedSourceInput): Promise<BlockedSourceView> {
  const { type, value } = parseBlockedValue(input.value);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    let row: BlockedSource;
    try {
      row = await BlockedSource.query(tx.db)
        .insert({
          id: newId(ID_PREFIX.blockedSource),
          ...scopeOf(tx),
          brandId: brand.id,
          type,
          value,
          reason: input.reason ?? null,
          createdBy: tx.actor.id,
        })
        .returning('*');
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, 'blocked_sources_value_unique')) throw conflict(`${value} is already blocked`, 'blocked_source_exists');
      throw err;
    }
    await audit.record(tx, createdFact(row));
    return toView(row);
  });
}

const createdFact = (row: Pick<BlockedSource, 'brandId' | 'id' | 'type' | 'value' | 'reason'>): audit.AuditFact => ({
  brandId: row.brandId,
  entityType: 'blocked_source',
  entityId: row.id,
  event: 'blocked_source.created',
  metadata: { type: row.type, value: row.value, reason: row.reason },
});
const deletedFact = (row: Pick<BlockedSource, 'brandId' | 'id' | 'type' | 'value'>): audit.AuditFact => ({
  brandId: row.brandId,
  entityType: 'blocked_source',
  entityId: row.id,
  event: 'blocked_source.deleted',
  metadata: { type: row.type, value: row.value },
});

/** All blocked sources of the brand, oldest first (a bare array: brands block a handful of sources). */
export async function list(ctx: TenantCtx, brandId: string): Promise<BlockedSourceView[]> {
  const brand = await requireBrand(ctx, brandId);
  return (await BlockedSource.scoped(ctx).where('brandId', brand.id).orderBy('id', 'asc')).map(toView);
}

/** Unblocks; returns what was removed. */
export async function remove(ctx: TenantCtx, brandId: string, sourceId: string): Promise<BlockedSourceView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const [row] = (await BlockedSource.scoped(tx).where({ brandId: brand.id, id: sourceId }).delete().returning('*')) as unknown as BlockedSource[];
    if (!row) throw notFound('Blocked source');
    await audit.record(tx, deletedFact(row));
    return toView(row);
  });
}

/** Whether mail from `email` is blocked for the brand (its tickets are then spam). */
export async function isBlocked(ctx: TenantCtx, brandId: string, email: string): Promise<boolean> {
  const brand = await requireBrand(ctx, brandId);
  const address = normalizeEmail(email);
  const { sql, bindings } = isBlockedSql(ctx, '?', '?', '?::text[]');
  const result = (await ctx.db.raw(`select ${sql} as blocked`, [...bindings, brand.id, address, blockedDomainsOf(address)] as Knex.Value[])) as { rows: { blocked: boolean }[] };
  return result.rows[0]!.blocked;
}

/** For the brand delete preview. */
export async function countForBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const r = (await BlockedSource.scoped(ctx).where('brandId', brandId).count({ n: '*' }).first()) as unknown as { n: string };
  return Number(r.n);
}

/**
 * For ticket spam marking: blocks these addresses (normalized) in the brand, leaving existing
 * blocks as they are. One statement; concurrent callers blocking the same address are fine.
 * Inside the caller's transaction (its audit entries need one), like unblockEmails.
 */
export async function blockEmails(ctx: TenantCtx, brandId: string, emails: readonly string[], reason: string): Promise<void> {
  const brand = await requireBrand(ctx, brandId);
  // Sorted, so concurrent transactions take the unique-index locks in the same order.
  const values = [...new Set(emails.map(normalizeEmail))].sort();
  if (!values.length) return;
  const created = (await ctx.db
    .table('blockedSources')
    .insert(values.map((value) => ({ id: newId(ID_PREFIX.blockedSource), ...scopeOf(ctx), brandId: brand.id, type: 'email' as const, value, reason, createdBy: ctx.actor.id })))
    .onConflict(['accountId', 'livemode', 'brandId', 'type', 'value'])
    .ignore()
    .returning(['id', 'brandId', 'type', 'value', 'reason'])) as Pick<BlockedSource, 'id' | 'brandId' | 'type' | 'value' | 'reason'>[];
  // Addresses that were blocked already keep their one entry.
  await audit.recordMany(ctx, created.map(createdFact));
}

/** For ticket spam unmarking: removes the exact-address blocks of these emails; domain blocks stay. */
export async function unblockEmails(ctx: TenantCtx, brandId: string, emails: readonly string[]): Promise<void> {
  const brand = await requireBrand(ctx, brandId);
  const values = [...new Set(emails.map(normalizeEmail))].sort();
  if (!values.length) return;
  const removed = (await BlockedSource.scoped(ctx).where({ brandId: brand.id, type: 'email' }).whereIn('value', values).delete().returning('*')) as unknown as BlockedSource[];
  await audit.recordMany(ctx, removed.map(deletedFact));
}
