import { withTx, type TenantCtx } from '../core/context.js';
import * as audit from '../core/audit.js';
import type { Change } from '../core/audit.js';
import { requireBrand } from '../core/brand.js';
import { badRequest, notFound } from '../core/errors.js';
import { canonicalJson } from '../core/idempotency.js';
import * as events from '../core/outbox/events.js';
import * as categories from '../domains/categories/service.js';
import * as fields from '../domains/fields/service.js';
import * as statuses from '../domains/statuses/service.js';
import type { TicketView, UpdateTicketInput } from '../domains/tickets/schemas.js';
import { Ticket } from '../domains/tickets/model.js';
import * as tickets from '../domains/tickets/service.js';
import { clockPatches } from '../domains/tickets/service-level.js';
import { asFieldError, assertAssignee, resolveTags } from './ticket-create.js';
import { scopeOf } from '../core/model.js';
import { linkTags, updateTickets, type TicketSet } from '../core/ticket-writes.js';

/** Ticket update: it checks the brand's statuses, categories, members, tags and custom fields. */

export interface UpdateResult {
  ticket: TicketView;
  /** The fields that really changed (the same list the ticket.updated audit entry records). */
  changes: Change[];
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

/**
 * PATCH: only the fields given; `changes` lists those whose value really changed (tags as sorted
 * id lists). Nothing changed: nothing is written and updatedAt stays.
 */
export async function updateTicket(ctx: TenantCtx, brandId: string, ticketId: string, input: UpdateTicketInput): Promise<UpdateResult> {
  if (Object.keys(input).length === 0) throw badRequest('Send at least one field to change', [], 'empty_update');
  let title: string | undefined;
  if (input.title !== undefined) {
    title = input.title.trim();
    if (!title) throw badRequest('title must not be blank', [{ field: 'title', message: 'must not be blank' }]);
  }
  tickets.checkCustomFieldsShape(input.customFields);

  const outcome = await withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const locked = await Ticket.scoped(tx).where({ 'tickets.brandId': brand.id, 'tickets.id': ticketId }).whereNull('tickets.deletedAt').forUpdate().select('tickets.id').first();
    if (!locked) throw notFound('Ticket');
    const before = await tickets.fetchView(tx, brand.id, locked.id);

    const patch: Record<string, unknown> = {};
    const changes: Change[] = [];
    const consider = (field: string, from: unknown, to: unknown) => {
      if (to === undefined || same(from, to)) return;
      changes.push({ field, from, to });
      patch[field] = to;
    };
    consider('title', before.title, title);
    consider('body', before.body, input.body);
    if (input.status !== undefined) await statuses.assertStatusKey(tx, brand.id, input.status);
    consider('status', before.status, input.status);
    consider('priority', before.priority, input.priority);
    if (input.assigneeId) await assertAssignee(tx, input.assigneeId);
    consider('assigneeId', before.assigneeId, input.assigneeId);
    if (input.categoryId) {
      await asFieldError('categoryId', 'invalid_category', `categoryId ${input.categoryId} is not a category of this brand`, () =>
        categories.requireCategory(tx, brand.id, input.categoryId!),
      );
    }
    consider('categoryId', before.categoryId, input.categoryId);
    consider('links', before.links, input.links);
    if (input.customFields !== undefined) await fields.validateCustomFields(tx, brand.id, input.customFields);
    consider('customFields', before.customFields, input.customFields);
    consider('metadata', before.metadata, input.metadata);
    consider('isSpam', before.isSpam, input.isSpam);
    consider('closeReason', before.closeReason, input.closeReason);
    // dueAt: given by hand, or moved by the brand's service level (a new priority, pending and back).
    const clock = (
      await clockPatches(tx, brand, [
        {
          ticketId: locked.id,
          fromStatus: before.status ?? 'open',
          to: {
            status: input.status ?? before.status ?? 'open',
            ...(input.priority === undefined ? {} : { priority: input.priority }),
            ...(input.dueAt === undefined ? {} : { dueAt: input.dueAt === null ? null : new Date(input.dueAt) }),
          },
        },
      ])
    ).get(locked.id);
    if (clock) {
      const { dueAt, ...columns } = clock.patch;
      if ('dueAt' in clock.patch) consider('dueAt', before.dueAt, dueAt ? dueAt.toISOString() : null);
      Object.assign(patch, columns);
    }

    let newTags: string[] | undefined;
    if (input.tags !== undefined) {
      const from = before.tags.map((g) => g.id).sort();
      const to = [...(await resolveTags(tx, brand.id, input.tags))].sort();
      if (!same(from, to)) {
        changes.push({ field: 'tags', from, to });
        newTags = to;
      }
    }

    if (changes.length) {
      await updateTickets(tx, brand.id, [locked.id], { ...(patch as TicketSet), updatedAt: tx.db.raw('now()') });
      await audit.record(tx, {
        brandId: brand.id,
        ticketId: locked.id,
        entityType: 'ticket',
        entityId: locked.id,
        event: 'ticket.updated',
        changes,
        metadata: { ticketNumber: before.ticketNumber, title: title ?? before.title },
      });
      await events.ticketsUpdated(tx, brand.id, [{ ticketId: locked.id, changes: changes.map((c) => c.field) }]);
      if (newTags) {
        await tx
          .db('ticket_tags')
          .where({ ...scopeOf(tx), brandId: brand.id, ticketId: locked.id })
          .whereNotIn('tagId', newTags)
          .delete();
        await linkTags(tx, brand.id, [locked.id], newTags);
      }
    }
    return { ticket: changes.length ? await tickets.fetchView(tx, brand.id, locked.id) : before, changes };
  });
  return outcome;
}
