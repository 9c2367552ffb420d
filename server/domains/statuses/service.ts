import { withTx, type TenantCtx } from '../../core/context.js';
import { isPgError, PG } from '../../core/db.js';
import { badRequest, conflict, forbidden, notFound } from '../../core/errors.js';
import { ID_PREFIX, newId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { Status } from './model.js';
import type { CreateStatusInput, ReorderStatusesInput, StatusView, StatusWithCountView, UpdateStatusInput } from './schemas.js';

/**
 * The statuses every brand starts with, in display order.
 *
 * Decision: they are created together with the brand (brands.create calls createSystemStatuses in
 * the same transaction), and migration 20261122000400 backfilled the brands that existed before.
 * Not lazily on first read: then every reader (ticket create, list filters, stats) would have to
 * remember to materialize them, and a read would write. A brand therefore always has them.
 */
export const SYSTEM_STATUSES = [
  { key: 'open', name: 'Open', color: '#3b82f6' },
  { key: 'pending', name: 'Pending', color: '#f59e0b' },
  { key: 'resolved', name: 'Resolved', color: '#10b981' },
  { key: 'closed', name: 'Closed', color: '#6b7280' },
] as const;

const KEY_UNIQUE = 'statuses_key_unique';

export function toView(row: Status): StatusView {
  return {
    id: row.id,
    object: 'status',
    brandId: row.brandId,
    key: row.key,
    name: row.name,
    color: row.color,
    description: row.description,
    isSystem: row.isSystem,
    isActive: row.isActive,
    sortOrder: row.sortOrder,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

const keyTaken = (key: string) => conflict(`A status with key "${key}" already exists in this brand`, 'status_key_taken');

/** Statuses of a brand the caller can already see (the brand was checked), in display order. */
function ofBrand(ctx: TenantCtx, brandId: string) {
  return Status.scoped(ctx).where('brandId', brandId);
}

async function ordered(ctx: TenantCtx, brandId: string): Promise<Status[]> {
  return ofBrand(ctx, brandId).orderBy([
    { column: 'sortOrder', order: 'asc' },
    { column: 'id', order: 'asc' },
  ]);
}

/**
 * Called by brands.create inside the transaction that creates the brand. It takes the id of a
 * brand that was just inserted in ctx's scope (the composite foreign key refuses any other).
 */
export async function createSystemStatuses(ctx: TenantCtx, brandId: string): Promise<void> {
  const now = new Date(ctx.services.now());
  await Status.query(ctx.db).insert(
    SYSTEM_STATUSES.map((s, i) => ({
      id: newId(ID_PREFIX.status),
      ...scopeOf(ctx),
      brandId,
      ...s,
      isSystem: true,
      isActive: true,
      sortOrder: i,
      createdAt: now,
      updatedAt: now,
    })),
  );
}

export async function list(ctx: TenantCtx, brandId: string): Promise<StatusView[]> {
  const brand = await requireBrand(ctx, brandId);
  return (await ordered(ctx, brand.id)).map(toView);
}

/** Tickets per status key of the brand, deleted tickets left out (keys without tickets are absent). */
async function ticketCountsByStatus(ctx: TenantCtx, brandId: string): Promise<Record<string, number>> {
  const rows = (await ctx
    .db('tickets')
    .where({ ...scopeOf(ctx), brandId })
    .whereNull('deletedAt')
    .groupBy('status')
    .select('status' + ' as k')
    .count({ n: '*' })) as unknown as { k: string | null; n: string }[];
  return Object.fromEntries(rows.filter((r) => r.k != null).map((r) => [r.k!, Number(r.n)]));
}

export async function stats(ctx: TenantCtx, brandId: string): Promise<StatusWithCountView[]> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const rows = await ordered(tx, brand.id);
    const counts = await ticketCountsByStatus(tx, brand.id);
    return rows.map((r) => ({ ...toView(r), ticketCount: counts[r.key] ?? 0 }));
  });
}

/** `lock`: for update, so the audit entry's `from` values are what the change replaced. */
async function requireStatus(ctx: TenantCtx, brandId: string, statusId: string, lock = false): Promise<Status> {
  const query = ofBrand(ctx, brandId).findById(statusId);
  const row = await (lock ? query.forUpdate() : query);
  if (!row) throw notFound('Status');
  return row;
}

export async function get(ctx: TenantCtx, brandId: string, statusId: string): Promise<StatusView> {
  const brand = await requireBrand(ctx, brandId);
  return toView(await requireStatus(ctx, brand.id, statusId));
}

