import { withTx, type TenantCtx } from '../../core/context.js';
import { isPgError, PG } from '../../core/db.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { BOUND_TENANT, boundToTenant, scopeOf, tenantIs } from '../../core/model.js';
import { keysetPage, type Page } from '../../core/pagination.js';
import { emailDomain, escapeLike, foldText, isEmail, normalizeEmail } from '../../core/text.js';
import * as audit from '../../core/audit.js';
import { blockedCondition } from '../../core/blocked.js';
import { requireBrand } from '../../core/brand.js';
import * as ticketNames from '../../core/ticket-names.js';
import { Contact } from './model.js';
import type { ContactListInput, ContactView, CreateContactInput, UpdateContactInput } from './schemas.js';

/**
 * Contacts (customers) of a brand, served at /contacts and /customers.
 * - Emails are stored trimmed and lower-cased and are unique per brand (409 contact_email_taken).
 * - A contact created without a companyId is linked to the brand's company whose domain equals
 *   the email domain exactly (domains are unique per brand, so there is at most one). An explicit
 *   companyId (or null) wins. Changing the email later does not re-link.
 * - isBlocked is computed in the same query from the brand's blocked sources.
 * - _count.tickets counts the contact's tickets that are not deleted (an index-served subquery).
 */

const SORT_SQL = { createdAt: 'contacts.id', name: 'contacts.name_key', email: 'contacts.email' } as const;
const SEARCH_LIMIT = 10;
const TICKET_COUNT = `(select count(*)::int from tickets t where ${tenantIs('t', BOUND_TENANT)}
  and t.brand_id = contacts.brand_id and t.customer_id = contacts.id and t.deleted_at is null) as ticket_count`;

export function toView(row: Contact): ContactView {
  return {
    id: row.id,
    brandId: row.brandId,
    email: row.email,
    name: row.name,
    avatarUrl: row.avatarUrl,
    companyId: row.companyId,
    company: row.companyId && row.companyName != null ? { id: row.companyId, name: row.companyName } : null,
    notifyEmail: row.notifyEmail,
    metadata: row.metadata,
    isBlocked: Boolean(row.isBlocked),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    _count: { tickets: row.ticketCount ?? 0 },
  };
}

/** Contacts of the brand with their company name and blocked state, in one statement. */
function query(ctx: TenantCtx, brandId: string) {
  return Contact.scoped(ctx)
    .where('contacts.brandId', brandId)
    .leftJoin('companies', (j) =>
      j
        .on('companies.accountId', 'contacts.accountId')
        .andOn('companies.livemode', 'contacts.livemode')
        .andOn('companies.brandId', 'contacts.brandId')
        .andOn('companies.id', 'contacts.companyId'),
    )
    .select('contacts.*', 'companies.name as companyName', boundToTenant(ctx, `${blockedCondition('contacts', 'email', BOUND_TENANT)} as is_blocked, ${TICKET_COUNT}`));
}

async function fetch(ctx: TenantCtx, brandId: string, contactId: string): Promise<Contact> {
  const row = await query(ctx, brandId).where('contacts.id', contactId).first();
  if (!row) throw notFound('Contact');
  return row;
}

function emailTaken(email: string) {
  return conflict(`A contact with email ${email} already exists in this brand`, 'contact_email_taken');
}

function checkedEmail(raw: string): string {
  const email = normalizeEmail(raw);
  if (!isEmail(email)) throw badRequest('email must be an email address', [{ field: 'email', message: 'is not an email address' }], 'invalid_email');
  return email;
}

/**
 * How contacts find companies: the companies domain answers, passed in by the flow that composes
 * the two (server/flows/customers.ts), so neither domain imports the other.
 */
export interface CompanyLookup {
  /** The id of a company of the brand, or a 400 naming companyId. */
  byId(ctx: TenantCtx, brandId: string, companyId: string): Promise<string>;
  /** The brand's company with exactly this domain, if any. */
  byDomain(ctx: TenantCtx, brandId: string, domain: string): Promise<string | null>;
}

async function companyFor(ctx: TenantCtx, companies: CompanyLookup, brandId: string, email: string, companyId: string | null | undefined): Promise<string | null> {
  if (companyId === null) return null;
  if (companyId !== undefined) return companies.byId(ctx, brandId, companyId);
  return companies.byDomain(ctx, brandId, emailDomain(email));
}

export async function create(ctx: TenantCtx, brandId: string, input: CreateContactInput, companies: CompanyLookup): Promise<ContactView> {
  const email = checkedEmail(input.email);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const companyId = await companyFor(tx, companies, brand.id, email, input.companyId);
    const id = newId(ID_PREFIX.contact);
    const name = input.name ?? null;
    try {
      await Contact.query(tx.db).insert({
        id,
        ...scopeOf(tx),
        brandId: brand.id,
        email,
        name,
        nameKey: foldText(name ?? ''),
        avatarUrl: input.avatarUrl ?? null,
        companyId,
        notifyEmail: input.notifyEmail ?? true,
        metadata: input.metadata ?? {},
      });
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, 'contacts_email_unique')) throw emailTaken(email);
      throw err;
    }
    await audit.record(tx, { brandId: brand.id, entityType: 'contact', entityId: id, event: 'contact.created', metadata: { email } });
    return toView(await fetch(tx, brand.id, id));
  });
}

