import type { Knex } from 'knex';
import type { AuditFact, Change } from '../core/audit.js';
import * as audit from '../core/audit.js';
import { Brand } from '../core/brand.js';
import { onCitus, runInAccount } from '../core/citus.js';
import { canSeeBrand, type TenantCtx } from '../core/context.js';
import type { SqlFragment } from '../core/db.js';
import { normalizeBrandId } from '../core/ids.js';
import { accountScope, columnsToProperties, sameAccount, sameTenant, tenantScope } from '../core/model.js';
import * as events from '../core/outbox/events.js';
import { eventsInsert, outboxAdded, wakeDispatchersJoin, type EventSpec } from '../core/outbox/service.js';
import { ticketUpdateParts, type PerTicketColumn, type TicketSet } from '../core/ticket-writes.js';
import type { BulkInput, BulkOutcome } from '../domains/tickets/actions-schemas.js';
import { clockMoveOf, type Clock } from '../domains/tickets/service-level.js';
import { checked, namedChecks, tagIdsOf, tagLinkParts, tagsNamed, versionSql } from './ticket-update-statement.js';

/**
 * A bulk action (POST /tickets/bulk) in two statements and no transaction, as a PATCH is
 * (decision 0117): one reads what the action is computed from (the brand, each live ticket named
 * with its version, clock and tags, whether the assignee or category set exists, the tags named),
 * the process plans each ticket's change (the fields that differ, the clock a status moves, the
 * audit entry, the events), and one statement writes it all: the tickets with what follows from
 * them, the tag links, the audit entries, the webhook deliveries and the dispatchers' NOTIFY.
 * The write locks the tickets it changes in id order and writes only when every one of them is
 * still as read (and the brand's settings, and what it sets still exists): the whole set or
 * nothing. Nothing: the action is read and planned again, then goes step by step.
 *
 * Step by step (ticket-actions.ts): spam (the allowance's adjustment and the senders' blocks), a
 * tag named that does not exist yet (it is made), inside a caller's transaction, and every
 * error's answer.
 */

/** How often a write that found a ticket changed is tried again before going step by step. */
const ATTEMPTS = 3;

type StatementAction = Exclude<BulkInput['action'], 'spam'>;

interface SeenTicket extends Clock {
  id: string;
  ticketNumber: number;
  title: string;
  closeReason: string | null;
  assigneeId: string | null;
  categoryId: string | null;
  version: string;
  /** The tag ids linked, sorted; read for setTags only. */
  tagIds: string[] | null;
}

interface Seen {
  brand: Brand;
  /** The brand's live tickets among those named, in id order. */
  tickets: SeenTicket[];
  assigneeOk: boolean;
  categoryOk: boolean;
  /** The brand's tags among those named, by id and lower-cased name. */
  tags: { id: string; name: string }[];
}

/** The first statement: everything the write is computed from; null when the brand is not there. */
async function read(ctx: TenantCtx, brandId: string, ids: readonly string[], input: BulkInput, named: { ids: string[]; names: string[] }): Promise<Seen | null> {
  const withTags = input.action === 'setTags';
  const checks = namedChecks(ctx, brandId, { assigneeId: input.assigneeId, categoryId: input.categoryId, tags: named });
  const [row] = await runInAccount<Record<string, unknown>>(
    ctx,
    ctx.db.raw(
      `select
      (select to_jsonb(br) from brands br where ? and br.id = ?) as brand,
      ${checks.sql},
      (select coalesce(jsonb_agg(jsonb_build_object('id', t.id, 'ticketNumber', t.ticket_number, 'title', t.title, 'status', t.status,
          'closeReason', t.close_reason, 'assigneeId', t.assignee_id, 'categoryId', t.category_id, 'version', ${versionSql('t', withTags)},
          'createdAt', t.created_at, 'priority', t.priority, 'dueAt', t.due_at, 'dueAtManual', t.due_at_manual,
          'slaPausedAt', t.sla_paused_at, 'slaPausedSeconds', t.sla_paused_seconds,
          'tagIds', ${withTags ? `array(select tt.tag_id from ticket_tags tt where ${sameTenant('tt', 't')} and tt.brand_id = t.brand_id and tt.ticket_id = t.id order by tt.tag_id)` : 'null'}
        ) order by t.id), '[]')
        from tickets t where ? and t.brand_id = ? and t.id = any(?::text[]) and t.deleted_at is null) as "tickets"`,
      [tenantScope(ctx, 'br'), brandId, ...checks.bindings, tenantScope(ctx, 't'), brandId, [...ids]] as Knex.RawBinding[],
    ),
  );
  const r = row!;
  if (!r.brand) return null;
  const dateOf = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string));
  const tickets = (r.tickets as Record<string, unknown>[]).map(
    (t): SeenTicket => ({
      ...(t as unknown as SeenTicket),
      createdAt: dateOf(t.createdAt)!,
      dueAt: dateOf(t.dueAt),
      slaPausedAt: dateOf(t.slaPausedAt),
      slaPausedSeconds: Number(t.slaPausedSeconds),
    }),
  );
  return {
    brand: Brand.fromJson(columnsToProperties(r.brand as Record<string, unknown>), { skipValidation: true }),
    tickets,
    assigneeOk: Boolean(r.assignee_ok),
    categoryOk: Boolean(r.category_ok),
    tags: r.tags as Seen['tags'],
  };
}