export async function create(ctx: TenantCtx, brandId: string, input: CreateStatusInput): Promise<StatusView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    // New statuses go last unless a place was given.
    const last = (await ofBrand(tx, brand.id).max('sortOrder as m').first()) as unknown as { m: number | null };
    const now = new Date(ctx.services.now());
    try {
      const row = await tx.db.transaction(async (trx) =>
        Status.query(trx)
          .insert({
            id: newId(ID_PREFIX.status),
            ...scopeOf(tx),
            brandId: brand.id,
            key: input.key,
            name: input.name,
            color: input.color,
            description: input.description ?? null,
            isSystem: false,
            isActive: input.isActive ?? true,
            sortOrder: input.sortOrder ?? (last.m === null ? 0 : last.m + 1),
            createdAt: now,
            updatedAt: now,
          })
          .returning('*'),
      );
      await audit.record(tx, { brandId: brand.id, entityType: 'status', entityId: row.id, event: 'status.created', metadata: { key: row.key, name: row.name } });
      return toView(row);
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, KEY_UNIQUE)) throw keyTaken(input.key);
      throw err;
    }
  });
}

/**
 * A system status keeps its key (403 system_status): tickets and clients rely on open, pending,
 * resolved and closed existing. A custom status may change its key; its tickets keep the key they
 * had (nothing moves them to the new one yet).
 */
export async function update(ctx: TenantCtx, brandId: string, statusId: string, input: UpdateStatusInput): Promise<StatusView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const status = await requireStatus(tx, brand.id, statusId, true);
    if (input.key !== undefined && input.key !== status.key && status.isSystem) {
      throw forbidden(`"${status.key}" is a system status: its key cannot change`, 'system_status');
    }
    try {
      const after = toView(
        await tx.db.transaction(
          async (trx) =>
            (await ofBrand({ ...tx, db: trx }, brand.id)
              .findById(status.id)
              .patch({ ...input, updatedAt: new Date(ctx.services.now()) })
              .returning('*')
              .first())!,
        ),
      );
      const changes = audit.changesBetween(toView(status), after, ['key', 'name', 'color', 'description', 'isActive', 'sortOrder']);
      if (changes.length)
        await audit.record(tx, { brandId: brand.id, entityType: 'status', entityId: status.id, event: 'status.updated', changes, metadata: { key: after.key, name: after.name } });
      return after;
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, KEY_UNIQUE)) throw keyTaken(input.key!);
      throw err;
    }
  });
}

/** Custom statuses only (403 system_status). Returns the deleted status. */
export async function remove(ctx: TenantCtx, brandId: string, statusId: string): Promise<StatusView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const status = await requireStatus(tx, brand.id, statusId);
    if (status.isSystem) throw forbidden(`"${status.key}" is a system status and cannot be deleted`, 'system_status');
    await ofBrand(tx, brand.id).where('id', status.id).delete();
    await audit.record(tx, { brandId: brand.id, entityType: 'status', entityId: status.id, event: 'status.deleted', metadata: { key: status.key, name: status.name } });
    return toView(status);
  });
}

/** statusIds must name every status of the brand exactly once; anything else is 400 and changes nothing. */
export async function reorder(ctx: TenantCtx, brandId: string, input: ReorderStatusesInput): Promise<StatusView[]> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    // Lock the brand's statuses so two reorders (or a create) cannot interleave.
    const rows = await ofBrand(tx, brand.id).forUpdate();
    const known = new Set(rows.map((r) => r.id));
    const seen = new Set<string>();
    const errors: { field: string; message: string }[] = [];
    input.statusIds.forEach((id, i) => {
      if (!known.has(id)) errors.push({ field: `statusIds.${i}`, message: `${id} is not a status of this brand` });
      else if (seen.has(id)) errors.push({ field: `statusIds.${i}`, message: `${id} is listed more than once` });
      seen.add(id);
    });
    for (const r of rows) if (!seen.has(r.id)) errors.push({ field: 'statusIds', message: `${r.id} (${r.key}) is missing` });
    if (errors.length) throw badRequest('statusIds must list every status of the brand exactly once', errors, 'invalid_reorder');
    const now = new Date(ctx.services.now());
    for (const [i, id] of input.statusIds.entries()) {
      await ofBrand(tx, brand.id).findById(id).patch({ sortOrder: i, updatedAt: now });
    }
    await audit.recordReorder(tx, brand.id, 'status', audit.displayOrder(rows), input.statusIds);
    return (await ordered(tx, brand.id)).map(toView);
  });
}

/**
 * A ticket's status must be a key of one of its brand's statuses.
 * Throws 400 invalid_status naming the allowed keys. Takes a brand the caller may see.
 */
export async function assertStatusKey(ctx: TenantCtx, brandId: string, key: string, field = 'status'): Promise<void> {
  // Every brand has the system statuses, which can be neither deleted nor re-keyed.
  if (SYSTEM_STATUSES.some((s) => s.key === key)) return;
  const brand = await requireBrand(ctx, brandId);
  const keys = (await ordered(ctx, brand.id)).map((s) => s.key);
  if (!keys.includes(key)) {
    throw badRequest(`"${key}" is not a status of this brand; use one of: ${keys.join(', ')}`, [{ field, message: `must be one of: ${keys.join(', ')}` }], 'invalid_status');
  }
}

/** Custom statuses of a brand, for the brand delete preview (system ones always exist). */
export async function countCustom(ctx: TenantCtx, brandId: string): Promise<number> {
  const result = (await ofBrand(ctx, brandId).where('isSystem', false).count({ n: '*' }).first()) as unknown as { n: string };
  return Number(result.n);
}