/**
 * The id of the brand's contact with this email, created (and linked to the company of its domain)
 * when there is none, for tickets and mail from new senders. Race-safe: INSERT … ON CONFLICT DO
 * NOTHING on the unique email index, then read.
 */
export async function findOrCreateByEmail(ctx: TenantCtx, companies: CompanyLookup, brandId: string, rawEmail: string, name?: string | null): Promise<{ id: string }> {
  const email = checkedEmail(rawEmail);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const byEmail = () => Contact.scoped(tx).where({ 'contacts.brandId': brand.id, 'contacts.email': email }).select('contacts.id').first();
    const existing = await byEmail();
    if (existing) return { id: existing.id };
    const companyId = await companies.byDomain(tx, brand.id, emailDomain(email));
    const inserted = (await tx.db
      .table('contacts')
      .insert({ id: newId(ID_PREFIX.contact), ...scopeOf(tx), brandId: brand.id, email, name: name ?? null, nameKey: foldText(name ?? ''), companyId })
      .onConflict(['accountId', 'livemode', 'brandId', 'email'])
      .ignore()
      .returning('id')) as { id: string }[];
    // Empty when a concurrent create won the race: its row is the contact (and its entry the winner's).
    if (inserted[0]) await audit.record(tx, { brandId: brand.id, entityType: 'contact', entityId: inserted[0].id, event: 'contact.created', metadata: { email } });
    return { id: inserted[0]?.id ?? (await byEmail())!.id };
  });
}

/**
 * Contacts made together (a page of an import), each as create makes it but with its company as
 * given (an id of the brand's company, or none), in one statement with their audit entries. An
 * email the brand has already is left out. Gives the ids made, by email as stored.
 */
export async function createMany(ctx: TenantCtx, brandId: string, inputs: readonly CreateContactInput[]): Promise<Map<string, string>> {
  if (!inputs.length) return new Map();
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const rows = inputs.map((input) => ({
      id: newId(ID_PREFIX.contact),
      ...scopeOf(tx),
      brandId: brand.id,
      email: checkedEmail(input.email),
      name: input.name ?? null,
      nameKey: foldText(input.name ?? ''),
      avatarUrl: input.avatarUrl ?? null,
      companyId: input.companyId ?? null,
      notifyEmail: input.notifyEmail ?? true,
      metadata: input.metadata ?? {},
    }));
    const made = (await tx.db.table('contacts').insert(rows).onConflict(['accountId', 'livemode', 'brandId', 'email']).ignore().returning(['id', 'email'])) as {
      id: string;
      email: string;
    }[];
    await audit.recordMany(
      tx,
      made.map((r) => ({ brandId: brand.id, entityType: 'contact', entityId: r.id, event: 'contact.created', metadata: { email: r.email } })),
    );
    return new Map(made.map((r) => [r.email, r.id]));
  });
}

/** The ids of the brand's contacts with these emails, by email as stored. */
export async function idsForEmails(ctx: TenantCtx, brandId: string, emails: readonly string[]): Promise<Map<string, string>> {
  const rows = (await Contact.scoped(ctx)
    .where('contacts.brandId', brandId)
    .whereIn('contacts.email', emails.map(normalizeEmail))
    .select('contacts.id', 'contacts.email')) as unknown as { id: string; email: string }[];
  return new Map(rows.map((r) => [r.email, r.id]));
}

/** The id of the brand's contact with this email, or null. */
export async function idForEmail(ctx: TenantCtx, brandId: string, email: string): Promise<string | null> {
  return (await idsForEmails(ctx, brandId, [email])).get(normalizeEmail(email)) ?? null;
}

export async function list(ctx: TenantCtx, brandId: string, input: ContactListInput): Promise<Page<ContactView>> {
  const brand = await requireBrand(ctx, brandId);
  const sort = input.sort ?? 'createdAt';
  const order = input.order ?? 'desc';
  const hideBlocked = input.hideBlocked !== false;
  const q = query(ctx, brand.id);
  if (input.search) {
    const text = input.search.trim();
    const folded = `%${escapeLike(foldText(text))}%`;
    const lower = `%${escapeLike(text.toLowerCase())}%`;
    q.where((w) => w.where('contacts.email', 'like', lower).orWhere('contacts.nameKey', 'like', folded));
  }
  if (input.companyId) q.where('contacts.companyId', input.companyId);
  if (hideBlocked) q.where(boundToTenant(ctx, `not ${blockedCondition('contacts', 'email', BOUND_TENANT)}`));
  return keysetPage(q, {
    sort: SORT_SQL[sort],
    id: 'contacts.id',
    order,
    limit: input.limit,
    cursor: input.cursor,
    filters: { brandId: brand.id, search: input.search ?? null, companyId: input.companyId ?? null, hideBlocked, sort, order },
    valueOf: (row) => (sort === 'name' ? row.nameKey : sort === 'email' ? row.email : row.id),
    toView,
  });
}

