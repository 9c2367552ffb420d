import { withTx, type Actor, type TenantCtx } from '../core/context.js';
import * as audit from '../core/audit.js';
import type { Change } from '../core/audit.js';
import { requireBrand, type Brand } from '../core/brand.js';
import type { SqlFragment } from '../core/db.js';
import { tenantScope } from '../core/model.js';
import * as events from '../core/outbox/events.js';
import { enqueueEvents, enqueueEventsWith, type EventSpec, type NamedPart } from '../core/outbox/service.js';
import { workingTimeOf, type BusinessHoursSpec, type WorkingTime } from '../core/working-time.js';
import * as comments from '../domains/comments/service.js';
import * as mail from '../domains/mail/service.js';
import * as messages from '../domains/mail/messages.js';
import * as members from '../domains/members/service.js';
import * as profiles from '../domains/profiles/service.js';
import { compile, explain, runRules, stateCopy, type CommentFacts, type CompiledRule, type Firing, type Subject, type TicketState } from '../domains/rules/engine.js';
import type { Action, TriggerEvent } from '../domains/rules/schemas.js';
import * as rules from '../domains/rules/service.js';
import * as tallies from '../domains/rules/tallies.js';
import { render, type TemplateData } from '../domains/rules/templates.js';
import type { CreateTicketInput, TicketView } from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import { mailingBrand } from './brand-domains.js';
import { referenceProblems } from './rules.js';
import * as watchers from './ticket-watchers.js';

/**
 * Triggers, as the flows that write tickets run them (ticket create, ticket update, comment
 * create): on the ticket as it will be, in the change's transaction. The fields they set are
 * folded into the change's own write by its flow; what this file adds after the write is each
 * firing's audit entry (source `automation`, performer the rule), its count, and its side effects
 * (watchers, notes, mail, webhooks). Automations share all of it but the evaluation's start
 * (flows/automations.ts).
 */

/** A ticket as rules see it. */
export function stateOfView(t: TicketView): TicketState {
  return {
    title: t.title,
    body: t.body,
    status: t.status,
    priority: t.priority,
    assigneeId: t.assigneeId,
    categoryId: t.categoryId,
    tags: t.tags.map((g) => g.name.toLowerCase()),
    source: t.source,
    customerEmail: t.customer?.email ?? null,
    customFields: customFieldsOf(t.customFields),
    isSpam: t.isSpam,
  };
}

export const customFieldsOf = (v: unknown): Record<string, unknown> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

/** A ticket about to be created, as rules see it. */
export function stateOfCreate(input: CreateTicketInput, title: string, email: string | null, tagNames: readonly string[], spam: boolean): TicketState {
  return {
    title,
    body: input.body ?? null,
    status: input.status ?? 'open',
    priority: input.priority ?? null,
    assigneeId: input.assigneeId ?? null,
    categoryId: input.categoryId ?? null,
    tags: tagNames.map((t) => t.toLowerCase()),
    source: input.source ?? 'api',
    customerEmail: email,
    customFields: customFieldsOf(input.customFields),
    isSpam: spam,
  };
}

/** A create's input with the fields its triggers set (their tags and spam flag are the caller's to carry). */
export function foldIntoCreate(input: CreateTicketInput, from: TicketState, to: TicketState): CreateTicketInput {
  const { tags: _tags, isSpam: _spam, ...fields } = stateChanges(from, to);
  return { ...input, ...fields };
}

/** The brand's business hours (those of its service level), or every hour when it has none. */
export const brandWorkingTime = (brand: Pick<Brand, 'slaBusinessHours'>): WorkingTime => workingTimeOf(brand.slaBusinessHours as BusinessHoursSpec | null);

export const isWithin = (working: WorkingTime, now: number) => working.between(now, now + 1000) > 0;

