import type { Knex } from 'knex';
import objection from 'objection';
import { canSeeBrand, type TenantCtx } from '../../core/context.js';
import { Brand } from '../../core/brand.js';
import { badRequest, notFound } from '../../core/errors.js';
import { normalizeBrandId } from '../../core/ids.js';
import { accountScope, BOUND_TENANT, tenantIs, tenantScope } from '../../core/model.js';
import { decodeCursor, encodeCursor, PAGE_LIMIT_DEFAULT, type Page } from '../../core/pagination.js';
import { countsOf } from './counts.js';
import { Ticket } from './model.js';
import { applyFilters, commaList, relevancePage, searchText, sortedPage, SORT_SQL, viewJson, type BrandRef, type TicketQuery } from './service.js';
import {
  DEFAULT_RANGE_DAYS,
  MAX_BRAND_FILTER,
  MAX_RANGE_DAYS,
  type CrossBrandListInput,
  type StatsInput,
  type StatsView,
  type TeamMetricsInput,
  type TeamMetricsView,
  type TrendsInput,
  type TrendsView,
} from './dashboard-schemas.js';

/**
 * The cross-brand dashboard (spec 4.9): the ticket list over every brand the caller may see, and
 * the counts behind the dashboard's stats, trends and team pages. Which brands the caller sees is
 * ctx.brandScope alone (an API key's brand scope; a member's brand assignments map onto it).
 */

interface BrandSummary {
  id: string;
  name: string;
  slug: string;
  ticketPrefix: string | null;
  iconUrl: string | null;
}

/**
 * The brands a dashboard call reads: those named in brandIds/workspaceIds, else every brand the
 * caller may see, in id order. A named brand the caller may not see (outside the key's scope,
 * another account's, the other mode's, unknown) is a 404, as it is on every brand route.
 */
async function brandsOf(ctx: TenantCtx, input: { brandIds?: string; workspaceIds?: string }): Promise<{ brands: BrandSummary[]; named: string[] | null }> {
  const named = namedBrands(ctx, input);
  const q = Brand.scoped(ctx).select('id', 'name', 'slug', 'ticketPrefix', 'iconUrl').orderBy('id');
  if (named) q.whereIn('id', named);
  else if (!ctx.brandScope.allBrands) q.whereIn('id', [...ctx.brandScope.brandIds]);
  const rows = await q;
  if (named && rows.length !== named.length) throw notFound('Brand');
  return { brands: rows.map((b) => ({ id: b.id, name: b.name, slug: b.slug, ticketPrefix: b.ticketPrefix ?? null, iconUrl: b.iconUrl ?? null })), named };
}

/** The brands named in brandIds/workspaceIds, sorted; null when none is named. 400 for a bad list, 404 for a brand out of the caller's reach. */
function namedBrands(ctx: TenantCtx, input: { brandIds?: string; workspaceIds?: string }): string[] | null {
  const given = [input.brandIds, input.workspaceIds].filter((v): v is string => v !== undefined);
  const named = given.length ? [...new Set(given.flatMap(commaList).map(normalizeBrandId))].sort() : null;
  if (named && named.length > MAX_BRAND_FILTER) {
    throw badRequest(`brandIds may name at most ${MAX_BRAND_FILTER} brands`, [{ field: 'brandIds', message: `must name at most ${MAX_BRAND_FILTER} brands` }]);
  }
  if (named && named.length === 0) throw badRequest('brandIds names no brand', [{ field: 'brandIds', message: 'must name at least one brand id' }]);
  if (named?.some((id) => !canSeeBrand(ctx.brandScope, id))) throw notFound('Brand');
  return named;
}

/**
 * Each ticket's view as JSON text with its brand as the dashboard shows it, the last field
 * (`brand`), read with the page: DashboardTicketOut, built by PostgreSQL (viewJson).
 */
function viewWithBrand(ctx: TenantCtx): Knex.Raw {
  return viewJson(
    ctx,
    `, (select row_to_json(r) from (select b.id, b.name, b.slug, b.ticket_prefix as "ticketPrefix", b.icon_url as "iconUrl"
      from brands b where ${tenantIs('b', BOUND_TENANT)} and b.id = tickets.brand_id) r) as "brand"`,
  );
}

const viewJsonOf = (row: Record<string, unknown>) => row.viewJson as string;

/** The brand of each LATERAL part: `unnest(…) as b (id)`. */
const LATERAL_BRAND: BrandRef = { sql: 'b.id', bindings: [] };
/** One statement over several brands (search): each ticket's own brand. */
const OWN_BRAND: BrandRef = { sql: 'tickets.brand_id', bindings: [] };

