import { canSeeBrand, withTx, type TenantCtx } from '../core/context.js';
import { batcher } from '../core/batcher.js';
import { forgetFound, requireBrand } from '../core/brand.js';
import { badRequest, HttpError, notFound } from '../core/errors.js';
import { claim as claimIdempotencyKey, requestFingerprint } from '../core/idempotency.js';
import { newId, normalizeBrandId, ID_PREFIX } from '../core/ids.js';
import { part } from '../core/services.js';
import { isEmail, normalizeEmail } from '../core/text.js';
import * as attachments from '../domains/attachments/service.js';
import * as billing from '../domains/billing/service.js';
import * as categories from '../domains/categories/service.js';
import * as fields from '../domains/fields/service.js';
import * as mail from '../domains/mail/service.js';
import * as members from '../domains/members/service.js';
import * as statuses from '../domains/statuses/service.js';
import * as tags from '../domains/tags/service.js';
import type { CreateTicketInput, TicketView } from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import { dueAtOf, rememberedServiceLevel, serviceLevelOfRow, type ServiceLevel } from '../domains/tickets/service-level.js';
import * as watchers from './ticket-watchers.js';
import { findOrCreateContact } from './customers.js';
import { mailingBrand } from './brand-domains.js';
import { createStatement, ticketWrite, type TicketWrite } from './ticket-create-statement.js';
import { onCitus, runInAccount } from '../core/citus.js';
import { stateCopy, type Firing } from '../domains/rules/engine.js';
import * as rules from '../domains/rules/service.js';
import { carryOutFirings, fireInMemory, fireTriggers, firingEntries, foldIntoCreate, isAutoSubmitted, stateOfCreate } from './triggers.js';
import { outboxAdded } from '../core/outbox/service.js';

/**
 * Ticket create: it spans the brand's statuses, categories, tags, contacts, members, watchers,
 * attachments and custom fields. Round trips are its cost, and the per-brand ticket counter
 * serializes creates within a brand, so the usual create (customer, existing tags, status,
 * category, assignee, no watchers or pending attachments, no custom-field schema) is ONE statement
 * (createInOneStatement); anything else, every error included, goes step by step in a transaction
 * (createStepByStep). Both write the ticket with the same statement (ticket-create-statement.ts).
 * notifyCustomer mails the customer the brand's confirmation (its autoresponse) in the create's
 * transaction, so such a create goes step by step.
 */

/** A 404 from a lookup of something the body named is the caller's 400 on that field. */
export async function asFieldError<T>(field: string, code: string, message: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof HttpError && err.statusCode === 404) throw badRequest(message, [{ field, message: 'is not known in this brand' }], code);
    throw err;
  }
}

/** Tag ids for tag ids (must be the brand's) or names (found or created). */
export async function resolveTags(ctx: TenantCtx, brandId: string, given: readonly string[]): Promise<Set<string>> {
  const tagIds = new Set<string>();
  const ids = given.filter((t) => tickets.TAG_ID.test(t));
  const names = given.filter((t) => !tickets.TAG_ID.test(t));
  if (ids.length) {
    const rows = await asFieldError('tags', 'invalid_tags', 'tags names a tag id that is not a tag of this brand', () => tags.requireTags(ctx, brandId, ids));
    for (const r of rows) tagIds.add(r.id);
  }
  if (names.length) for (const t of await tags.findOrCreateByNames(ctx, brandId, names)) tagIds.add(t.id);
  return tagIds;
}

export async function assertAssignee(ctx: TenantCtx, assigneeId: string): Promise<void> {
  if (!(await members.isMember(ctx, assigneeId))) {
    throw badRequest(
      `assigneeId ${assigneeId} is not a member of this account; see GET /v1/accounts/me/members`,
      [{ field: 'assigneeId', message: 'is not a member of this account' }],
      'invalid_assignee',
    );
  }
}

