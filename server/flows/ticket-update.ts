import { hasRole, withTx, type TenantCtx } from '../core/context.js';
import type { Change } from '../core/audit.js';
import { requireBrand, type Brand } from '../core/brand.js';
import { badRequest, forbidden, notFound } from '../core/errors.js';
import { canonicalJson } from '../core/idempotency.js';
import * as categories from '../domains/categories/service.js';
import * as fields from '../domains/fields/service.js';
import type { Firing, TicketState } from '../domains/rules/engine.js';
import * as statuses from '../domains/statuses/service.js';
import * as tags from '../domains/tags/service.js';
import type { TicketView, UpdateTicketInput } from '../domains/tickets/schemas.js';
import { Ticket } from '../domains/tickets/model.js';
import * as tickets from '../domains/tickets/service.js';
import { lockedClock, moveClocks } from '../domains/tickets/service-level.js';
import { asFieldError, assertAssignee, resolveTags } from './ticket-create.js';
import { scopeOf } from '../core/model.js';
import { linkTags, updateTickets, type TicketSet } from '../core/ticket-writes.js';
import { enqueueEventsWith } from '../core/outbox/service.js';
import { carryOutFirings, fireTriggers, isAutoSubmitted, entryParts, recordFired, stateChanges, stateOfView, type AfterWrite, type StatePatch } from './triggers.js';
import { addToPlan, inputOfRules, newPlan, planClock, planRecords, same, type Plan } from './ticket-update-plan.js';
import { updateInTwoStatements, type UpdateResult } from './ticket-update-statement.js';

export type { UpdateResult };

/**
 * Ticket update: it checks the brand's statuses, categories, members, tags and custom fields, then
 * runs the brand's triggers on the ticket as it will be; what they set is written by the same
 * statement as the caller's change. The usual update is a read and one write
 * (ticket-update-statement.ts); this file is the step-by-step way, in one transaction, for the
 * rest and for every error's answer.
 */

/** Checks that what `input` names is the brand's (its status, assignee, category) and its custom fields fit the brand's schema. */
async function checkInput(tx: TenantCtx, brand: Brand, input: Pick<UpdateTicketInput, 'status' | 'assigneeId' | 'categoryId' | 'customFields'>): Promise<void> {
  if (input.status !== undefined) await statuses.assertStatusKey(tx, brand.id, input.status);
  if (input.assigneeId) await assertAssignee(tx, input.assigneeId);
  if (input.categoryId) {
    await asFieldError('categoryId', 'invalid_category', `categoryId ${input.categoryId} is not a category of this brand`, () =>
      categories.requireCategory(tx, brand.id, input.categoryId!),
    );
  }
  if (input.customFields !== undefined) await fields.validateCustomFields(tx, brand.id, input.customFields);
}

/** Checks and adds `input` to the plan; `changes` receives what it changes. */
async function planInput(tx: TenantCtx, brand: Brand, plan: Plan, input: UpdateTicketInput & { title?: string }, changes: Change[]): Promise<void> {
  await checkInput(tx, brand, input);
  addToPlan(plan, input, input.tags === undefined ? undefined : [...(await resolveTags(tx, brand.id, input.tags))], changes);
}

/** The state rules see after the caller's change (tag ids named back). */
async function stateOfPlan(tx: TenantCtx, brand: Brand, plan: Plan) {
  const state = stateOfView({ ...plan.before, ...(plan.patch as Partial<TicketView>), tags: plan.before.tags });
  if (plan.newTags) state.tags = (await tags.requireTags(tx, brand.id, plan.newTags)).map((g) => g.name.toLowerCase());
  return state;
}

/**
 * Writes a planned change with its audit entry and event (none when `changes` is empty) and the
 * triggers' firings after it.
 */
async function writePlan(tx: TenantCtx, brand: Brand, plan: Plan, changes: Change[], ruleChanges: Change[], firings: readonly Firing[]): Promise<TicketView> {
  const { before } = plan;
  const all = [...changes, ...ruleChanges];
  if (!all.length && !firings.length) return before;
  if (all.length) {
    await updateTickets(tx, brand.id, [before.id], { ...(plan.patch as TicketSet), updatedAt: tx.db.raw('now()') });
    if (plan.newTags) {
      await tx
        .db('ticket_tags')
        .where({ ...scopeOf(tx), brandId: brand.id, ticketId: before.id })
        .whereNotIn('tagId', plan.newTags)
        .delete();
      await linkTags(tx, brand.id, [before.id], plan.newTags);
    }
  }
  const records = planRecords(tx, brand.id, plan, changes, firings);
  // The entries (and the rules' tallies) and the events in one statement.
  await enqueueEventsWith(tx, entryParts(tx, brand.id, records.entries, firings), records.events);
  const ticket = all.length ? await tickets.fetchView(tx, brand.id, before.id) : before;
  await carryOutFirings(tx, firings, { brand, ticket, autoSubmitted: false });
  return ticket;
}

