import type { Knex } from 'knex';
import objection from 'objection';
import { canSeeBrand, withTx, type TenantCtx } from '../../core/context.js';
import { prepared, type SqlFragment } from '../../core/db.js';
import { perKeyLimit } from '../../core/per-key-limit.js';
import { badRequest, HttpError, notFound } from '../../core/errors.js';
import { newId, normalizeBrandId, ID_PREFIX } from '../../core/ids.js';
import { canonicalJson, claim as claimIdempotencyKey, claimStatement, requestFingerprint } from '../../core/idempotency.js';
import { isEmail, normalizeEmail } from '../../core/text.js';
import * as attachments from '../attachments/service.js';
import * as audit from '../audit/service.js';
import * as blockedSources from '../blocked-sources/service.js';
import * as brands from '../brands/service.js';
import * as categories from '../categories/service.js';
import * as contacts from '../contacts/service.js';
import * as fields from '../fields/service.js';
import * as members from '../members/service.js';
import * as statuses from '../statuses/service.js';
import * as tags from '../tags/service.js';
import * as watchers from '../watchers/service.js';
import * as events from '../../outbox/events.js';
import { Ticket } from './model.js';
import { decodeCursor, encodeCursor, keysetPage, PAGE_LIMIT_DEFAULT, type Page, type Position, type SortValue, invalidCursor } from '../../core/pagination.js';
import type { Change } from '../audit/service.js';
import { TICKET_SORTS, type CreateTicketInput, type TicketListInput, type TicketView, type UpdateTicketInput } from './schemas.js';

/**
 * Tickets of a brand: create, get, update, soft delete and the list with full-text search.
 *
 * Create: round trips are its cost, and the per-brand ticket counter serializes creates within a
 * brand, so the usual create (customer, existing tags, status, category, assignee, no watchers or
 * pending attachments, no custom-field schema) is ONE statement (createInOneStatement); anything
 * else, every error included, goes step by step in a transaction (createStepByStep). Both write
 * the ticket with the same statement (writeStatement).
 * notifyCustomer is accepted and not stored.
 */

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
    closeReason: row.closeReason as TicketView['closeReason'],
    dueAt: row.dueAt ? new Date(row.dueAt).toISOString() : null,
  };
}

/** Rows of raw statements arrive with column names; views read model properties. */
const { parse: columnsToProperties } = objection.snakeCaseMappers();

/**
 * The columns a ticket view reads. Not `tickets.*`: the derived list and search columns
 * (search_vector can be as large as the body) stay in the database.
 */
const VIEW_COLUMNS = ['id', 'account_id', 'livemode', 'brand_id', 'ticket_number', 'title', 'body', 'status', 'priority', 'assignee_id',
  'created_by', 'customer_id', 'category_id', 'links', 'custom_fields', 'metadata', 'source', 'source_id', 'source_data', 'is_spam',
  'merged_into_id', 'comment_count', 'attachment_count', 'close_reason', 'due_at', 'created_at', 'updated_at', 'deleted_at'];
const TICKET_COLUMNS = VIEW_COLUMNS.map((c) => `tickets.${c}`);

/**
 * The related records of a view, as columns over a row named `tickets`. The tag list reads the
 * ticket's links, or (`tagIdsSql`: ticket create, whose own statement cannot see the links it
 * inserts) the brand's tags whose ids that SQL array expression holds; likewise the customer is
 * read from `contactsRelation` (ticket create's CTE holding a contact it creates).
 */
function relatedColumns(tagIdsSql: string | null, contactsRelation = 'contacts'): string {
  const tagRows = tagIdsSql === null
    ? `ticket_tags tt join tags tg on tg.account_id = tt.account_id and tg.livemode = tt.livemode and tg.brand_id = tt.brand_id and tg.id = tt.tag_id
        where tt.account_id = tickets.account_id and tt.livemode = tickets.livemode and tt.brand_id = tickets.brand_id and tt.ticket_id = tickets.id`
    : `tags tg where tg.account_id = tickets.account_id and tg.livemode = tickets.livemode and tg.brand_id = tickets.brand_id and tg.id = any(${tagIdsSql})`;
  return `
      (select json_build_object('id', s.id, 'key', s.key, 'name', s.name, 'color', s.color) from statuses s
        where s.account_id = tickets.account_id and s.livemode = tickets.livemode and s.brand_id = tickets.brand_id and s.key = tickets.status) as status_ref,
      (select json_build_object('id', c.id, 'email', c.email, 'name', c.name, 'avatarUrl', c.avatar_url, 'companyId', c.company_id,
          'company', (select json_build_object('id', co.id, 'name', co.name) from companies co where co.id = c.company_id))
        from ${contactsRelation} c where c.account_id = tickets.account_id and c.livemode = tickets.livemode and c.brand_id = tickets.brand_id and c.id = tickets.customer_id) as customer,
      (select json_build_object('id', ca.id, 'name', ca.name, 'color', ca.color) from categories ca
        where ca.account_id = tickets.account_id and ca.livemode = tickets.livemode and ca.brand_id = tickets.brand_id and ca.id = tickets.category_id) as category,
      coalesce((select json_agg(json_build_object('id', tg.id, 'name', tg.name, 'color', tg.color) order by lower(tg.name), tg.id)
        from ${tagRows}), '[]'::json) as tag_list`;
}
const RELATED_BY_LINKS = relatedColumns(null);