/**
 * A new ticket's deadline: the one given (null or absent: none given), else its brand's service
 * level's; `slaRevision`: the brand's settings revision the level was read at, for the create
 * statement to check (null: nothing to check).
 */
function dueOnCreate(ctx: TenantCtx, input: CreateTicketInput, level: ServiceLevel | null, slaRevision: number | null) {
  if (input.dueAt != null) return { dueAt: tickets.isoOrNull(input.dueAt), dueAtManual: true, slaRevision: null };
  return { dueAt: dueAtOf(level, ctx.services.now(), input.priority ?? null)?.toISOString() ?? null, dueAtManual: false, slaRevision };
}

export interface CreateResult {
  created: boolean;
  ticket: TicketView;
}

/** How a create may be narrowed: a customer's ticket (the portal) links only that customer's pending uploads. */
export interface CreateOptions {
  pendingUploadsOf?: string;
  /** Created as spam whoever the sender is (inbound mail failing its domain's DMARC policy). */
  spam?: boolean;
}

export async function createTicket(ctx: TenantCtx, brandId: string, input: CreateTicketInput, idempotencyKey?: string, options: CreateOptions = {}): Promise<CreateResult> {
  const c = createOf(ctx, brandId, input, idempotencyKey);
  const write = c.oneStatement ? await usualWrite(ctx, c.brandId, c.title, c.email, input, c.idempotency, options.spam) : null;
  const ticket = write ? await createInOneStatement(ctx, write) : null;
  if (ticket) return { created: true, ticket };
  return createStepByStep(ctx, c.brandId, c.title, c.email, input, c.idempotency, c.brandKey, options);
}

/** A create's input checked (400s and the brand's 404 thrown here), and whether it may try the one statement. */
function createOf(ctx: TenantCtx, brandId: string, input: CreateTicketInput, idempotencyKey: string | undefined) {
  const title = input.title.trim();
  if (!title) throw badRequest('title must not be blank', [{ field: 'title', message: 'must not be blank' }]);
  tickets.checkCustomFieldsShape(input.customFields);
  let email: string | null = null;
  if (input.customerEmail != null) {
    email = normalizeEmail(input.customerEmail);
    if (!isEmail(email)) throw badRequest('customerEmail must be an email address', [{ field: 'customerEmail', message: 'is not an email address' }], 'invalid_email');
  }
  const id = normalizeBrandId(brandId);
  if (!canSeeBrand(ctx.brandScope, id)) throw notFound('Brand');
  const fingerprint = requestFingerprint('POST', `/brands/${id}/tickets`, input);
  const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, fingerprint };
  const brandKey = `${ctx.accountId}:${ctx.livemode}:${id}`;
  const confirms = Boolean(input.notifyCustomer && email);
  return { brandId: id, title, email, idempotency, brandKey, oneStatement: !hasFieldSchema(ctx, brandKey) && !confirms };
}

/** One create of createTogether: its ctx carries its own actor. */
export interface GroupedCreate {
  ctx: TenantCtx;
  brandId: string;
  input: CreateTicketInput;
  options?: CreateOptions;
}

/**
 * Several creates of one account and mode in the caller's transaction (a group of inbound mail):
 * the usual ones are written by ONE create statement, numbered in the order given; the others,
 * and any that statement did not write (a check failed), then go step by step, in order. Each
 * ticket has its own audit entries and events, as from createTicket.
 */
