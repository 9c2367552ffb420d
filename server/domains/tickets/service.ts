import type { Knex } from 'knex';
import objection from 'objection';
import { canSeeBrand, withTx, type TenantCtx } from '../../core/context.js';
import { prepared } from '../../core/db.js';
import { batcher } from '../../core/batcher.js';
import { badRequest, HttpError, notFound } from '../../core/errors.js';
import { newId, normalizeBrandId, ID_PREFIX } from '../../core/ids.js';
import { canonicalJson, claim as claimIdempotencyKey, claimRowsStatement, requestFingerprint } from '../../core/idempotency.js';
import { emailDomain, foldText, isEmail, normalizeEmail } from '../../core/text.js';
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
  const ticket = hasFieldSchema(brandKey) ? null : await createInOneStatement(ctx, id, title, email, input, idempotency);
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

/** One ticket for writeStatement to create, with what its request asked for. */
interface TicketWrite {
  ctx: TenantCtx;
  id: string;
  brandId: string;
  title: string;
  email: string | null;
  /** The id a new customer contact would take. */
  contactId: string;
  input: CreateTicketInput;
  /** Tag ids (each must be the brand's) and lower-cased names (each must exist). */
  tagIds: readonly string[];
  tagNames: readonly string[];
  idempotency?: { key: string; fingerprint: string };
  attachmentCount: number;
  /** Its custom fields were validated against the brand's schema (step by step); else the brand must have none. */
  fieldsChecked: boolean;
  /** Audit rows made before the statement (so their ids order them before later entries). */
  contactEntry: Record<string, unknown>[];
  ticketEntry: Record<string, unknown>[];
}

function ticketWrite(ctx: TenantCtx, brandId: string, title: string, email: string | null, input: CreateTicketInput, given: {
  id?: string; tagIds: readonly string[]; tagNames: readonly string[]; idempotency?: { key: string; fingerprint: string }; attachmentCount?: number; fieldsChecked?: boolean;
}): TicketWrite {
  const id = given.id ?? newId(ID_PREFIX.ticket);
  const contactId = newId(ID_PREFIX.contact);
  return {
    ctx, id, brandId, title, email, contactId, input, tagIds: given.tagIds, tagNames: given.tagNames, idempotency: given.idempotency,
    attachmentCount: given.attachmentCount ?? 0, fieldsChecked: given.fieldsChecked ?? false,
    contactEntry: email ? contacts.createdEntryRows(ctx, brandId, contactId, email) : [],
    ticketEntry: audit.entryRows(ctx, [{ brandId, ticketId: id, entityType: 'ticket', entityId: id, event: 'ticket.created', metadata: { title } }]),
  };
}

/** A write's row of the statement's `items` relation (jsonb_to_recordset); `contactId`: the id its new customer would take. */
function itemOf(w: TicketWrite, ord: number, contactId: string | null) {
  const { input } = w;
  return {
    ord, id: w.id, brand_id: w.brandId, title: w.title, body: input.body ?? null, status: input.status ?? 'open', priority: input.priority ?? null,
    assignee_id: input.assigneeId ?? null, created_by: input.createdBy ?? null, category_id: input.categoryId ?? null,
    links: input.links ?? [], custom_fields: input.customFields ?? null, metadata: input.metadata ?? {}, source: input.source ?? 'api',
    source_id: input.sourceId ?? null, source_data: input.sourceData ?? null, close_reason: input.closeReason ?? null, due_at: isoOrNull(input.dueAt),
    attachment_count: w.attachmentCount, tag_ids: w.tagIds, tag_names: w.tagNames, fields_checked: w.fieldsChecked,
    key: w.idempotency?.key ?? null, fingerprint: w.idempotency?.fingerprint ?? null,
    email: w.email, email_domain: w.email ? emailDomain(w.email) : null, blocked_domains: w.email ? blockedSources.blockedDomainsOf(w.email) : [],
    contact_id: contactId, customer_name: input.customerName ?? null, customer_name_key: foldText(input.customerName ?? ''),
  };
}

const ITEM_COLUMNS = `ord int, id text, brand_id text, title text, body text, status text, priority text, assignee_id text, created_by text,
  category_id text, links jsonb, custom_fields jsonb, metadata jsonb, source text, source_id text, source_data jsonb, close_reason text,
  due_at timestamptz, attachment_count int, tag_ids text[], tag_names text[], fields_checked boolean, key text, fingerprint text,
  email text, email_domain text, blocked_domains text[], contact_id text, customer_name text, customer_name_key text`;