const EMPTY_PAGE = { data: [], pagination: { cursor: null, nextCursor: null, hasMore: false } };

/**
 * GET /v1/tickets: the brand list's filters and sorts over many brands, one keyset cursor, each
 * ticket's brand read with the page (no read of the brands first).
 *
 * A caller who sees every brand and names none reads one range of the account-wide sort indexes.
 * Otherwise, without search, PostgreSQL never sorts every match: each brand's part is its own LATERAL
 * subquery, the brand list's query with the brand bound to the part (`brand_id = b.id`), so it is
 * a range scan of that brand's index for the sort, read from the cursor's position and stopped
 * after a few rows (see merged). The cursor is the last row's (sort value, id), which every
 * part continues after. With search the matches come from the full-text index, which is not per
 * brand: one statement over all the brands, ordered like the brand list's search (relevance, or
 * the sort asked).
 */
export async function listAcrossBrands(ctx: TenantCtx, input: CrossBrandListInput): Promise<Page<string>> {
  const named = namedBrands(ctx, input);
  const limit = input.limit ?? PAGE_LIMIT_DEFAULT;
  const listInput = { ...input, brandIds: undefined, workspaceIds: undefined, source: undefined };
  const extra = { brandIds: named, source: input.source ?? null };

  /** The brand list's filters and `source` on q; what the cursor is bound to. */
  const filter = (q: TicketQuery, brand: BrandRef) => {
    const applied = applyFilters(ctx, q, brand, listInput);
    if (input.source) q.where('tickets.source', input.source);
    return { ...applied, filters: { ...applied.filters, ...extra } };
  };

  const search = searchText(input.search);
  // Every brand of the account: one range of its account-wide index, each ticket's brand read with
  // the page (one statement, like the brand list's), never the brands first.
  if (search === null && named === null && ctx.brandScope.allBrands) {
    const q = Ticket.scoped(ctx).select('tickets.id', viewWithBrand(ctx));
    const applied = filter(q, OWN_BRAND);
    return sortedPage(ctx, q, applied.sort, applied.order, { limit, cursor: input.cursor }, applied.filters, viewJsonOf);
  }

  if (search === null) {
    // The brands named, else those the caller may see: a LATERAL part each, their brands read with the page.
    const brandIds = named ?? [...ctx.brandScope.brandIds].sort();
    if (brandIds.length === 0) return EMPTY_PAGE;
    const part = Ticket.scoped(ctx)
      .whereRaw('tickets.brand_id = b.id')
      .select(...MATCH_COLUMNS);
    const applied = filter(part, LATERAL_BRAND);
    return merged(ctx, part, applied.sort, applied.order, limit, input.cursor, applied.filters, { lateralBrands: brandIds, mustFind: named });
  }

  // Search: the full-text index is not per brand, so one statement over the brands.
  const { brands } = await brandsOf(ctx, input);
  const brandIds = brands.map((b) => b.id);
  if (brandIds.length === 0) return EMPTY_PAGE;
  const searched: BrandRef = { ...OWN_BRAND, ids: brandIds };
  const base = () => Ticket.scoped(ctx).whereIn('tickets.brandId', brandIds).select('tickets.id', viewWithBrand(ctx));
  if (input.sort === undefined) {
    const q = base();
    const { filters } = filter(q, searched);
    return relevancePage(q, base, search, listInput, { ...filters, search, sort: 'relevance', order: 'desc' }, viewJsonOf);
  }
  const q = Ticket.scoped(ctx)
    .whereIn('tickets.brandId', brandIds)
    .select(...MATCH_COLUMNS);
  const applied = filter(q, searched);
  return merged(ctx, q, applied.sort, applied.order, limit, input.cursor, { ...applied.filters, search }, { lateralBrands: null, mustFind: null });
}

/**
 * What a match carries until the page is cut: its key and sort value only. With the brand list's
 * partial sort indexes (live, non-spam tickets, key and id in the index) a part is then a short
 * index range; the page's rows are read whole afterwards, with their related records.
 */
const MATCH_COLUMNS = ['tickets.id', 'tickets.brand_id'];

/**
 * One page of q in (sort, id) order: q per brand in LATERAL parts when lateralBrands is given, else
 * q itself; then the page's tickets with the related records (customer, category, tags, status)
 * and their brands. mustFind: brands the caller named, each of which must exist (else 404),
 * checked in the same statement.
 */