/** Round robin: the active member among `memberIds` with the fewest unresolved tickets of the brand; ties in list order. */
export async function leastLoaded(tx: TenantCtx, brandId: string, memberIds: readonly string[]): Promise<string | null> {
  const active = new Set((await members.findMany(tx, memberIds)).filter((m) => m.status === 'active').map((m) => m.id));
  const candidates = memberIds.filter((m) => active.has(m));
  if (!candidates.length) return null;
  const { rows } = await tx.db.raw<{ rows: { assignee_id: string; n: string }[] }>(
    `select t.assignee_id, count(*) as n from tickets t
    where ? and t.brand_id = ? and t.assignee_id = any(?::text[]) and t.deleted_at is null and t.status not in ('resolved', 'closed')
    group by t.assignee_id`,
    [tenantScope(tx, 't'), brandId, candidates],
  );
  const load = new Map(rows.map((r) => [r.assignee_id, Number(r.n)]));
  return candidates.reduce((best, m) => ((load.get(m) ?? 0) < (load.get(best) ?? 0) ? m : best));
}

export interface TriggerRun {
  event: TriggerEvent;
  /** The ticket before the change; null while it is created. */
  before: TicketState | null;
  comment: CommentFacts | null;
}

/**
 * Runs the brand's enabled triggers on `event` over `state` (changed in place) and returns their
 * firings. None fires on a ticket that was closed before the change. A fired rule that names
 * something the brand no longer has is disabled (saying why), and the run starts again without it.
 */
export async function fireTriggers(tx: TenantCtx, brand: Brand, state: TicketState, run: TriggerRun, checks?: ReferenceChecks): Promise<Firing[]> {
  if (run.before?.status === 'closed') return [];
  const all = (await rules.rulesOf(tx, brand)).triggers.filter((r) => r.on.includes(run.event));
  if (!all.length) return [];
  return fireChecked(tx, brand, all, state, subjectOf(tx, brand, run.before, run.comment), checks);
}

/** What rules are evaluated on; `now`: the instant they are evaluated at (the services' clock by default). */
export function subjectOf(tx: TenantCtx, brand: Brand, before: TicketState | null, comment: CommentFacts | null, hours?: Subject['hours'], now = tx.services.now()): Subject {
  let within: boolean | undefined;
  return {
    before,
    comment,
    withinBusinessHours: () => (within ??= isWithin(brandWorkingTime(brand), now)),
    ...(hours ? { hours } : {}),
  };
}

/**
 * The references of the rules a run has checked: each rule's id, and why it is broken (null: it is
 * not). A run over many tickets passes the same map to each, so each rule is checked once.
 */
export type ReferenceChecks = Map<string, string | null>;

/** Runs `candidates` (see fireTriggers), leaving out and disabling the fired ones whose references are gone. */
export async function fireChecked(
  tx: TenantCtx,
  brand: Brand,
  candidates: readonly CompiledRule[],
  state: TicketState,
  subject: Subject,
  checks: ReferenceChecks = new Map(),
): Promise<Firing[]> {
  let usable = candidates.filter((r) => !checks.get(r.id));
  const start = stateCopy(state);
  for (;;) {
    const trial = stateCopy(start);
    const firings = await runRules(usable, trial, subject, (ids) => leastLoaded(tx, brand.id, ids));
    const broken = await brokenRules(tx, brand, firings, checks);
    if (!broken.length) {
      Object.assign(state, trial);
      return firings;
    }
    for (const rule of broken) await rules.disable(tx, brand.id, rule, checks.get(rule.id)!);
    usable = usable.filter((r) => !broken.includes(r));
  }
}

async function brokenRules(tx: TenantCtx, brand: Brand, firings: readonly Firing[], checks: ReferenceChecks): Promise<CompiledRule[]> {
  for (const f of firings) {
    if (checks.has(f.rule.id)) continue;
    const problems = await referenceProblems(tx, brand, null, f.rule.actions);
    checks.set(f.rule.id, problems.length ? `${problems[0]!.field}: ${problems[0]!.message}` : null);
  }
  return firings.map((f) => f.rule).filter((r) => checks.get(r.id));
}

/** The actor of a rule's changes: the audit log's performer is the rule, its source `automation`. */
export function ruleActor(rule: Pick<CompiledRule, 'id' | 'name'>): Actor {
  return { type: 'system', id: rule.id, name: rule.name, source: 'automation' };
}
const asRule = (tx: TenantCtx, rule: CompiledRule): TenantCtx => ({ ...tx, actor: ruleActor(rule) });

export interface AfterWrite {
  brand: Brand;
  /** The ticket as written (the rules' fields included). */
  ticket: TicketView;
  /** The change answered a message that was itself sent by a machine: no rule mails its customer. */
  autoSubmitted: boolean;
  comment?: { body: string; authorName: string | null; isInternal: boolean } | null;
}

