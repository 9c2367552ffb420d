import type { Knex } from 'knex';
import objection from 'objection';
import { withTx, type TenantCtx } from '../../core/context.js';
import { badRequest, notFound } from '../../core/errors.js';
import { escapeLike, normalizeEmail } from '../../core/text.js';
import * as audit from '../../core/audit.js';
import { requireBrand, visibleBrandId } from '../../core/brand.js';
import * as events from '../../core/outbox/events.js';
import { VIEW_COLUMNS } from './columns.js';
import { Ticket } from './model.js';
import { decodeCursor, encodeCursor, keysetPage, PAGE_LIMIT_DEFAULT, type Page, type Position, type SortValue, invalidCursor } from '../../core/pagination.js';
import { TICKET_SORTS, type TicketListInput, type TicketView } from './schemas.js';
import { BOUND_TENANT, boundToTenant, isoText, sameTenant, tenantIs, tenantScope, preparedRows, columnsToProperties } from '../../core/model.js';
import { updateTickets } from '../../core/ticket-writes.js';
import { countInStatuses, countsByStatus } from './counts.js';

/**
 * Tickets of a brand: create, get, update, soft delete and the list with full-text search.
 * Create, update and merge are flows (server/flows/ticket-*.ts): they span other domains.
 */

export const MAX_CUSTOM_FIELDS_BYTES = 64 * 1024;
export const MAX_CUSTOM_FIELDS_DEPTH = 10;
export const TAG_ID = /^tag_[0-9a-z]{26}$/;

export interface Row extends Ticket {
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
    legalHold: row.legalHold ?? false,
  };
}

/** A ticket row of a raw statement (snake_case columns, VIEW_COLUMNS and relatedColumns) as the response shows it. */
export function viewOfColumns(row: Record<string, unknown>): TicketView {
  return toView(columnsToProperties(row) as Row);
}

/** A given date-time as stored and read back (millisecond ISO, UTC). */
export const isoOrNull = (v: string | null | undefined) => (v == null ? null : new Date(v).toISOString());

export const TICKET_COLUMNS = VIEW_COLUMNS.map((c) => `tickets.${c}`);

/**
 * The related records of a view, as columns over a row named `tickets`. The tag list reads the
 * ticket's links, or (`tagIdsSql`: ticket create, whose own statement cannot see the links it
 * inserts) the brand's tags whose ids that SQL array expression holds; likewise the customer is
 * read from `contactsRelation` (ticket create's CTE holding a contact it creates). `tenant` names
 * the account and mode every table is read in: the ticket row's by default; ticket create gives
 * its bound values, since on Citus a table read beside the rows a statement wrote must name its
 * account itself (those rows are an intermediate result, which carries no shard).
 */
export function relatedColumns(tagIdsSql: string | null, contactsRelation = 'contacts', tenant = { account: 'tickets.account_id', livemode: 'tickets.livemode' }): string {
  const tagRows =
    tagIdsSql === null
      ? `ticket_tags tt join tags tg on ${sameTenant('tg', 'tt')} and tg.brand_id = tt.brand_id and tg.id = tt.tag_id
        where ${tenantIs('tt', tenant)} and tt.brand_id = tickets.brand_id and tt.ticket_id = tickets.id`
      : `tags tg where ${tenantIs('tg', tenant)} and tg.brand_id = tickets.brand_id and tg.id = any(${tagIdsSql})`;
  return `
      (select json_build_object('id', s.id, 'key', s.key, 'name', s.name, 'color', s.color) from statuses s
        where ${tenantIs('s', tenant)} and s.brand_id = tickets.brand_id and s.key = tickets.status) as status_ref,
      (select json_build_object('id', c.id, 'email', c.email, 'name', c.name, 'avatarUrl', c.avatar_url, 'companyId', c.company_id,
          'company', (select json_build_object('id', co.id, 'name', co.name) from companies co
            where ${tenantIs('co', tenant)} and co.brand_id = c.brand_id and co.id = c.company_id))
        from ${contactsRelation} c where ${tenantIs('c', tenant)} and c.brand_id = tickets.brand_id and c.id = tickets.customer_id) as customer,
      (select json_build_object('id', ca.id, 'name', ca.name, 'color', ca.color) from categories ca
        where ${tenantIs('ca', tenant)} and ca.brand_id = tickets.brand_id and ca.id = tickets.category_id) as category,
      coalesce((select json_agg(json_build_object('id', tg.id, 'name', tg.name, 'color', tg.color) order by lower(tg.name), tg.id)
        from ${tagRows}), '[]'::json) as tag_list`;
}