/** Locks a live ticket of the brand against other changes until the transaction ends; its id (404 when there is none). */
export async function lockLiveTicket(tx: TenantCtx, brandId: string, ticketId: string): Promise<string> {
  const locked = await Ticket.scoped(tx).where({ 'tickets.brandId': brandId, 'tickets.id': ticketId }).whereNull('tickets.deletedAt').forUpdate().select('tickets.id').first();
  if (!locked) throw notFound('Ticket');
  return locked.id;
}

/**
 * A legal hold keeps a ticket from retention: an owner, an admin or an API key sets or lifts it.
 * A member who cannot see the brand gets its 404 first.
 */
async function assertMaySetLegalHold(ctx: TenantCtx, brandId: string): Promise<void> {
  if (!ctx.session || hasRole(ctx.session.role, 'admin')) return;
  await requireBrand(ctx, brandId);
  throw forbidden(`Setting or lifting a legal hold takes the admin role or above; your role is ${ctx.session.role}`, 'insufficient_role');
}

/**
 * PATCH: only the fields given; `changes` lists those whose value really changed (tags as sorted
 * id lists). Nothing changed: nothing is written, no trigger runs, and updatedAt stays.
 */
export async function updateTicket(ctx: TenantCtx, brandId: string, ticketId: string, input: UpdateTicketInput): Promise<UpdateResult> {
  if (Object.keys(input).length === 0) throw badRequest('Send at least one field to change', [], 'empty_update');
  if (input.legalHold !== undefined) await assertMaySetLegalHold(ctx, brandId);
  let title: string | undefined;
  if (input.title !== undefined) {
    title = input.title.trim();
    if (!title) throw badRequest('title must not be blank', [{ field: 'title', message: 'must not be blank' }]);
  }
  tickets.checkCustomFieldsShape(input.customFields);
  const usual = await updateInTwoStatements(ctx, brandId, ticketId, title === undefined ? input : { ...input, title });
  if (usual) return usual;

  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const locked = await lockedClock(tx, brand.id, ticketId);
    if (!locked) throw notFound('Ticket');
    const before = await tickets.fetchView(tx, brand.id, locked.id);
    const plan = newPlan(before);
    const changes: Change[] = [];
    await planInput(tx, brand, plan, { ...input, title }, changes);
    const ruleChanges: Change[] = [];
    let firings: Firing[] = [];
    if (changes.length) {
      const state = await stateOfPlan(tx, brand, plan);
      const asChanged = { ...state, tags: [...state.tags], customFields: { ...state.customFields } };
      firings = await fireTriggers(tx, brand, state, { event: 'ticket.updated', before: stateOfView(before), comment: null });
      if (firings.length) await planInput(tx, brand, plan, inputOfRules(stateChanges(asChanged, state)), ruleChanges);
    }
    await planClock(tx, brand, plan, input.dueAt, changes, locked);
    const ticket = await writePlan(tx, brand, plan, changes, ruleChanges, firings);
    return { ticket, changes };
  });
}

/**
 * The triggers of a change another flow wrote (a comment): run on the ticket as that change left
 * it, their fields written by one more statement, their firings recorded. `ticket`: the ticket as
 * that change left it, when the caller read it already.
 */
export async function runTriggersAfter(
  tx: TenantCtx,
  brand: Brand,
  ticketId: string,
  run: { event: 'comment.created'; statusBefore: string | null; comment: { body: string; authorType: string; isInternal: boolean; authorName: string | null; metadata: unknown } },
  ticket?: TicketView,
): Promise<void> {
  const before = ticket ?? (await tickets.fetchView(tx, brand.id, ticketId));
  const state = stateOfView(before);
  const was = { ...state, status: run.statusBefore ?? state.status };
  const facts = { body: run.comment.body, authorType: run.comment.authorType, isInternal: run.comment.isInternal };
  const firings = await fireTriggers(tx, brand, state, { event: run.event, before: was, comment: facts });
  await applyRuleChanges(tx, brand, [{ before, after: state, firings }], {
    autoSubmitted: isAutoSubmitted(run.comment.metadata),
    comment: { body: run.comment.body, authorName: run.comment.authorName, isInternal: run.comment.isInternal },
  });
}

/** What rules did to a ticket: the ticket before them (locked by the caller), the state they left it in, and their firings. */
export interface RuleOutcome {
  before: TicketView;
  after: TicketState;
  firings: readonly Firing[];
}

/** What rules changed on a ticket, as a write that is the same for every ticket they changed alike. */
interface RuleDelta {
  set: Omit<StatePatch, 'tags' | 'customFields'>;
  /** Tag names, lower-cased. */
  addTags: string[];
  removeTags: string[];
  /** The custom fields set, by key. */
  customFields: Record<string, unknown> | null;
}