type TicketQuery = ReturnType<typeof query>;

/** The brand's tickets with every related record, in one statement. */
function query(ctx: TenantCtx, brandId: string) {
  return Ticket.scoped(ctx)
    .where('tickets.brandId', brandId)
    .select(...TICKET_COLUMNS, objection.raw(RELATED_BY_LINKS));
}

export async function fetchView(ctx: TenantCtx, brandId: string, ticketId: string, includeDeleted = false): Promise<TicketView> {
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
export async function asFieldError<T>(field: string, code: string, message: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof HttpError && err.statusCode === 404) throw badRequest(message, [{ field, message: 'is not known in this brand' }], code);
    throw err;
  }
}

/** Tag ids for tag ids (must be the brand's) or names (found or created). */
export async function resolveTags(ctx: TenantCtx, brandId: string, given: readonly string[]): Promise<Set<string>> {
  const tagIds = new Set<string>();
  const ids = given.filter((t) => TAG_ID.test(t));
  const names = given.filter((t) => !TAG_ID.test(t));
  if (ids.length) {
    const rows = await asFieldError('tags', 'invalid_tags', 'tags names a tag id that is not a tag of this brand', () => tags.requireTags(ctx, brandId, ids));
    for (const r of rows) tagIds.add(r.id);
  }
  if (names.length) for (const t of await tags.findOrCreateByNames(ctx, brandId, names)) tagIds.add(t.id);
  return tagIds;
}

export async function assertAssignee(ctx: TenantCtx, assigneeId: string): Promise<void> {
  if (!(await members.isMember(ctx, assigneeId))) {
    throw badRequest(`assigneeId ${assigneeId} is not a member of this account; see GET /v1/accounts/me/members`, [{ field: 'assigneeId', message: 'is not a member of this account' }], 'invalid_assignee');
  }
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
  const id = normalizeBrandId(brandId);
  if (!canSeeBrand(ctx.brandScope, id)) throw notFound('Brand');
  const fingerprint = requestFingerprint('POST', `/brands/${id}/tickets`, input);
  const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, fingerprint };
  const brandKey = `${ctx.accountId}:${ctx.livemode}:${id}`;
  const ticket = hasFieldSchema(brandKey) ? null : await createInOneStatement(ctx, id, brandKey, title, email, input, idempotency);
  if (ticket) return { created: true, ticket };
  return createStepByStep(ctx, id, title, email, input, idempotency, brandKey);
}

/**
 * Brands seen (in the last minute) with a ticket schema or field rules: their creates always go
 * step by step, so they skip the one statement that would only find that out. A hint, not a rule:
 * the statement checks for itself, so a stale entry costs one round trip, never a wrong ticket.
 */
const FIELD_SCHEMA_HINT_MS = 60_000;
const brandsWithFieldSchema = new Map<string, number>();
function hasFieldSchema(brandKey: string): boolean {
  const until = brandsWithFieldSchema.get(brandKey);
  if (until === undefined) return false;
  if (until > Date.now()) return true;
  brandsWithFieldSchema.delete(brandKey);
  return false;
}

interface TicketWrite {
  id: string;
  brandId: string;
  title: string;
  email: string | null;
  status: string;
  categoryId: string | null;
  assigneeId: string | null;
  attachmentCount: number;
  input: CreateTicketInput;
}

/**
 * How a create's statement learns what it does not bind: the customer's id and the tag ids as SQL,
 * `ready` (nothing is written unless it holds), and the CTEs that compute them, which run first.
 */
interface Resolution {
  before: SqlFragment | null;
  /** Where the customer's row is: `contacts`, or the CTE of a contact made by this statement. */
  contactsRelation: string;
  customerId: SqlFragment;
  tagIds: SqlFragment;
  ready: string;
}

/** The ticket.created entry, written by the create's statement only if it inserts the ticket. */
const createdEntry = (ctx: TenantCtx, w: Pick<TicketWrite, 'brandId' | 'id' | 'title'>) => audit.insertStatement(ctx,
  [{ brandId: w.brandId, ticketId: w.id, entityType: 'ticket', entityId: w.id, event: 'ticket.created', metadata: { title: w.title } }],
  { sql: 'exists (select 1 from t)', bindings: [] });