/** relatedColumns for a statement over the tenant's own tickets, their tags read by their links. */
export function relatedByLinks(ctx: TenantCtx): Knex.Raw {
  return boundToTenant(ctx, relatedColumns(null, 'contacts', BOUND_TENANT));
}

/**
 * The view of the ticket row named `tickets` as JSON text, built by PostgreSQL: a column
 * `view_json` holding what toView makes, with the fields in TicketOut's order and the related
 * records read as relatedByLinks reads them. row_to_json writes no blanks; the JSON columns
 * (links, customFields, metadata, sourceData) come as jsonb writes them, the same values.
 * `extra`: more fields after the ticket's, as `, <expression> as "name"` (the cross-brand list's
 * brand), with tenantIs(…, BOUND_TENANT) for its scope. `tagIds`: the tags are these of the
 * brand's, not the links read (a statement that writes the links cannot see them).
 */
export function viewJson(ctx: TenantCtx, extra = '', tagIds?: readonly string[]): Knex.Raw {
  const tenant = BOUND_TENANT;
  const object = (select: string) => `(select row_to_json(r) from (${select}) r)`;
  const tagRows =
    tagIds === undefined
      ? `ticket_tags tt join tags tg on ${sameTenant('tg', 'tt')} and tg.brand_id = tt.brand_id and tg.id = tt.tag_id
          where ${tenantIs('tt', tenant)} and tt.brand_id = tickets.brand_id and tt.ticket_id = tickets.id`
      : `tags tg where ${tenantIs('tg', tenant)} and tg.brand_id = tickets.brand_id and tg.id = any(:tagIds::text[])`;
  return ctx.db.raw(
    `(select row_to_json(v)::text from (select tickets.id as "id", 'ticket' as "object", tickets.brand_id as "brandId", tickets.ticket_number as "ticketNumber",
      tickets.title as "title", tickets.body as "body", tickets.status as "status",
      ${object(`select s.id, s.key, s.name, s.color from statuses s where ${tenantIs('s', tenant)} and s.brand_id = tickets.brand_id and s.key = tickets.status`)} as "statusRef",
      tickets.priority as "priority", tickets.assignee_id as "assigneeId", tickets.created_by as "createdBy", tickets.customer_id as "customerId",
      ${object(`select c.id, c.email, c.name, c.avatar_url as "avatarUrl", c.company_id as "companyId",
          ${object(`select co.id, co.name from companies co where ${tenantIs('co', tenant)} and co.brand_id = c.brand_id and co.id = c.company_id`)} as "company"
        from contacts c where ${tenantIs('c', tenant)} and c.brand_id = tickets.brand_id and c.id = tickets.customer_id`)} as "customer",
      tickets.category_id as "categoryId",
      ${object(`select ca.id, ca.name, ca.color from categories ca where ${tenantIs('ca', tenant)} and ca.brand_id = tickets.brand_id and ca.id = tickets.category_id`)} as "category",
      coalesce((select ('[' || string_agg(row_to_json(r)::text, ',' order by lower(r.name), r.id) || ']')::json
        from (select tg.id, tg.name, tg.color from ${tagRows}) r), '[]'::json) as "tags",
      coalesce(tickets.links, '[]'::jsonb) as "links", tickets.custom_fields as "customFields", coalesce(tickets.metadata, '{}'::jsonb) as "metadata",
      tickets.source as "source", tickets.source_id as "sourceId", tickets.source_data as "sourceData",
      tickets.comment_count as "commentCount", tickets.attachment_count as "attachmentCount", tickets.is_spam as "isSpam",
      ${isoText('tickets.created_at')} as "createdAt", ${isoText('tickets.updated_at')} as "updatedAt", ${isoText('tickets.deleted_at')} as "deletedAt",
      tickets.merged_into_id as "mergedIntoId", tickets.close_reason as "closeReason", ${isoText('tickets.due_at')} as "dueAt",
      tickets.legal_hold as "legalHold"${extra}) v) as view_json`,
    { account: ctx.accountId, livemode: ctx.livemode, ...(tagIds === undefined ? {} : { tagIds: [...tagIds] }) },
  );
}