/**
 * THE statement that creates tickets, for a batch of creates (the usual ones, grouped by
 * createInOneStatement) or for one (the last step of createStepByStep, in its transaction). Per
 * create, in order:
 *   1. checks: the brand (visible; no ticket schema or field rules unless fieldsChecked), the
 *      status, category, assignee, and every tag by id or lower-cased name;
 *   2. its idempotency key claimed (keys are distinct within a batch);
 *   3. its customer contact found or made (with its contact.created entry);
 *   4. only then the brand counters (the rows locked in id order, so two batches cannot deadlock),
 *      bumped once per brand; the tickets numbered in batch order; nothing under those locks waits
 *      on another create;
 *   5. the ticket (spam if the sender is blocked) with its derived columns filled here rather
 *      than by the per-row trigger (migration 2200), its tag links, its ticket.created entry and
 *      webhook deliveries.
 * Returns each created ticket as the response shows it, with its `ord`; a create that failed a
 * check, or whose key was taken, is absent and wrote nothing.
 */
function writeStatement(ctx: TenantCtx, writes: readonly TicketWrite[]): Knex.Raw {
  // Every create of the batch naming one email makes (at most) one contact: the first one's.
  const emailKey = (w: TicketWrite) => `${w.brandId} ${w.email}`;
  const contactIds = new Map<string, string>();
  for (const w of writes) if (w.email && !contactIds.has(emailKey(w))) contactIds.set(emailKey(w), w.contactId);
  const items = writes.map((w, ord) => itemOf(w, ord, w.email ? contactIds.get(emailKey(w))! : null));
  const contactEntries = writes.filter((w) => w.email && contactIds.get(emailKey(w)) === w.contactId).flatMap((w) => w.contactEntry);
  const scope = [ctx.accountId, ctx.livemode];
  const claim = claimRowsStatement(ctx, { sql: 'select i.key, i.fingerprint, i.id as resource_id from items i join checks c on c.ord = i.ord where c.ok and i.key is not null', bindings: [] });
  const contactCtes = contacts.findOrCreateManyCtes(ctx, 'items', 'r.ord in (select ord from go)', contactEntries);
  const blocked = blockedSources.isBlockedSql(ctx, 'r.brand_id', 'r.email', 'r.blocked_domains');
  const entry = audit.insertRowsStatement(writes.flatMap((w) => w.ticketEntry), { sql: 'exists (select 1 from t where t.id = entry.entity_id)', bindings: [] });
  const announced = events.ticketsCreated(ctx, writes.map((w) => ({ brandId: w.brandId, ticketId: w.id })), 't', 'customer');
  const sql = `
    with items as materialized (
      select * from jsonb_to_recordset(?::jsonb) as i(${ITEM_COLUMNS})
    ), given_tags as materialized (
      select i.ord, tg.id, lower(tg.name) as name_key from items i
      join tags tg on tg.account_id = ? and tg.livemode = ? and tg.brand_id = i.brand_id and (tg.id = any(i.tag_ids) or lower(tg.name) = any(i.tag_names))
    ), checks as materialized (
      select i.ord, exists (select 1 from brands b where b.account_id = ? and b.livemode = ? and b.id = i.brand_id
            and (i.fields_checked or (b.ticket_schema is null and jsonb_array_length(coalesce(b.field_rules -> 'ticket', '[]'::jsonb)) = 0)))
        and exists (select 1 from statuses s where s.account_id = ? and s.livemode = ? and s.brand_id = i.brand_id and s.key = i.status)
        and (i.category_id is null or exists (select 1 from categories ca where ca.account_id = ? and ca.livemode = ? and ca.brand_id = i.brand_id and ca.id = i.category_id))
        and (i.assignee_id is null or exists (select 1 from members m where m.account_id = ? and m.id = i.assignee_id))
        and i.tag_ids <@ (select coalesce(array_agg(g.id), '{}') from given_tags g where g.ord = i.ord)
        and i.tag_names <@ (select coalesce(array_agg(g.name_key), '{}') from given_tags g where g.ord = i.ord) as ok
      from items i
    ), claim as (${claim.sql}
    ), go as materialized (
      select i.ord from items i join checks c on c.ord = i.ord where c.ok and (i.key is null or i.key in (select key from claim))
    ), ${contactCtes.sql}, ready as materialized (
      select r.*, c.id as customer_id,
        coalesce(ticketd_person_sort(c.name, c.email), '') as customer_sort, coalesce(ticketd_person_text(c.name, c.email), '') as customer_text,
        coalesce((select lower(co.name) from companies co where co.account_id = ? and co.livemode = ? and co.brand_id = c.brand_id and co.id = c.company_id), '') as company_sort,
        coalesce((select ticketd_person_sort(m.name, m.email) from members m where m.account_id = ? and m.id = r.assignee_id), '') as assignee_sort,
        coalesce((select lower(ca.name) from categories ca where ca.account_id = ? and ca.livemode = ? and ca.brand_id = r.brand_id and ca.id = r.category_id), '') as category_sort
      from items r left join customer c on c.brand_id = r.brand_id and c.email = r.email
      where r.ord in (select ord from go) and (r.email is null or c.id is not null)
    ), locked as materialized (
      select b.id from brands b where b.account_id = ? and b.livemode = ? and b.id in (select brand_id from ready) order by b.id for no key update
    ), n as (
      update brands b set next_ticket_number = b.next_ticket_number + counted.n
      from (select brand_id, count(*) as n from ready group by brand_id) counted
      where b.account_id = ? and b.livemode = ? and b.id = counted.brand_id and b.id in (select id from locked)
      returning b.id as brand_id, b.next_ticket_number - counted.n as first
    ), t as (
      insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, assignee_id, created_by,
        customer_id, category_id, links, custom_fields, metadata, source, source_id, source_data, is_spam, close_reason, due_at, attachment_count,
        customer_sort, customer_text, company_sort, assignee_sort, category_sort, search_vector)
      select r.id, ?, ?, r.brand_id, n.first + row_number() over (partition by r.brand_id order by r.ord) - 1, r.title, r.body, r.status, r.priority,
        r.assignee_id, r.created_by, r.customer_id, r.category_id, coalesce(r.links, '[]'), r.custom_fields, coalesce(r.metadata, '{}'), r.source,
        r.source_id, r.source_data, r.email is not null and ${blocked.sql}, r.close_reason, r.due_at, r.attachment_count,
        r.customer_sort, r.customer_text, r.company_sort, r.assignee_sort, r.category_sort, ticketd_ticket_vector(r.title, r.customer_text, r.body)
      from ready r join n on n.brand_id = r.brand_id
      returning ${VIEW_COLUMNS.join(', ')}
    ), tt as (
      insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority)
      select t.account_id, t.livemode, t.brand_id, t.id, g.id, t.status, t.priority from t join items i on i.id = t.id join given_tags g on g.ord = i.ord
    ), entry as (${entry.sql}
    ), announced as (${announced.sql}
    )
    select i.ord, tickets.*, ${relatedColumns('array(select g.id from given_tags g where g.ord = i.ord)', 'customer')}
    from t as tickets join items i on i.id = tickets.id`;
  return ctx.db.raw(sql, [
    JSON.stringify(items), ...scope, ...scope, ...scope, ...scope, ctx.accountId,
    ...claim.bindings, ...contactCtes.bindings, ...scope, ctx.accountId, ...scope, ...scope, ...scope, ...scope, ...blocked.bindings,
    ...entry.bindings, ...announced.bindings,
  ] as never[]);
}