/**
 * The statement that writes a ticket, for both ways of creating one: the counter (UPDATE …
 * RETURNING, which takes the brand row lock that serializes creates within a brand), the ticket
 * (spam when the sender is blocked), its tag links, its audit entry and its ticket.created webhook
 * deliveries; it returns the ticket as the response shows it, or no row when `ready` did not hold.
 */
function writeStatement(ctx: TenantCtx, w: TicketWrite, r: Resolution, entry: SqlFragment): Knex.Raw {
  const { input } = w;
  const raw = (q: SqlFragment) => ctx.db.raw(q.sql, q.bindings as never[]);
  const blocked = w.email ? blockedSources.isBlockedCondition(ctx, w.brandId, w.email) : { sql: 'false', bindings: [] };
  const announced = events.ticketCreated(ctx, w.brandId, w.id, 't', r.contactsRelation); // inserts nothing without subscribers
  const json = (v: unknown) => (v === undefined ? null : JSON.stringify(v));
  return ctx.db.raw(`
    with ${r.before ? '?, ' : ''}n as (
      update brands set next_ticket_number = next_ticket_number + 1
      where account_id = ? and livemode = ? and id = ? and ${r.ready}
      returning next_ticket_number - 1 as num
    ), t as (
      insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, assignee_id, created_by,
        customer_id, category_id, links, custom_fields, metadata, source, source_id, source_data, is_spam, close_reason, due_at, attachment_count)
      select ?, ?, ?, ?, n.num, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?::jsonb, ?, ?, ?::jsonb, ?, ?, ?::timestamptz, ? from n
      returning ${VIEW_COLUMNS.join(', ')}
    ), tt as (
      insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority)
      select t.account_id, t.livemode, t.brand_id, t.id, tag, t.status, t.priority from t, unnest(?) as tag
    ), entry as (?
    ), announced as (?
    )
    select tickets.*, ${relatedColumns('?', r.contactsRelation)} from t as tickets`, [
    ...(r.before ? [raw(r.before)] : []),
    ctx.accountId, ctx.livemode, w.brandId,
    w.id, ctx.accountId, ctx.livemode, w.brandId, w.title, input.body ?? null, w.status, input.priority ?? null, w.assigneeId, input.createdBy ?? null,
    raw(r.customerId), w.categoryId, JSON.stringify(input.links ?? []), json(input.customFields), JSON.stringify(input.metadata ?? {}),
    input.source ?? 'api', input.sourceId ?? null, json(input.sourceData ?? null), raw(blocked), input.closeReason ?? null, isoOrNull(input.dueAt), w.attachmentCount,
    raw(r.tagIds),
    raw(entry),
    raw(announced),
    raw(r.tagIds),
  ]);
}

const viewOf = (rows: Record<string, unknown>[]) => (rows[0] ? toView(columnsToProperties(rows[0]) as Row) : null);

/**
 * One-statement creates in flight per brand (and process): one can hold the brand row lock while
 * the next is sent and checked; more would only wait on that lock holding pool connections.
 */
const oneStatementCreates = perKeyLimit(2);

/**
 * The usual create in ONE statement, committed on its own (or inside the caller's transaction):
 * one round trip, and the brand row lock held only from the counter's UPDATE to the end of that
 * statement. Its CTEs check the brand (visible, no ticket schema or field rules to validate
 * customFields against), the status, category, assignee and every tag (by id or name), then claim
 * the idempotency key, find or create the customer contact, and write the ticket (writeStatement).
 * When any of that does not hold (a check fails, a tag is new, the key is taken) nothing is written
 * and it returns null: the step-by-step create then gives the precise answer (a 400 or 404, new
 * tags, the replay). Watchers and pending attachments always go step by step. The statement is
 * prepared (planned once per connection) and at most two per brand run at once.
 */