/**
 * What a list reads of each ticket and gives for it: the full view (for callers that work on the
 * tickets: views, the portal), or the view's JSON text built by PostgreSQL (the list routes, which
 * only send it: no model, no view object, no serializer per row).
 */
export interface TicketShape<V> {
  columns: (ctx: TenantCtx) => (string | Knex.Raw)[];
  of: (row: Record<string, unknown>) => V;
}
export const AS_VIEWS: TicketShape<TicketView> = { columns: (ctx) => [...TICKET_COLUMNS, relatedByLinks(ctx)], of: (row) => toView(row as unknown as Row) };
export const AS_JSON: TicketShape<string> = { columns: (ctx) => ['tickets.id', viewJson(ctx)], of: (row) => row.viewJson as string };

export type TicketQuery = ReturnType<typeof query>;

/** The brand's tickets with every related record, in one statement. */
function query(ctx: TenantCtx, brandId: string, shape: TicketShape<unknown> = AS_VIEWS) {
  return Ticket.scoped(ctx)
    .where('tickets.brandId', brandId)
    .select(...shape.columns(ctx));
}

export async function fetchView(ctx: TenantCtx, brandId: string, ticketId: string, includeDeleted = false): Promise<TicketView> {
  const q = query(ctx, brandId).where('tickets.id', ticketId);
  if (!includeDeleted) q.whereNull('tickets.deletedAt');
  const [row] = await preparedRows<Row>(ctx, q); // at most one: (account, id) is the primary key
  if (!row) throw notFound('Ticket');
  return toView(row);
}

/** The brand's live tickets among `ticketIds`, in id order (missing and deleted ones left out). */
export async function fetchViews(ctx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<TicketView[]> {
  if (!ticketIds.length) return [];
  const q = query(ctx, brandId)
    .whereRaw('tickets.id = any(?::text[])', [[...ticketIds]])
    .whereNull('tickets.deletedAt')
    .orderBy('tickets.id');
  return (await preparedRows<Row>(ctx, q)).map(toView);
}

export async function get(ctx: TenantCtx, brandId: string, ticketId: string): Promise<TicketView> {
  return fetchView(ctx, await visibleBrandId(ctx, brandId), ticketId);
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

export function checkCustomFieldsShape(value: unknown): void {
  if (value === undefined) return;
  if (jsonDepth(value) > MAX_CUSTOM_FIELDS_DEPTH) {
    throw badRequest(
      `customFields may nest at most ${MAX_CUSTOM_FIELDS_DEPTH} levels deep`,
      [{ field: 'customFields', message: `must not nest deeper than ${MAX_CUSTOM_FIELDS_DEPTH} levels` }],
      'custom_fields_too_deep',
    );
  }
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_CUSTOM_FIELDS_BYTES) {
    throw badRequest(
      `customFields may take at most ${MAX_CUSTOM_FIELDS_BYTES} bytes as JSON`,
      [{ field: 'customFields', message: `must be at most ${MAX_CUSTOM_FIELDS_BYTES} bytes as JSON` }],
      'custom_fields_too_large',
    );
  }
}

/** For the brand delete preview: the brand's tickets that are not deleted. */
export async function countForBrand(ctx: TenantCtx, brandId: string): Promise<number> {
  const r = (await Ticket.scoped(ctx).where('brandId', brandId).whereNull('deletedAt').count({ n: '*' }).first()) as unknown as { n: string };
  return Number(r.n);
}

/** Soft delete: sets deleted_at; the ticket then vanishes from reads (404) and lists. */
export async function remove(ctx: TenantCtx, brandId: string, ticketId: string): Promise<TicketView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const [removed] = await updateTickets(tx, brand.id, [ticketId], { deletedAt: tx.db.raw('now()') });
    if (!removed) throw notFound('Ticket');
    const ticket = await fetchView(tx, brand.id, ticketId, true);
    await audit.record(tx, {
      brandId: brand.id,
      ticketId,
      entityType: 'ticket',
      entityId: ticketId,
      event: 'ticket.deleted',
      metadata: { ticketNumber: ticket.ticketNumber, title: ticket.title },
    });
    await events.ticketsDeleted(tx, brand.id, [ticketId]);
    return ticket;
  });
}