/** The created tickets by their write's position; absent: that create wrote nothing. */
async function runWrites(ctx: TenantCtx, writes: readonly TicketWrite[]): Promise<(TicketView | null)[]> {
  const result = await prepared(ctx.db, writeStatement(ctx, writes)) as unknown as { rows: (Record<string, unknown> & { ord: number })[] };
  const views: (TicketView | null)[] = writes.map(() => null);
  for (const { ord, ...row } of result.rows) views[ord] = toView(columnsToProperties(row) as Row);
  return views;
}

/**
 * Group commit for the usual creates: while a batch of them runs, the next creates of the same
 * account and mode wait, and then go together as ONE statement, one commit: the statement's fixed
 * cost (about half of a lone create's database time) and the brand row locks are paid once per
 * batch. A lone create goes at once. A batch that fails as a whole (a deadlock with another
 * process, a row deleted under it) answers null for each create, which then goes step by step.
 *
 * Two batches run at once: while one statement keeps a database core busy (or waits for its
 * commit to reach the disk), the other uses the second. The second starts only with at least as
 * many creates as the running one holds, and never with a brand the running one writes (it would
 * wait for that brand's row lock): a brand's creates wait and go together in the next batch. On 2
 * cores, 16 brands at concurrency 16 (harness, 20k tickets): ~615 creates/s in batches of about 6,
 * where two lanes split by brand hash made ~515/s in batches of about 4.
 */