/** One ticket's planned change: its audit entry's changes and the clock columns it writes. */
interface Planned {
  ticket: SeenTicket;
  changes: Change[];
  clock: Partial<Record<PerTicketColumn, unknown>>;
}

/** The columns the action sets on every ticket it changes (setTags: none but the links). */
function setOf(ctx: TenantCtx, input: BulkInput & { action: StatementAction }): TicketSet {
  switch (input.action) {
    case 'resolve':
      return { status: 'resolved' };
    case 'close':
      return { status: 'closed', ...(input.closeReason !== undefined ? { closeReason: input.closeReason } : {}) };
    case 'assign':
      return { assigneeId: input.assigneeId };
    case 'setCategory':
      return { categoryId: input.categoryId };
    case 'delete':
      return { deletedAt: ctx.db.raw('now()') };
    case 'setTags':
      return {};
  }
  throw new Error(`no columns for bulk ${String(input.action)}`);
}

/** Each ticket the action changes, with what changes; tickets already as asked are left out. */
async function plan(ctx: TenantCtx, seen: Seen, input: BulkInput & { action: StatementAction }, set: TicketSet, tagIds: string[] | undefined): Promise<Planned[]> {
  const planned: Planned[] = [];
  for (const ticket of seen.tickets) {
    if (input.action === 'delete') {
      planned.push({ ticket, changes: [], clock: {} });
      continue;
    }
    if (tagIds) {
      if (ticket.tagIds!.join() !== tagIds.join()) planned.push({ ticket, changes: [{ field: 'tags', from: ticket.tagIds!, to: tagIds }], clock: {} });
      continue;
    }
    const changes: Change[] = (Object.entries(set) as [keyof SeenTicket, unknown][])
      .filter(([field, to]) => ticket[field] !== to)
      .map(([field, to]) => ({ field, from: ticket[field], to }));
    if (!changes.length) continue;
    let clock = {};
    if (set.status) {
      // Pending and back moves the ticket's service-level clock: its dueAt change goes with the status.
      const moved = await clockMoveOf(ctx, seen.brand, { ticketId: ticket.id, fromStatus: ticket.status ?? 'open', to: { status: set.status as string } }, ticket);
      clock = moved.set;
      changes.push(...moved.changes);
    }
    planned.push({ ticket, changes, clock });
  }
  return planned;
}

/**
 * The bulk action in two statements, or null: not for this one (see the file comment), or a
 * ticket kept changing; then the caller goes step by step. `count` and `failedIds` as bulk's.
 */
export async function bulkInTwoStatements(ctx: TenantCtx, givenBrandId: string, input: BulkInput): Promise<BulkOutcome | null> {
  if (ctx.db.isTransaction || input.action === 'spam') return null;
  const action = input as BulkInput & { action: StatementAction };
  const brandId = normalizeBrandId(givenBrandId);
  if (!canSeeBrand(ctx.brandScope, brandId)) return null;
  const named = tagsNamed(input.tags ?? []);
  if (!named) return null;
  const ids = [...new Set(input.ticketIds)];
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const seen = await read(ctx, brandId, ids, input, named);
    if (!seen || !seen.assigneeOk || !seen.categoryOk) return null;
    const tagIds = input.tags === undefined ? undefined : tagIdsOf(seen.tags, named);
    if (tagIds === null) return null;
    tagIds?.sort();
    const found = new Set(seen.tickets.map((t) => t.id));
    const outcome = { count: found.size, failedIds: input.ticketIds.filter((id) => !found.has(id)) };
    const set = setOf(ctx, action);
    const planned = await plan(ctx, seen, action, set, tagIds);
    if (!planned.length) return outcome;
    if (await write(ctx, { seen, action, set, planned, tagIds })) return outcome;
  }
  return null;
}