async function merged(
  ctx: TenantCtx,
  q: TicketQuery,
  sort: keyof typeof SORT_SQL,
  order: 'asc' | 'desc',
  limit: number,
  cursor: string | undefined,
  filters: Record<string, unknown>,
  brands: { lateralBrands: string[] | null; mustFind: string[] | null },
): Promise<Page<string>> {
  const { lateralBrands, mustFind } = brands;
  const sortSql = SORT_SQL[sort];
  const direction = order === 'asc' ? 'asc' : 'desc';
  q.select(objection.raw(`${sortSql} as sort_key`));
  if (cursor) {
    const [value, id] = decodeCursor(cursor, filters);
    q.whereRaw(`(${sortSql}, tickets.id) ${direction === 'asc' ? '>' : '<'} (?, ?)`, [value, id]);
  }
  q.orderByRaw(`${sortSql} ${direction}, tickets.id ${direction}`);

  /**
   * The first limit + 1 matches, read whole, in one statement; perBrand bounds each LATERAL part (limit + 1, without parts: never cut short).
   * cut_short: a part came back full (it may hold more rows) yet its last row is before the
   * window's last, so its next rows might belong in the page.
   */
  const read = async (perBrand: number) => {
    const matches = lateralBrands
      ? ctx.db.raw('select p.* from unnest(?::text[]) as b (id) cross join lateral (?) as p', [lateralBrands, q.clone().limit(perBrand).toKnexQuery()])
      : q
          .clone()
          .limit(limit + 1)
          .toKnexQuery();
    const result = await ctx.db.raw(
      `with m as (select p.*, row_number() over (order by p.sort_key ${direction}, p.id ${direction}) as pos from (?) as p),
       cut_short as (select 1 from m group by m.brand_id having count(*) = ? and max(m.pos) <= ?)
       select tickets.id, ?, m.sort_key, exists (select 1 from cut_short) as cut_short,
         ${mustFind ? '(select count(*) from brands nb where ? and nb.id = any(?::text[]))::int' : 'null'} as brands_found
       from m join tickets on ? and tickets.brand_id = m.brand_id and tickets.id = m.id
       where m.pos <= ? order by m.pos`,
      [matches, perBrand, limit, viewWithBrand(ctx), ...(mustFind ? [tenantScope(ctx, 'nb'), mustFind] : []), tenantScope(ctx, 'tickets'), limit + 1],
    );
    return (result as { rows: Record<string, unknown>[] }).rows;
  };
  // A page rarely draws more than a few rows from each brand, so each part first reads three fair
  // shares and two more (11 of 51 with twenty brands: a page of random brands needs more in under
  // 0.1% of pages), and reads again with limit + 1 rows, which is always enough, only when that
  // window was cut short (as when one brand holds most of the newest tickets).
  const share = lateralBrands ? Math.min(limit + 1, 3 * Math.ceil((limit + 1) / lateralBrands.length) + 2) : limit + 1;
  let window = await read(share);
  if (window[0]?.cut_short) window = await read(limit + 1);
  if (mustFind) {
    const found = window.length ? (window[0]!.brands_found as number) : await Brand.scoped(ctx).whereIn('id', mustFind).resultSize();
    if (found !== mustFind.length) throw notFound('Brand');
  }

  const hasMore = window.length > limit;
  const page = window.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = hasMore && last ? encodeCursor([last.sort_key as string | number, last.id as string], filters) : null;
  return { data: page.map((row) => row.view_json as string), pagination: { cursor: nextCursor, nextCursor, hasMore } };
}

/** Live, non-spam tickets of the given brands: what team metrics count, and what the counts stats and trends read are kept of (counts.ts). */
const COUNTED = (ctx: TenantCtx, brandIds: string[]) => ({
  sql: '? and t.brand_id = any(?::text[]) and t.deleted_at is null and not t.is_spam',
  bindings: [tenantScope(ctx, 't'), brandIds],
});

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const utcDay = (value: string, field: string): number => {
  const ms = Date.parse(value.length === 10 ? `${value}T00:00:00Z` : value);
  if (Number.isNaN(ms)) throw badRequest(`${field} is not a date`, [{ field, message: 'must be a date (YYYY-MM-DD) or a date-time' }]);
  return Math.floor(ms / DAY_MS) * DAY_MS;
};

