import { createHash } from 'node:crypto';
import objection from 'objection';
import { withTx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, HttpError, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { isEmail, normalizeEmail } from '../../core/text.js';
import * as blockedSources from '../blocked-sources/service.js';
import * as brands from '../brands/service.js';
import * as categories from '../categories/service.js';
import * as contacts from '../contacts/service.js';
import * as fields from '../fields/service.js';
import * as members from '../members/service.js';
import * as statuses from '../statuses/service.js';
import * as tags from '../tags/service.js';
import { Ticket } from './model.js';
import type { CreateTicketInput, TicketView } from './schemas.js';

/**
 * Tickets of a brand (first slice: create and get).
 *
 * Create runs in one transaction, in this order:
 *   1. claim the idempotency key (if any): INSERT … ON CONFLICT; a concurrent request with the
 *      same key blocks on the uncommitted row and then sees the committed ticket;
 *   2. every check and every side write (status, category, assignee, tags, customer contact,
 *      blocked sender, custom fields): none of them locks the brand row;
 *   3. LAST, one statement: a CTE that bumps brands.next_ticket_number (UPDATE … RETURNING), inserts
 *      the ticket with that number and inserts its tag links. The brand row lock, which serializes
 *      creates within a brand, is taken by that statement and held only until the commit right
 *      after it. A failed create rolls the counter back with everything else: numbers have no gaps.
 *   The full ticket is read after the commit, outside the lock.
 *
 * notifyCustomer is accepted and not stored (notifications come with a later issue);
 * attachmentIds are accepted and ignored until attachments exist.
 */

export const IDEMPOTENCY_TTL_HOURS = 24;
export const MAX_CUSTOM_FIELDS_BYTES = 64 * 1024;
export const MAX_CUSTOM_FIELDS_DEPTH = 10;
const TAG_ID = /^tag_[0-9a-z]{26}$/;

interface Row extends Ticket {
  statusRef: TicketView['statusRef'];
  customer: TicketView['customer'];
  category: TicketView['category'];
  tagList: TicketView['tags'];
}

function toView(row: Row): TicketView {
  return {
    id: row.id,
    object: 'ticket',
    brandId: row.brandId,
    ticketNumber: row.ticketNumber,
    title: row.title,
    body: row.body,
    status: row.status,
    statusRef: row.statusRef,
    priority: row.priority,
    assigneeId: row.assigneeId,
    createdBy: row.createdBy,
    customerId: row.customerId,
    customer: row.customer ? { ...row.customer, company: row.customer.companyId && row.customer.company?.name != null ? row.customer.company : null } : null,
    categoryId: row.categoryId,
    category: row.category,
    tags: row.tagList ?? [],
    links: row.links ?? [],
    customFields: row.customFields ?? null,
    metadata: row.metadata ?? {},
    source: row.source,
    sourceId: row.sourceId,
    sourceData: row.sourceData,
    commentCount: row.commentCount,
    attachmentCount: row.attachmentCount,
    isSpam: row.isSpam,
    createdAt: new Date(row.createdAt).toISOString(),
    updatedAt: new Date(row.updatedAt).toISOString(),
    deletedAt: row.deletedAt ? new Date(row.deletedAt).toISOString() : null,
    mergedIntoId: row.mergedIntoId,
  };
}

/** The brand's tickets with every related record, in one statement. */
function query(ctx: TenantCtx, brandId: string) {
  return Ticket.scoped(ctx)
    .where('tickets.brandId', brandId)
    .select('tickets.*', objection.raw(`
      (select json_build_object('id', s.id, 'key', s.key, 'name', s.name, 'color', s.color) from statuses s
        where s.account_id = tickets.account_id and s.livemode = tickets.livemode and s.brand_id = tickets.brand_id and s.key = tickets.status) as status_ref,
      (select json_build_object('id', c.id, 'email', c.email, 'name', c.name, 'avatarUrl', c.avatar_url, 'companyId', c.company_id,
          'company', (select json_build_object('id', co.id, 'name', co.name) from companies co where co.id = c.company_id))
        from contacts c where c.account_id = tickets.account_id and c.livemode = tickets.livemode and c.brand_id = tickets.brand_id and c.id = tickets.customer_id) as customer,
      (select json_build_object('id', ca.id, 'name', ca.name, 'color', ca.color) from categories ca
        where ca.account_id = tickets.account_id and ca.livemode = tickets.livemode and ca.brand_id = tickets.brand_id and ca.id = tickets.category_id) as category,
      coalesce((select json_agg(json_build_object('id', tg.id, 'name', tg.name, 'color', tg.color) order by lower(tg.name), tg.id)
        from ticket_tags tt join tags tg on tg.account_id = tt.account_id and tg.livemode = tt.livemode and tg.brand_id = tt.brand_id and tg.id = tt.tag_id
        where tt.account_id = tickets.account_id and tt.livemode = tickets.livemode and tt.brand_id = tickets.brand_id and tt.ticket_id = tickets.id), '[]'::json) as tag_list`));
}

async function fetchView(ctx: TenantCtx, brandId: string, ticketId: string, includeDeleted = false): Promise<TicketView> {
  const q = query(ctx, brandId).where('tickets.id', ticketId);
  if (!includeDeleted) q.whereNull('tickets.deletedAt');
  const row = await q.first() as Row | undefined;
  if (!row) throw notFound('Ticket');
  return toView(row);
}

export async function get(ctx: TenantCtx, brandId: string, ticketId: string): Promise<TicketView> {
  const brand = await brands.requireBrand(ctx, brandId);
  return fetchView(ctx, brand.id, ticketId);
}

/** JSON with object keys sorted at every level: the same body always has the same text. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

export function requestFingerprint(method: string, route: string, body: unknown): string {
  return createHash('sha256').update(`${method}\n${route}\n${canonicalJson(body)}`).digest('hex');
}

/** Depth of a JSON value: scalars 0, {} and [] 1, one more per level of nesting. */
function jsonDepth(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (v && typeof v === 'object') {
      max = Math.max(max, d + 1);
      if (max > MAX_CUSTOM_FIELDS_DEPTH) return max;
      for (const child of Object.values(v)) stack.push([child, d + 1]);
    }
  }
  return max;
}

