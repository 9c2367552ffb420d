import { withTx, type TenantCtx } from '../../core/context.js';
import { isPgError, PG } from '../../core/db.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { BOUND_TENANT, boundToTenant, scopeOf, tenantIs, tenantScope } from '../../core/model.js';
import { keysetPage, type Page } from '../../core/pagination.js';
import { escapeLike, foldText, isDomain, normalizeDomain } from '../../core/text.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import * as ticketNames from '../../core/ticket-names.js';
import { Company } from './model.js';
import type { CompanyListInput, CompanyView, CreateCompanyInput, UpdateCompanyInput } from './schemas.js';

/**
 * Companies of a brand. A domain is optional and unique per brand (409 company_domain_taken), so
 * linking contacts by their email domain is never ambiguous:
 * - a contact created without companyId is linked to the company whose domain equals its email
 *   domain exactly (subdomains do not match);
 * - creating a company with a domain, or setting one, links the brand's contacts of that domain
 *   that have no company yet (contacts linked elsewhere are left alone).
 * Deleting a company unlinks its contacts (the foreign key sets their companyId to null).
 */

const CUSTOMER_COUNT = `(select count(*) from contacts c where ${tenantIs('c', BOUND_TENANT)}
  and c.brand_id = companies.brand_id and c.company_id = companies.id)::int as customer_count`;

export function toView(row: Company): CompanyView {
  return {
    id: row.id,
    brandId: row.brandId,
    name: row.name,
    domain: row.domain,
    metadata: row.metadata,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    _count: { customers: Number(row.customerCount ?? 0) },
  };
}

function checkedDomain(domain: string | null | undefined): string | null | undefined {
  if (domain === undefined || domain === null) return domain;
  const d = normalizeDomain(domain);
  if (!isDomain(d)) throw badRequest('domain must be a host name such as acme.com', [{ field: 'domain', message: 'is not a domain name' }], 'invalid_domain');
  return d;
}

function translate(err: unknown, domain: string | null | undefined): never {
  if (isPgError(err, PG.uniqueViolation, 'companies_domain_unique')) throw conflict(`Another company of this brand already has the domain ${domain}`, 'company_domain_taken');
  throw err;
}

function query(ctx: TenantCtx, brandId: string) {
  return Company.scoped(ctx).where('companies.brandId', brandId).select('companies.*', boundToTenant(ctx, CUSTOMER_COUNT));
}

/** `lock`: for update, so the audit entry's `from` values are what the change replaced. */
async function fetch(ctx: TenantCtx, brandId: string, companyId: string, lock = false): Promise<Company> {
  // Locked by a statement of its own: Citus refuses FOR UPDATE beside the count's subquery.
  if (lock) await Company.scoped(ctx).where({ brandId, id: companyId }).forUpdate().select('id');
  const row = await query(ctx, brandId).where('companies.id', companyId).first();
  if (!row) throw notFound('Company');
  return row;
}

/**
 * Links the brand's contacts of a domain that have no company yet to a company, returning how
 * many; the contacts domain does it, passed in by the flow that composes the two
 * (server/flows/customers.ts), so neither domain imports the other.
 */
export type LinkContacts = (ctx: TenantCtx, brandId: string, companyId: string, domain: string) => Promise<number>;

export async function create(ctx: TenantCtx, brandId: string, input: CreateCompanyInput, linkContacts: LinkContacts): Promise<CompanyView> {
  const domain = checkedDomain(input.domain) ?? null;
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const id = newId(ID_PREFIX.company);
    try {
      await Company.query(tx.db).insert({ id, ...scopeOf(tx), brandId: brand.id, name: input.name, nameKey: foldText(input.name), domain, metadata: input.metadata ?? {} });
    } catch (err) {
      translate(err, domain);
    }
    const linkedContacts = domain ? await linkContacts(tx, brand.id, id, domain) : 0;
    // Contacts linked by domain are part of this entry (a count), not entries of their own.
    await audit.record(tx, { brandId: brand.id, entityType: 'company', entityId: id, event: 'company.created', metadata: { name: input.name, domain, linkedContacts } });
    return toView(await fetch(tx, brand.id, id));
  });
}