/** A ticket as a firing's audit entry names it. */
type EntryTicket = { id: string; ticketNumber?: number; title: string };

/** Each firing's audit entry (source automation, performed by the rule) as audit rows; `alsoChanged` (the write's dueAt) goes with the first. */
export function firingEntries(tx: TenantCtx, firings: readonly Firing[], brandId: string, ticket: EntryTicket, alsoChanged: readonly Change[] = []) {
  return firings.flatMap((f, i) =>
    audit.entryRows(asRule(tx, f.rule), [
      {
        brandId,
        ticketId: ticket.id,
        entityType: 'ticket',
        entityId: ticket.id,
        event: 'ticket.updated',
        changes: i === 0 ? [...f.changes, ...alsoChanged] : f.changes,
        metadata: {
          ...(ticket.ticketNumber === undefined ? {} : { ticketNumber: ticket.ticketNumber }),
          title: ticket.title,
          rule: { id: f.rule.id, name: f.rule.name, kind: f.rule.kind },
          ...(f.sideEffects.length ? { actions: f.sideEffects.map((a) => a.type) } : {}),
        },
      },
    ]),
  );
}

/** What firings changed on a ticket, as a ticket.updated's `changes` (custom fields as customFields). */
const changedFields = (firings: readonly Firing[], alsoChanged: readonly Change[] = []) => [
  ...new Set([...firings.flatMap((f) => f.changes), ...alsoChanged].map((c) => (c.field.startsWith('customFields.') ? 'customFields' : c.field))),
];

/** The ticket.updated event (source automation) for the fields firings changed, or none. */
export function firingEvent(brandId: string, ticketId: string, firings: readonly Firing[], alsoChanged: readonly Change[] = []): EventSpec | null {
  const changed = changedFields(firings, alsoChanged);
  return changed.length ? events.ticketsUpdatedEvents(brandId, [{ ticketId, changes: changed }], 'automation')[0]! : null;
}

/**
 * A change's audit rows and its firings' in ONE statement, which also tallies the firings: a
 * change its triggers fired on costs no more round trips than one they did not.
 */
export async function recordEntries(tx: TenantCtx, brandId: string, rows: readonly Record<string, unknown>[], firings: readonly Firing[]): Promise<void> {
  await enqueueEventsWith(tx, entryParts(tx, brandId, rows, firings), []);
}

/**
 * recordEntries' writes as parts of a statement that also enqueues the change's events
 * (enqueueEventsWith); `when`: a condition of that statement they are written under.
 */
export function entryParts(tx: TenantCtx, brandId: string, rows: readonly Record<string, unknown>[], firings: readonly Firing[], when?: SqlFragment): NamedPart[] {
  if (!rows.length) return [];
  const counts = firings.length
    ? tallies.tallyStatement(
        tx,
        brandId,
        firings.map((f) => f.rule.id),
        when,
      )
    : null;
  return [...(counts ? [{ name: 'fired', ...counts }] : []), { name: 'entries', ...audit.insertRowsStatement(rows, when) }];
}

/** One ticket's firings, as recordFired writes them. */
export interface FiredTicket {
  ticket: EntryTicket;
  firings: readonly Firing[];
  /** What the write changed beside the rules' fields (the service-level clock's dueAt). */
  alsoChanged?: readonly Change[];
}

/**
 * After the writes, for tickets of the brand at once: each firing's audit entry and the rules'
 * counts (one statement), and a ticket.updated event (source automation) for each ticket whose
 * fields they changed (one more).
 */
export async function recordFired(tx: TenantCtx, brandId: string, fired: readonly FiredTicket[]): Promise<void> {
  const rows = fired.flatMap((f) => firingEntries(tx, f.firings, brandId, f.ticket, f.alsoChanged));
  await recordEntries(
    tx,
    brandId,
    rows,
    fired.flatMap((f) => f.firings),
  );
  await enqueueEvents(
    tx,
    fired.flatMap((f) => firingEvent(brandId, f.ticket.id, f.firings, f.alsoChanged) ?? []),
  );
}