const PRIORITY_RANK = `(case tickets.priority when 'low' then 1 when 'normal' then 2 when 'medium' then 3 when 'high' then 4 when 'urgent' then 5 else 0 end)`;
/**
 * The brand a list reads, as SQL: a bound id for the brand list (`?`), the brand of the LATERAL
 * part for the cross-brand list (`b.id`), or the ticket's own brand when one statement reads many.
 */
export interface BrandRef {
  sql: string;
  bindings: unknown[];
  /** The brands as values, where the caller knows them: what a lookup made once per statement is bounded by. */
  ids?: readonly string[];
}
export const boundBrand = (brandId: string): BrandRef => ({ sql: '?', bindings: [brandId], ids: [brandId] });

/**
 * A filter subquery's scope as bound values, not as columns of the ticket row: PostgreSQL folds
 * a livemode test against true into the bare boolean, which then no longer carries over to the subquery's
 * table, and an index led by (account_id, livemode, brand_id, …) is only usable with all three
 * given. Bound, the tag filter reads ticket_tags by its tag index (a rare tag drives the plan) and
 * the customer email lookup runs once, not per ticket.
 */
const inScope = (ctx: TenantCtx, brand: BrandRef, alias: string) => ({
  sql: `? and ${alias}.brand_id = ${brand.sql}`,
  bindings: [tenantScope(ctx, alias), ...brand.bindings],
});

/**
 * Sort expressions, never NULL (keysetPage compares row values). Each one is, character for
 * character, the expression of an index (migrations 0800 and 1300) followed by the id, so a page
 * at any depth is an index range scan. ticketNumber, unique in its brand, reads
 * tickets_number_unique, and the id only orders groups of one row (migration 2300). Timestamps
 * sort as integer microseconds so the cursor keeps their full precision; relation sorts use the
 * related name (lower-cased, '' for none), kept denormalized on the ticket (core/ticket-writes.ts, core/ticket-names.ts).
 */
