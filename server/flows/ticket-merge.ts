import { withTx, type TenantCtx } from '../core/context.js';
import { badRequest, notFound } from '../core/errors.js';
import * as attachments from '../domains/attachments/service.js';
import * as audit from '../core/audit.js';
import { requireBrand } from '../core/brand.js';
import * as comments from '../domains/comments/service.js';
import * as orders from '../domains/commerce/orders.js';
import * as events from '../core/outbox/events.js';
import type { MergeInput, MergeResultView } from '../domains/tickets/actions-schemas.js';
import { Ticket } from '../domains/tickets/model.js';
import { fetchView } from '../domains/tickets/service.js';
import { updateTickets } from '../core/ticket-writes.js';

/**
 * POST /tickets/:targetId/merge: folds source tickets into the target, Zendesk style. In one
 * transaction, with every ticket involved locked in id order (so two opposite merges queue instead
 * of deadlocking, and the second sees the first's result):
 *   - the sources' comments (and attachments) move to the target, counts recomputed;
 *   - the target is linked to the sources' orders too (commerce);
 *   - each source is closed, gets `mergedIntoId`, and an internal SYSTEM note naming the target;
 *   - the target gets one internal SYSTEM note naming the sources;
 *   - audit: `ticket.merged` on the target (which sources) and on each source (its changes).
 * Refused: the target among the sources (400 merge_into_self), a missing or deleted ticket of this
 * brand (404, also for other brands, accounts and modes), a source already merged elsewhere or a
 * target that itself was merged away (400 already_merged).
 */
export async function merge(ctx: TenantCtx, brandId: string, targetId: string, input: MergeInput): Promise<MergeResultView> {
  const sourceIds = sourcesOf(input);
  if (sourceIds.includes(targetId)) {
    throw badRequest('A ticket cannot be merged into itself', [{ field: 'sourceTicketIds', message: 'must not include the target ticket' }], 'merge_into_self');
  }

  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const all = [targetId, ...sourceIds].sort();
    const locked = await Ticket.scoped(tx)
      .where('tickets.brandId', brand.id)
      .whereIn('tickets.id', all)
      .whereNull('tickets.deletedAt')
      .orderBy('tickets.id')
      .forUpdate()
      .select('tickets.id', 'tickets.ticketNumber', 'tickets.title', 'tickets.status', 'tickets.mergedIntoId');
    const byId = new Map(locked.map((t) => [t.id, t]));
    const missing = all.find((id) => !byId.has(id));
    if (missing) throw notFound(`Ticket ${missing}`);
    const target = byId.get(targetId)!;
    const merged = all.find((id) => byId.get(id)!.mergedIntoId);
    if (merged) {
      throw badRequest(
        `Ticket ${merged} was already merged into ${byId.get(merged)!.mergedIntoId}`,
        [{ field: merged === targetId ? 'ticketId' : 'sourceTicketIds', message: 'was already merged into another ticket' }],
        'already_merged',
      );
    }
    const sources = sourceIds.map((id) => byId.get(id)!);

    await comments.moveToTicket(tx, brand.id, sourceIds, targetId);
    await attachments.moveToTicket(tx, brand.id, sourceIds, targetId);
    await orders.copyLinksToTicket(tx, brand.id, sourceIds, targetId);

    await updateTickets(tx, brand.id, sourceIds, { status: 'closed', mergedIntoId: targetId, updatedAt: tx.db.raw('now()') });
    const numbers = sources.map((s) => `#${s.ticketNumber}`).join(', ');
    for (const source of sources) {
      await comments.addSystemComment(tx, brand.id, source.id, `Merged into ticket #${target.ticketNumber} (${target.title}).`, { isInternal: true, mergedIntoId: targetId });
    }
    await comments.addSystemComment(tx, brand.id, targetId, `Merged ${numbers} into this ticket.`, { isInternal: true, mergedTicketIds: sourceIds });

    await audit.recordMany(tx, [
      {
        brandId: brand.id,
        ticketId: targetId,
        entityType: 'ticket',
        entityId: targetId,
        event: 'ticket.merged',
        metadata: { ticketNumber: target.ticketNumber, title: target.title, sourceTicketIds: sourceIds },
      },
      ...sources.map((s) => ({
        brandId: brand.id,
        ticketId: s.id,
        entityType: 'ticket',
        entityId: s.id,
        event: 'ticket.merged',
        changes: [...(s.status === 'closed' ? [] : [{ field: 'status', from: s.status, to: 'closed' }]), { field: 'mergedIntoId', from: null, to: targetId }],
        metadata: { ticketNumber: s.ticketNumber, title: s.title, mergedIntoId: targetId },
      })),
    ]);
    await events.ticketsUpdated(
      tx,
      brand.id,
      sources.map((s) => ({ ticketId: s.id, changes: [...(s.status === 'closed' ? [] : ['status']), 'mergedIntoId'] })),
    );

    const ticket = await fetchView(tx, brand.id, targetId);
    return { ...ticket, targetTicketId: targetId, mergedTicketIds: sourceIds, mergedCount: sourceIds.length };
  });
}

/** `{ sourceTicketIds }` (the SDK's and dashboard's spelling) or `{ ticketIds }`: exactly one. */
function sourcesOf(input: MergeInput): string[] {
  const given = input.sourceTicketIds ?? input.ticketIds;
  if (!given || (input.sourceTicketIds && input.ticketIds)) {
    throw badRequest('Send the tickets to merge as sourceTicketIds (or ticketIds), not both', [{ field: 'sourceTicketIds', message: 'is required' }], 'invalid_merge_request');
  }
  return [...new Set(given)];
}