export async function list(ctx: TenantCtx, brandId: string, input: CompanyListInput): Promise<Page<CompanyView>> {
  const brand = await requireBrand(ctx, brandId);
  const sort = input.sort ?? 'createdAt';
  const order = input.order ?? 'desc';
  const q = query(ctx, brand.id);
  if (input.search) {
    const folded = `%${escapeLike(foldText(input.search.trim()))}%`;
    const lower = `%${escapeLike(input.search.trim().toLowerCase())}%`;
    q.where((w) => w.where('companies.nameKey', 'like', folded).orWhere('companies.domain', 'like', lower));
  }
  return keysetPage(q, {
    sort: sort === 'name' ? 'companies.name_key' : 'companies.id',
    id: 'companies.id',
    order,
    limit: input.limit,
    cursor: input.cursor,
    filters: { brandId: brand.id, search: input.search ?? null, sort, order },
    valueOf: (row) => (sort === 'name' ? row.nameKey : row.id),
    toView,
  });
}

export async function get(ctx: TenantCtx, brandId: string, companyId: string): Promise<CompanyView> {
  const brand = await requireBrand(ctx, brandId);
  return toView(await fetch(ctx, brand.id, companyId));
}

export async function update(ctx: TenantCtx, brandId: string, companyId: string, input: UpdateCompanyInput, linkContacts: LinkContacts): Promise<CompanyView> {
  const domain = checkedDomain(input.domain);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const before = await fetch(tx, brand.id, companyId, true);
    const patch: Partial<Company> = { updatedAt: new Date(ctx.services.now()) };
    if (input.name !== undefined) Object.assign(patch, { name: input.name, nameKey: foldText(input.name) });
    if (domain !== undefined) patch.domain = domain;
    if (input.metadata !== undefined) patch.metadata = input.metadata;
    try {
      await Company.scoped(tx).where({ brandId: brand.id, id: before.id }).patch(patch);
    } catch (err) {
      translate(err, domain);
    }
    if (patch.name !== undefined && patch.name !== before.name) await ticketNames.companyChanged(tx, brand.id, before.id);
    const linkedContacts = domain && domain !== before.domain ? await linkContacts(tx, brand.id, before.id, domain) : 0;
    const after = toView(await fetch(tx, brand.id, before.id));
    const changes = audit.changesBetween(toView(before), after, ['name', 'domain', 'metadata']);
    if (changes.length)
      await audit.record(tx, { brandId: brand.id, entityType: 'company', entityId: before.id, event: 'company.updated', changes, metadata: { name: after.name, linkedContacts } });
    return after;
  });
}

/** Deletes the company and returns it as it was; its contacts stay, without a company. */
export async function remove(ctx: TenantCtx, brandId: string, companyId: string): Promise<CompanyView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await fetch(tx, brand.id, companyId);
    // Locked before its contacts' tickets lose its name, so no contact joins it in between.
    await Company.scoped(tx).where({ brandId: brand.id, id: row.id }).forUpdate().select('id');
    await ticketNames.companyChanged(tx, brand.id, row.id, true);
    // Its contacts lose it first: the key has no ON DELETE action (decision 0090).
    await tx.db.raw('update contacts c set company_id = null where ? and c.brand_id = ? and c.company_id = ?', [tenantScope(tx, 'c'), brand.id, row.id]);
    await Company.scoped(tx).where({ brandId: brand.id, id: row.id }).delete();
    // This entry stands for its contacts' unlinking too.
    await audit.record(tx, {
      brandId: brand.id,
      entityType: 'company',
      entityId: row.id,
      event: 'company.deleted',
      metadata: { name: row.name, domain: row.domain, unlinkedContacts: Number(row.customerCount ?? 0) },
    });
    return toView(row);
  });
}

/** The id of a company of this brand, or a 400 naming companyId (a contact's company). */
export async function requireCompanyId(ctx: TenantCtx, brandId: string, companyId: string): Promise<string> {
  const row = await Company.scoped(ctx).where({ brandId, id: companyId }).select('id').first();
  if (!row) throw badRequest(`companyId ${companyId} is not a company of this brand`, [{ field: 'companyId', message: 'is not a company of this brand' }], 'invalid_company_id');
  return row.id;
}

/** The company of this brand with exactly this domain, if any (a new contact's company). */
export async function idForDomain(ctx: TenantCtx, brandId: string, domain: string): Promise<string | null> {
  const row = await Company.scoped(ctx).where({ brandId, domain }).select('id').first();
  return row?.id ?? null;
}

/** For the brand delete preview. */
export async function countForBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const r = (await Company.scoped(ctx).where('brandId', brandId).count({ n: '*' }).first()) as unknown as { n: string };
  return Number(r.n);
}
