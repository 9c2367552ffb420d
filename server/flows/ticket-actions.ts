import { withTx, type TenantCtx } from '../core/context.js';
import { badRequest, notFound } from '../core/errors.js';
import * as audit from '../core/audit.js';
import { enqueueEventsWith } from '../core/outbox/service.js';
import * as events from '../core/outbox/events.js';
import * as blockedSources from '../domains/blocked-sources/service.js';
import { requireBrand } from '../core/brand.js';
import * as categories from '../domains/categories/service.js';
import type { AuditFact, Change } from '../core/audit.js';
import { BULK_ACTIONS, type BulkInput, type BulkOutcome, type SpamInput } from '../domains/tickets/actions-schemas.js';
import { Ticket } from '../domains/tickets/model.js';
import type { TicketView } from '../domains/tickets/schemas.js';
import { fetchView } from '../domains/tickets/service.js';
import { moveClocks } from '../domains/tickets/service-level.js';
import { asFieldError, assertAssignee, resolveTags } from './ticket-create.js';
import { BOUND_TENANT, boundToTenant, scopeOf, tenantIs } from '../core/model.js';
import { linkTags, updateTickets } from '../core/ticket-writes.js';
import { bulkInTwoStatements } from './ticket-bulk-statement.js';

/**
 * Ticket actions beyond create/update/delete: the spam flag and bulk actions (merge is in merge.ts).
 * A bulk action is two statements when it can (ticket-bulk-statement.ts); this is its step-by-step way.
 *
 * Both lock the tickets they act on (FOR UPDATE, in id order, so concurrent bulks over
 * overlapping tickets queue instead of deadlocking) and then do every write, with its audit
 * entries, in the one transaction. Bulk works set-wise: one UPDATE for all the tickets that change
 * and one INSERT for their audit entries, not the single-ticket path once per ticket; the entries
 * are those the single-ticket path writes (ticket.updated with its changes, ticket.deleted,
 * ticket.spam_marked), marked `bulk: true` in their metadata.
 */

/** What an action needs of a locked ticket. */
interface Locked {
  id: string;
  ticketNumber: number;
  title: string;
  status: string;
  closeReason: string | null;
  assigneeId: string | null;
  categoryId: string | null;
  isSpam: boolean;
  /** The customer contact's (normalized) email, if the ticket has a customer. */
  customerEmail: string | null;
}

/**
 * Locks the brand's live tickets among `ids`, in id order; missing and deleted ones are absent.
 * Locked by a statement of their own, then read: Citus refuses FOR UPDATE beside a subquery.
 */
async function lockTickets(ctx: TenantCtx, brandId: string, ids: readonly string[]): Promise<Locked[]> {
  const live = () =>
    Ticket.scoped(ctx)
      .where('tickets.brandId', brandId)
      .whereIn('tickets.id', [...ids])
      .whereNull('tickets.deletedAt');
  await live().orderBy('tickets.id').forUpdate().select('tickets.id');
  const rows = await live()
    .select(
      'tickets.id',
      'tickets.ticketNumber',
      'tickets.title',
      'tickets.status',
      'tickets.closeReason',
      'tickets.assigneeId',
      'tickets.categoryId',
      'tickets.isSpam',
      boundToTenant(
        ctx,
        `(select c.email from contacts c where ${tenantIs('c', BOUND_TENANT)}
        and c.brand_id = tickets.brand_id and c.id = tickets.customer_id) as customer_email`,
      ),
    )
    .orderBy('tickets.id');
  return rows as unknown as Locked[];
}

/** A change's audit entries and its ticket.updated events, in one statement. */
async function recordUpdated(ctx: TenantCtx, brandId: string, facts: readonly AuditFact[], updates: readonly { ticketId: string; changes: readonly string[] }[]): Promise<void> {
  await enqueueEventsWith(ctx, [audit.entriesPart(ctx, facts)], events.ticketsUpdatedEvents(brandId, updates));
}

const ticketMeta = (t: Locked, bulk: boolean) => ({ ticketNumber: t.ticketNumber, title: t.title, ...(bulk ? { bulk: true } : {}) });

/** The flag a spam request asks for: `{ isSpam }` or `{ action: 'mark' | 'unmark' }`, exactly one. */
function spamFlag(input: SpamInput): boolean {
  if ((input.isSpam === undefined) === (input.action === undefined)) {
    throw badRequest(
      'Send exactly one of isSpam (true or false) and action ("mark" or "unmark")',
      [{ field: input.isSpam === undefined ? 'isSpam' : 'action', message: input.isSpam === undefined ? 'is required (or action)' : 'must not be sent with isSpam' }],
      'invalid_spam_request',
    );
  }
  return input.isSpam ?? input.action === 'mark';
}

/**
 * Sets the spam flag of locked tickets. Marking also blocks each ticket's customer email in the
 * brand (so later tickets from the sender arrive as spam); unmarking removes that exact-address
 * block (a domain block stays). Tickets already in the asked state are left alone: no write, no entry.
 */