async function createInOneStatement(ctx: TenantCtx, brandId: string, brandKey: string, title: string, email: string | null, input: CreateTicketInput,
  idempotency: { key: string; fingerprint: string } | undefined): Promise<TicketView | null> {
  if (input.watchers?.length || input.attachmentIds?.length) return null;
  const given = input.tags ?? [];
  const tagIds = [...new Set(given.filter((t) => TAG_ID.test(t)))];
  const tagNames = [...new Set(given.filter((t) => !TAG_ID.test(t)).map((t) => t.trim().toLowerCase()))];
  if (tagNames.some((n) => !n || n.length > tags.MAX_TAG_NAME_LENGTH)) return null;

  const scope = [ctx.accountId, ctx.livemode, brandId];
  const w: TicketWrite = {
    id: newId(ID_PREFIX.ticket), brandId, title, email, status: input.status ?? 'open',
    categoryId: input.categoryId ?? null, assigneeId: input.assigneeId ?? null, attachmentCount: 0, input,
  };
  const ctes: SqlFragment[] = [{
    sql: `given_tags as (
        select id, lower(name) as name_key from tags where account_id = ? and livemode = ? and brand_id = ? and (id = any(?::text[]) or lower(name) = any(?::text[]))
      ), checks as (
        select exists (select 1 from brands b where b.account_id = ? and b.livemode = ? and b.id = ?
              and b.ticket_schema is null and jsonb_array_length(coalesce(b.field_rules -> 'ticket', '[]'::jsonb)) = 0)
          and exists (select 1 from statuses s where s.account_id = ? and s.livemode = ? and s.brand_id = ? and s.key = ?)
          and (?::text is null or exists (select 1 from categories ca where ca.account_id = ? and ca.livemode = ? and ca.brand_id = ? and ca.id = ?))
          and (?::text is null or exists (select 1 from members m where m.account_id = ? and m.id = ?))
          and ?::text[] <@ (select coalesce(array_agg(id), '{}') from given_tags)
          and ?::text[] <@ (select coalesce(array_agg(name_key), '{}') from given_tags) as ok
      )`,
    bindings: [...scope, tagIds, tagNames, ...scope, ...scope, w.status, w.categoryId, ...scope, w.categoryId, w.assigneeId, ctx.accountId, w.assigneeId, tagIds, tagNames],
  }];
  if (idempotency) {
    // Claimed only when every check holds; a key already taken leaves `go` false (the replay, or the 409, comes step by step).
    const claim = claimStatement(ctx, idempotency.key, idempotency.fingerprint, w.id, '(select ok from checks)');
    ctes.push({ sql: `claim as (${claim.sql}), go as (select (select ok from checks) and exists (select 1 from claim) as ok)`, bindings: claim.bindings });
  } else {
    ctes.push({ sql: 'go as (select ok from checks)', bindings: [] });
  }
  if (email) ctes.push(contacts.findOrCreateCtes(ctx, brandId, email, input.customerName ?? null, '(select ok from go)'));
  const before = { sql: ctes.map((c) => c.sql).join(', '), bindings: ctes.flatMap((c) => c.bindings) };
  const resolution: Resolution = {
    before,
    contactsRelation: email ? 'customer' : 'contacts',
    customerId: email ? { sql: '(select id from customer)', bindings: [] } : { sql: '?::text', bindings: [null] },
    tagIds: { sql: 'array(select id from given_tags)', bindings: [] },
    // With a customer, `ready` reads it, so the contact is found or made before the counter's UPDATE
    // locks the brand row: nothing under that lock waits on another create.
    ready: email ? '(select ok from go) and exists (select 1 from customer)' : '(select ok from go)',
  };
  const statement = prepared(ctx.db, writeStatement(ctx, w, resolution, createdEntry(ctx, w)));
  const result = await oneStatementCreates(brandKey,
    async () => await statement as unknown as { rows: Record<string, unknown>[] }); // a knex query runs when awaited
  return viewOf(result.rows);
}

/**
 * The create for everything else, in one transaction:
 *   1. claim the idempotency key (if any): INSERT … ON CONFLICT; a concurrent request with the
 *      same key blocks on the uncommitted row and then sees the committed ticket;
 *   2. every check and every side write (status, category, assignee, custom fields against the
 *      brand's schema, new tags, the customer contact, attachments, watchers): none of them locks
 *      the brand row (watcher rows and linked attachments reference the ticket through deferred
 *      foreign keys, checked at commit);
 *   3. LAST, writeStatement with every value bound; the commit follows at once, so the brand row
 *      lock is held for that statement and the commit. A failed create rolls the counter back with
 *      everything else: numbers have no gaps.
 */
async function createStepByStep(ctx: TenantCtx, brandId: string, title: string, email: string | null, input: CreateTicketInput,
  idempotency: { key: string; fingerprint: string } | undefined, brandKey: string): Promise<CreateResult> {
  const outcome = await withTx(ctx, async (tx) => {
    const brand = await brands.requireBrand(tx, brandId);
    if (brand.ticketSchema !== null || (brand.fieldRules.ticket ?? []).length > 0) brandsWithFieldSchema.set(brandKey, Date.now() + FIELD_SCHEMA_HINT_MS);
    const id = newId(ID_PREFIX.ticket);
    if (idempotency) {
      const claim = await claimIdempotencyKey(tx, idempotency.key, idempotency.fingerprint, id, 'ticket');
      if (!claim.claimed) return { created: false as const, id: claim.resourceId, brandId: brand.id };
    }

    const status = input.status ?? 'open';
    await statuses.assertStatusKey(tx, brand.id, status);
    const categoryId = input.categoryId
      ? (await asFieldError('categoryId', 'invalid_category', `categoryId ${input.categoryId} is not a category of this brand`, () => categories.requireCategory(tx, brand.id, input.categoryId!))).id
      : null;
    const assigneeId = input.assigneeId ?? null;
    if (assigneeId) await assertAssignee(tx, assigneeId);
    await fields.validateCustomFields(tx, brand.id, input.customFields);

    const tagIds = await resolveTags(tx, brand.id, input.tags ?? []);
    const customerId = email ? (await contacts.findOrCreateByEmail(tx, brand.id, email, input.customerName ?? null)).id : null;
    const attachmentCount = await attachments.linkPending(tx, brand.id, id, input.attachmentIds ?? []);
    const w: TicketWrite = { id, brandId: brand.id, title, email, status, categoryId, assigneeId, attachmentCount, input };
    // Made (and so ordered) before the watchers' entries, though written by the last statement.
    const entry = createdEntry(tx, w);
    if (input.watchers?.length) await watchers.addToNewTicket(tx, brand.id, id, input.watchers);

    const inserted = await writeStatement(tx, w, {
      before: null,
      contactsRelation: 'contacts',
      customerId: { sql: '?::text', bindings: [customerId] },
      tagIds: { sql: '?::text[]', bindings: [[...tagIds]] },
      ready: 'true',
    }, entry) as unknown as { rows: Record<string, unknown>[] };
    const ticket = viewOf(inserted.rows);
    if (!ticket) throw notFound('Brand');
    brands.forgetFound(tx, brand.id); // its next_ticket_number moved
    return { created: true as const, ticket };
  });

  // A replay answers with the ticket as it is now, even if it was deleted since.
  if (!outcome.created) return { created: false, ticket: await fetchView(ctx, outcome.brandId, outcome.id, true) };
  return outcome;
}

