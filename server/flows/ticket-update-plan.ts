import type { Change } from '../core/audit.js';
import type { Brand } from '../core/brand.js';
import { canonicalJson } from '../core/idempotency.js';
import type { TenantCtx } from '../core/context.js';
import type { TicketView, UpdateTicketInput } from '../domains/tickets/schemas.js';
import { clockPatches, type Clock } from '../domains/tickets/service-level.js';
import * as audit from '../core/audit.js';
import * as events from '../core/outbox/events.js';
import type { EventSpec } from '../core/outbox/service.js';
import type { Firing } from '../domains/rules/engine.js';
import { firingEntries, firingEvent, type StatePatch } from './triggers.js';

/**
 * A ticket update's plan: what the caller's input and then the triggers' set, the changes each
 * made, and the service-level clock they move. Shared by the update's two ways (ticket-update.ts
 * step by step, ticket-update-statement.ts in two statements); no reads of its own.
 */

export const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

/** What one write will set, gathered from the caller's input and then from the triggers'. */
export interface Plan {
  before: TicketView;
  /** The values as they will be (before's, then each accepted change's), by field. */
  current: Record<string, unknown>;
  patch: Record<string, unknown>;
  /** The tag ids the ticket will have, when they change. */
  newTags?: string[];
}

export const newPlan = (before: TicketView): Plan => ({ before, current: { ...before, tags: before.tags.map((g) => g.id).sort() }, patch: {}, newTags: undefined });

/**
 * Adds checked input to the plan, its tags as the ids they name (undefined: not given); `changes`
 * receives what it changes.
 */
export function addToPlan(plan: Plan, input: Omit<UpdateTicketInput, 'tags'> & { title?: string }, tagIds: readonly string[] | undefined, changes: Change[]): void {
  const consider = (field: string, to: unknown) => {
    if (to === undefined || same(plan.current[field], to)) return;
    changes.push({ field, from: plan.current[field] ?? null, to });
    plan.current[field] = to;
    plan.patch[field] = to;
  };
  consider('title', input.title);
  consider('body', input.body);
  consider('status', input.status);
  consider('priority', input.priority);
  consider('assigneeId', input.assigneeId);
  consider('categoryId', input.categoryId);
  consider('links', input.links);
  consider('customFields', input.customFields);
  consider('metadata', input.metadata);
  consider('isSpam', input.isSpam);
  consider('closeReason', input.closeReason);
  consider('legalHold', input.legalHold);
  if (tagIds !== undefined) {
    const to = [...tagIds].sort();
    if (!same(plan.current.tags, to)) {
      changes.push({ field: 'tags', from: plan.current.tags, to });
      plan.current.tags = to;
      plan.newTags = to;
    }
  }
}

/** The service-level clock the planned change moves (dueAt given by hand, a new priority, pending and back), from the clock `locked` read. */
export async function planClock(tx: TenantCtx, brand: Brand, plan: Plan, dueAt: string | null | undefined, changes: Change[], locked: Clock & { id: string }): Promise<void> {
  const { before } = plan;
  const clock = (
    await clockPatches(
      tx,
      brand,
      [
        {
          ticketId: before.id,
          fromStatus: before.status ?? 'open',
          to: {
            status: (plan.current.status as string) ?? 'open',
            ...('priority' in plan.patch ? { priority: plan.patch.priority as string | null } : {}),
            ...(dueAt === undefined ? {} : { dueAt: dueAt === null ? null : new Date(dueAt) }),
          },
        },
      ],
      [locked],
    )
  ).get(before.id);
  if (!clock) return;
  const { dueAt: due, ...columns } = clock.patch;
  if ('dueAt' in clock.patch) {
    const to = due ? due.toISOString() : null;
    if (!same(before.dueAt, to)) changes.push({ field: 'dueAt', from: before.dueAt, to });
  }
  Object.assign(plan.patch, columns, 'dueAt' in clock.patch ? { dueAt: due } : {});
}

/** The triggers' fields as an update's input (their tags by name: new names make tags). */
export const inputOfRules = (patch: StatePatch): UpdateTicketInput => ({ ...patch });

/**
 * What a planned change records: its audit entry (none when `changes` is empty) and each firing's,
 * and their ticket.updated events, the caller's then the rules'.
 */
export function planRecords(
  ctx: TenantCtx,
  brandId: string,
  plan: Plan,
  changes: readonly Change[],
  firings: readonly Firing[],
): { entries: Record<string, unknown>[]; events: EventSpec[] } {
  const { before } = plan;
  const title = (plan.current.title as string) ?? before.title;
  const own = changes.length
    ? audit.entryRows(ctx, [
        {
          brandId,
          ticketId: before.id,
          entityType: 'ticket',
          entityId: before.id,
          event: 'ticket.updated',
          changes: [...changes],
          metadata: { ticketNumber: before.ticketNumber, title },
        },
      ])
    : [];
  const announced = firingEvent(brandId, before.id, firings);
  return {
    entries: [...own, ...firingEntries(ctx, firings, brandId, { id: before.id, ticketNumber: before.ticketNumber, title })],
    events: [...(changes.length ? events.ticketsUpdatedEvents(brandId, [{ ticketId: before.id, changes: changes.map((c) => c.field) }]) : []), ...(announced ? [announced] : [])],
  };
}