export async function createTogether(creates: readonly GroupedCreate[]): Promise<CreateResult[]> {
  if (!creates.length) return [];
  const tx = creates[0]!.ctx;
  if (!tx.db.isTransaction) throw new Error('creates go together inside the caller’s transaction only');
  if (creates.some((c) => c.ctx.accountId !== tx.accountId || c.ctx.livemode !== tx.livemode)) throw new Error('creates go together within one account and mode only');
  const checked = creates.map((c) => createOf(c.ctx, c.brandId, c.input, undefined));
  const writes: (TicketWrite | null)[] = [];
  for (const [i, c] of creates.entries()) {
    const { brandId, title, email, oneStatement } = checked[i]!;
    writes.push(oneStatement ? await usualWrite(c.ctx, brandId, title, email, c.input, undefined, c.options?.spam) : null);
  }
  const together = writes.filter((w): w is TicketWrite => w !== null);
  const written = together.length ? await runWrites(tx, together) : [];
  const views = writes.map((w) => (w ? written[together.indexOf(w)]! : null));
  const results: CreateResult[] = [];
  for (const [i, c] of creates.entries()) {
    const view = views[i];
    const { brandId, title, email, brandKey } = checked[i]!;
    results.push(view ? { created: true, ticket: view } : await createStepByStep(c.ctx, brandId, title, email, c.input, undefined, brandKey, c.options ?? {}));
  }
  return results;
}

/**
 * Brands seen (in the last minute) with a ticket schema or field rules: their creates always go
 * step by step, so they skip the one statement that would only find that out. A hint, not a rule:
 * the statement checks for itself, so a stale entry costs one round trip, never a wrong ticket.
 */
const FIELD_SCHEMA_HINT_MS = 60_000;
const brandsWithFieldSchema = part('tickets.brandsWithFieldSchema', () => new Map<string, number>());
function hasFieldSchema(ctx: TenantCtx, brandKey: string): boolean {
  const hints = ctx.services.get(brandsWithFieldSchema);
  const until = hints.get(brandKey);
  if (until === undefined) return false;
  if (until > ctx.services.now()) return true;
  hints.delete(brandKey);
  return false;
}

/** The created tickets by their write's position; absent: that create wrote nothing. */
async function runWrites(ctx: TenantCtx, writes: readonly TicketWrite[]): Promise<(TicketView | null)[]> {
  // On Citus the statement runs on the worker that holds the account, where a NOTIFY would reach
  // no dispatcher (and a transaction that sent one cannot commit in two phases): the dispatchers
  // are woken from here (at the caller's commit, or now when the statement committed itself).
  const citus = await onCitus(ctx);
  const rows = await runInAccount<Record<string, unknown> & { ord: number; announced: unknown }>(ctx, createStatement(ctx, writes, !citus)).catch((err: unknown) => {
    throw billing.allowanceRefusal(err) ?? err;
  });
  const views: (TicketView | null)[] = writes.map(() => null);
  for (const { ord, announced: _, ...row } of rows) views[ord] = tickets.viewOfColumns(row);
  if (citus && rows.some((r) => r.announced)) await outboxAdded(ctx, 1);
  return views;
}

/**
 * Group commit for the usual creates: while a batch of them runs, the next creates of the same
 * account and mode wait, and then go together as ONE statement, one commit: the statement's fixed
 * cost (about half of a lone create's database time) and the brand row locks are paid once per
 * batch. A lone create goes at once. A batch that fails as a whole (a deadlock with another
 * process, a row deleted under it) answers null for each create, which then goes step by step.
 *
 * Two batches run at once: while one statement keeps a database core busy (or waits for its
 * commit to reach the disk), the other uses the second. The second starts only with at least as
 * many creates as the running one holds, and never with a brand the running one writes (it would
 * wait for that brand's row lock): a brand's creates wait and go together in the next batch. On 2
 * cores, 16 brands at concurrency 16 (harness, 20k tickets): ~615 creates/s in batches of about 6,
 * where two lanes split by brand hash made ~515/s in batches of about 4.
 */
