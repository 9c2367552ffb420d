import { withTx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { isPgError, PG } from '../../core/db.js';
import { scopeOf } from '../../core/model.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import * as ticketNames from '../../core/ticket-names.js';
import { Category } from './model.js';
import type { CategoryCountView, CategoryView, CreateCategoryInput, ReorderCategoriesInput, UpdateCategoryInput } from './schemas.js';

export const DEFAULT_CATEGORY_COLOR = '#6b7280';

export function toView(row: Category): CategoryView {
  return {
    id: row.id,
    object: 'category',
    brandId: row.brandId,
    name: row.name,
    color: row.color,
    description: row.description,
    sortOrder: row.sortOrder,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The categories of one (already visible) brand. */
const ofBrand = (ctx: TenantCtx, brandId: string) => Category.scoped(ctx).where('categories.brandId', brandId);

function nameTaken(name: string) {
  return conflict(`A category named "${name}" already exists in this brand (names ignore case)`, 'category_name_taken');
}

/** Unique name per brand (categories_name_unique) → 409; brand deleted meanwhile (FK) → 404. */
function translate(err: unknown, name: string | undefined): unknown {
  if (isPgError(err, PG.uniqueViolation, 'categories_name_unique')) return nameTaken(name ?? '');
  if (isPgError(err, PG.foreignKeyViolation, 'categories_brand_fk')) return notFound('Brand');
  return err;
}

/** One past the highest sortOrder of the brand (0 for its first category). */
async function nextSortOrder(ctx: TenantCtx, brandId: string): Promise<number> {
  const row = (await ofBrand(ctx, brandId).max('sortOrder as m').first()) as unknown as { m: number | null } | undefined;
  return row?.m == null ? 0 : Number(row.m) + 1;
}

export async function list(ctx: TenantCtx, brandId: string): Promise<CategoryView[]> {
  const brand = await requireBrand(ctx, brandId);
  return (await ofBrand(ctx, brand.id).orderBy([{ column: 'sortOrder' }, { column: 'id' }])).map(toView);
}

/**
 * The categories with these ids, if every one belongs to the brand (404 otherwise, whether the id
 * is unknown or of another brand, account or mode). For callers such as tickets that store ids.
 */
export async function requireCategories(ctx: TenantCtx, brandId: string, ids: readonly string[]): Promise<Category[]> {
  const brand = await requireBrand(ctx, brandId);
  const unique = [...new Set(ids)];
  const rows = unique.length ? await ofBrand(ctx, brand.id).whereIn('categories.id', unique) : [];
  if (rows.length !== unique.length) throw notFound('Category');
  return rows;
}

export async function requireCategory(ctx: TenantCtx, brandId: string, categoryId: string): Promise<Category> {
  return (await requireCategories(ctx, brandId, [categoryId]))[0]!;
}

export async function get(ctx: TenantCtx, brandId: string, categoryId: string): Promise<CategoryView> {
  return toView(await requireCategory(ctx, brandId, categoryId));
}

export async function create(ctx: TenantCtx, brandId: string, input: CreateCategoryInput): Promise<CategoryView> {
  const name = input.name.trim();
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    // New categories go last unless the caller says where.
    const sortOrder = input.sortOrder ?? (await nextSortOrder(tx, brand.id));
    let row: Category;
    try {
      row = await Category.query(tx.db)
        .insert({
          id: newId(ID_PREFIX.category),
          ...scopeOf(tx),
          brandId: brand.id,
          name,
          color: input.color ?? DEFAULT_CATEGORY_COLOR,
          description: input.description ?? null,
          sortOrder,
        })
        .returning('*');
    } catch (err) {
      throw translate(err, name);
    }
    await audit.record(tx, { brandId: brand.id, entityType: 'category', entityId: row.id, event: 'category.created', metadata: { name } });
    return toView(row);
  });
}

export async function update(ctx: TenantCtx, brandId: string, categoryId: string, input: UpdateCategoryInput): Promise<CategoryView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    // Locked, so the audit entry's `from` values are what this update replaced.
    const row = await ofBrand(tx, brand.id).findById(categoryId).forUpdate();
    if (!row) throw notFound('Category');
    const patch: Partial<Category> = { updatedAt: new Date(ctx.services.now()) };
    if (input.name !== undefined) patch.name = input.name.trim();
    if (input.color !== undefined) patch.color = input.color ?? DEFAULT_CATEGORY_COLOR;
    if (input.description !== undefined) patch.description = input.description;
    if (input.sortOrder !== undefined) patch.sortOrder = input.sortOrder;
    let after: CategoryView;
    try {
      after = toView((await ofBrand(tx, row.brandId).findById(row.id).patch(patch).returning('*').first())!);
    } catch (err) {
      throw translate(err, patch.name);
    }
    if (after.name !== row.name) await ticketNames.categoryChanged(tx, row.brandId, row.id);
    const changes = audit.changesBetween(toView(row), after, ['name', 'color', 'description', 'sortOrder']);
    if (changes.length)
      await audit.record(tx, { brandId: row.brandId, entityType: 'category', entityId: row.id, event: 'category.updated', changes, metadata: { name: after.name } });
    return after;
  });
}