export const SORT_SQL: Record<(typeof TICKET_SORTS)[number], string> = {
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
/** The sorts whose key is a bigint. */
const BIGINT_SORTS: ReadonlySet<TicketSort> = new Set(['updatedAt', 'dueAt']);
const MAX_TAG_FILTER = 20;

export const commaList = (s: string) => [
  ...new Set(
    s
      .split(',')
      .map((v) => v.trim())
      .filter(Boolean),
  ),
];

/**
 * The list (spec 4.8). Sentinels: status `active` = open,pending and `all` = none; priority,
 * assigneeId and categoryId `all` = none; assigneeId `unassigned`/`null` and categoryId `null`
 * select the empty column. Spam is excluded unless isSpam is given. One statement per page; the
 * relations come from correlated subqueries evaluated for the page's rows only.
 */
export function list(ctx: TenantCtx, brandId: string, input: TicketListInput): Promise<Page<TicketView>> {
  return listAs(ctx, brandId, input, AS_VIEWS);
}

/** The list as the route sends it: each ticket the JSON text of its view (see viewJson). */
export function listJson(ctx: TenantCtx, brandId: string, input: TicketListInput): Promise<Page<string>> {
  return listAs(ctx, brandId, input, AS_JSON);
}

async function listAs<V>(ctx: TenantCtx, brandId: string, input: TicketListInput, shape: TicketShape<V>): Promise<Page<V>> {
  const id = await visibleBrandId(ctx, brandId);
  const q = query(ctx, id, shape);
  const { filters, search, sort, order } = applyFilters(ctx, q, boundBrand(id), input);
  const listed = { brandId: id, ...filters };
  if (search !== null && input.sort === undefined) {
    return relevancePage(q, () => query(ctx, id, shape), search, input, { ...listed, search, sort: 'relevance', order: 'desc' }, shape.of);
  }
  return sortedPage(ctx, q, sort, order, input, search === null ? listed : { ...listed, search }, shape.of);
}

/**
 * One keyset page of q, a ticket query with the list's filters applied, in (sort, id) order: the
 * brand list's read, and the cross-brand list's for a caller who sees every brand.
 */
export function sortedPage<V>(
  ctx: TenantCtx,
  q: TicketQuery,
  sort: TicketSort,
  order: 'asc' | 'desc',
  page: { limit?: number; cursor?: string },
  filters: Record<string, unknown>,
  of: (row: Record<string, unknown>) => V,
): Promise<Page<V>> {
  const sortSql = SORT_SQL[sort];
  // A bigint key as text, as PostgreSQL's client gives it: the JSON rows of Citus (preparedRows) would make it a number, and round it.
  q.select(objection.raw(BIGINT_SORTS.has(sort) ? `(${sortSql})::text as sort_key` : `${sortSql} as sort_key`));
  return keysetPage(q, {
    sort: sortSql,
    id: 'tickets.id',
    order,
    limit: page.limit,
    cursor: page.cursor,
    filters,
    valueOf: (row) => (row as unknown as { sortKey: string | number }).sortKey,
    toView: (row) => of(row as unknown as Record<string, unknown>),
    rowsOf: isUnfiltered(filters) ? (page) => preparedRows(ctx, page) : undefined,
  });
}

/**
 * Whether a list is a brand's (or the brands') plain list in some sort: the page a dashboard polls.
 * Only that one runs prepared. A generic plan, made once for every value, cannot know how rare a
 * tag, a status or a search word is, and the plan of a filtered list depends on just that.
 */
function isUnfiltered(filters: Record<string, unknown>): boolean {
  return Object.entries(filters).every(([name, value]) => ['sort', 'order', 'brandId'].includes(name) || value === null || (name === 'isSpam' && value === false));
}

/** The list's filters alone (no page, sort or order): what an export selects with. */
export type TicketFilterInput = Omit<TicketListInput, 'sort' | 'order' | 'limit' | 'cursor'>;

/**
 * An export's statement: the brand's tickets the list with these filters holds, after the ticket
 * `after` in id (creation) order, with `columns`. The position is the id alone, which never
 * changes: however long an export runs and whatever is written meanwhile, a ticket comes at most
 * once, and one that matches throughout comes. `brandId`: the brand as visibleBrandId gave it.
 * Unfiltered, it runs prepared (its plan is the same for every brand).
 */
async function exportRows<R>(
  ctx: TenantCtx,
  brandId: string,
  input: TicketFilterInput,
  after: string | null,
  shape: TicketShape<unknown>,
  narrow: (q: TicketQuery) => void,
): Promise<R[]> {
  const q = query(ctx, brandId, shape);
  const { filters } = applyFilters(ctx, q, boundBrand(brandId), input);
  if (after !== null) q.where('tickets.id', '>', after);
  q.orderBy('tickets.id', 'asc');
  narrow(q);
  if (isUnfiltered(filters)) return preparedRows<R>(ctx, q);
  const { sql, bindings } = q.toKnexQuery().toSQL();
  return ((await ctx.db.raw(sql, bindings)).rows as Record<string, unknown>[]).map((row) => columnsToProperties(row) as R);
}

const AS_IDS: TicketShape<string> = { columns: () => ['tickets.id'], of: (row) => row.id as string };

/** The ids of an export's next `limit` tickets after `after`: where its pages end (an index scan, no view built). */
export async function exportIds(ctx: TenantCtx, brandId: string, input: TicketFilterInput, after: string | null, limit: number): Promise<string[]> {
  const rows = await exportRows<{ id: string }>(ctx, brandId, input, after, AS_IDS, (q) =>
    // The limit in the text, as keysetPage does: a generic plan then knows how few rows it reads.
    (q as unknown as { limit(n: number, o: { skipBinding: boolean }): void }).limit(limit, { skipBinding: true }),
  );
  return rows.map((r) => r.id);
}

/** One page of an export: its tickets after `after` up to the ticket `through` (an id exportIds gave), each as its view's JSON text (viewJson). */
export async function exportPage(ctx: TenantCtx, brandId: string, input: TicketFilterInput, after: string | null, through: string): Promise<{ id: string; viewJson: string }[]> {
  return exportRows(ctx, brandId, input, after, AS_JSON, (q) => q.where('tickets.id', '<=', through));
}

export type TicketSort = (typeof TICKET_SORTS)[number];
export interface AppliedFilters {
  /** What defines the list for its cursor (without the brand and the search text). */
  filters: Record<string, unknown>;
  search: string | null;
  sort: TicketSort;
  order: 'asc' | 'desc';
}

/** The status keys a status filter selects (`active`: open and pending), sorted; null: every status. */
function statusesOf(filter: string | undefined): string[] | null {
  if (filter === undefined) return null;
  const keys = commaList(filter);
  return keys.includes('all') ? null : [...new Set(keys.flatMap((k) => (k === 'active' ? ['open', 'pending'] : [k])))].sort();
}

/**
 * Adds the list filters of spec 4.8 to q, a query over `tickets` of the brand `brand`: live
 * tickets, spam excluded unless isSpam is given, the search condition when there is text to
 * look for. Shared by the brand list and the cross-brand list.
 */
export function applyFilters(ctx: TenantCtx, q: TicketQuery, brand: BrandRef, input: TicketListInput): AppliedFilters {
  const sort = (input.sort ?? 'createdAt') as TicketSort;
  const order = input.order ?? 'desc';
  q.whereNull('tickets.deletedAt');

  const status = statusesOf(input.status);
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
    const scope = inScope(ctx, brand, 'c');
    q.whereRaw(`tickets.customer_id = (select c.id from contacts c where ${scope.sql} and ${sameTenant('c', 'tickets')} and c.email = ?)`, [...scope.bindings, customerEmail]);
  }
  if (input.companyId) {
    const scope = inScope(ctx, brand, 'c');
    q.whereRaw(`exists (select 1 from contacts c where ${scope.sql} and ${sameTenant('c', 'tickets')} and c.id = tickets.customer_id and c.company_id = ?)`, [
      ...scope.bindings,
      input.companyId,
    ]);
  }
  if (input.createdBy) q.where('tickets.createdBy', input.createdBy);
  const createdAfter = input.createdAfter ? new Date(input.createdAfter).toISOString() : null;
  const createdBefore = input.createdBefore ? new Date(input.createdBefore).toISOString() : null;
  if (createdAfter) q.where('tickets.createdAt', '>', createdAfter);
  if (createdBefore) q.where('tickets.createdAt', '<', createdBefore);
  // On the dueAt sort's own expression, so that sort reads only the range of its index in either order.
  const dueKey = (iso: string) => new Date(iso).getTime() * 1000;
  const overdue = input.overdue ?? null;
  const dueBefore = input.dueBefore ? new Date(input.dueBefore).toISOString() : null;
  const dueAfter = input.dueAfter ? new Date(input.dueAfter).toISOString() : null;
  if (overdue !== null) {
    const now = new Date(ctx.services.now()).toISOString();
    if (overdue) q.whereRaw(`${SORT_SQL.dueAt} < ?`, [dueKey(now)]).whereNull('tickets.resolvedAt');
    else q.where((notOverdue) => notOverdue.whereRaw(`${SORT_SQL.dueAt} >= ?`, [dueKey(now)]).orWhereNotNull('tickets.resolvedAt'));
  }
  if (dueBefore) q.whereRaw(`${SORT_SQL.dueAt} < ?`, [dueKey(dueBefore)]);
  if (dueAfter) q.whereRaw(`${SORT_SQL.dueAt} > ?`, [dueKey(dueAfter)]).whereNotNull('tickets.dueAt');
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
  checkListFilters(input);
  const tagIds = input.tagIds !== undefined ? commaList(input.tagIds).sort() : null;
  for (const [i, tagId] of (tagIds ?? []).entries()) {
    // A join, not EXISTS: (scope, ticket, tag) is ticket_tags' primary key, so a ticket never comes
    // twice, and the planner may walk a rare tag's index in ticket order and stop at the page's end.
    // The link carries its ticket's status and priority (migration 2000): filtered on the link too,
    // a rare tag's index yields only the matching tickets instead of every ticket of the tag.
    const alias = `tt${i}`;
    const scope = inScope(ctx, brand, alias);
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
    q.joinRaw(`join ticket_tags ${alias} on ${sameTenant(alias, 'tickets')} and ${onLink.join(' and ')}`, bindings as never[]);
  }

  const filters = {
    status,
    priority,
    assignee,
    customerId: input.customerId ?? null,
    customerEmail,
    companyId: input.companyId ?? null,
    createdBy: input.createdBy ?? null,
    createdAfter,
    createdBefore,
    hasAttachments,
    overdue,
    dueBefore,
    dueAfter,
    isSpam,
    category,
    tagIds,
    sort,
    order,
  };
  const search = searchText(input.search);
  if (search !== null) matchSearch(ctx, q, brand, search);
  return { filters, search, sort, order };
}