const CREATE_BATCHES_AT_ONCE = 2;
const MAX_CREATE_BATCH = 32;
/** This process's create batches (one batcher per Services, so per connection pool). */
const createBatches = part('tickets.createBatches', () =>
  batcher<TicketWrite, TicketView | null>(
    async (writes) =>
      runWrites(writes[0]!.ctx, writes).catch((err: unknown) => {
        // The callers still get their tickets (step by step); the log says group commit failed.
        // A batch over the plan's allowance, or one whose brand has no room in its budget of it, is
        // no failure: step by step, each create counts the exact way, and fits or gets its 403.
        if (!billing.isLimitReached(err) && !billing.isOutsideBrandBudget(err)) {
          writes[0]!.ctx.log?.warn({ err, creates: writes.length }, 'a batch of ticket creates failed as a whole: each goes step by step');
        }
        return writes.map(() => null);
      }),
    { maxSize: MAX_CREATE_BATCH, concurrency: CREATE_BATCHES_AT_ONCE, exclusive: (w) => w.idempotency?.key ?? null, affinity: (w) => w.brandId },
  ),
);

/**
 * The usual create, as one statement committed on its own (batched with concurrent creates), or
 * inside the caller's transaction (inbound mail) alone: one round trip. When a check fails, a tag
 * is new or the key is taken, nothing is written and it returns null: the step-by-step create
 * then gives the precise answer (a 400 or 404, new tags, the replay). Watchers and pending
 * attachments always go step by step.
 */
async function createInOneStatement(ctx: TenantCtx, w: TicketWrite): Promise<TicketView | null> {
  if (ctx.db.isTransaction) return (await runWrites(ctx, [w]))[0]!;
  return ctx.services.get(createBatches)(`${ctx.accountId}:${ctx.livemode}`, w);
}

/** The usual create's write, its triggers run in memory; null when it must go step by step. */
async function usualWrite(
  ctx: TenantCtx,
  brandId: string,
  title: string,
  email: string | null,
  input: CreateTicketInput,
  idempotency: { key: string; fingerprint: string } | undefined,
  spam = false,
): Promise<TicketWrite | null> {
  if (input.watchers?.length || input.attachmentIds?.length) return null;
  const given = input.tags ?? [];
  const tagIds = [...new Set(given.filter((t) => tickets.TAG_ID.test(t)))];
  let tagNames = [...new Set(given.filter((t) => !tickets.TAG_ID.test(t)).map((t) => t.trim().toLowerCase()))];
  if (tagNames.some((n) => !n || n.length > tags.MAX_TAG_NAME_LENGTH)) return null;
  const id = newId(ID_PREFIX.ticket);
  const known = rules.rememberedRules(ctx, brandId);
  let firings: Firing[] = [];
  if (known.triggers.some((r) => r.on.includes('ticket.created'))) {
    // Rules compare tags by name: tags given by id are named step by step.
    if (tagIds.length) return null;
    const state = stateOfCreate(input, title, email, tagNames, spam);
    const initial = stateCopy(state);
    const fired = await fireInMemory(known, state);
    if (fired === null) return null;
    firings = fired;
    input = foldIntoCreate(input, initial, state);
    tagNames = state.tags;
    spam = state.isSpam;
  }
  const sla = rememberedServiceLevel(ctx, brandId);
  const due = dueOnCreate(ctx, input, sla.level, sla.revision);
  const entries = firingEntries(ctx, firings, brandId, { id, title });
  return ticketWrite(ctx, brandId, title, email, input, {
    id,
    tagIds,
    tagNames,
    idempotency,
    spam,
    due,
    rules: { revision: known.revision, firedRuleIds: firings.map((f) => f.rule.id), entries },
  });
}

/**
 * The create for everything else, in one transaction:
 *   1. claim the idempotency key (if any): INSERT … ON CONFLICT; a concurrent request with the
 *      same key blocks on the uncommitted row and then sees the committed ticket;
 *   2. every check and every side write (status, category, assignee, custom fields against the
 *      brand's schema, new tags, the customer contact, attachments, watchers): none of them locks
 *      the brand row (watcher rows and linked attachments reference the ticket through deferred
 *      foreign keys, checked at commit);
 *   3. LAST, the create statement for this one create (everything it checks now holds); the commit
 *      follows at once, so the brand row lock is held for that statement and the commit. A failed
 *      create rolls the counter back with everything else: numbers have no gaps.
 */