/** Autocomplete: up to 10 contacts whose email or name starts with q, blocked ones included (flagged). */
export async function search(ctx: TenantCtx, brandId: string, q: string): Promise<ContactView[]> {
  const brand = await requireBrand(ctx, brandId);
  const text = q.trim();
  if (!text) return [];
  const rows = await query(ctx, brand.id)
    .where((w) => w.where('contacts.email', 'like', `${escapeLike(text.toLowerCase())}%`).orWhere('contacts.nameKey', 'like', `${escapeLike(foldText(text))}%`))
    .orderBy('contacts.email', 'asc')
    .orderBy('contacts.id', 'asc')
    .limit(SEARCH_LIMIT);
  return rows.map(toView);
}

export async function get(ctx: TenantCtx, brandId: string, contactId: string): Promise<ContactView> {
  const brand = await requireBrand(ctx, brandId);
  return toView(await fetch(ctx, brand.id, contactId));
}

export async function update(ctx: TenantCtx, brandId: string, contactId: string, input: UpdateContactInput, companies: CompanyLookup): Promise<ContactView> {
  const email = input.email === undefined ? undefined : checkedEmail(input.email);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    // Locked first (the read joins companies), so the audit entry's `from` values are what this update replaced.
    await Contact.scoped(tx).where({ brandId: brand.id, id: contactId }).forUpdate().select('id');
    const before = await fetch(tx, brand.id, contactId);
    const patch: Partial<Contact> = { updatedAt: new Date(ctx.services.now()) };
    if (email !== undefined) patch.email = email;
    if (input.name !== undefined) Object.assign(patch, { name: input.name, nameKey: foldText(input.name ?? '') });
    if (input.avatarUrl !== undefined) patch.avatarUrl = input.avatarUrl;
    if (input.notifyEmail !== undefined) patch.notifyEmail = input.notifyEmail;
    if (input.metadata !== undefined) patch.metadata = input.metadata;
    if (input.companyId !== undefined) patch.companyId = input.companyId === null ? null : await companies.byId(tx, brand.id, input.companyId);
    try {
      await Contact.scoped(tx).where({ brandId: brand.id, id: before.id }).patch(patch);
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, 'contacts_email_unique')) throw emailTaken(email!);
      throw err;
    }
    const after = toView(await fetch(tx, brand.id, before.id));
    if (after.name !== before.name || after.email !== before.email || after.companyId !== before.companyId) await ticketNames.contactsChanged(tx, brand.id, [before.id]);
    const changes = audit.changesBetween(toView(before), after, ['email', 'name', 'avatarUrl', 'companyId', 'notifyEmail', 'metadata']);
    if (changes.length)
      await audit.record(tx, { brandId: brand.id, entityType: 'contact', entityId: before.id, event: 'contact.updated', changes, metadata: { email: after.email } });
    return after;
  });
}

/** Deletes the contact and returns it as it was. */
export async function remove(ctx: TenantCtx, brandId: string, contactId: string): Promise<ContactView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await fetch(tx, brand.id, contactId);
    await ticketNames.contactDeleting(tx, brand.id, row.id);
    await Contact.scoped(tx).where({ brandId: brand.id, id: row.id }).delete();
    await audit.record(tx, { brandId: brand.id, entityType: 'contact', entityId: row.id, event: 'contact.deleted', metadata: { email: row.email, name: row.name } });
    return toView(row);
  });
}

/** Links the brand's contacts of `domain` that have no company yet to the company (their tickets show it); how many. */
export async function linkUnlinkedByDomain(ctx: TenantCtx, brandId: string, companyId: string, domain: string): Promise<number> {
  const linked = (await Contact.scoped(ctx)
    .where({ brandId })
    .whereNull('companyId')
    .where('email', 'like', `%@${escapeLike(domain)}`)
    .patch({ companyId, updatedAt: new Date(ctx.services.now()) })
    .returning('contacts.id')) as unknown as { id: string }[];
  await ticketNames.contactsChanged(
    ctx,
    brandId,
    linked.map((r) => r.id),
  );
  return linked.length;
}

/** For the brand delete preview. */
export async function countForBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const r = (await Contact.scoped(ctx).where('brandId', brandId).count({ n: '*' }).first()) as unknown as { n: string };
  return Number(r.n);
}
