import type { TenantCtx } from '../../core/context.js';
import { ID_PREFIX } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { savedItems } from '../../core/saved-items.js';
import { View } from './model.js';
import type { CreateViewInput, StoredSort, UpdateViewInput, ViewSort, ViewView } from './schemas.js';

/**
 * A brand's views, shared or personal (core/saved-items.ts), and the cache of their counts. Their
 * tickets are the ticket list's (flows/views.ts).
 */

export function toView(row: View): ViewView {
  return {
    id: row.id,
    object: 'view',
    brandId: row.brandId,
    name: row.name,
    visibility: row.visibility,
    ownerId: row.ownerId,
    filters: row.filters,
    sort: row.sort,
    createdBy: row.createdBy,
    createdAt: new Date(row.createdAt).toISOString(),
    updatedAt: new Date(row.updatedAt).toISOString(),
  };
}

const views = savedItems<View, ViewView>({ model: View, entity: 'view', idPrefix: ID_PREFIX.view, label: 'View', toView, audited: ['name', 'visibility', 'filters', 'sort'] });

export const { list, get, remove } = views;

/** A view the caller sees (404 otherwise), as stored. */
export const requireView = (ctx: TenantCtx, brandId: string, id: string): Promise<View> => views.find(ctx, brandId, id);

const sortOf = (sort: ViewSort | undefined): StoredSort => ({ field: sort?.field ?? null, order: sort?.order ?? 'desc' });

/** Creates a view whose filters the caller checked. */
export async function create(ctx: TenantCtx, brandId: string, input: CreateViewInput): Promise<ViewView> {
  return views.create(ctx, brandId, input, { filters: input.filters, sort: sortOf(input.sort) });
}

export async function update(ctx: TenantCtx, brandId: string, id: string, input: UpdateViewInput): Promise<ViewView> {
  return views.update(ctx, brandId, id, input, (current) => ({ filters: input.filters ?? current.filters, sort: input.sort ? sortOf(input.sort) : current.sort }));
}

/** A view's count as last taken. */
export interface KeptCount {
  viewId: string;
  count: number;
  countedAt: Date;
}

/** The counts of these views of the brand taken after `since`, by view. */
export async function keptCounts(ctx: TenantCtx, brandId: string, viewIds: readonly string[], since: Date): Promise<Map<string, KeptCount>> {
  if (!viewIds.length) return new Map();
  const rows = (await ctx
    .db('viewCounts')
    .where({ ...scopeOf(ctx), brandId })
    .whereIn('viewId', [...viewIds])
    .where('countedAt', '>', since)
    .select('viewId', 'count', 'countedAt')) as { viewId: string; count: string; countedAt: Date }[];
  return new Map(rows.map((r) => [r.viewId, { viewId: r.viewId, count: Number(r.count), countedAt: new Date(r.countedAt) }]));
}

const FOREIGN_KEY_VIOLATION = '23503';

/** Keeps counts just taken, for the next callers. A view deleted meanwhile keeps none. */
export async function keepCounts(ctx: TenantCtx, brandId: string, counts: readonly KeptCount[]): Promise<void> {
  if (!counts.length) return;
  const rows = counts.map((c) => ({ ...scopeOf(ctx), brandId, viewId: c.viewId, count: c.count, countedAt: c.countedAt }));
  try {
    await ctx.db('viewCounts').insert(rows).onConflict(['accountId', 'viewId']).merge(['count', 'countedAt']);
  } catch (err) {
    const code = (err as { code?: string; nativeError?: { code?: string } }).nativeError?.code ?? (err as { code?: string }).code;
    if (code !== FOREIGN_KEY_VIOLATION) throw err;
  }
}