async function createStepByStep(
  ctx: TenantCtx,
  brandId: string,
  title: string,
  email: string | null,
  input: CreateTicketInput,
  idempotency: { key: string; fingerprint: string } | undefined,
  brandKey: string,
  options: CreateOptions,
): Promise<CreateResult> {
  const outcome = await withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    if (fields.hasTicketSchema(brand)) tx.services.get(brandsWithFieldSchema).set(brandKey, tx.services.now() + FIELD_SCHEMA_HINT_MS);
    const id = newId(ID_PREFIX.ticket);
    if (idempotency) {
      const claim = await claimIdempotencyKey(tx, idempotency.key, idempotency.fingerprint, id, 'ticket');
      if (!claim.claimed) return { created: false as const, id: claim.resourceId, brandId: brand.id };
    }

    const status = input.status ?? 'open';
    await statuses.assertStatusKey(tx, brand.id, status);
    if (input.categoryId) {
      await asFieldError('categoryId', 'invalid_category', `categoryId ${input.categoryId} is not a category of this brand`, () =>
        categories.requireCategory(tx, brand.id, input.categoryId!),
      );
    }
    if (input.assigneeId) await assertAssignee(tx, input.assigneeId);
    await fields.validateCustomFields(tx, brand.id, input.customFields);

    let tagIds = await resolveTags(tx, brand.id, input.tags ?? []);
    let spam = options.spam ?? false;
    let firings: Firing[] = [];
    if ((await rules.rulesOf(tx, brand)).triggers.some((r) => r.on.includes('ticket.created'))) {
      const names = tagIds.size ? (await tags.requireTags(tx, brand.id, [...tagIds])).map((g) => g.name) : [];
      const state = stateOfCreate(input, title, email, names, spam);
      const initial = stateCopy(state);
      firings = await fireTriggers(tx, brand, state, { event: 'ticket.created', before: null, comment: null });
      input = foldIntoCreate(input, initial, state);
      if (firings.some((f) => f.changes.some((c) => c.field.startsWith('customFields.')))) await fields.validateCustomFields(tx, brand.id, input.customFields);
      if (firings.some((f) => f.changes.some((c) => c.field === 'tags'))) tagIds = await resolveTags(tx, brand.id, state.tags);
      spam = state.isSpam;
    }
    if (email) await findOrCreateContact(tx, brand.id, email, input.customerName ?? null);
    const attachmentCount = await attachments.linkPending(tx, brand.id, id, input.attachmentIds ?? [], options.pendingUploadsOf ?? null);
    // Its entry is made (and so ordered) before the watchers' entries, though written by the last statement.
    const due = dueOnCreate(tx, input, serviceLevelOfRow(tx, brand), null);
    const w = ticketWrite(tx, brand.id, title, email, input, {
      id,
      tagIds: [...tagIds],
      tagNames: [],
      attachmentCount,
      fieldsChecked: true,
      spam,
      due,
      rules: { revision: null, firedRuleIds: firings.map((f) => f.rule.id), entries: firingEntries(tx, firings, brand.id, { id, title }) },
    });
    if (input.watchers?.length) await watchers.addToNewTicket(tx, brand.id, id, input.watchers);

    const [ticket] = await runWrites(tx, [w]);
    if (!ticket) throw notFound('Brand');
    forgetFound(tx, brand.id); // its next_ticket_number moved
    await carryOutFirings(tx, firings, { brand, ticket, autoSubmitted: isAutoSubmitted(input.metadata) });
    if (input.notifyCustomer && email) {
      await mail.queueAutoresponse(tx, await mailingBrand(tx, brand), mail.ticketInfo(ticket), { name: input.customerName ?? null, address: email });
    }
    return { created: true as const, ticket };
  });

  // A replay answers with the ticket as it is now, even if it was deleted since.
  if (!outcome.created) return { created: false, ticket: await tickets.fetchView(ctx, outcome.brandId, outcome.id, true) };
  return outcome;
}
