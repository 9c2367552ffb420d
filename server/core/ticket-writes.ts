import type { Knex } from 'knex';
import type { TenantCtx } from './context.js';
import { accountScope, sameAccount, sameTenant, tenantScope } from './model.js';
import { runInAccount } from './citus.js';
import { announces } from './outbox/service.js';
import type { SqlFragment } from './db.js';

/**
 * Every UPDATE of tickets that sets their status, priority, spam flag, deletion, assignee, category,
 * title or body goes through updateTickets, and every link of a tag to tickets through linkTags.
 * What database triggers used to keep up to date as tickets change is written by the same
 * statement, because Citus runs no trigger on a distributed table (decision 0090):
 * - resolved_at: set when the status becomes resolved or closed, cleared when it leaves them;
 * - status_changed_at: set when the status changes (automations count hours from it);
 * - the sort keys and search vector of an assignee, a category, a title or a body set;
 * - ticket_count_changes: what the rows written contribute to the counts now minus before
 *   (the roll-up in server/domains/tickets/counts.ts; migration 20261125020000 defines the sums);
 * - ticket_tags' copy of the status and priority (the tag filters read it);
 * - a rating request scheduled when a ticket with a customer is resolved (the old one cancelled);
 * - the allowance's adjustment when a live-mode ticket is marked or unmarked as spam (a second
 *   statement, adjustUsage).
 * Each part is in the statement only when the columns set can change it. Every table is named
 * with the tenant's account and mode, so on Citus the statement stays on the account's shards.
 */

/** The columns of tickets that callers set, by their model names. */
export type TicketSet = Partial<
  Record<
    | 'status'
    | 'priority'
    | 'isSpam'
    | 'deletedAt'
    | 'assigneeId'
    | 'categoryId'
    | 'title'
    | 'body'
    | 'closeReason'
    | 'mergedIntoId'
    | 'commentCount'
    | 'updatedAt'
    | 'dueAt'
    | 'dueAtManual'
    | 'slaPausedAt'
    | 'slaPausedSeconds'
    | 'overdueAt'
    | 'links'
    | 'customFields'
    | 'metadata'
    | 'lastCustomerMessageAt'
    | 'lastAgentReplyAt'
    | 'legalHold',
    unknown
  >
>;

