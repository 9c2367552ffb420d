import { withTx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { isPgError, PG } from '../../core/db.js';
import { scopeOf, tenantScope } from '../../core/model.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { Tag } from './model.js';
import type { CreateTagInput, TagCountView, TagView, UpdateTagInput } from './schemas.js';

export const DEFAULT_TAG_COLOR = '#6b7280';
export const MAX_TAG_NAME_LENGTH = 100;

export function toView(row: Tag): TagView {
  return {
    id: row.id,
    object: 'tag',
    brandId: row.brandId,
    name: row.name,
    color: row.color,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The tags of one (already visible) brand. */
const ofBrand = (ctx: TenantCtx, brandId: string) => Tag.scoped(ctx).where('tags.brandId', brandId);

function nameTaken(name: string) {
  return conflict(`A tag named "${name}" already exists in this brand (names ignore case)`, 'tag_name_taken');
}

/** Unique name per brand (tags_name_unique) → 409; brand deleted meanwhile (FK) → 404. */
function translate(err: unknown, name: string | undefined): unknown {
  if (isPgError(err, PG.uniqueViolation, 'tags_name_unique')) return nameTaken(name ?? '');
  if (isPgError(err, PG.foreignKeyViolation, 'tags_brand_fk')) return notFound('Brand');
  return err;
}

export async function list(ctx: TenantCtx, brandId: string): Promise<TagView[]> {
  const brand = await requireBrand(ctx, brandId);
  return (await ofBrand(ctx, brand.id).orderByRaw('lower(tags.name), tags.id')).map(toView);
}

/**
 * The tags with these ids, if every one belongs to the brand (404 otherwise, whether the id is
 * unknown or of another brand, account or mode). For callers such as tickets that store ids.
 * `lock` takes row locks (inside a transaction) so the tags cannot vanish before the caller commits.
 */
export async function requireTags(ctx: TenantCtx, brandId: string, ids: readonly string[], lock = false): Promise<Tag[]> {
  const brand = await requireBrand(ctx, brandId);
  const unique = [...new Set(ids)];
  if (!unique.length) return [];
  const query = ofBrand(ctx, brand.id).whereIn('tags.id', unique).orderBy('tags.id');
  const rows = lock ? await query.forUpdate() : await query;
  if (rows.length !== unique.length) throw notFound('Tag');
  return rows;
}

export async function requireTag(ctx: TenantCtx, brandId: string, tagId: string): Promise<Tag> {
  return (await requireTags(ctx, brandId, [tagId]))[0]!;
}

export async function get(ctx: TenantCtx, brandId: string, tagId: string): Promise<TagView> {
  return toView(await requireTag(ctx, brandId, tagId));
}

export async function create(ctx: TenantCtx, brandId: string, input: CreateTagInput): Promise<TagView> {
  const name = input.name.trim();
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    let row: Tag;
    try {
      row = await Tag.query(tx.db)
        .insert({
          id: newId(ID_PREFIX.tag),
          ...scopeOf(tx),
          brandId: brand.id,
          name,
          color: input.color ?? DEFAULT_TAG_COLOR,
        })
        .returning('*');
    } catch (err) {
      throw translate(err, name);
    }
    await audit.record(tx, { brandId: brand.id, entityType: 'tag', entityId: row.id, event: 'tag.created', metadata: { name } });
    return toView(row);
  });
}

/**
 * The brand's tags with these names, matched ignoring case and surrounding space; names the brand
 * does not have yet are created with the default colour. Safe under concurrency: an insert that
 * loses a race to the same name is skipped (ON CONFLICT DO NOTHING) and the winner's row is read.
 * Returns one tag per distinct name, in the order first given. For tickets, which write tags by name.
 */
export async function findOrCreateByNames(ctx: TenantCtx, brandId: string, names: readonly string[]): Promise<TagView[]> {
  const wanted = new Map<string, string>();
  for (const raw of names) {
    const name = raw.trim();
    if (!name || name.length > MAX_TAG_NAME_LENGTH)
      throw badRequest(`Tag names must have 1 to ${MAX_TAG_NAME_LENGTH} characters`, [{ field: 'tags', message: `each name must have 1 to ${MAX_TAG_NAME_LENGTH} characters` }]);
    if (!wanted.has(name.toLowerCase())) wanted.set(name.toLowerCase(), name);
  }
  if (!wanted.size) return [];
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const find = async () => new Map((await ofBrand(tx, brand.id).whereIn(Tag.raw('lower(tags.name)'), [...wanted.keys()])).map((t) => [t.name.toLowerCase(), t]));
    let rows = await find();
    const missing = [...wanted].filter(([key]) => !rows.has(key));
    if (missing.length) {
      let created: { id: string; name: string }[];
      try {
        created = await tx.db
          .table('tags')
          .insert(missing.map(([, name]) => ({ id: newId(ID_PREFIX.tag), ...scopeOf(tx), brandId: brand.id, name, color: DEFAULT_TAG_COLOR })))
          .onConflict()
          .ignore()
          .returning(['id', 'name']);
      } catch (err) {
        throw translate(err, undefined);
      }
      // Only the tags this call inserted: one that lost a race to the same name was the winner's to record.
      await audit.recordMany(
        tx,
        created.map((t) => ({ brandId: brand.id, entityType: 'tag', entityId: t.id, event: 'tag.created', metadata: { name: t.name } })),
      );
      rows = await find();
    }
    return [...wanted.keys()].map((key) => toView(rows.get(key)!));
  });
}

