import { randomBytes } from 'node:crypto';
import { Ajv } from 'ajv';
import { canSeeBrand, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX, normalizeBrandId } from '../../core/ids.js';
import { isPgError, PG } from '../../core/db.js';
import { scopeOf } from '../../core/model.js';
import * as apiKeys from '../api-keys/service.js';
import * as audit from '../audit/service.js';
import * as blockedSources from '../blocked-sources/service.js';
import * as categories from '../categories/service.js';
import * as companies from '../companies/service.js';
import * as contacts from '../contacts/service.js';
import * as fields from '../fields/service.js';
import * as statuses from '../statuses/service.js';
import * as tags from '../tags/service.js';
import * as tickets from '../tickets/service.js';
import * as webhooks from '../webhooks/service.js';
import { Brand } from './model.js';
export type { FieldRule } from './model.js';
import type { BrandView, CreateBrandInput, DeleteBrandResultView, UpdateBrandInput } from './schemas.js';

export const DEFAULT_TICKET_NUMBER_START = 1000;

export function toView(row: Brand): BrandView {
  return {
    id: row.id,
    object: 'brand',
    accountId: row.accountId,
    livemode: row.livemode,
    name: row.name,
    slug: row.slug,
    ticketPrefix: row.ticketPrefix,
    nextTicketNumber: row.nextTicketNumber,
    url: row.url,
    iconUrl: row.iconUrl,
    settings: row.settings,
    metadata: row.metadata,
    ticketSchema: row.ticketSchema,
    inboundEmailEnabled: row.inboundEmailEnabled,
    autoresponseEnabled: row.autoresponseEnabled,
    autoresponseSubject: row.autoresponseSubject,
    autoresponseBody: row.autoresponseBody,
    fromName: row.fromName,
    fromEmail: row.fromEmail,
    portalOrigins: row.portalOrigins,
    csatEnabled: row.csatEnabled,
    csatType: row.csatType as BrandView['csatType'],
    csatDelayMinutes: row.csatDelayMinutes,
    csatEmailSubject: row.csatEmailSubject,
    csatEmailBody: row.csatEmailBody,
    slaEnabled: row.slaEnabled,
    slaDefaultHours: row.slaDefaultHours,
    slaByPriority: row.slaByPriority,
    slaNotifyOverdue: row.slaNotifyOverdue,
    slaBusinessHoursOnly: row.slaBusinessHoursOnly,
    slaBusinessHours: row.slaBusinessHours as BrandView['slaBusinessHours'],
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** "Acme Support Team" -> "acme-support-team"; accents folded, anything else becomes a hyphen. */
export function slugify(name: string): string {
  const slug = name.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase()
    .replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 48).replace(/-+$/, '');
  return slug || 'brand';
}

/** "Acme Support" -> "ACME": the first four letters or digits of the name. */
export function defaultTicketPrefix(name: string): string {
  // Not via slugify: its "brand" fallback would turn a name without latin letters into "BRAN".
  const letters = name.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').replace(/[^A-Za-z0-9]/g, '');
  return letters.slice(0, 4).toUpperCase() || 'TKT';
}

/** A brand's ticketSchema must be a JSON Schema ajv can compile; say why when it is not. */
export function assertValidTicketSchema(schema: Record<string, unknown> | null | undefined): void {
  if (!schema) return;
  // A fresh instance per check: a schema's $id must not stay registered for the next tenant.
  const schemaAjv = new Ajv({ strict: false, allErrors: true });
  const valid = schemaAjv.validateSchema(schema);
  let problem = valid ? null : schemaAjv.errorsText(schemaAjv.errors, { dataVar: 'ticketSchema' });
  if (!problem) {
    try {
      schemaAjv.compile(schema);
    } catch (err) {
      problem = (err as Error).message;
    }
  }
  if (problem) throw badRequest(`ticketSchema is not a valid JSON Schema: ${problem}`, [{ field: 'ticketSchema', message: problem }], 'invalid_ticket_schema');
}

function slugTaken(slug: string) {
  return conflict(`A brand with slug "${slug}" already exists in this account`, 'slug_taken');
}

export async function create(ctx: TenantCtx, input: CreateBrandInput): Promise<BrandView> {
  assertValidTicketSchema(input.ticketSchema);
  const { ticketNumberStart, slug: givenSlug, ticketPrefix, ...rest } = input;
  const base = {
    ...rest,
    ...scopeOf(ctx),
    ticketPrefix: (ticketPrefix ?? defaultTicketPrefix(input.name)).toUpperCase(),
    nextTicketNumber: ticketNumberStart ?? DEFAULT_TICKET_NUMBER_START,
  };
  // A slug the caller chose must be free (409); a derived one gets a short suffix until it is.
  // Each attempt runs in its own savepoint, so a violation leaves an enclosing transaction usable.
  // The brand and its system statuses commit together (see statuses/service.ts SYSTEM_STATUSES).
  return withTx(ctx, async (tx) => {
    for (let attempt = 0; ; attempt++) {
      const slug = givenSlug ?? (attempt === 0 ? slugify(input.name) : `${slugify(input.name).slice(0, 43).replace(/-+$/, '')}-${randomBytes(3).toString('hex').slice(0, 4)}`);
      let row: Brand;
      try {
        row = await tx.db.transaction(async (trx): Promise<Brand> => Brand.query(trx).insertAndFetch({ id: newId(ID_PREFIX.brand), ...base, slug }));
      } catch (err) {
        if (!isPgError(err, PG.uniqueViolation, 'brands_slug_unique')) throw err;
        if (givenSlug || attempt >= 4) throw slugTaken(slug);
        continue;
      }
      // The system statuses are part of this entry, not entries of their own.
      await statuses.createSystemStatuses(tx, row.id);
      await audit.record(tx, { brandId: row.id, entityType: 'brand', entityId: row.id, event: 'brand.created', metadata: { name: row.name, slug: row.slug } });
      return toView(row);
    }
  });
}

/**
 * The brand, if the caller may see it. Every brand route goes through here: a brand of another
 * account, of the other mode, or outside the key's brand scope reads as 404, never 403.
 */
/**
 * Brands already found inside a transaction, by transaction. One request's services each check the
 * brand (ticket create reaches five of them); within a transaction the first read answers the rest.
 * Writes to a brand row through this service (and the ticket counter) forget it.
 */
const foundInTx = new WeakMap<object, Map<string, Brand>>();

export async function requireBrand(ctx: TenantCtx, brandId: string): Promise<Brand> {
  const id = normalizeBrandId(brandId);
  if (!canSeeBrand(ctx.brandScope, id)) throw notFound('Brand');
  const memo = ctx.db.isTransaction ? foundInTx.get(ctx.db) ?? new Map<string, Brand>() : null;
  // The scope is part of the key: a transaction may serve more than one tenant ctx.
  const key = `${ctx.accountId}:${ctx.livemode}:${id}`;
  const known = memo?.get(key);
  if (known) return known;
  const row = await Brand.scoped(ctx).findById(id);
  if (!row) throw notFound('Brand');
  if (memo) foundInTx.set(ctx.db, memo.set(key, row));
  return row;
}

/**
 * Inbound mail names a brand by id alone (`<brandId>@<inbound domain>`): its account and mode, in
 * any tenant, or null. Only the inbound mail path, authenticated by the server's inbound secret, asks.
 */
export async function locate(base: BaseCtx, brandId: string): Promise<{ id: string; accountId: string; livemode: boolean; inboundEmailEnabled: boolean } | null> {
  const row = await Brand.query(base.db).findById(normalizeBrandId(brandId)).select('id', 'accountId', 'livemode', 'inboundEmailEnabled');
  return row ? { id: row.id, accountId: row.accountId, livemode: row.livemode, inboundEmailEnabled: row.inboundEmailEnabled } : null;
}

/** After a write to the brand row inside ctx's transaction: the next requireBrand reads it again. */
export function forgetFound(ctx: TenantCtx, brandId: string): void {
  if (ctx.db.isTransaction) foundInTx.get(ctx.db)?.delete(`${ctx.accountId}:${ctx.livemode}:${normalizeBrandId(brandId)}`);
}

export async function get(ctx: TenantCtx, brandId: string): Promise<BrandView> {
  return toView(await requireBrand(ctx, brandId));
}

/** The brands of the tenant that the credential's brand scope lets it see. */
function visibleBrands(ctx: TenantCtx) {
  const query = Brand.scoped(ctx);
  if (!ctx.brandScope.allBrands) query.whereIn('id', [...ctx.brandScope.brandIds]);
  return query;
}

/** Brands the caller may see, oldest first. */
export async function list(ctx: TenantCtx): Promise<BrandView[]> {
  return (await visibleBrands(ctx).orderBy('id', 'asc')).map(toView);
}

/** Brand fields no update changes by hand; every other field of the view is compared for the audit entry. */
const NOT_AUDITED = new Set(['id', 'object', 'accountId', 'livemode', 'createdAt', 'updatedAt']);

export async function update(ctx: TenantCtx, brandId: string, input: UpdateBrandInput): Promise<BrandView> {
  assertValidTicketSchema(input.ticketSchema);
  return withTx(ctx, async (tx) => {
    const { id } = await requireBrand(tx, brandId);
    forgetFound(tx, id);
    // Locked and read again, so the audit entry's `from` values are what this update replaced.
    const brand = (await Brand.scoped(tx).findById(id).forUpdate())!;
    const { ticketNumberStart, ticketPrefix, ...rest } = input;
    const patch: Partial<Brand> = { ...rest, updatedAt: new Date() };
    if (ticketPrefix !== undefined) patch.ticketPrefix = ticketPrefix.toUpperCase();
    if (ticketNumberStart !== undefined) {
      // Compare and set in one statement: a ticket created meanwhile cannot be numbered twice.
      const moved = await Brand.scoped(tx).findById(brand.id).where('nextTicketNumber', '<=', ticketNumberStart).patch({ nextTicketNumber: ticketNumberStart });
      if (!moved) {
        const current = (await Brand.scoped(tx).findById(brand.id))!.nextTicketNumber;
        throw badRequest(`ticketNumberStart must be at least the next ticket number (${current})`, [{ field: 'ticketNumberStart', message: `must be >= ${current}` }]);
      }
    }
    let after: BrandView;
    try {
      after = toView(await Brand.scoped(tx).patchAndFetchById(brand.id, patch));
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, 'brands_slug_unique')) throw slugTaken(input.slug!);
      throw err;
    }
    const changes = audit.changesBetween(toView(brand), after, (Object.keys(after) as (keyof BrandView)[]).filter((f) => !NOT_AUDITED.has(f)));
    if (changes.length) await audit.record(tx, { brandId: brand.id, entityType: 'brand', entityId: brand.id, event: 'brand.updated', changes, metadata: { name: after.name } });
    return after;
  });
}