/** For the brand delete preview: the brand's tickets that are not deleted. */
export async function countForBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const r = await Ticket.scoped(ctx).where('brandId', brandId).whereNull('deletedAt').count({ n: '*' }).first() as unknown as { n: string };
  return Number(r.n);
}

export interface UpdateResult {
  ticket: TicketView;
  /** The fields that really changed (the same list the ticket.updated audit entry records). */
  changes: Change[];
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
/** A given date-time as stored and read back (millisecond ISO, UTC). */
const isoOrNull = (v: string | null | undefined) => (v == null ? null : new Date(v).toISOString());

/**
 * PATCH: only the fields given; `changes` lists those whose value really changed (tags as sorted
 * id lists). Nothing changed: nothing is written and updatedAt stays.
 */
export async function update(ctx: TenantCtx, brandId: string, ticketId: string, input: UpdateTicketInput): Promise<UpdateResult> {
  if (Object.keys(input).length === 0) throw badRequest('Send at least one field to change', [], 'empty_update');
  let title: string | undefined;
  if (input.title !== undefined) {
    title = input.title.trim();
    if (!title) throw badRequest('title must not be blank', [{ field: 'title', message: 'must not be blank' }]);
  }
  checkCustomFieldsShape(input.customFields);

  const outcome = await withTx(ctx, async (tx) => {
    const brand = await brands.requireBrand(tx, brandId);
    const locked = await Ticket.scoped(tx).where({ 'tickets.brandId': brand.id, 'tickets.id': ticketId }).whereNull('tickets.deletedAt')
      .forUpdate().select('tickets.id').first();
    if (!locked) throw notFound('Ticket');
    const before = await fetchView(tx, brand.id, locked.id);

    const patch: Record<string, unknown> = {};
    const changes: Change[] = [];
    const consider = (field: string, from: unknown, to: unknown, column: string = field, stored: unknown = to) => {
      if (to === undefined || same(from, to)) return;
      changes.push({ field, from, to });
      patch[column] = stored;
    };
    consider('title', before.title, title);
    consider('body', before.body, input.body);
    if (input.status !== undefined) await statuses.assertStatusKey(tx, brand.id, input.status);
    consider('status', before.status, input.status);
    consider('priority', before.priority, input.priority);
    if (input.assigneeId) await assertAssignee(tx, input.assigneeId);
    consider('assigneeId', before.assigneeId, input.assigneeId);
    if (input.categoryId) {
      await asFieldError('categoryId', 'invalid_category', `categoryId ${input.categoryId} is not a category of this brand`, () => categories.requireCategory(tx, brand.id, input.categoryId!));
    }
    consider('categoryId', before.categoryId, input.categoryId);
    consider('links', before.links, input.links, 'links', JSON.stringify(input.links));
    if (input.customFields !== undefined) await fields.validateCustomFields(tx, brand.id, input.customFields);
    consider('customFields', before.customFields, input.customFields, 'customFields', input.customFields === null ? null : JSON.stringify(input.customFields));
    consider('metadata', before.metadata, input.metadata, 'metadata', JSON.stringify(input.metadata));
    consider('isSpam', before.isSpam, input.isSpam);
    consider('closeReason', before.closeReason, input.closeReason);
    consider('dueAt', before.dueAt, input.dueAt === undefined ? undefined : isoOrNull(input.dueAt));

    let newTags: string[] | undefined;
    if (input.tags !== undefined) {
      const from = before.tags.map((g) => g.id).sort();
      const to = [...await resolveTags(tx, brand.id, input.tags)].sort();
      if (!same(from, to)) {
        changes.push({ field: 'tags', from, to });
        newTags = to;
      }
    }

    if (changes.length) {
      const columns = Object.keys(patch);
      const json = new Set(['links', 'customFields', 'metadata']);
      const snake = (c: string) => c.replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`);
      // Raw on purpose: customFields may be any JSON, a bare string included, which objection's
      // jsonAttributes would not encode; here every JSON column is sent as text and cast to jsonb.
      const sets = columns.map((c) => `${snake(c)} = ?${json.has(c) ? '::jsonb' : ''}`);
      await tx.db.raw(`update tickets set ${[...sets, 'updated_at = now()'].join(', ')}
        where account_id = ? and livemode = ? and brand_id = ? and id = ?`, [...columns.map((c) => patch[c] ?? null) as never[], tx.accountId, tx.livemode, brand.id, locked.id]);
      await audit.record(tx, { brandId: brand.id, ticketId: locked.id, entityType: 'ticket', entityId: locked.id, event: 'ticket.updated', changes, metadata: { ticketNumber: before.ticketNumber, title: title ?? before.title } });
      await events.ticketsUpdated(tx, brand.id, [{ ticketId: locked.id, changes: changes.map((c) => c.field) }]);
      if (newTags) {
        await tx.db('ticket_tags').where({ accountId: tx.accountId, livemode: tx.livemode, brandId: brand.id, ticketId: locked.id }).whereNotIn('tagId', newTags).delete();
        if (newTags.length) {
          await tx.db('ticket_tags').insert(newTags.map((tagId) => ({ accountId: tx.accountId, livemode: tx.livemode, brandId: brand.id, ticketId: locked.id, tagId })))
            .onConflict(['accountId', 'livemode', 'brandId', 'ticketId', 'tagId']).ignore();
        }
      }
    }
    return { ticket: changes.length ? await fetchView(tx, brand.id, locked.id) : before, changes };
  });
  return outcome;
}

/** Soft delete: sets deleted_at; the ticket then vanishes from reads (404) and lists. */
export async function remove(ctx: TenantCtx, brandId: string, ticketId: string): Promise<TicketView> {
  return withTx(ctx, async (tx) => {
    const brand = await brands.requireBrand(tx, brandId);
    const n = await Ticket.scoped(tx).where({ brandId: brand.id, id: ticketId }).whereNull('deletedAt')
      .patch({ deletedAt: objection.raw('now()') as unknown as Date });
    if (!n) throw notFound('Ticket');
    const ticket = await fetchView(tx, brand.id, ticketId, true);
    await audit.record(tx, { brandId: brand.id, ticketId, entityType: 'ticket', entityId: ticketId, event: 'ticket.deleted', metadata: { ticketNumber: ticket.ticketNumber, title: ticket.title } });
    await events.ticketsDeleted(tx, brand.id, [ticketId]);
    return ticket;
  });
}

const PRIORITY_RANK = `(case tickets.priority when 'low' then 1 when 'normal' then 2 when 'medium' then 3 when 'high' then 4 when 'urgent' then 5 else 0 end)`;
/**
 * A filter subquery's scope as bound values, not as columns of the ticket row: PostgreSQL folds
 * `livemode = true` into the bare boolean, which then no longer carries over to the subquery's
 * table, and an index led by (account_id, livemode, brand_id, …) is only usable with all three
 * given. Bound, the tag filter reads ticket_tags by its tag index (a rare tag drives the plan) and
 * the customer email lookup runs once, not per ticket.
 */
const inScope = (ctx: TenantCtx, brandId: string, alias: string) => ({
  sql: `${alias}.account_id = ? and ${alias}.livemode = ? and ${alias}.brand_id = ?`,
  bindings: [ctx.accountId, ctx.livemode, brandId],
});

/**
 * Sort expressions, never NULL (keysetPage compares row values). Each one is, character for
 * character, the expression of an index (migrations 0800 and 1300) followed by the id, so a page
 * at any depth is an index range scan. Timestamps sort as integer microseconds so the cursor keeps
 * their full precision; relation sorts use the related name (lower-cased, '' for none), which
 * triggers keep denormalized on the ticket.
 */
const SORT_SQL: Record<typeof TICKET_SORTS[number], string> = {
  createdAt: 'tickets.id',
  updatedAt: `(extract(epoch from (tickets.updated_at at time zone 'UTC')) * 1000000)::bigint`,
  priority: PRIORITY_RANK,
  ticketNumber: 'tickets.ticket_number',
  title: 'lower(tickets.title)',
  status: 'tickets.status',
  customer: 'tickets.customer_sort',
  company: 'tickets.company_sort',
  assignee: 'tickets.assignee_sort',
  category: 'tickets.category_sort',
  // No due date sorts after every date (the largest bigint), like NULLS LAST ascending.
  dueAt: `coalesce((extract(epoch from (tickets.due_at at time zone 'UTC')) * 1000000)::bigint, 9223372036854775807)`,
};
const MAX_TAG_FILTER = 20;

const commaList = (s: string) => [...new Set(s.split(',').map((v) => v.trim()).filter(Boolean))];

/**
 * The list (spec 4.8). Sentinels: status `active` = open,pending and `all` = none; priority,
 * assigneeId and categoryId `all` = none; assigneeId `unassigned`/`null` and categoryId `null`
 * select the empty column. Spam is excluded unless isSpam is given. One statement per page; the
 * relations come from correlated subqueries evaluated for the page's rows only.
 */
export async function list(ctx: TenantCtx, brandId: string, input: TicketListInput): Promise<Page<TicketView>> {
  const brand = await brands.requireBrand(ctx, brandId);
  const sort = (input.sort ?? 'createdAt') as typeof TICKET_SORTS[number];
  const order = input.order ?? 'desc';
  const q = query(ctx, brand.id).whereNull('tickets.deletedAt');

  let status: string[] | null = null;
  if (input.status !== undefined) {
    const keys = commaList(input.status);
    if (!keys.includes('all')) status = [...new Set(keys.flatMap((k) => (k === 'active' ? ['open', 'pending'] : [k])))].sort();
  }
  if (status) q.whereIn('tickets.status', status);
  const priority = input.priority && input.priority !== 'all' ? input.priority : null;
  if (priority) q.where('tickets.priority', priority);
  let assignee: string | null = null;
  if (input.assigneeId !== undefined && input.assigneeId !== 'all') {
    assignee = input.assigneeId === 'unassigned' || input.assigneeId === 'null' ? 'null' : input.assigneeId;
    if (assignee === 'null') q.whereNull('tickets.assigneeId');
    else q.where('tickets.assigneeId', assignee);
  }
  if (input.customerId) q.where('tickets.customerId', input.customerId);
  const customerEmail = input.customerEmail !== undefined ? normalizeEmail(input.customerEmail) : null;
  if (customerEmail !== null) {
    const scope = inScope(ctx, brand.id, 'c');
    q.whereRaw(`tickets.customer_id = (select c.id from contacts c where ${scope.sql} and c.email = ?)`, [...scope.bindings, customerEmail]);
  }
  if (input.companyId) {
    const scope = inScope(ctx, brand.id, 'c');
    q.whereRaw(`exists (select 1 from contacts c where ${scope.sql} and c.id = tickets.customer_id and c.company_id = ?)`, [...scope.bindings, input.companyId]);
  }
  if (input.createdBy) q.where('tickets.createdBy', input.createdBy);
  const createdAfter = input.createdAfter ? new Date(input.createdAfter).toISOString() : null;
  const createdBefore = input.createdBefore ? new Date(input.createdBefore).toISOString() : null;
  if (createdAfter) q.where('tickets.createdAt', '>', createdAfter);
  if (createdBefore) q.where('tickets.createdAt', '<', createdBefore);
  const hasAttachments = input.hasAttachments ?? null;
  if (hasAttachments !== null) q.where('tickets.attachmentCount', hasAttachments ? '>' : '=', 0);
  const isSpam = input.isSpam ?? false;
  q.where('tickets.isSpam', isSpam);
  let category: string | null = null;
  if (input.categoryId !== undefined && input.categoryId !== 'all') {
    category = input.categoryId;
    if (category === 'null') q.whereNull('tickets.categoryId');
    else q.where('tickets.categoryId', category);
  }
  const tagIds = input.tagIds !== undefined ? commaList(input.tagIds).sort() : null;
  if (tagIds && tagIds.length > MAX_TAG_FILTER) {
    throw badRequest(`tagIds may name at most ${MAX_TAG_FILTER} tags`, [{ field: 'tagIds', message: `must name at most ${MAX_TAG_FILTER} tags` }]);
  }
  for (const [i, tagId] of (tagIds ?? []).entries()) {
    // A join, not EXISTS: (scope, ticket, tag) is ticket_tags' primary key, so a ticket never comes
    // twice, and the planner may walk a rare tag's index in ticket order and stop at the page's end.
    // The link carries its ticket's status and priority (migration 2000): filtered on the link too,
    // a rare tag's index yields only the matching tickets instead of every ticket of the tag.
    const alias = `tt${i}`;
    const scope = inScope(ctx, brand.id, alias);
    const onLink = [`${scope.sql} and ${alias}.tag_id = ? and ${alias}.ticket_id = tickets.id`];
    const bindings: unknown[] = [...scope.bindings, tagId];
    if (status) {
      onLink.push(`${alias}.status in (${status.map(() => '?').join(', ')})`); // one key parses as "=": the index stays in ticket order
      bindings.push(...status);
    }
    if (priority) {
      onLink.push(`${alias}.priority = ?`);
      bindings.push(priority);
    }
    q.joinRaw(`join ticket_tags ${alias} on ${onLink.join(' and ')}`, bindings as never[]);
  }

  const filters = {
    brandId: brand.id, status, priority, assignee, customerId: input.customerId ?? null, customerEmail, companyId: input.companyId ?? null,
    createdBy: input.createdBy ?? null, createdAfter, createdBefore, hasAttachments, isSpam, category, tagIds, sort, order,
  };
  const search = searchText(input.search);
  if (search !== null) {
    q.whereRaw('tickets.search_vector @@ ticketd_search_query(?)', [search]);
    if (input.sort === undefined) return relevancePage(q, () => query(ctx, brand.id), search, input, { ...filters, search, sort: 'relevance', order: 'desc' });
  }

  const sortSql = SORT_SQL[sort];
  q.select(objection.raw(`${sortSql} as sort_key`));
  return keysetPage(q, {
    sort: sortSql,
    id: 'tickets.id',
    order,
    limit: input.limit,
    cursor: input.cursor,
    filters: search === null ? filters : { ...filters, search },
    valueOf: (row) => (row as unknown as { sortKey: string | number }).sortKey,
    toView: (row) => toView(row as Row),
  });
}

/** The search text if it has a letter or digit to look for; otherwise the list is not filtered. */
function searchText(raw: string | undefined): string | null {
  const text = raw?.replace(/\0/g, ' ').trim() ?? ''; // PostgreSQL text cannot hold NUL
  return /[\p{L}\p{N}]/u.test(text) ? text : null;
}

/**
 * How many of the newest matches a relevance-ordered search ranks. Ranking every match of a common
 * word (hundreds of thousands of rows) cannot answer in a few milliseconds, so: the newest
 * SEARCH_RANK_WINDOW matches come first, best ranked first; the older matches follow, newest first.
 * A search with fewer matches is ranked entirely.
 */
export const SEARCH_RANK_WINDOW = 200;
const RANK_SQL = 'ts_rank(tickets.search_vector, ticketd_search_query(?), 1)';

/**
 * A page of search results in relevance order. The window is fixed by the first page: its oldest
 * ticket id (the anchor, '' when every match was ranked) travels in the cursor, so later pages rank
 * the same window and then walk the older matches by id; the cursor position is (rank, id) in the
 * window and (null, id) after it.
 */
async function relevancePage(q: TicketQuery, base: () => TicketQuery, search: string, input: TicketListInput, filters: Record<string, unknown>): Promise<Page<TicketView>> {
  const limit = input.limit ?? PAGE_LIMIT_DEFAULT;
  const rows: { row: Row; key: SortValue }[] = [];
  let anchor = '';
  let position: Position | null = null;
  if (!input.cursor) {
    // One statement: the window (newest matches, found once) ranked, with its anchor on every row.
    const window = q.clone().clearSelect().select('tickets.id').orderBy('tickets.id', 'desc').limit(SEARCH_RANK_WINDOW);
    const found = await base().with('search_window', window)
      .whereRaw('tickets.id in (select id from search_window)')
      .select(objection.raw(`${RANK_SQL} as sort_key`, [search]),
        objection.raw(`(select case when count(*) = ? then min(id) else '' end from search_window) as anchor`, [SEARCH_RANK_WINDOW]))
      .orderByRaw(`${RANK_SQL} desc, tickets.id desc`, [search]).limit(limit + 1) as unknown as (Row & { sortKey: number; anchor: string })[];
    anchor = found[0]?.anchor ?? '';
    rows.push(...found.map((row) => ({ row, key: row.sortKey })));
  } else {
    position = decodeCursor(input.cursor, filters);
    if (position.length !== 3) throw invalidCursor();
    anchor = position[2];
    if (position[0] !== null) {
      const found = await q.clone().where('tickets.id', '>=', anchor)
        .select(objection.raw(`${RANK_SQL} as sort_key`, [search]))
        .whereRaw(`(${RANK_SQL}, tickets.id) < (?, ?)`, [search, position[0], position[1]])
        .orderByRaw(`${RANK_SQL} desc, tickets.id desc`, [search]).limit(limit + 1) as unknown as (Row & { sortKey: number })[];
      rows.push(...found.map((row) => ({ row, key: row.sortKey })));
    }
  }
  if (rows.length <= limit && anchor !== '') {
    const after = !position || position[0] !== null ? anchor : position[1];
    const older = await q.clone().where('tickets.id', '<', after).orderBy('tickets.id', 'desc').limit(limit + 1 - rows.length) as unknown as Row[];
    rows.push(...older.map((row) => ({ row, key: null })));
  }

  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = hasMore && last ? encodeCursor([last.key, last.row.id, anchor], filters) : null;
  return { data: page.map((r) => toView(r.row)), pagination: { cursor: nextCursor, nextCursor, hasMore } };
}