const CREATE_BATCHES_AT_ONCE = 2;
const MAX_CREATE_BATCH = 32;
/** A batch runs on its first create's connection pool: creates sent to other pools (tests run several apps in one process) never share one. */
const databaseNumbers = new WeakMap<Knex, number>();
let databasesSeen = 0;
function databaseNumber(db: Knex): number {
  let n = databaseNumbers.get(db);
  if (n === undefined) databaseNumbers.set(db, n = ++databasesSeen);
  return n;
}
const createBatches = batcher<TicketWrite, TicketView | null>(
  async (writes) => runWrites(writes[0]!.ctx, writes).catch((err: unknown) => {
    // The callers still get their tickets (step by step); the log says group commit failed.
    writes[0]!.ctx.log?.warn({ err, creates: writes.length }, 'a batch of ticket creates failed as a whole: each goes step by step');
    return writes.map(() => null);
  }),
  { maxSize: MAX_CREATE_BATCH, concurrency: CREATE_BATCHES_AT_ONCE, exclusive: (w) => w.idempotency?.key ?? null, affinity: (w) => w.brandId },
);

/**
 * The usual create, as one statement committed on its own (batched with concurrent creates), or
 * inside the caller's transaction (inbound mail) alone: one round trip. When a check fails, a tag
 * is new or the key is taken, nothing is written and it returns null: the step-by-step create
 * then gives the precise answer (a 400 or 404, new tags, the replay). Watchers and pending
 * attachments always go step by step.
 */
async function createInOneStatement(ctx: TenantCtx, brandId: string, title: string, email: string | null, input: CreateTicketInput,
  idempotency: { key: string; fingerprint: string } | undefined): Promise<TicketView | null> {
  if (input.watchers?.length || input.attachmentIds?.length) return null;
  const given = input.tags ?? [];
  const tagIds = [...new Set(given.filter((t) => TAG_ID.test(t)))];
  const tagNames = [...new Set(given.filter((t) => !TAG_ID.test(t)).map((t) => t.trim().toLowerCase()))];
  if (tagNames.some((n) => !n || n.length > tags.MAX_TAG_NAME_LENGTH)) return null;
  const w = ticketWrite(ctx, brandId, title, email, input, { tagIds, tagNames, idempotency });
  if (ctx.db.isTransaction) return (await runWrites(ctx, [w]))[0]!;
  return createBatches(`${databaseNumber(ctx.db)}:${ctx.accountId}:${ctx.livemode}`, w);
}

/**
 * The create for everything else, in one transaction:
 *   1. claim the idempotency key (if any): INSERT … ON CONFLICT; a concurrent request with the
 *      same key blocks on the uncommitted row and then sees the committed ticket;
 *   2. every check and every side write (status, category, assignee, custom fields against the
 *      brand's schema, new tags, the customer contact, attachments, watchers): none of them locks
 *      the brand row (watcher rows and linked attachments reference the ticket through deferred
 *      foreign keys, checked at commit);
 *   3. LAST, writeStatement for this one create (everything it checks now holds); the commit
 *      follows at once, so the brand row lock is held for that statement and the commit. A failed
 *      create rolls the counter back with everything else: numbers have no gaps.
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
    if (input.categoryId) {
      await asFieldError('categoryId', 'invalid_category', `categoryId ${input.categoryId} is not a category of this brand`, () => categories.requireCategory(tx, brand.id, input.categoryId!));
    }
    if (input.assigneeId) await assertAssignee(tx, input.assigneeId);
    await fields.validateCustomFields(tx, brand.id, input.customFields);

    const tagIds = await resolveTags(tx, brand.id, input.tags ?? []);
    if (email) await contacts.findOrCreateByEmail(tx, brand.id, email, input.customerName ?? null);
    const attachmentCount = await attachments.linkPending(tx, brand.id, id, input.attachmentIds ?? []);
    // Its entry is made (and so ordered) before the watchers' entries, though written by the last statement.
    const w = ticketWrite(tx, brand.id, title, email, input, { id, tagIds: [...tagIds], tagNames: [], attachmentCount, fieldsChecked: true });
    if (input.watchers?.length) await watchers.addToNewTicket(tx, brand.id, id, input.watchers);

    const [ticket] = await runWrites(tx, [w]);
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
 * at any depth is an index range scan. ticketNumber, unique in its brand, reads
 * tickets_number_unique, and the id only orders groups of one row (migration 2300). Timestamps
 * sort as integer microseconds so the cursor keeps their full precision; relation sorts use the
 * related name (lower-cased, '' for none), which triggers keep denormalized on the ticket.
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