function deltaOf(from: TicketState, to: TicketState): RuleDelta | null {
  const { tags: _tags, customFields, ...set } = stateChanges(from, to);
  const delta: RuleDelta = {
    set,
    addTags: to.tags.filter((t) => !from.tags.includes(t)).sort(),
    removeTags: from.tags.filter((t) => !to.tags.includes(t)).sort(),
    customFields: customFields ? Object.fromEntries(Object.entries(to.customFields).filter(([k, v]) => !same(from.customFields[k] ?? null, v ?? null))) : null,
  };
  if (delta.customFields && !Object.keys(delta.customFields).length) delta.customFields = null;
  return Object.keys(set).length || delta.addTags.length || delta.removeTags.length || delta.customFields ? delta : null;
}

/**
 * Writes one delta to the tickets it is the delta of, set-wise: its checks once (each ticket's
 * custom fields whole), the service-level clocks it moves, one update, the tags' links. Returns
 * the dueAt each ticket's clock moved to, for its audit entry.
 */
async function writeDelta(tx: TenantCtx, brand: Brand, delta: RuleDelta, outcomes: readonly RuleOutcome[]): Promise<Map<string, Change>> {
  const { set } = delta;
  await checkInput(tx, brand, set);
  if (delta.customFields) for (const o of outcomes) await checkInput(tx, brand, { customFields: o.after.customFields });
  const ids = outcomes.map((o) => o.before.id);
  const moves = 'status' in set || 'priority' in set;
  const dueChanges = moves
    ? await moveClocks(
        tx,
        brand,
        outcomes.map((o) => ({
          ticketId: o.before.id,
          fromStatus: o.before.status,
          to: { status: set.status ?? o.before.status, ...('priority' in set ? { priority: set.priority } : {}) },
        })),
      )
    : new Map<string, Change>();
  const customFields =
    delta.customFields && tx.db.raw(`(case when jsonb_typeof(t.custom_fields) = 'object' then t.custom_fields else '{}' end) || ?::jsonb`, [JSON.stringify(delta.customFields)]);
  await updateTickets(tx, brand.id, ids, { ...set, ...(customFields ? { customFields } : {}), updatedAt: tx.db.raw('now()') });
  if (delta.addTags.length) await linkTags(tx, brand.id, ids, [...(await resolveTags(tx, brand.id, delta.addTags))]);
  if (delta.removeTags.length) {
    await tx
      .db('ticket_tags')
      .where({ ...scopeOf(tx), brandId: brand.id })
      .whereIn('ticketId', ids)
      .whereIn('tagId', [...(await resolveTags(tx, brand.id, delta.removeTags))])
      .delete();
  }
  return dueChanges;
}

/**
 * Writes what rules changed on tickets of the brand (locked by the caller) and records their
 * firings: the tickets the rules changed alike in one write (writeDelta), every firing's audit
 * entry in one statement, one ticket.updated event per ticket changed, the side effects on each
 * ticket as written (the counts go with the entries). A ticket-update PATCH folds its triggers into its own
 * write instead (updateTicket).
 */
export async function applyRuleChanges(
  tx: TenantCtx,
  brand: Brand,
  outcomes: readonly RuleOutcome[],
  after: Pick<AfterWrite, 'autoSubmitted' | 'comment'> = { autoSubmitted: false },
): Promise<void> {
  const fired = outcomes.filter((o) => o.firings.length);
  if (!fired.length) return;
  const alike = new Map<string, { delta: RuleDelta; outcomes: RuleOutcome[] }>();
  const changed = new Set<string>();
  for (const o of fired) {
    const delta = deltaOf(stateOfView(o.before), o.after);
    if (!delta) continue;
    changed.add(o.before.id);
    const key = canonicalJson(delta);
    (alike.get(key) ?? alike.set(key, { delta, outcomes: [] }).get(key)!).outcomes.push(o);
  }
  const dueChanges = new Map<string, Change>();
  for (const group of alike.values()) for (const [id, change] of await writeDelta(tx, brand, group.delta, group.outcomes)) dueChanges.set(id, change);
  await recordFired(
    tx,
    brand.id,
    fired.map((o) => ({ ticket: o.before, firings: o.firings, alsoChanged: dueChanges.has(o.before.id) ? [dueChanges.get(o.before.id)!] : [] })),
  );
  const withEffects = fired.filter((o) => o.firings.some((f) => f.sideEffects.length));
  const written = new Map(
    (
      await tickets.fetchViews(
        tx,
        brand.id,
        withEffects.map((o) => o.before.id).filter((id) => changed.has(id)),
      )
    ).map((v) => [v.id, v]),
  );
  for (const o of withEffects) await carryOutFirings(tx, o.firings, { brand, ticket: written.get(o.before.id) ?? o.before, ...after });
}