function checkCustomFieldsShape(value: unknown): void {
  if (value === undefined) return;
  if (jsonDepth(value) > MAX_CUSTOM_FIELDS_DEPTH) {
    throw badRequest(`customFields may nest at most ${MAX_CUSTOM_FIELDS_DEPTH} levels deep`, [{ field: 'customFields', message: `must not nest deeper than ${MAX_CUSTOM_FIELDS_DEPTH} levels` }], 'custom_fields_too_deep');
  }
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_CUSTOM_FIELDS_BYTES) {
    throw badRequest(`customFields may take at most ${MAX_CUSTOM_FIELDS_BYTES} bytes as JSON`, [{ field: 'customFields', message: `must be at most ${MAX_CUSTOM_FIELDS_BYTES} bytes as JSON` }], 'custom_fields_too_large');
  }
}

/** A 404 from a lookup of something the body named is the caller's 400 on that field. */
async function asFieldError<T>(field: string, code: string, message: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof HttpError && err.statusCode === 404) throw badRequest(message, [{ field, message: 'is not known in this brand' }], code);
    throw err;
  }
}

/**
 * Claims the idempotency key for this request, or answers with the ticket it already created.
 * The claim is an insert in the caller's transaction (rolled back if the create fails); an expired
 * key is taken over. A row that already exists and is live belongs to a committed request (the
 * insert waits for an uncommitted one), so its resource id is final.
 */
async function claimKey(ctx: TenantCtx, key: string, fingerprint: string, ticketId: string): Promise<{ claimed: true } | { claimed: false; ticketId: string }> {
  const claimed = await ctx.db.raw(`
    insert into idempotency_keys (account_id, livemode, key, fingerprint, resource_id, created_at, expires_at)
    values (?, ?, ?, ?, ?, now(), now() + make_interval(hours => ?))
    on conflict (account_id, livemode, key) do update
      set fingerprint = excluded.fingerprint, resource_id = excluded.resource_id, created_at = excluded.created_at, expires_at = excluded.expires_at
      where idempotency_keys.expires_at <= now()
    returning key`, [ctx.accountId, ctx.livemode, key, fingerprint, ticketId, IDEMPOTENCY_TTL_HOURS]) as { rows: unknown[] };
  if (claimed.rows.length) return { claimed: true };
  const existing = await ctx.db('idempotency_keys').where({ accountId: ctx.accountId, livemode: ctx.livemode, key })
    .first('fingerprint', 'resourceId') as { fingerprint: string; resourceId: string | null };
  if (existing.fingerprint !== fingerprint || !existing.resourceId) {
    throw conflict('This X-Idempotency-Key was already used with a different request; use a new key for a new ticket', 'idempotency_key_reused');
  }
  return { claimed: false, ticketId: existing.resourceId };
}

export interface CreateResult {
  created: boolean;
  ticket: TicketView;
}