/** Sent as JSON text cast to jsonb: customFields may be any JSON, a bare string included. */
const JSON_COLUMNS: readonly string[] = ['links', 'customFields', 'metadata'];
const snake = (c: string) => c.replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`);
const snakeKeys = (values: object) => Object.fromEntries(Object.entries(values).map(([k, v]) => [snake(k), v]));
const DONE = `('resolved', 'closed')`;

/** What a counted ticket contributes to ticket_count_changes, times sign: the migration's definition. */
const contributions = (rows: string, sign: 1 | -1) => `
  select r.account_id, r.livemode, r.brand_id, c.day, r.status,
    ${sign} * c.created as created, ${sign} * c.resolved as resolved, ${sign} * c.seconds as resolution_seconds
  from ${rows} r cross join lateral (values
    ((r.created_at at time zone 'UTC')::date, 1, 0, 0::numeric),
    ((r.resolved_at at time zone 'UTC')::date, 0, 1, extract(epoch from r.resolved_at - r.created_at))
  ) as c (day, created, resolved, seconds)
  where r.deleted_at is null and not r.is_spam and c.day is not null`;

/**
 * The counts CTE of a statement whose written rows are `after` and whose rows before are `before`
 * (either may be absent). Each row's id is drawn from the column's own sequence by name: on Citus
 * a statement run on a worker's shards (core/citus.ts runInAccount) writes a shard, which has no
 * identity of its own.
 */
export function countChangesSql(parts: { after?: string; before?: string }): string {
  const sums = [parts.after && contributions(parts.after, 1), parts.before && contributions(parts.before, -1)].filter(Boolean);
  return `insert into ticket_count_changes (id, account_id, livemode, brand_id, day, status, created, resolved, resolution_seconds) overriding system value
    select nextval('ticket_count_changes_id_seq'), account_id, livemode, brand_id, day, status, sum(created), sum(resolved), sum(resolution_seconds)
    from (${sums.join(' union all ')}) as d
    group by account_id, livemode, brand_id, day, status
    having sum(created) <> 0 or sum(resolved) <> 0 or sum(resolution_seconds) <> 0`;
}

/**
 * resolved_at of a row written with status `status` (an SQL expression); `was`, the row's status
 * and resolved_at before and the transaction's time (absent for an insert): kept while the ticket
 * stays resolved or closed.
 */
export function resolvedAtSql(status: string, was?: { status: string; resolvedAt: string; now: string }): string {
  if (!was) return `case when ${status} in ${DONE} then now() end`;
  return `case when ${status} not in ${DONE} then null when ${was.status} in ${DONE} then ${was.resolvedAt} else ${was.now} end`;
}

/**
 * Sets `set` on the brand's live tickets `ids` (missing and deleted ones are skipped) with
 * everything that follows from it, and returns the ids written. The rows are locked first, in id order.
 */
export async function updateTickets(tx: TenantCtx, brandId: string, ids: readonly string[], set: TicketSet): Promise<string[]> {
  const parts = ticketUpdateParts(tx, brandId, ids, set);
  if (!parts) return [];
  // created_at: a Date on one server, an ISO string on Citus (runInAccount's rows are JSON there).
  const rows = await runInAccount<{ id: string; created_at: Date | string; is_spam: boolean; was_spam: boolean }>(
    tx,
    tx.db.raw(
      `with ${parts.sql}
    select a.id, a.created_at, a.is_spam, b.is_spam as was_spam from a join b on b.id = a.id`,
      parts.bindings as Knex.RawBinding[],
    ),
  );
  if (set.isSpam !== undefined && tx.livemode)
    await adjustUsage(
      tx,
      rows.filter((r) => r.is_spam !== r.was_spam),
    );
  return rows.map((r) => r.id);
}

/** What a statement that folds updateTickets' CTEs into its own write asks of them. */
export interface UpdatePartsOptions {
  /** ANDed to the selection of `b` (a condition on `t`, the ticket): false, nothing is written. */
  guard?: SqlFragment;
  /** `a` returns every column of the rows written (for their view), not only those the CTEs read. */
  wholeRows?: boolean;
  /** The statement replaces the tickets' tag links with these: only their copies of the status and priority are updated. */
  keptTagIds?: readonly string[];
  /**
   * A condition ANDed to the write of `a`, read after `b` has locked its rows, and perhaps a CTE
   * (`name as (…)`) between `b` and `a` that it reads: a claim of the request's idempotency key,
   * made only when `b` holds a row, the write only when the claim was made; or "b locked every
   * ticket asked for", so a set is written whole or not at all.
   */
  gate?: { cte?: SqlFragment; writeWhen: SqlFragment };
  /**
   * Clock columns whose values differ by ticket (each status change moves its own service-level
   * clock), by ticket id; a column a ticket's values lack keeps its value.
   */
  perTicket?: ReadonlyMap<string, Partial<Record<PerTicketColumn, unknown>>>;
}

/** The columns UpdatePartsOptions.perTicket may set. */
export type PerTicketColumn = 'dueAt' | 'dueAtManual' | 'slaPausedAt' | 'slaPausedSeconds' | 'overdueAt';

/**
 * updateTickets' CTEs (`b`: the rows before, locked; `a`: the rows written; then what follows),
 * for a statement that also makes the change they are part of (a comment:
 * flows/comment-create-statement.ts; a ticket update: flows/ticket-update-statement.ts). Not for
 * isSpam (its allowance adjustment is a statement of its own). Null: nothing to set.
 */
export function ticketUpdateParts(tx: TenantCtx, brandId: string, ids: readonly string[], set: TicketSet, options: UpdatePartsOptions = {}): SqlFragment | null {
  const { guard, keptTagIds, gate, perTicket } = options;
  const columns = Object.keys(set).filter((c) => set[c as keyof TicketSet] !== undefined) as (keyof TicketSet)[];
  if (!ids.length || !columns.length) return null;
  const sets: string[] = [];
  const bindings: Knex.RawBinding[] = [];
  const value = (c: keyof TicketSet) => {
    const v = set[c];
    if (JSON_COLUMNS.includes(c) && v !== null && !isRaw(v)) return { sql: '?::jsonb', bindings: [JSON.stringify(v)] as Knex.RawBinding[] };
    return { sql: '?', bindings: [(v ?? null) as Knex.RawBinding] };
  };
  for (const c of columns) {
    const v = value(c);
    sets.push(`${snake(c)} = ${v.sql}`);
    bindings.push(...v.bindings);
  }
  // Each ticket's own values, typed in `b` (a row of tickets made from its JSON) and set where given.
  const own = perTicket?.size ? JSON.stringify(Object.fromEntries([...perTicket].map(([id, values]) => [id, snakeKeys(values)]))) : null;
  if (perTicket) {
    for (const c of new Set([...perTicket.values()].flatMap((values) => Object.keys(values)))) {
      const column = snake(c);
      sets.push(`${column} = case when jsonb_exists(b.own_set, '${column}') then (b.own).${column} else t.${column} end`);
    }
  }
  const has = (c: keyof TicketSet) => columns.includes(c);
  // Derived columns read the value given, bound once more (the SET list sees the row before).
  const given = (c: keyof TicketSet) => {
    const v = value(c);
    bindings.push(...v.bindings);
    return v.sql;
  };
  // now() read in `b`: Citus refuses a STABLE function in a CASE of an UPDATE.
  if (has('status')) {
    sets.push(`resolved_at = ${resolvedAtSql(`${given('status')}::text`, { status: 'b.status', resolvedAt: 't.resolved_at', now: 'b.now' })}`);
    sets.push(`status_changed_at = case when ${given('status')}::text is distinct from b.status then b.now else t.status_changed_at end`);
  }
  if (has('assigneeId')) {
    sets.push(`assignee_sort = coalesce((select ticketd_person_sort(m.name, m.email) from members m
      where ${sameAccount('m', 't')} and m.id = ${given('assigneeId')}::text), '')`);
  }
  if (has('categoryId')) {
    sets.push(`category_sort = coalesce((select lower(ca.name) from categories ca
      where ${sameTenant('ca', 't')} and ca.brand_id = t.brand_id and ca.id = ${given('categoryId')}::text), '')`);
  }
  if (has('title') || has('body')) {
    const title = has('title') ? `${given('title')}::text` : 't.title';
    const body = has('body') ? `${given('body')}::text` : 't.body';
    sets.push(`search_vector = ticketd_ticket_vector(${title}, t.customer_text, ${body})`);
  }

  const counted = has('status') || has('isSpam') || has('deletedAt');
  const effects: string[] = [];
  const effectBindings: Knex.RawBinding[] = [];
  if (counted) effects.push(`counts as (${countChangesSql({ after: 'a', before: 'b' })})`);
  if (has('status') || has('priority')) {
    effects.push(`tag_copies as (update ticket_tags tt set status = a.status, priority = a.priority
      from a join b on b.id = a.id
      where ? and tt.brand_id = a.brand_id and tt.ticket_id = a.id${keptTagIds ? ' and tt.tag_id = any(?::text[])' : ''}
        and (a.status is distinct from b.status or a.priority is distinct from b.priority))`);
    effectBindings.push(tenantScope(tx, 'tt'), ...(keptTagIds ? [[...keptTagIds]] : []));
  }
  if (has('status') && announces(tx)) {
    // A customer's ticket newly resolved: the rating request before is cancelled, one scheduled
    // (not for history an import writes: it asks no customer anything).
    const resolvedNow = `a.status = 'resolved' and b.status not in ${DONE} and a.customer_id is not null and not a.is_spam and a.deleted_at is null`;
    effects.push(`feedback_cancelled as (update ticket_feedback f set status = 'cancelled'
      from a join b on b.id = a.id
      where ? and f.brand_id = a.brand_id and f.ticket_id = a.id and f.status in ('scheduled', 'sent') and ${resolvedNow})`);
    effects.push(`feedback_scheduled as (insert into ticket_feedback (account_id, livemode, brand_id, id, ticket_id, contact_id, resolver_id, rating_type, send_at)
      select a.account_id, a.livemode, a.brand_id, ticketd_new_id('fb'), a.id, a.customer_id, a.assignee_id, br.csat_type,
        now() + make_interval(mins => br.csat_delay_minutes)
      from a join b on b.id = a.id join brands br on ${sameTenant('br', 'a')} and br.id = a.brand_id
      where br.csat_enabled and ${resolvedNow})`);
    effectBindings.push(tenantScope(tx, 'f'));
  }
  return {
    sql: `b as (
      select t.id, t.brand_id, t.account_id, t.livemode, t.status, t.priority, t.is_spam, t.deleted_at, t.resolved_at, t.created_at, now() as now${
        own ? ', ?::jsonb -> t.id as own_set, jsonb_populate_record(null::tickets, ?::jsonb -> t.id) as own' : ''
      }
      from tickets t where ? and t.brand_id = ? and t.id = any(?::text[]) and t.deleted_at is null${guard ? ` and ${guard.sql}` : ''} order by t.id for update
    ),${gate?.cte ? ` ${gate.cte.sql},` : ''} a as (
      update tickets t set ${sets.join(', ')}
      from b where ? and t.brand_id = ? and t.id = b.id${gate ? ` and ${gate.writeWhen.sql}` : ''}
      returning ${
        options.wholeRows
          ? 't.*'
          : `t.id, t.brand_id, t.account_id, t.livemode, t.status, t.priority, t.is_spam, t.deleted_at, t.resolved_at, t.created_at,
        t.customer_id, t.assignee_id, t.ticket_number, t.title, t.source, t.updated_at, t.due_at`
      }
    )${effects.map((e) => `, ${e}`).join('')}`,
    bindings: [
      ...(own ? [own, own] : []),
      tenantScope(tx, 't'),
      brandId,
      [...ids],
      ...((guard?.bindings ?? []) as Knex.RawBinding[]),
      ...((gate?.cte?.bindings ?? []) as Knex.RawBinding[]),
      ...bindings,
      tenantScope(tx, 't'),
      brandId,
      ...((gate?.writeWhen.bindings ?? []) as Knex.RawBinding[]),
      ...effectBindings,
    ],
  };
}

/**
 * Live-mode tickets marked spam (-1) or unmarked (+1) after they were counted: the adjustment of
 * the allowance's period each was created in (the latest begun by its creation). The account's
 * periods are read first (a few rows), so the update names its rows: on Citus it stays on the
 * account's worker.
 */
async function adjustUsage(tx: TenantCtx, flipped: readonly { created_at: Date | string; is_spam: boolean }[]): Promise<void> {
  if (!flipped.length) return;
  const periods = (
    await tx.db.raw<{ rows: { period_start: Date }[] }>('select u.period_start from ticket_usage u where ? order by u.period_start desc', [accountScope(tx, 'u')])
  ).rows.map((p) => p.period_start);
  const deltas = new Map<number, number>();
  for (const t of flipped) {
    const created = new Date(t.created_at).getTime();
    const period = periods.find((p) => p.getTime() <= created);
    if (period) deltas.set(period.getTime(), (deltas.get(period.getTime()) ?? 0) + (t.is_spam ? -1 : 1));
  }
  if (!deltas.size) return;
  await tx.db.raw(
    `update ticket_usage p set adjustment = p.adjustment + d.delta
    from unnest(?::timestamptz[], ?::int[]) as d (period_start, delta)
    where ? and p.period_start = d.period_start`,
    [[...deltas.keys()].map((ms) => new Date(ms)), [...deltas.values()], accountScope(tx, 'p')],
  );
}

/**
 * Links each of the brand's tickets `ticketIds` to each tag `tagIds` not linked yet, with the
 * copy of the ticket's status and priority the tag filters read.
 */
export function linkTags(tx: TenantCtx, brandId: string, ticketIds: readonly string[], tagIds: readonly string[]): Promise<void> {
  return linkEachTags(
    tx,
    brandId,
    ticketIds.map((ticketId) => ({ ticketId, tagIds })),
  );
}

/** linkTags for tickets each with its own tags, in one statement. */
export async function linkEachTags(tx: TenantCtx, brandId: string, links: readonly { ticketId: string; tagIds: readonly string[] }[]): Promise<void> {
  const pairs = links.flatMap((l) => l.tagIds.map((tagId) => [l.ticketId, tagId] as const));
  if (!pairs.length) return;
  await tx.db.raw(
    `insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority)
    select t.account_id, t.livemode, t.brand_id, t.id, g.tag_id, t.status, t.priority
    from tickets t join unnest(?::text[], ?::text[]) as g (ticket_id, tag_id) on g.ticket_id = t.id
    where ? and t.brand_id = ?
    on conflict do nothing`,
    [pairs.map((p) => p[0]), pairs.map((p) => p[1]), tenantScope(tx, 't'), brandId],
  );
}

function isRaw(v: unknown): v is Knex.Raw {
  return typeof v === 'object' && v !== null && 'toSQL' in v;
}