interface Write {
  seen: Seen;
  action: BulkInput & { action: StatementAction };
  set: TicketSet;
  planned: readonly Planned[];
  tagIds: string[] | undefined;
}

/** The second statement: everything, or nothing when a ticket changed since it was read. Returns whether it wrote. */
async function write(ctx: TenantCtx, w: Write): Promise<boolean> {
  const { brand } = w.seen;
  const { planned, set, tagIds } = w;
  const ids = planned.map((p) => p.ticket.id);
  const guard: SqlFragment = {
    sql: `${versionSql('t', tagIds !== undefined)} = ?::jsonb ->> t.id
      and exists (select 1 from brands br where ? and ${sameTenant('br', 't')} and br.id = t.brand_id and br.settings_revision = ?)
      and (?::text is null or exists (select 1 from members m where ? and ${sameAccount('m', 't')} and m.id = ?::text and m.status = 'active'))
      and (?::text is null or exists (select 1 from categories ca where ? and ${sameTenant('ca', 't')} and ca.brand_id = t.brand_id and ca.id = ?::text))
      and (select count(*) from tags tg where ? and ${sameTenant('tg', 't')} and tg.brand_id = t.brand_id and tg.id = any(?::text[])) = ?`,
    bindings: [
      JSON.stringify(Object.fromEntries(planned.map((p) => [p.ticket.id, p.ticket.version]))),
      tenantScope(ctx, 'br'),
      brand.settingsRevision,
      ...checked(set.assigneeId, accountScope(ctx, 'm')),
      ...checked(set.categoryId, tenantScope(ctx, 'ca')),
      tenantScope(ctx, 'tg'),
      tagIds ?? [],
      (tagIds ?? []).length,
    ],
  };
  const perTicket = new Map(planned.filter((p) => Object.keys(p.clock).length).map((p) => [p.ticket.id, p.clock]));
  const ticketParts = ticketUpdateParts(
    ctx,
    brand.id,
    ids,
    // A deletion keeps updatedAt, as DELETE /tickets/{id} does.
    set.deletedAt ? set : { ...set, updatedAt: ctx.db.raw('now()') },
    // Every ticket planned locked and still as read, or none written.
    { guard, perTicket, gate: { writeWhen: { sql: '(select count(*) from b) = ?', bindings: [ids.length] } } },
  )!;
  const written: SqlFragment = { sql: 'exists (select 1 from a)', bindings: [] };
  const { facts, announced } = recordsOf(brand.id, w);
  const entries = audit.insertRowsStatement(audit.entryRows(ctx, facts), written);
  const deliveries = eventsInsert(ctx, announced, 'a');
  const parts: SqlFragment[] = [
    ticketParts,
    ...(tagIds ? tagLinkParts(ctx, tagIds, tagIds) : []),
    { sql: `entries as (${entries.sql})`, bindings: entries.bindings },
    { sql: `announced as (${deliveries.sql} returning 1)`, bindings: deliveries.bindings },
  ];
  // On Citus the statement runs on the account's worker, where a NOTIFY reaches no dispatcher: they are woken from here after it.
  const citus = await onCitus(ctx);
  const sql = `with ${parts.map((p) => p.sql).join(', ')}
    select (select count(*) from a)::int as "written", (select 1 from announced${wakeDispatchersJoin(!citus)} limit 1) as "announced"`;
  const [row] = await runInAccount<{ written: number; announced: number | null }>(ctx, ctx.db.raw(sql, parts.flatMap((p) => p.bindings) as Knex.RawBinding[]));
  if (!row!.written) return false;
  if (citus && row!.announced !== null) await outboxAdded(ctx, 1);
  return true;
}

/** The audit entries the step by step way writes for these changes (marked bulk), and their events. */
function recordsOf(brandId: string, w: Write): { facts: AuditFact[]; announced: EventSpec[] } {
  const deleting = w.action.action === 'delete';
  const facts = w.planned.map(
    ({ ticket, changes }): AuditFact => ({
      brandId,
      ticketId: ticket.id,
      entityType: 'ticket',
      entityId: ticket.id,
      event: deleting ? 'ticket.deleted' : 'ticket.updated',
      ...(deleting ? {} : { changes }),
      metadata: { ticketNumber: ticket.ticketNumber, title: ticket.title, bulk: true },
    }),
  );
  const announced = deleting
    ? events.ticketsDeletedEvents(
        brandId,
        w.planned.map((p) => p.ticket.id),
      )
    : events.ticketsUpdatedEvents(
        brandId,
        w.planned.map((p) => ({ ticketId: p.ticket.id, changes: p.changes.map((c) => c.field) })),
      );
  return { facts, announced };
}