async function applySpam(ctx: TenantCtx, brandId: string, rows: readonly Locked[], isSpam: boolean, bulk: boolean): Promise<void> {
  const changed = rows.filter((r) => r.isSpam !== isSpam);
  if (!changed.length) return;
  await updateTickets(
    ctx,
    brandId,
    changed.map((r) => r.id),
    { isSpam, updatedAt: ctx.db.raw('now()') },
  );
  const emails = changed.map((r) => r.customerEmail).filter((e): e is string => e !== null);
  if (isSpam) await blockedSources.blockEmails(ctx, brandId, emails, 'Marked as spam');
  else await blockedSources.unblockEmails(ctx, brandId, emails);
  await recordUpdated(
    ctx,
    brandId,
    changed.map((r) => ({
      brandId,
      ticketId: r.id,
      entityType: 'ticket',
      entityId: r.id,
      event: isSpam ? 'ticket.spam_marked' : 'ticket.spam_unmarked',
      changes: [{ field: 'isSpam', from: r.isSpam, to: isSpam }],
      metadata: { ...ticketMeta(r, bulk), sender: r.customerEmail },
    })),
    changed.map((r) => ({ ticketId: r.id, changes: ['isSpam'] })),
  );
}

/** POST /tickets/:ticketId/spam: mark or unmark; returns the ticket. */
export async function setSpam(ctx: TenantCtx, brandId: string, ticketId: string, input: SpamInput): Promise<TicketView> {
  const isSpam = spamFlag(input);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const rows = await lockTickets(tx, brand.id, [ticketId]);
    if (!rows.length) throw notFound('Ticket');
    await applySpam(tx, brand.id, rows, isSpam, false);
    return fetchView(tx, brand.id, ticketId);
  });
}

type SettableField = 'status' | 'closeReason' | 'assigneeId' | 'categoryId';

/** Sets the same column values on every locked ticket; only tickets where a value differs are written. */
async function applyFields(ctx: TenantCtx, brandId: string, rows: readonly Locked[], patch: Partial<Record<SettableField, string | null>>): Promise<void> {
  const changed: { row: Locked; changes: Change[] }[] = [];
  for (const row of rows) {
    const changes = (Object.entries(patch) as [SettableField, string | null][]).filter(([field, to]) => row[field] !== to).map(([field, to]) => ({ field, from: row[field], to }));
    if (changes.length) changed.push({ row, changes });
  }
  if (!changed.length) return;
  const status = patch.status;
  if (status) {
    // Pending and back moves the tickets' service-level clocks: their dueAt changes go with the status.
    const moves = changed.map(({ row }) => ({ ticketId: row.id, fromStatus: row.status, to: { status } }));
    const dueChanges = await moveClocks(ctx, await requireBrand(ctx, brandId), moves);
    for (const c of changed) {
      const due = dueChanges.get(c.row.id);
      if (due) c.changes.push(due);
    }
  }
  await updateTickets(
    ctx,
    brandId,
    changed.map((c) => c.row.id),
    { ...patch, updatedAt: ctx.db.raw('now()') },
  );
  await recordUpdated(
    ctx,
    brandId,
    changed.map(
      ({ row, changes }): AuditFact => ({
        brandId,
        ticketId: row.id,
        entityType: 'ticket',
        entityId: row.id,
        event: 'ticket.updated',
        changes,
        metadata: ticketMeta(row, true),
      }),
    ),
    changed.map(({ row, changes }) => ({ ticketId: row.id, changes: changes.map((c) => c.field) })),
  );
}

/** Replaces the tags of every locked ticket with `tagIds`; changes are sorted id lists, as PATCH records them. */
async function applyTags(ctx: TenantCtx, brandId: string, rows: readonly Locked[], tagIds: readonly string[]): Promise<void> {
  const scope = { ...scopeOf(ctx), brandId };
  const to = [...tagIds].sort();
  const current = new Map<string, string[]>(rows.map((r) => [r.id, []]));
  const links = (await ctx
    .db('ticketTags')
    .where(scope)
    .whereIn(
      'ticketId',
      rows.map((r) => r.id),
    )
    .orderBy('tagId')
    .select('ticketId', 'tagId')) as { ticketId: string; tagId: string }[];
  for (const l of links) current.get(l.ticketId)!.push(l.tagId);
  const changed = rows.filter((r) => current.get(r.id)!.join() !== to.join());
  if (!changed.length) return;
  const ids = changed.map((r) => r.id);

  const stale = ctx.db('ticketTags').where(scope).whereIn('ticketId', ids);
  if (to.length) stale.whereNotIn('tagId', to);
  await stale.delete();
  await linkTags(ctx, brandId, ids, to);
  await updateTickets(ctx, brandId, ids, { updatedAt: ctx.db.raw('now()') });
  await recordUpdated(
    ctx,
    brandId,
    changed.map(
      (row): AuditFact => ({
        brandId,
        ticketId: row.id,
        entityType: 'ticket',
        entityId: row.id,
        event: 'ticket.updated',
        changes: [{ field: 'tags', from: current.get(row.id)!, to }],
        metadata: ticketMeta(row, true),
      }),
    ),
    changed.map((row) => ({ ticketId: row.id, changes: ['tags'] })),
  );
}