export async function update(ctx: TenantCtx, brandId: string, tagId: string, input: UpdateTagInput): Promise<TagView> {
  return withTx(ctx, async (tx) => {
    // Locked, so the audit entry's `from` values are what this update replaced.
    const [row] = await requireTags(tx, brandId, [tagId], true);
    const patch: Partial<Tag> = { updatedAt: new Date(ctx.services.now()) };
    if (input.name !== undefined) patch.name = input.name.trim();
    if (input.color !== undefined) patch.color = input.color ?? DEFAULT_TAG_COLOR;
    let after: TagView;
    try {
      after = toView((await ofBrand(tx, row.brandId).findById(row.id).patch(patch).returning('*').first())!);
    } catch (err) {
      throw translate(err, patch.name);
    }
    const changes = audit.changesBetween(toView(row), after, ['name', 'color']);
    if (changes.length) await audit.record(tx, { brandId: row.brandId, entityType: 'tag', entityId: row.id, event: 'tag.updated', changes, metadata: { name: after.name } });
    return after;
  });
}

/** Deletes a tag; its ticket_tags rows go with it (FK ON DELETE CASCADE). */
export async function remove(ctx: TenantCtx, brandId: string, tagId: string): Promise<void> {
  await withTx(ctx, async (tx) => {
    const row = await requireTag(tx, brandId, tagId);
    await ofBrand(tx, row.brandId).deleteById(row.id);
    await audit.record(tx, { brandId: row.brandId, entityType: 'tag', entityId: row.id, event: 'tag.deleted', metadata: { name: row.name } });
  });
}

/**
 * Merges the source tags into the target, in one transaction: every ticket tagged with a source
 * ends up tagged with the target exactly once, then the sources are deleted.
 * - sources empty, or the target among them → 400; any id not a tag of this brand → 404.
 * - The target and sources are locked (in id order, so concurrent merges cannot deadlock) before
 *   the links move, so a concurrent tagging or merge waits rather than slipping past.
 */
export async function merge(ctx: TenantCtx, brandId: string, targetId: string, sourceIds: readonly string[]): Promise<TagView> {
  const sources = [...new Set(sourceIds)];
  if (!sources.length) throw badRequest('sourceTagIds must name at least one tag to merge', [{ field: 'sourceTagIds', message: 'must not be empty' }]);
  if (sources.includes(targetId))
    throw badRequest(
      'A tag cannot be merged into itself: remove the target from sourceTagIds',
      [{ field: 'sourceTagIds', message: 'must not contain the target tag' }],
      'merge_into_self',
    );
  return withTx(ctx, async (tx) => {
    const locked = await requireTags(tx, brandId, [targetId, ...sources], true);
    const target = locked.find((t) => t.id === targetId)!;

    // Re-point the ticket-tag links; the source links then go with the source tags below
    // (ticket_tags.tag_id ON DELETE CASCADE).
    await relinkTickets(tx, target, sources);

    await ofBrand(tx, target.brandId).whereIn('tags.id', sources).delete();
    // The target's entry names what went into it; each source's own history ends with its deletion.
    const merged = locked.filter((t) => t.id !== target.id);
    await audit.recordMany(tx, [
      {
        brandId: target.brandId,
        entityType: 'tag',
        entityId: target.id,
        event: 'tag.merged',
        metadata: { name: target.name, sourceTagIds: merged.map((t) => t.id), sourceNames: merged.map((t) => t.name) },
      },
      ...merged.map((t) => ({ brandId: t.brandId, entityType: 'tag', entityId: t.id, event: 'tag.deleted', metadata: { name: t.name, mergedInto: target.id } })),
    ]);
    return toView(
      (await ofBrand(tx, target.brandId)
        .findById(target.id)
        .patch({ updatedAt: new Date(ctx.services.now()) })
        .returning('*')
        .first())!,
    );
  });
}

/** Every ticket linked to a source tag gets the target once (the source links go with the sources). */
async function relinkTickets(tx: TenantCtx, target: Tag, sourceIds: readonly string[]): Promise<void> {
  await tx.db.raw(
    `insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority)
    select account_id, livemode, brand_id, ticket_id, ?, status, priority from ticket_tags
    where ? and brand_id = ? and tag_id = any(?::text[])
    on conflict do nothing`,
    [target.id, tenantScope(tx, 'ticket_tags'), target.brandId, [...sourceIds]],
  );
}

/** Tickets per tag of the brand, deleted tickets left out (tags without tickets are absent). */
export async function ticketCountsByTag(ctx: TenantCtx, brandId: string): Promise<Record<string, number>> {
  const rows = (await ctx
    .db('ticketTags as tt')
    .join('tickets as t', (j) => j.on('t.accountId', 'tt.accountId').andOn('t.livemode', 'tt.livemode').andOn('t.brandId', 'tt.brandId').andOn('t.id', 'tt.ticketId'))
    .where({ 'tt.accountId': ctx.accountId, 'tt.livemode': ctx.livemode, 'tt.brandId': brandId })
    .whereNull('t.deletedAt')
    .groupBy('tt.tagId')
    .select('tt.tagId as k')
    .count({ n: '*' })) as unknown as { k: string; n: string }[];
  return Object.fromEntries(rows.map((r) => [r.k, Number(r.n)]));
}

/** Every tag of the brand, with the number of tickets carrying it (0 when none). */
export async function stats(ctx: TenantCtx, brandId: string): Promise<TagCountView[]> {
  const brand = await requireBrand(ctx, brandId);
  const rows = await ofBrand(ctx, brand.id).orderByRaw('lower(tags.name), tags.id');
  const counts = await ticketCountsByTag(ctx, brand.id);
  return rows.map((r) => ({ id: r.id, name: r.name, color: r.color, ticketCount: counts[r.id] ?? 0 }));
}

/** How many tags a brand has; for the brand delete preview (the caller has checked the brand). */
export async function countInBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const row = (await ofBrand(ctx, brandId).count({ n: '*' }).first()) as unknown as { n: string | number } | undefined;
  return Number(row?.n ?? 0);
}