/**
 * The search condition (decision 0100). Words: every one must match, the last as a prefix. Text
 * that looks like an email (emailPrefixOf): its words whole, or a customer whose email starts with
 * it, read from contacts_email_prefix (index only) within the list's brands. The customers come
 * twice: as an array, read once, that probes tickets_customer_idx (a bitmap OR-ed with the
 * full-text index's, for a rare match), and as a hashed set a row is checked against when the
 * plan walks the tickets instead (a common one): PostgreSQL searches an array that is not a
 * constant one element after another, for every row. A ticket's customer is a contact of its
 * own brand (tickets_customer_fk).
 */
function matchSearch(ctx: TenantCtx, q: TicketQuery, brand: BrandRef, search: string): void {
  const email = emailPrefixOf(search);
  if (email === null) {
    q.whereRaw(`tickets.search_vector @@ ${wordsQuery(search)}`, [search]);
    return;
  }
  const brands = brand.ids === undefined ? null : brand.ids.length === 1 ? boundBrand(brand.ids[0]!) : { sql: 'any(?::text[])', bindings: [brand.ids] };
  const scope = brands === null ? { sql: '?', bindings: [tenantScope(ctx, 'c')] } : inScope(ctx, brands, 'c');
  const customers = `select c.id from contacts c where ${scope.sql} and c.email like ?`;
  const bindings = [...scope.bindings, `${escapeLike(email)}%`];
  q.whereRaw(`(tickets.search_vector @@ ${wordsQuery(search)} or (tickets.customer_id in (${customers}) and tickets.customer_id = any(array(${customers}))))`, [
    search,
    ...bindings,
    ...bindings,
  ]);
}