/**
 * What deleting a brand removes, counted through each domain's service; ticketCount leaves out soft-deleted tickets. statusCount counts custom statuses only (every brand
 * has the four system ones). Every child table cascades from brands, so the delete stays one statement.
 */
async function contentCounts(ctx: TenantCtx, brand: Brand) {
  return {
    ticketCount: await tickets.countForBrand(ctx, brand.id),
    webhookCount: await webhooks.countForBrand(ctx, brand.id),
    categoryCount: await categories.countInBrand(ctx, brand.id),
    tagCount: await tags.countInBrand(ctx, brand.id),
    statusCount: await statuses.countCustom(ctx, brand.id),
    fieldCount: await fields.count(ctx, brand.id),
    contactCount: await contacts.countForBrand(ctx, brand.id),
    companyCount: await companies.countForBrand(ctx, brand.id),
    blockedSourceCount: await blockedSources.countForBrand(ctx, brand.id),
  };
}

/** Without confirm: a preview of what would go. With it: the brand and everything in it, atomically. */
export async function remove(ctx: TenantCtx, brandId: string, confirm: boolean): Promise<DeleteBrandResultView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const counts = await contentCounts(tx, brand);
    if (!confirm) {
      return { id: brand.id, deleted: false, ...counts, message: 'Nothing was deleted. Repeat the request with ?confirm=true to delete this brand and everything in it.' };
    }
    await Brand.scoped(tx).deleteById(brand.id);
    forgetFound(tx, brand.id);
    await apiKeys.forgetBrand(tx, brand.id);
    // Everything in the brand goes with it: this one entry (with the counts) stands for all of it.
    await audit.record(tx, { brandId: brand.id, entityType: 'brand', entityId: brand.id, event: 'brand.deleted', metadata: { name: brand.name, slug: brand.slug, ...counts } });
    return { id: brand.id, deleted: true, ...counts, message: `Brand "${brand.name}" and everything in it were deleted.` };
  });
}

/** For credentials limited to brands: every id must be a brand of this account and mode. */
export async function assertBrandsExist(ctx: TenantCtx, brandIds: string[]): Promise<void> {
  if (brandIds.length === 0) return;
  const found = (await Brand.scoped(ctx).whereIn('id', brandIds).select('id')).map((b) => b.id);
  const missing = brandIds.filter((id) => !found.includes(id));
  if (missing.length) {
    throw badRequest(`Unknown brand id${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`, missing.map((id) => ({ field: 'brandIds', message: `${id} is not a brand of this account` })));
  }
}

/** How many brands the caller may see. */
export async function count(ctx: TenantCtx): Promise<number> {
  const result = await visibleBrands(ctx).count({ n: '*' }).first() as unknown as { n: string };
  return Number(result.n);
}