/** Soft-deletes every locked ticket, as DELETE /tickets/:id does. */
async function applyDelete(ctx: TenantCtx, brandId: string, rows: readonly Locked[]): Promise<void> {
  if (!rows.length) return;
  await updateTickets(
    ctx,
    brandId,
    rows.map((r) => r.id),
    { deletedAt: ctx.db.raw('now()') },
  );
  await audit.recordMany(
    ctx,
    rows.map(
      (row): AuditFact => ({
        brandId,
        ticketId: row.id,
        entityType: 'ticket',
        entityId: row.id,
        event: 'ticket.deleted',
        metadata: ticketMeta(row, true),
      }),
    ),
  );
  await events.ticketsDeleted(
    ctx,
    brandId,
    rows.map((row) => row.id),
  );
}

type BulkAction = (typeof BULK_ACTIONS)[number];
const BULK_PARAM_NAMES = ['assigneeId', 'categoryId', 'tags', 'closeReason'] as const;
type BulkParam = (typeof BULK_PARAM_NAMES)[number];

/** Which optional parameters each action takes, and which of them it requires. */
const BULK_PARAMS: Record<BulkAction, { takes: readonly BulkParam[]; requires: readonly BulkParam[] }> = {
  spam: { takes: [], requires: [] },
  resolve: { takes: [], requires: [] },
  close: { takes: ['closeReason'], requires: [] },
  delete: { takes: [], requires: [] },
  assign: { takes: ['assigneeId'], requires: ['assigneeId'] },
  setCategory: { takes: ['categoryId'], requires: ['categoryId'] },
  setTags: { takes: ['tags'], requires: ['tags'] },
};

function checkBulkParams(input: BulkInput): void {
  const spec = BULK_PARAMS[input.action as BulkAction];
  const errors: { field: string; message: string }[] = [];
  for (const name of BULK_PARAM_NAMES) {
    const given = input[name] !== undefined;
    if (given && !spec.takes.includes(name)) errors.push({ field: name, message: `does not apply to action ${input.action}` });
    if (!given && spec.requires.includes(name)) errors.push({ field: name, message: `is required for action ${input.action}${name === 'tags' ? '' : ' (null clears)'}` });
  }
  if (errors.length) throw badRequest(`Bulk ${input.action}: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors, 'invalid_bulk_parameters');
}

/**
 * POST /tickets/bulk: one action over up to 100 tickets, in one transaction. Ids that are missing,
 * deleted, or of another brand, account or mode are reported as failed; bad parameters fail the
 * whole request (400) and change nothing. `count` is the tickets acted on, including those already
 * in the asked state; the route tells it in the caller's shape.
 */
export async function bulk(ctx: TenantCtx, brandId: string, input: BulkInput): Promise<BulkOutcome> {
  checkBulkParams(input);
  return (await bulkInTwoStatements(ctx, brandId, input)) ?? bulkStepByStep(ctx, brandId, input);
}

/** The bulk action in one transaction, a statement or more per step: the way for every action and every error. */
async function bulkStepByStep(ctx: TenantCtx, brandId: string, input: BulkInput): Promise<BulkOutcome> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    // Tickets first, then tags and the rest: the order PATCH takes its locks in.
    const rows = await lockTickets(tx, brand.id, input.ticketIds);
    const found = new Set(rows.map((r) => r.id));
    const failedIds = input.ticketIds.filter((id) => !found.has(id));

    switch (input.action) {
      case 'spam':
        await applySpam(tx, brand.id, rows, true, true);
        break;
      case 'resolve':
        await applyFields(tx, brand.id, rows, { status: 'resolved' });
        break;
      case 'close':
        await applyFields(tx, brand.id, rows, { status: 'closed', ...(input.closeReason !== undefined ? { closeReason: input.closeReason } : {}) });
        break;
      case 'delete':
        await applyDelete(tx, brand.id, rows);
        break;
      case 'assign': {
        const assigneeId = input.assigneeId!;
        if (assigneeId !== null) await assertAssignee(tx, assigneeId);
        await applyFields(tx, brand.id, rows, { assigneeId });
        break;
      }
      case 'setCategory': {
        const categoryId = input.categoryId!;
        if (categoryId !== null) {
          await asFieldError('categoryId', 'invalid_category', `categoryId ${categoryId} is not a category of this brand`, () =>
            categories.requireCategory(tx, brand.id, categoryId),
          );
        }
        await applyFields(tx, brand.id, rows, { categoryId });
        break;
      }
      case 'setTags': {
        // Sorted (ignoring case, as tag names are unique), so concurrent bulks create new tags in one order.
        const key = (s: string) => s.trim().toLowerCase();
        const names = [...input.tags!].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
        await applyTags(tx, brand.id, rows, [...(await resolveTags(tx, brand.id, names))]);
        break;
      }
    }
    return { count: rows.length, failedIds };
  });
}