export async function create(ctx: TenantCtx, brandId: string, input: CreateTicketInput, idempotencyKey?: string): Promise<CreateResult> {
  const title = input.title.trim();
  if (!title) throw badRequest('title must not be blank', [{ field: 'title', message: 'must not be blank' }]);
  checkCustomFieldsShape(input.customFields);
  let email: string | null = null;
  if (input.customerEmail != null) {
    email = normalizeEmail(input.customerEmail);
    if (!isEmail(email)) throw badRequest('customerEmail must be an email address', [{ field: 'customerEmail', message: 'is not an email address' }], 'invalid_email');
  }

  const outcome = await withTx(ctx, async (tx) => {
    const brand = await brands.requireBrand(tx, brandId);
    const id = newId(ID_PREFIX.ticket);
    if (idempotencyKey !== undefined) {
      const claim = await claimKey(tx, idempotencyKey, requestFingerprint('POST', `/brands/${brand.id}/tickets`, input), id);
      if (!claim.claimed) return { created: false, id: claim.ticketId, brandId: brand.id };
    }

    const status = input.status ?? 'open';
    await statuses.assertStatusKey(tx, brand.id, status);
    const categoryId = input.categoryId
      ? (await asFieldError('categoryId', 'invalid_category', `categoryId ${input.categoryId} is not a category of this brand`, () => categories.requireCategory(tx, brand.id, input.categoryId!))).id
      : null;
    const assigneeId = input.assigneeId ?? null;
    if (assigneeId && !(await members.isMember(tx, assigneeId))) {
      throw badRequest(`assigneeId ${assigneeId} is not a member of this account; see GET /v1/accounts/me/members`, [{ field: 'assigneeId', message: 'is not a member of this account' }], 'invalid_assignee');
    }
    await fields.validateCustomFields(tx, brand.id, input.customFields);

    const tagIds = new Set<string>();
    const given = input.tags ?? [];
    const ids = given.filter((t) => TAG_ID.test(t));
    const names = given.filter((t) => !TAG_ID.test(t));
    if (ids.length) {
      const rows = await asFieldError('tags', 'invalid_tags', 'tags names a tag id that is not a tag of this brand', () => tags.requireTags(tx, brand.id, ids));
      for (const r of rows) tagIds.add(r.id);
    }
    if (names.length) for (const t of await tags.findOrCreateByNames(tx, brand.id, names)) tagIds.add(t.id);

    let customerId: string | null = null;
    let isSpam = false;
    if (email) {
      customerId = (await contacts.findOrCreateByEmail(tx, brand.id, email, input.customerName ?? null)).id;
      isSpam = await blockedSources.isBlocked(tx, brand.id, email);
    }

    // Last statement of the transaction (see the file comment): counter, ticket and tag links.
    const json = (v: unknown) => (v === undefined ? null : JSON.stringify(v));
    const inserted = await tx.db.raw(`
      with n as (
        update brands set next_ticket_number = next_ticket_number + 1
        where account_id = ? and livemode = ? and id = ?
        returning next_ticket_number - 1 as num
      ), t as (
        insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, assignee_id, created_by,
          customer_id, category_id, links, custom_fields, metadata, source, source_id, source_data, is_spam)
        select ?, ?, ?, ?, n.num, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?::jsonb, ?, ?, ?::jsonb, ? from n
        returning id, account_id, livemode, brand_id
      ), tt as (
        insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id)
        select t.account_id, t.livemode, t.brand_id, t.id, tag from t, unnest(?::text[]) as tag
      )
      select id from t`, [
      tx.accountId, tx.livemode, brand.id,
      id, tx.accountId, tx.livemode, brand.id, title, input.body ?? null, status, input.priority ?? null, assigneeId, input.createdBy ?? null,
      customerId, categoryId, JSON.stringify(input.links ?? []), json(input.customFields), JSON.stringify(input.metadata ?? {}),
      input.source ?? 'api', input.sourceId ?? null, json(input.sourceData ?? null), isSpam,
      [...tagIds],
    ]) as { rows: { id: string }[] };
    if (inserted.rows.length !== 1) throw notFound('Brand');
    return { created: true, id, brandId: brand.id };
  });

  // A replay answers with the ticket as it is now, even if it was deleted since.
  return { created: outcome.created, ticket: await fetchView(ctx, outcome.brandId, outcome.id, !outcome.created) };
}

/** For the brand delete preview: the brand's tickets that are not deleted. */
export async function countForBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const r = await Ticket.scoped(ctx).where('brandId', brandId).whereNull('deletedAt').count({ n: '*' }).first() as unknown as { n: string };
  return Number(r.n);
}