/** The UTC days counted, first and last included, from `days` or startDate/endDate (default: the last 30 days). */
function period(input: { days?: number; startDate?: string; endDate?: string }, now: number): { start: number; end: number } {
  if (input.days !== undefined && (input.startDate !== undefined || input.endDate !== undefined)) {
    throw badRequest('Give days or startDate/endDate, not both', [{ field: 'days', message: 'must not be given with startDate or endDate' }]);
  }
  const today = Math.floor(now / DAY_MS) * DAY_MS;
  if (input.startDate === undefined && input.endDate === undefined) return { start: today - ((input.days ?? DEFAULT_RANGE_DAYS) - 1) * DAY_MS, end: today };
  const end = input.endDate !== undefined ? utcDay(input.endDate, 'endDate') : today;
  const start = input.startDate !== undefined ? utcDay(input.startDate, 'startDate') : end - (DEFAULT_RANGE_DAYS - 1) * DAY_MS;
  if (start > end) throw badRequest('startDate is after endDate', [{ field: 'startDate', message: 'must not be after endDate' }]);
  if ((end - start) / DAY_MS + 1 > MAX_RANGE_DAYS) {
    throw badRequest(`The period may span at most ${MAX_RANGE_DAYS} days`, [{ field: 'startDate', message: `must be at most ${MAX_RANGE_DAYS} days before endDate` }]);
  }
  return { start, end };
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * GET /v1/tickets/stats: counts by status and by brand, and the resolution time, from the counts
 * kept per brand, day and status (counts.ts): with `days`, tickets created since the period's
 * first day, and resolutions since then. One statement: the per-status rows and the whole's.
 */
export async function stats(ctx: TenantCtx, input: StatsInput): Promise<StatsView> {
  const { brands } = await brandsOf(ctx, input);
  const from = input.days !== undefined ? dayOf(period({ days: input.days }, ctx.services.now()).start) : undefined;
  const counts = countsOf(
    ctx,
    brands.map((b) => b.id),
    { from },
  );
  // Resolution minutes as avg() over the tickets made them: the sum of seconds (numeric, exact)
  // over the count, then /60, rounded.
  const result = await ctx.db.raw(
    `select c.brand_id, c.status, coalesce(sum(c.created), 0)::int as created, coalesce(sum(c.resolved), 0)::int as resolved,
       round(sum(c.resolution_seconds) / nullif(sum(c.resolved), 0) / 60)::int as minutes, grouping(c.brand_id) = 1 as whole
     from ? as c group by grouping sets ((c.brand_id, c.status), ()) order by c.brand_id, c.status`,
    [counts],
  );
  const view: StatsView = {
    total: 0,
    open: 0,
    pending: 0,
    resolved: 0,
    closed: 0,
    byStatus: {},
    byBrand: Object.fromEntries(brands.map((b) => [b.id, { name: b.name, prefix: b.ticketPrefix, total: 0, open: 0, pending: 0, resolved: 0, closed: 0 }])),
    responseMetrics: { avgFirstResponseMinutes: null, avgResolutionMinutes: null, ticketsWithResponse: 0, ticketsResolved: 0 },
  };
  type Row = { brand_id: string; status: string; created: number; resolved: number; minutes: number | null; whole: boolean };
  for (const row of (result as { rows: Row[] }).rows) {
    if (row.whole) {
      view.responseMetrics.ticketsResolved = row.resolved;
      view.responseMetrics.avgResolutionMinutes = row.minutes;
      continue;
    }
    // A key whose tickets all moved on (another status, deleted) counts none: no entry, as no ticket.
    const n = row.created;
    if (n === 0) continue;
    const brand = view.byBrand[row.brand_id]!;
    const status = row.status;
    view.total += n;
    brand.total += n;
    view.byStatus[status] = (view.byStatus[status] ?? 0) + n;
    if (status === 'open' || status === 'pending' || status === 'resolved' || status === 'closed') {
      view[status] += n;
      brand[status] += n;
    }
  }
  return view;
}

/** GET /v1/tickets/trends: tickets created and resolved per UTC day, every day of the period, from the counts kept (counts.ts). */
export async function trends(ctx: TenantCtx, input: TrendsInput): Promise<TrendsView> {
  const { brands } = await brandsOf(ctx, input);
  const { start, end } = period(input, ctx.services.now());
  const counts = countsOf(
    ctx,
    brands.map((b) => b.id),
    { from: dayOf(start), to: dayOf(end) },
  );
  const result = await ctx.db.raw(
    `with per_day as (select c.day, sum(c.created)::int as created, sum(c.resolved)::int as resolved from ? as c group by c.day)
     select to_char(d.day, 'YYYY-MM-DD') as date, coalesce(p.created, 0) as created, coalesce(p.resolved, 0) as resolved
     from generate_series(?::date, ?::date, interval '1 day') as g (ts)
     cross join lateral (select g.ts::date as day) as d
     left join per_day p on p.day = d.day
     order by d.day`,
    [counts, dayOf(start), dayOf(end)],
  );
  return { data: (result as { rows: TrendsView['data'] }).rows, period: { start: dayOf(start), end: dayOf(end) } };
}

/**
 * A positive satisfaction rating: thumbs up, or the top fifth of a scale (4 and 5 of 5, 8 to 10 of
 * 10). The one place the rule is written (docs/decisions/0056).
 */
const POSITIVE_RATING = `case f.rating_type when 'thumbs' then f.rating = 1 when 'scale5' then f.rating >= 4 else f.rating >= 8 end`;

/**
 * GET /v1/tickets/team-metrics: per active member of the account, the tickets assigned to them
 * that were resolved or closed in the period (by resolved_at, the ticket's status now telling
 * which), and the satisfaction ratings submitted in the period for resolutions credited to them
 * (the assignee when the ticket was resolved): how many, how many positive, and the positive share
 * in percent (null without ratings); and the SLA attainment of those resolutions, per member and for
 * the whole team (unassigned tickets included): of those that had a dueAt, how many came by it.
 */
export async function teamMetrics(ctx: TenantCtx, input: TeamMetricsInput): Promise<TeamMetricsView> {
  const { brands } = await brandsOf(ctx, input);
  const { start, end } = period(input, ctx.services.now());
  const counted = COUNTED(
    ctx,
    brands.map((b) => b.id),
  );
  const result = await ctx.db.raw(
    `with done as (
       select t.assignee_id, count(*) filter (where t.status = 'resolved')::int as resolved, count(*) filter (where t.status = 'closed')::int as closed,
         count(t.due_at)::int as sla_tracked, count(*) filter (where t.resolved_at <= t.due_at)::int as sla_met
       from tickets t where ${counted.sql} and t.resolved_at >= ? and t.resolved_at < ? group by t.assignee_id),
     rated as (
       select f.resolver_id, count(*)::int as ratings, count(*) filter (where ${POSITIVE_RATING})::int as positive
       from ticket_feedback f where ? and f.brand_id = any(?::text[]) and f.status = 'rated' and f.submitted_at >= ? and f.submitted_at < ? and f.resolver_id is not null
       group by f.resolver_id)
     select m.id, m.email, m.name, coalesce(d.resolved, 0) as resolved, coalesce(d.closed, 0) as closed, coalesce(r.ratings, 0) as ratings, coalesce(r.positive, 0) as positive,
       coalesce(d.sla_tracked, 0) as "slaTracked", coalesce(d.sla_met, 0) as "slaMet", team.sla_tracked as "teamSlaTracked", team.sla_met as "teamSlaMet"
     from members m left join done d on d.assignee_id = m.id left join rated r on r.resolver_id = m.id
     cross join (select coalesce(sum(sla_tracked), 0)::int as sla_tracked, coalesce(sum(sla_met), 0)::int as sla_met from done) team
     where ? and m.status = 'active'
     order by coalesce(d.resolved, 0) + coalesce(d.closed, 0) desc, m.id`,
    [...counted.bindings, iso(start), iso(end + DAY_MS), tenantScope(ctx, 'f'), brands.map((b) => b.id), iso(start), iso(end + DAY_MS), accountScope(ctx, 'm')],
  );
  type Row = { id: string; email: string | null; name: string | null; resolved: number; closed: number; ratings: number; positive: number };
  type SlaRow = { slaTracked: number; slaMet: number; teamSlaTracked: number; teamSlaMet: number };
  const rows = (result as { rows: (Row & SlaRow)[] }).rows;
  return {
    members: rows.map((m) => ({
      memberId: m.id,
      memberEmail: m.email,
      memberName: m.name,
      ticketsResolved: m.resolved,
      ticketsClosed: m.closed,
      csatCount: m.ratings,
      csatPositive: m.positive,
      csatScore: m.ratings ? Math.round((100 * m.positive) / m.ratings) : null,
      ...attainment(m.slaTracked, m.slaMet),
    })),
    sla: attainment(rows[0]?.teamSlaTracked ?? 0, rows[0]?.teamSlaMet ?? 0),
    period: { start: dayOf(start), end: dayOf(end) },
  };
}

/** SLA attainment: the share of resolutions with a dueAt that came at or before it. */
function attainment(tracked: number, met: number) {
  return { slaTracked: tracked, slaMet: met, slaAttainment: tracked ? Math.round((100 * met) / tracked) : null };
}