/** The firings' side effects (watchers, notes, mail, webhooks), in firing order, after the change is written. */
export async function carryOutFirings(tx: TenantCtx, firings: readonly Firing[], after: AfterWrite): Promise<void> {
  const withEffects = firings.filter((f) => f.sideEffects.length);
  if (!withEffects.length) return;
  const data = await templateData(tx, after.brand, after.ticket, after.comment ?? null);
  for (const f of withEffects) {
    const origin: ActionOrigin = { id: f.rule.id, name: f.rule.name, kind: f.rule.kind };
    for (const action of f.sideEffects) await carryOut(asRule(tx, f.rule), origin, action, after, data);
  }
}

/** What side effects are carried out for: a rule that fired, or a macro a member applied. */
export interface ActionOrigin {
  id: string;
  name: string;
  kind: 'trigger' | 'automation' | 'macro';
}

/** Side effects (watchers, notes, mail, webhooks) of `origin` on the ticket as written, as the ctx's actor. */
export async function carryOutActions(tx: TenantCtx, origin: ActionOrigin, actions: readonly Action[], after: AfterWrite): Promise<void> {
  if (!actions.length) return;
  const data = await templateData(tx, after.brand, after.ticket, after.comment ?? null);
  for (const action of actions) await carryOut(tx, origin, action, after, data);
}

/** A rule's evaluation needs what only a transaction reads (the brand's business hours, the members' loads). */
class NeedsTheDatabase extends Error {}

/**
 * Triggers run on what this process remembers of the brand's rules, without a round trip: their
 * firings, or null when they need the database (the least-loaded assignee; a create's business
 * hours, its brand unread) or have side effects (the write then goes step by step, where
 * fireTriggers runs them). `state` is changed in place. A create's run by default; an update
 * gives its event and subject (subjectOf).
 */
export async function fireInMemory(
  known: rules.BrandRules,
  state: TicketState,
  event: TriggerEvent = 'ticket.created',
  subject: Subject = {
    before: null,
    comment: null,
    withinBusinessHours: () => {
      throw new NeedsTheDatabase();
    },
  },
): Promise<Firing[] | null> {
  if (subject.before?.status === 'closed') return [];
  const candidates = known.triggers.filter((r) => r.on.includes(event));
  if (!candidates.length) return [];
  try {
    const firings = await runRules(candidates, state, subject, () => Promise.reject(new NeedsTheDatabase()));
    return firings.some((f) => f.sideEffects.length) ? null : firings;
  } catch (err) {
    if (err instanceof NeedsTheDatabase) return null;
    throw err;
  }
}

/** What a template sees of a ticket, its brand, customer and assignee (and the comment that started a rule). */
export async function templateData(tx: TenantCtx, brand: Brand, ticket: TicketView, comment: TemplateData['comment']): Promise<TemplateData> {
  const assignee = ticket.assigneeId ? (await members.findMany(tx, [ticket.assigneeId]))[0] : undefined;
  return {
    ticket: {
      id: ticket.id,
      number: ticket.ticketNumber,
      ticketNumber: ticket.ticketNumber,
      title: ticket.title,
      body: ticket.body,
      status: ticket.status,
      priority: ticket.priority,
      tags: ticket.tags.map((g) => g.name),
      source: ticket.source,
      dueAt: ticket.dueAt,
      createdAt: ticket.createdAt,
      customFields: customFieldsOf(ticket.customFields),
      category: ticket.category?.name ?? null,
    },
    customer: ticket.customer ? { name: ticket.customer.name, email: ticket.customer.email } : null,
    brand: { id: brand.id, name: brand.name },
    assignee: assignee ? { id: assignee.id, name: assignee.name, email: assignee.email } : null,
    comment,
  };
}