/**
 * Deletes a category. Its tickets become uncategorized first, in the same transaction, so no
 * ticket can keep pointing at a deleted category.
 */
export async function remove(ctx: TenantCtx, brandId: string, categoryId: string): Promise<void> {
  await withTx(ctx, async (tx) => {
    const row = await requireCategory(tx, brandId, categoryId);
    await ticketNames.categoryDeleting(tx, row.brandId, row.id);
    await ofBrand(tx, row.brandId).deleteById(row.id);
    await audit.record(tx, { brandId: row.brandId, entityType: 'category', entityId: row.id, event: 'category.deleted', metadata: { name: row.name } });
  });
}

/**
 * Sets sortOrder 0..n-1 in the order given. The list must name every category of the brand exactly
 * once: an id that is not one of the brand's categories is 404 (as anywhere else), a missing or
 * repeated one is 400. The brand's categories are locked so two reorders cannot interleave.
 */
export async function reorder(ctx: TenantCtx, brandId: string, input: ReorderCategoriesInput): Promise<CategoryView[]> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const rows = await ofBrand(tx, brand.id).orderBy('id').forUpdate();
    const known = new Set(rows.map((r) => r.id));
    if (input.categoryIds.some((id) => !known.has(id))) throw notFound('Category');
    const seen = new Set<string>();
    const repeated = input.categoryIds.filter((id) => (seen.has(id) ? true : (seen.add(id), false)));
    if (repeated.length) throw badRequest(`categoryIds lists ${repeated[0]} more than once`, [{ field: 'categoryIds', message: 'must not repeat an id' }], 'invalid_reorder');
    const missing = rows.filter((r) => !seen.has(r.id)).map((r) => r.id);
    if (missing.length)
      throw badRequest(
        `categoryIds must list every category of the brand; missing: ${missing.join(', ')}`,
        [{ field: 'categoryIds', message: 'must list every category of the brand exactly once' }],
        'invalid_reorder',
      );
    const now = new Date(ctx.services.now());
    for (const [i, id] of input.categoryIds.entries()) await ofBrand(tx, brand.id).findById(id).patch({ sortOrder: i, updatedAt: now });
    await audit.recordReorder(tx, brand.id, 'category', audit.displayOrder(rows), input.categoryIds);
    return (await ofBrand(tx, brand.id).orderBy([{ column: 'sortOrder' }, { column: 'id' }])).map(toView);
  });
}

/** Tickets per category of the brand, deleted tickets left out (categories without tickets are absent). */
export async function ticketCountsByCategory(ctx: TenantCtx, brandId: string): Promise<Record<string, number>> {
  const rows = (await ctx
    .db('tickets')
    .where({ ...scopeOf(ctx), brandId })
    .whereNull('deletedAt')
    .groupBy('categoryId')
    .select('categoryId' + ' as k')
    .count({ n: '*' })) as unknown as { k: string | null; n: string }[];
  return Object.fromEntries(rows.filter((r) => r.k != null).map((r) => [r.k!, Number(r.n)]));
}

/** Every category of the brand, with its ticket count (0 when it has none). */
export async function stats(ctx: TenantCtx, brandId: string): Promise<CategoryCountView[]> {
  const brand = await requireBrand(ctx, brandId);
  const rows = await ofBrand(ctx, brand.id).orderBy([{ column: 'sortOrder' }, { column: 'id' }]);
  const counts = await ticketCountsByCategory(ctx, brand.id);
  return rows.map((r) => ({ id: r.id, name: r.name, color: r.color, ticketCount: counts[r.id] ?? 0 }));
}

/** How many categories a brand has; for the brand delete preview (the caller has checked the brand). */
export async function countInBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const row = (await ofBrand(ctx, brandId).count({ n: '*' }).first()) as unknown as { n: string | number } | undefined;
  return Number(row?.n ?? 0);
}