/** The longest text taken for an email (RFC 5321 allows 254 characters in a path). */
const MAX_EMAIL_SEARCH = 254;
/** One token with a single `@` after something: an email, or its start. */
const EMAIL_START = /^[^\s@]+@[^\s@]*$/u;
/** A local part as typed: runs of letters and digits joined by single `.`, `_`, `+` or `-`. */
const LOCAL_PART = /^[\p{L}\p{N}]+(?:[._+-][\p{L}\p{N}]+)*[._+-]?$/u;

/**
 * The start of an email a search text looks like, lower-cased as contacts keep emails; null for any
 * other text. Email-like: one token of at most 254 characters that either holds one `@` after
 * something (`ann.lee1@`, `ann.lee1@company2.ex`), or has the shape of a local part with a `.`,
 * `_` or `+` in it (`ann.lee1`, `john_doe`, `jane+billing`). A hyphen alone does not make one:
 * hyphenated words are common in prose.
 */
export function emailPrefixOf(search: string): string | null {
  if (search.length > MAX_EMAIL_SEARCH) return null;
  if (EMAIL_START.test(search) || (LOCAL_PART.test(search) && /[._+]/.test(search))) return normalizeEmail(search);
  return null;
}

/**
 * The search's words as a tsquery, with `?` for the search text: the last word a prefix, or every
 * word whole for an email-like text, whose last word as a prefix (`lee1:*` of `ann.lee1`) would
 * gather every indexed word starting so before anything is intersected.
 */
function wordsQuery(search: string): string {
  return emailPrefixOf(search) === null ? 'ticketd_search_query(?)' : 'ticketd_search_words(?)';
}

/** What the list's schema cannot say of its filters (400 naming the field, after `prefix`). */
export function checkListFilters(input: Pick<TicketListInput, 'tagIds'>, prefix = ''): void {
  if (input.tagIds !== undefined && commaList(input.tagIds).length > MAX_TAG_FILTER) {
    throw badRequest(`${prefix}tagIds may name at most ${MAX_TAG_FILTER} tags`, [{ field: `${prefix}tagIds`, message: `must name at most ${MAX_TAG_FILTER} tags` }]);
  }
}

/**
 * Whether the list with these filters is counted from the brand's kept counts (counts.ts): a filter
 * on status alone, spam left out. Those hold the live, non-spam tickets of each status as every
 * ticket write commits: exact, and a few rows to read whatever the brand's size.
 */
export function countedFromRollUps(input: TicketListInput): boolean {
  return Object.entries(input).every(([name, value]) => name === 'status' || (name === 'isSpam' && value === false) || ['sort', 'order', 'limit', 'cursor'].includes(name));
}

/**
 * How many tickets of the brand the list with these filters holds: the list's own conditions,
 * counted; a list on status alone from the brand's kept counts by status (`byStatus`, read once by
 * a caller counting several lists, else here).
 */
