import { canSeeBrand, type BaseCtx, type TenantCtx } from './context.js';
import { credentialCacheOf, credentialsChanged, startCredentialCache, type CacheEntry } from './credential-cache.js';
import { badRequest, notFound } from './errors.js';
import { normalizeBrandId } from './ids.js';
import { scopeOf, TenantModel } from './model.js';
import type { Services } from './services.js';

/**
 * The brand: the unit every brand-scoped route, service and row hangs from. The kernel owns its
 * row and the scope check, so every domain can find "the caller's brand" without importing the
 * brands domain.
 */

/** What validating a custom-field value needs of one field definition. */
export interface FieldRule {
  key: string;
  type: string;
  options: string[] | null;
  required: boolean;
}

/** A brand's retention policy as stored: days per kind (null: that kind is kept), and what becomes of old closed tickets. */
export interface BrandRetention {
  closedTicketsDays: number | null;
  rawMailDays: number | null;
  attachmentsDays: number | null;
  mode: 'delete' | 'anonymize';
}

export class Brand extends TenantModel {
  static override tableName = 'brands';
  // jsonb columns; the text[] columns (portalOrigins) must not be JSON-encoded.
  static override jsonAttributes = ['settings', 'metadata', 'ticketSchema', 'slaByPriority', 'slaBusinessHours', 'fieldRules', 'retention'];

  declare id: string;
  declare name: string;
  declare slug: string;
  declare ticketPrefix: string;
  declare nextTicketNumber: number;
  declare url: string | null;
  declare iconUrl: string | null;
  declare settings: Record<string, unknown>;
  declare metadata: Record<string, unknown>;
  declare ticketSchema: Record<string, unknown> | null;
  /** Rewritten by every change of field_definitions (fields/service.ts refreshFieldRules): per entity type, in display order. */
  declare fieldRules: Partial<Record<'ticket' | 'customer' | 'company', FieldRule[]>>;
  declare inboundEmailEnabled: boolean;
  declare autoresponseEnabled: boolean;
  declare autoresponseSubject: string | null;
  declare autoresponseBody: string | null;
  declare fromName: string | null;
  declare fromEmail: string | null;
  declare portalOrigins: string[];
  declare csatEnabled: boolean;
  declare csatType: string;
  declare csatDelayMinutes: number;
  declare csatEmailSubject: string | null;
  declare csatEmailBody: string | null;
  declare slaEnabled: boolean;
  declare slaDefaultHours: number | null;
  declare slaByPriority: Record<string, number> | null;
  declare slaNotifyOverdue: boolean;
  declare slaBusinessHoursOnly: boolean;
  declare slaBusinessHours: Record<string, unknown> | null;
  declare slaPauseOnPending: boolean;
  /** What the dispatcher's retention job removes and after how long (flows/retention.ts); null: everything is kept. */
  declare retention: BrandRetention | null;
  /** Bumped by every settings update: a create that remembered the brand's service level checks it (domains/tickets/service-level.ts). */
  declare settingsRevision: number;
  /** Bumped by every change of the brand's triggers and automations (domains/rules). */
  declare rulesRevision: number;
  declare createdAt: Date;
  declare updatedAt: Date;
}

/**
 * The brand, if the caller may see it. Every brand route goes through here: a brand of another
 * account, of the other mode, or outside the key's brand scope reads as 404, never 403.
 * Within a transaction the first read answers the rest (ticket create reaches five services that
 * each check the brand); writes to a brand row forget it (forgetFound).
 */
export async function requireBrand(ctx: TenantCtx, brandId: string): Promise<Brand> {
  const id = normalizeBrandId(brandId);
  if (!canSeeBrand(ctx.brandScope, id)) throw notFound('Brand');
  const memo = ctx.db.isTransaction ? ctx.txBrands : undefined;
  // The scope is part of the key: a transaction may serve more than one tenant ctx.
  const key = `${ctx.accountId}:${ctx.livemode}:${id}`;
  const known = memo?.get(key);
  if (known) return known as Brand;
  const row = await Brand.scoped(ctx).findById(id);
  if (!row) throw notFound('Brand');
  memo?.set(key, row);
  return row;
}

