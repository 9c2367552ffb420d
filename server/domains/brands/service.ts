import { randomBytes } from 'node:crypto';
import { Ajv } from 'ajv';
import { hasRole, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, forbidden } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { isPgError, PG } from '../../core/db.js';
import { scopeOf } from '../../core/model.js';
import * as audit from '../../core/audit.js';
import { Brand, brandDeleted, forgetFound, requireBrand, type BrandRetention } from '../../core/brand.js';
export type { FieldRule } from '../../core/brand.js';
import { businessHoursProblem, type BusinessHoursSpec } from '../../core/working-time.js';
import type { BrandView, CreateBrandInput, RetentionInput, UpdateBrandInput } from './schemas.js';

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
    slaPauseOnPending: row.slaPauseOnPending,
    retention: row.retention ?? null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** "Acme Support Team" -> "acme-support-team"; accents folded, anything else becomes a hyphen. */
export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48)
    .replace(/-+$/, '');
  return slug || 'brand';
}

/** "Acme Support" -> "ACME": the first four letters or digits of the name. */
export function defaultTicketPrefix(name: string): string {
  // Not via slugify: its "brand" fallback would turn a name without latin letters into "BRAN".
  const letters = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Za-z0-9]/g, '');
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

/** Business hours a service level can count in: a real time zone, opening before closing. */
function assertUsableBusinessHours(hours: BusinessHoursSpec | null | undefined): void {
  const problem = hours ? businessHoursProblem(hours) : null;
  if (problem) throw badRequest(`${problem.field} ${problem.message}`, [problem], 'invalid_business_hours');
}

function slugTaken(slug: string) {
  return conflict(`A brand with slug "${slug}" already exists in this account`, 'slug_taken');
}

export async function create(ctx: TenantCtx, input: CreateBrandInput): Promise<BrandView> {
  assertValidTicketSchema(input.ticketSchema);
  assertUsableBusinessHours(input.slaBusinessHours);
  const { ticketNumberStart, slug: givenSlug, ticketPrefix, ...rest } = input;
  const base = {
    ...rest,
    ...scopeOf(ctx),
    ticketPrefix: (ticketPrefix ?? defaultTicketPrefix(input.name)).toUpperCase(),
    nextTicketNumber: ticketNumberStart ?? DEFAULT_TICKET_NUMBER_START,
  };
  // A slug the caller chose must be free (409); a derived one gets a short suffix until it is.
  // Each attempt runs in its own savepoint, so a violation leaves an enclosing transaction usable.
  // Its system statuses are made by the caller in the same transaction (flows/brands.ts).
  return withTx(ctx, async (tx) => {
    for (let attempt = 0; ; attempt++) {
      const slug = givenSlug ?? (attempt === 0 ? slugify(input.name) : `${slugify(input.name).slice(0, 43).replace(/-+$/, '')}-${randomBytes(3).toString('hex').slice(0, 4)}`);
      let row: Brand;
      try {
        row = await tx.db.transaction(
          async (trx): Promise<Brand> =>
            Brand.query(trx)
              .insert({ id: newId(ID_PREFIX.brand), ...base, slug })
              .returning('*'),
        );
      } catch (err) {
        if (!isPgError(err, PG.uniqueViolation, 'brands_slug_unique')) throw err;
        if (givenSlug || attempt >= 4) throw slugTaken(slug);
        continue;
      }
      await audit.record(tx, { brandId: row.id, entityType: 'brand', entityId: row.id, event: 'brand.created', metadata: { name: row.name, slug: row.slug } });
      return toView(row);
    }
  });
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
const NOT_AUDITED: ReadonlySet<string> = new Set(['id', 'object', 'accountId', 'livemode', 'createdAt', 'updatedAt']);

/** The policy as stored: every kind named (null: kept), anonymize unless delete is asked for; null when nothing is ever removed. */
export function normalizeRetention(input: RetentionInput | null): BrandRetention | null {
  if (!input) return null;
  const policy: BrandRetention = {
    closedTicketsDays: input.closedTicketsDays ?? null,
    rawMailDays: input.rawMailDays ?? null,
    attachmentsDays: input.attachmentsDays ?? null,
    mode: input.mode ?? 'anonymize',
  };
  return policy.closedTicketsDays === null && policy.rawMailDays === null && policy.attachmentsDays === null ? null : policy;
}

/** Retention deletes what no one can bring back: an owner, an admin or an API key sets it, not a member. */
function assertMaySetRetention(ctx: TenantCtx): void {
  if (ctx.session && !hasRole(ctx.session.role, 'admin')) {
    throw forbidden(`Setting a brand's retention takes the admin role or above; your role is ${ctx.session.role}`, 'insufficient_role');
  }
}

export async function update(ctx: TenantCtx, brandId: string, input: UpdateBrandInput): Promise<BrandView> {
  assertValidTicketSchema(input.ticketSchema);
  assertUsableBusinessHours(input.slaBusinessHours);
  return withTx(ctx, async (tx) => {
    const { id } = await requireBrand(tx, brandId);
    if (input.retention !== undefined) assertMaySetRetention(tx);
    forgetFound(tx, id);
    // Locked and read again, so the audit entry's `from` values are what this update replaced.
    const brand = (await Brand.scoped(tx).findById(id).forUpdate())!;
    const { ticketNumberStart, ticketPrefix, retention, ...rest } = input;
    // The revision tells ticket creates that remembered the brand's service level to read it again.
    const patch: Partial<Brand> = { ...rest, updatedAt: new Date(ctx.services.now()), settingsRevision: tx.db.raw('settings_revision + 1') as unknown as number };
    if (ticketPrefix !== undefined) patch.ticketPrefix = ticketPrefix.toUpperCase();
    if (retention !== undefined) patch.retention = normalizeRetention(retention);
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
      after = toView((await Brand.scoped(tx).findById(brand.id).patch(patch).returning('*').first())!);
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, 'brands_slug_unique')) throw slugTaken(input.slug!);
      throw err;
    }
    const changes = audit.changesBetween(
      toView(brand),
      after,
      (Object.keys(after) as (keyof BrandView)[]).filter((f) => !NOT_AUDITED.has(f)),
    );
    if (changes.length) await audit.record(tx, { brandId: brand.id, entityType: 'brand', entityId: brand.id, event: 'brand.updated', changes, metadata: { name: after.name } });
    return after;
  });
}

/** Deletes the brand row; every child table cascades from brands, so this is one statement. */
export async function deleteRow(ctx: TenantCtx, brandId: string): Promise<void> {
  await Brand.scoped(ctx).deleteById(brandId);
  await brandDeleted(ctx, brandId);
}

/** How many brands the caller may see. */
export async function count(ctx: TenantCtx): Promise<number> {
  const result = (await visibleBrands(ctx).count({ n: '*' }).first()) as unknown as { n: string };
  return Number(result.n);
}

/** A brand whose retention removes something, with its tenant. */
export interface RetainingBrand {
  accountId: string;
  livemode: boolean;
  brandId: string;
  retention: BrandRetention;
}

/** The dispatcher's retention job: every brand with a policy, of every account (no lock; each brand's work runs in its account). */
export async function withRetention(base: BaseCtx): Promise<RetainingBrand[]> {
  const { rows } = await base.db.raw<{ rows: RetainingBrand[] }>(
    `select b.account_id as "accountId", b.livemode, b.id as "brandId", b.retention from brands b where b.retention is not null order by b.account_id, b.id`,
  );
  return rows;
}