export async function countMatching(ctx: TenantCtx, brandId: string, input: TicketListInput, byStatus?: ReadonlyMap<string, number>): Promise<number> {
  if (countedFromRollUps(input)) return countInStatuses(byStatus ?? (await countsByStatus(ctx, brandId)), statusesOf(input.status));
  const q = Ticket.scoped(ctx).where('tickets.brandId', brandId);
  applyFilters(ctx, q, boundBrand(brandId), input);
  const row = (await q.count({ n: '*' }).first()) as unknown as { n: string };
  return Number(row.n);
}

/** The search text if it has a letter or digit to look for; otherwise the list is not filtered. */
export function searchText(raw: string | undefined): string | null {
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
const rankSql = (search: string) => `ts_rank(tickets.search_vector, ${wordsQuery(search)}, 1)`;

/**
 * A page of search results in relevance order. The window is fixed by the first page: its oldest
 * ticket id (the anchor, '' when every match was ranked) travels in the cursor, so later pages rank
 * the same window and then walk the older matches by id; the cursor position is (rank, id) in the
 * window and (null, id) after it.
 */
export async function relevancePage<V>(
  q: TicketQuery,
  base: () => TicketQuery,
  search: string,
  input: TicketListInput,
  filters: Record<string, unknown>,
  of: (row: Record<string, unknown>) => V,
): Promise<Page<V>> {
  const limit = input.limit ?? PAGE_LIMIT_DEFAULT;
  const rank = rankSql(search);
  const rows: { row: Row; key: SortValue }[] = [];
  let anchor = '';
  let position: Position | null = null;
  if (!input.cursor) {
    // One statement: the window (newest matches, found once) ranked, with its anchor on every row.
    const window = q.clone().clearSelect().select('tickets.id').orderBy('tickets.id', 'desc').limit(SEARCH_RANK_WINDOW);
    const found = (await base()
      .with('search_window', window)
      .whereRaw('tickets.id in (select id from search_window)')
      .select(
        objection.raw(`${rank} as sort_key`, [search]),
        objection.raw(`(select case when count(*) = ? then min(id) else '' end from search_window) as anchor`, [SEARCH_RANK_WINDOW]),
      )
      .orderByRaw(`${rank} desc, tickets.id desc`, [search])
      .limit(limit + 1)) as unknown as (Row & { sortKey: number; anchor: string })[];
    anchor = found[0]?.anchor ?? '';
    rows.push(...found.map((row) => ({ row, key: row.sortKey })));
  } else {
    position = decodeCursor(input.cursor, filters);
    if (position.length !== 3) throw invalidCursor();
    anchor = position[2];
    if (position[0] !== null) {
      const found = (await q
        .clone()
        .where('tickets.id', '>=', anchor)
        .select(objection.raw(`${rank} as sort_key`, [search]))
        .whereRaw(`(${rank}, tickets.id) < (?, ?)`, [search, position[0], position[1]])
        .orderByRaw(`${rank} desc, tickets.id desc`, [search])
        .limit(limit + 1)) as unknown as (Row & { sortKey: number })[];
      rows.push(...found.map((row) => ({ row, key: row.sortKey })));
    }
  }
  if (rows.length <= limit && anchor !== '') {
    const after = !position || position[0] !== null ? anchor : position[1];
    const older = (await q
      .clone()
      .where('tickets.id', '<', after)
      .orderBy('tickets.id', 'desc')
      .limit(limit + 1 - rows.length)) as unknown as Row[];
    rows.push(...older.map((row) => ({ row, key: null })));
  }

  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = hasMore && last ? encodeCursor([last.key, last.row.id, anchor], filters) : null;
  return { data: page.map((r) => of(r.row as unknown as Record<string, unknown>)), pagination: { cursor: nextCursor, nextCursor, hasMore } };
}

/**
 * A live ticket of the brand (404 otherwise: deleted, unknown, another brand, account or mode),
 * for the ticket's parts (watchers, …). The brand must already have been checked.
 */
export async function requireTicket(ctx: TenantCtx, brandId: string, ticketId: string): Promise<Ticket> {
  const row = await Ticket.scoped(ctx)
    .where({ 'tickets.brandId': brandId, 'tickets.id': ticketId })
    .whereNull('tickets.deletedAt')
    .select('tickets.id', 'tickets.ticketNumber', 'tickets.title')
    .first();
  if (!row) throw notFound('Ticket');
  return row;
}