/** After a write to the brand row inside ctx's transaction: the next requireBrand reads it again. */
export function forgetFound(ctx: TenantCtx, brandId: string): void {
  if (ctx.db.isTransaction) ctx.txBrands?.delete(`${ctx.accountId}:${ctx.livemode}:${normalizeBrandId(brandId)}`);
}

/**
 * Whether the caller may see the brand, asked of every brand route before its body is read
 * (core/auth.ts): the same 404 as requireBrand, which the services still call. A brand's account
 * and mode never change, so where each brand lives is kept in memory (core/credential-cache.ts):
 * one read per brand and process, then none until the brand is deleted (brandDeleted), whoever asks.
 */
export async function assertBrandVisible(ctx: TenantCtx, brandId: string): Promise<void> {
  const id = normalizeBrandId(brandId);
  if (!canSeeBrand(ctx.brandScope, id)) throw notFound('Brand');
  const cache = credentialCacheOf<BrandHome>(ctx.services, 'brands');
  let home = await cache?.lookup(id, ctx.services.now());
  if (!home) {
    const token = cache?.token() ?? 0;
    // Read in the caller's own scope: an id found elsewhere is no concern of this caller's.
    if (!(await Brand.scoped(ctx).findById(id).select('id'))) throw notFound('Brand');
    home = { tags: [id], cachedUntil: ctx.services.now() + (cache?.ttl ?? 0), accountId: ctx.accountId, livemode: ctx.livemode };
    cache?.set(id, home, token);
  }
  if (home.accountId !== ctx.accountId || home.livemode !== ctx.livemode) throw notFound('Brand');
}

/**
 * The brand's id, if the caller may see it, for a read that needs nothing else of the brand (a
 * ticket, its comments, a list page): assertBrandVisible's check, kept per process, instead of a
 * read of the row on every request. Its 404 is requireBrand's.
 */
export async function visibleBrandId(ctx: TenantCtx, brandId: string): Promise<string> {
  await assertBrandVisible(ctx, brandId);
  return normalizeBrandId(brandId);
}

/** Where a brand lives, as kept by assertBrandVisible. */
interface BrandHome extends CacheEntry {
  accountId: string;
  livemode: boolean;
}

/** Only brands found are kept (never an id that was not), so the cache holds brands that exist. */
const BRAND_CACHE_TTL_MS = 5 * 60_000;

/** Starts the cache assertBrandVisible answers from (the API does); it closes with the services. */
export function startBrandCache(services: Services): void {
  startCredentialCache<BrandHome>(services, 'brands', BRAND_CACHE_TTL_MS);
}

/** Inside the transaction that deletes the brand row: every process forgets the brand once it commits. */
export async function brandDeleted(ctx: TenantCtx, brandId: string): Promise<void> {
  forgetFound(ctx, brandId);
  await credentialsChanged(ctx, 'brands', [normalizeBrandId(brandId)]);
}

/**
 * Inbound mail names a brand by id alone (`<brandId>@<inbound domain>`): its row (account, mode,
 * settings), in any tenant, or null. Only the inbound mail path, authenticated by the server's
 * inbound secret, asks.
 */
export async function locate(base: BaseCtx, brandId: string): Promise<Brand | null> {
  return (await Brand.query(base.db).findById(normalizeBrandId(brandId))) ?? null;
}

/** For credentials limited to brands: every id must be a brand of this account and mode. */
export async function assertBrandsExist(ctx: TenantCtx, brandIds: string[]): Promise<void> {
  if (brandIds.length === 0) return;
  const found = (await Brand.scoped(ctx).whereIn('id', brandIds).select('id')).map((b) => b.id);
  const missing = brandIds.filter((id) => !found.includes(id));
  if (missing.length) {
    throw badRequest(
      `Unknown brand id${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`,
      missing.map((id) => ({ field: 'brandIds', message: `${id} is not a brand of this account` })),
    );
  }
}

/**
 * The brand, its row locked until the transaction ends: changes of a brand's settings that must
 * take turns (the one primary mail domain or mailbox) wait for each other on it. The tenant's own
 * row, held for a few statements of a rare change; ticket creates of the brand wait that long.
 */
export async function lockBrand(tx: TenantCtx, brandId: string): Promise<string> {
  const brand = await requireBrand(tx, brandId);
  await tx
    .db('brands')
    .where({ ...scopeOf(tx), id: brand.id })
    .forUpdate()
    .select('id')
    .first();
  return brand.id;
}