/** One side effect, as the ctx's actor (a rule's firing: the rule). */
async function carryOut(tx: TenantCtx, origin: ActionOrigin, action: Action, after: AfterWrite, data: TemplateData): Promise<void> {
  const { brand, ticket } = after;
  switch (action.type) {
    case 'add_watchers':
      for (const memberId of action.value) await watchers.add(tx, brand.id, ticket.id, { memberId });
      return;
    case 'add_note':
      await comments.create(tx, brand.id, ticket.id, {
        body: await render(tx.services, action.value, data),
        metadata: {
          isInternal: true,
          ...(origin.kind === 'macro' ? { macro: { id: origin.id, name: origin.name } } : { automation: { ruleId: origin.id, ruleName: origin.name } }),
        },
      });
      return;
    case 'mail_customer': {
      // Never to a machine (an out-of-office would answer, and the two would talk forever), nor to spam.
      if (after.autoSubmitted || ticket.isSpam || !ticket.customer?.email) return;
      const to = [{ name: ticket.customer.name, address: ticket.customer.email }];
      return queueRuleMail(tx, origin, after, data, to, action.value);
    }
    case 'mail_members': {
      const ids = action.value.to ?? (ticket.assigneeId ? [ticket.assigneeId] : []);
      const optedOut = await profiles.mailOptedOut(tx, ids);
      const to = (await members.findMany(tx, ids)).filter((m) => m.status === 'active' && !optedOut.has(m.id)).map((m) => ({ name: m.name, address: m.email }));
      if (!to.length) return;
      return queueRuleMail(tx, origin, after, data, to, action.value);
    }
    case 'webhook':
      await enqueueEvents(tx, [
        {
          brandId: brand.id,
          names: ['rule.fired'],
          ticketId: ticket.id,
          ticketFields: ['id', 'ticketNumber', 'title', 'status', 'priority', 'assigneeId', 'updatedAt', 'customerId', 'customerEmail', 'customerName'],
          data: { rule: { id: origin.id, name: origin.name, kind: origin.kind } },
          webhookId: action.value,
        },
      ]);
      return;
    default:
      return;
  }
}

async function queueRuleMail(
  tx: TenantCtx,
  origin: ActionOrigin,
  after: AfterWrite,
  data: TemplateData,
  to: { name: string | null; address: string }[],
  template: { subject: string; body: string },
): Promise<void> {
  const { brand, ticket } = after;
  const message = messages.ruleMail({
    settings: mail.settingsOf(tx.services),
    key: await mail.replyTokenKey(tx),
    brand: await mailingBrand(tx, brand),
    ticket: mail.ticketInfo(ticket),
    thread: { inboundMessageIds: await mail.inboundMessageIds(tx, brand.id, ticket.id) },
    firingId: `${ticket.id}.${origin.id}.${tx.services.now()}`,
    to,
    subject: await render(tx.services, template.subject, data),
    text: await render(tx.services, template.body, data),
  });
  await mail.queueMail(tx, brand.id, ticket.id, message);
}

/** Whether the message that made the change was sent by a machine (inbound mail marks it so). */
export function isAutoSubmitted(metadata: unknown): boolean {
  const email = (metadata as { email?: { autoReply?: unknown } } | null)?.email;
  return email?.autoReply === true;
}

/** The fields a ticket's state differs in from another's, as an update's input (tags as names). */
export function stateChanges(from: TicketState, to: TicketState): StatePatch {
  const patch: StatePatch = {};
  if (from.status !== to.status) patch.status = to.status;
  if (from.priority !== to.priority) patch.priority = to.priority as StatePatch['priority'];
  if (from.assigneeId !== to.assigneeId) patch.assigneeId = to.assigneeId;
  if (from.categoryId !== to.categoryId) patch.categoryId = to.categoryId;
  if (from.isSpam !== to.isSpam) patch.isSpam = to.isSpam;
  if (JSON.stringify([...from.tags].sort()) !== JSON.stringify([...to.tags].sort())) patch.tags = to.tags;
  if (from.customFields !== to.customFields) patch.customFields = to.customFields;
  return patch;
}

export interface StatePatch {
  status?: string;
  priority?: 'low' | 'normal' | 'medium' | 'high' | 'urgent' | null;
  assigneeId?: string | null;
  categoryId?: string | null;
  isSpam?: boolean;
  tags?: string[];
  customFields?: Record<string, unknown>;
}

/**
 * A trigger's dry run on a real ticket, as on a ticket.updated that changed nothing: each
 * condition's result and, when it matches, the actions that would apply. Writes nothing.
 */
export async function testTrigger(ctx: TenantCtx, brandId: string, ruleId: string, ticketId: string) {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const rule = compile(await rules.requireRule(tx, brand.id, 'trigger', ruleId));
    const ticket = await tickets.fetchView(tx, brand.id, ticketId);
    const state = stateOfView(ticket);
    const subject = subjectOf(tx, brand, stateCopy(state), null);
    const result = explain(rule, state, subject);
    return { ...result, actions: result.matched ? [...rule.actions] : [] };
  });
}
