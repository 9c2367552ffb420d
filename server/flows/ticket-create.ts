import type { Knex } from 'knex';
import { canSeeBrand, withTx, type TenantCtx } from '../core/context.js';
import * as audit from '../core/audit.js';
import { batcher } from '../core/batcher.js';
import { forgetFound, requireBrand } from '../core/brand.js';
import { prepared } from '../core/db.js';
import { badRequest, HttpError, notFound } from '../core/errors.js';
import { claim as claimIdempotencyKey, claimRowsStatement, requestFingerprint } from '../core/idempotency.js';
import { newId, normalizeBrandId, ID_PREFIX } from '../core/ids.js';
import { part } from '../core/services.js';
import { emailDomain, foldText, isEmail, normalizeEmail } from '../core/text.js';
import * as events from '../outbox/events.js';
import * as attachments from '../domains/attachments/service.js';
import * as blockedSources from '../domains/blocked-sources/service.js';
import * as categories from '../domains/categories/service.js';
import * as contacts from '../domains/contacts/service.js';
import * as fields from '../domains/fields/service.js';
import * as members from '../domains/members/service.js';
import * as statuses from '../domains/statuses/service.js';
import * as tags from '../domains/tags/service.js';
import type { CreateTicketInput, TicketView } from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import * as watchers from './ticket-watchers.js';

/**
 * Ticket create: it spans the brand's statuses, categories, tags, contacts, members, watchers,
 * attachments and custom fields. Round trips are its cost, and the per-brand ticket counter
 * serializes creates within a brand, so the usual create (customer, existing tags, status,
 * category, assignee, no watchers or pending attachments, no custom-field schema) is ONE statement
 * (createInOneStatement); anything else, every error included, goes step by step in a transaction
 * (createStepByStep). Both write the ticket with the same statement (writeStatement).
 * notifyCustomer is accepted and not stored.
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
    throw badRequest(`assigneeId ${assigneeId} is not a member of this account; see GET /v1/accounts/me/members`, [{ field: 'assigneeId', message: 'is not a member of this account' }], 'invalid_assignee');
  }
}

export interface CreateResult {
  created: boolean;
  ticket: TicketView;
}

export async function createTicket(ctx: TenantCtx, brandId: string, input: CreateTicketInput, idempotencyKey?: string): Promise<CreateResult> {
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
  const ticket = hasFieldSchema(ctx, brandKey) ? null : await createInOneStatement(ctx, id, title, email, input, idempotency);
  if (ticket) return { created: true, ticket };
  return createStepByStep(ctx, id, title, email, input, idempotency, brandKey);
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

/** One ticket for writeStatement to create, with what its request asked for. */
interface TicketWrite {
  ctx: TenantCtx;
  id: string;
  brandId: string;
  title: string;
  email: string | null;
  /** The id a new customer contact would take. */
  contactId: string;
  input: CreateTicketInput;
  /** Tag ids (each must be the brand's) and lower-cased names (each must exist). */
  tagIds: readonly string[];
  tagNames: readonly string[];
  idempotency?: { key: string; fingerprint: string };
  attachmentCount: number;
  /** Its custom fields were validated against the brand's schema (step by step); else the brand must have none. */
  fieldsChecked: boolean;
  /** Audit rows made before the statement (so their ids order them before later entries). */
  contactEntry: Record<string, unknown>[];
  ticketEntry: Record<string, unknown>[];
}

function ticketWrite(ctx: TenantCtx, brandId: string, title: string, email: string | null, input: CreateTicketInput, given: {
  id?: string; tagIds: readonly string[]; tagNames: readonly string[]; idempotency?: { key: string; fingerprint: string }; attachmentCount?: number; fieldsChecked?: boolean;
}): TicketWrite {
  const id = given.id ?? newId(ID_PREFIX.ticket);
  const contactId = newId(ID_PREFIX.contact);
  return {
    ctx, id, brandId, title, email, contactId, input, tagIds: given.tagIds, tagNames: given.tagNames, idempotency: given.idempotency,
    attachmentCount: given.attachmentCount ?? 0, fieldsChecked: given.fieldsChecked ?? false,
    contactEntry: email ? contacts.createdEntryRows(ctx, brandId, contactId, email) : [],
    ticketEntry: audit.entryRows(ctx, [{ brandId, ticketId: id, entityType: 'ticket', entityId: id, event: 'ticket.created', metadata: { title } }]),
  };
}

/** A write's row of the statement's `items` relation (jsonb_to_recordset); `contactId`: the id its new customer would take. */
function itemOf(w: TicketWrite, ord: number, contactId: string | null) {
  const { input } = w;
  return {
    ord, id: w.id, brand_id: w.brandId, title: w.title, body: input.body ?? null, status: input.status ?? 'open', priority: input.priority ?? null,
    assignee_id: input.assigneeId ?? null, created_by: input.createdBy ?? null, category_id: input.categoryId ?? null,
    links: input.links ?? [], custom_fields: input.customFields ?? null, metadata: input.metadata ?? {}, source: input.source ?? 'api',
    source_id: input.sourceId ?? null, source_data: input.sourceData ?? null, close_reason: input.closeReason ?? null, due_at: tickets.isoOrNull(input.dueAt),
    attachment_count: w.attachmentCount, tag_ids: w.tagIds, tag_names: w.tagNames, fields_checked: w.fieldsChecked,
    key: w.idempotency?.key ?? null, fingerprint: w.idempotency?.fingerprint ?? null,
    email: w.email, email_domain: w.email ? emailDomain(w.email) : null, blocked_domains: w.email ? blockedSources.blockedDomainsOf(w.email) : [],
    contact_id: contactId, customer_name: input.customerName ?? null, customer_name_key: foldText(input.customerName ?? ''),
  };
}

const ITEM_COLUMNS = `ord int, id text, brand_id text, title text, body text, status text, priority text, assignee_id text, created_by text,
  category_id text, links jsonb, custom_fields jsonb, metadata jsonb, source text, source_id text, source_data jsonb, close_reason text,
  due_at timestamptz, attachment_count int, tag_ids text[], tag_names text[], fields_checked boolean, key text, fingerprint text,
  email text, email_domain text, blocked_domains text[], contact_id text, customer_name text, customer_name_key text`;

/**
 * THE statement that creates tickets, for a batch of creates (the usual ones, grouped by
 * createInOneStatement) or for one (the last step of createStepByStep, in its transaction). Per
 * create, in order:
 *   1. checks: the brand (visible; no ticket schema or field rules unless fieldsChecked), the
 *      status, category, assignee, and every tag by id or lower-cased name;
 *   2. its idempotency key claimed (keys are distinct within a batch);
 *   3. its customer contact found or made (with its contact.created entry);
 *   4. only then the brand counters (the rows locked in id order, so two batches cannot deadlock),
 *      bumped once per brand; the tickets numbered in batch order; nothing under those locks waits
 *      on another create;
 *   5. the ticket (spam if the sender is blocked) with its derived columns filled here rather
 *      than by the per-row trigger (migration 2200), its tag links, its ticket.created entry and
 *      webhook deliveries.
 * Returns each created ticket as the response shows it, with its `ord`; a create that failed a
 * check, or whose key was taken, is absent and wrote nothing.
 */
function writeStatement(ctx: TenantCtx, writes: readonly TicketWrite[]): Knex.Raw {
  // Every create of the batch naming one email makes (at most) one contact: the first one's.
  const emailKey = (w: TicketWrite) => `${w.brandId} ${w.email}`;
  const contactIds = new Map<string, string>();
  for (const w of writes) if (w.email && !contactIds.has(emailKey(w))) contactIds.set(emailKey(w), w.contactId);
  const items = writes.map((w, ord) => itemOf(w, ord, w.email ? contactIds.get(emailKey(w))! : null));
  const contactEntries = writes.filter((w) => w.email && contactIds.get(emailKey(w)) === w.contactId).flatMap((w) => w.contactEntry);
  const scope = [ctx.accountId, ctx.livemode];
  const claim = claimRowsStatement(ctx, { sql: 'select i.key, i.fingerprint, i.id as resource_id from items i join checks c on c.ord = i.ord where c.ok and i.key is not null', bindings: [] });
  const contactCtes = contacts.findOrCreateManyCtes(ctx, 'items', 'r.ord in (select ord from go)', contactEntries);
  const blocked = blockedSources.isBlockedSql(ctx, 'r.brand_id', 'r.email', 'r.blocked_domains');
  const entry = audit.insertRowsStatement(writes.flatMap((w) => w.ticketEntry), { sql: 'exists (select 1 from t where t.id = entry.entity_id)', bindings: [] });
  const announced = events.ticketsCreated(ctx, writes.map((w) => ({ brandId: w.brandId, ticketId: w.id })), 't', 'customer');
  const sql = `
    with items as materialized (
      select * from jsonb_to_recordset(?::jsonb) as i(${ITEM_COLUMNS})
    ), given_tags as materialized (
      select i.ord, tg.id, lower(tg.name) as name_key from items i
      join tags tg on tg.account_id = ? and tg.livemode = ? and tg.brand_id = i.brand_id and (tg.id = any(i.tag_ids) or lower(tg.name) = any(i.tag_names))
    ), checks as materialized (
      select i.ord, exists (select 1 from brands b where b.account_id = ? and b.livemode = ? and b.id = i.brand_id
            and (i.fields_checked or (b.ticket_schema is null and jsonb_array_length(coalesce(b.field_rules -> 'ticket', '[]'::jsonb)) = 0)))
        and exists (select 1 from statuses s where s.account_id = ? and s.livemode = ? and s.brand_id = i.brand_id and s.key = i.status)
        and (i.category_id is null or exists (select 1 from categories ca where ca.account_id = ? and ca.livemode = ? and ca.brand_id = i.brand_id and ca.id = i.category_id))
        and (i.assignee_id is null or exists (select 1 from members m where m.account_id = ? and m.id = i.assignee_id))
        and i.tag_ids <@ (select coalesce(array_agg(g.id), '{}') from given_tags g where g.ord = i.ord)
        and i.tag_names <@ (select coalesce(array_agg(g.name_key), '{}') from given_tags g where g.ord = i.ord) as ok
      from items i
    ), claim as (${claim.sql}
    ), go as materialized (
      select i.ord from items i join checks c on c.ord = i.ord where c.ok and (i.key is null or i.key in (select key from claim))
    ), ${contactCtes.sql}, ready as materialized (
      select r.*, c.id as customer_id,
        coalesce(ticketd_person_sort(c.name, c.email), '') as customer_sort, coalesce(ticketd_person_text(c.name, c.email), '') as customer_text,
        coalesce((select lower(co.name) from companies co where co.account_id = ? and co.livemode = ? and co.brand_id = c.brand_id and co.id = c.company_id), '') as company_sort,
        coalesce((select ticketd_person_sort(m.name, m.email) from members m where m.account_id = ? and m.id = r.assignee_id), '') as assignee_sort,
        coalesce((select lower(ca.name) from categories ca where ca.account_id = ? and ca.livemode = ? and ca.brand_id = r.brand_id and ca.id = r.category_id), '') as category_sort
      from items r left join customer c on c.brand_id = r.brand_id and c.email = r.email
      where r.ord in (select ord from go) and (r.email is null or c.id is not null)
    ), locked as materialized (
      select b.id from brands b where b.account_id = ? and b.livemode = ? and b.id in (select brand_id from ready) order by b.id for no key update
    ), n as (
      update brands b set next_ticket_number = b.next_ticket_number + counted.n
      from (select brand_id, count(*) as n from ready group by brand_id) counted
      where b.account_id = ? and b.livemode = ? and b.id = counted.brand_id and b.id in (select id from locked)
      returning b.id as brand_id, b.next_ticket_number - counted.n as first
    ), t as (
      insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, assignee_id, created_by,
        customer_id, category_id, links, custom_fields, metadata, source, source_id, source_data, is_spam, close_reason, due_at, attachment_count,
        customer_sort, customer_text, company_sort, assignee_sort, category_sort, search_vector)
      select r.id, ?, ?, r.brand_id, n.first + row_number() over (partition by r.brand_id order by r.ord) - 1, r.title, r.body, r.status, r.priority,
        r.assignee_id, r.created_by, r.customer_id, r.category_id, coalesce(r.links, '[]'), r.custom_fields, coalesce(r.metadata, '{}'), r.source,
        r.source_id, r.source_data, r.email is not null and ${blocked.sql}, r.close_reason, r.due_at, r.attachment_count,
        r.customer_sort, r.customer_text, r.company_sort, r.assignee_sort, r.category_sort, ticketd_ticket_vector(r.title, r.customer_text, r.body)
      from ready r join n on n.brand_id = r.brand_id
      returning ${tickets.VIEW_COLUMNS.join(', ')}
    ), tt as (
      insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority)
      select t.account_id, t.livemode, t.brand_id, t.id, g.id, t.status, t.priority from t join items i on i.id = t.id join given_tags g on g.ord = i.ord
    ), entry as (${entry.sql}
    ), announced as (${announced.sql}
    )
    select i.ord, tickets.*, ${tickets.relatedColumns('array(select g.id from given_tags g where g.ord = i.ord)', 'customer')}
    from t as tickets join items i on i.id = tickets.id`;
  return ctx.db.raw(sql, [
    JSON.stringify(items), ...scope, ...scope, ...scope, ...scope, ctx.accountId,
    ...claim.bindings, ...contactCtes.bindings, ...scope, ctx.accountId, ...scope, ...scope, ...scope, ...scope, ...blocked.bindings,
    ...entry.bindings, ...announced.bindings,
  ] as never[]);
}

/** The created tickets by their write's position; absent: that create wrote nothing. */
async function runWrites(ctx: TenantCtx, writes: readonly TicketWrite[]): Promise<(TicketView | null)[]> {
  const result = await prepared(ctx.db, writeStatement(ctx, writes)) as unknown as { rows: (Record<string, unknown> & { ord: number })[] };
  const views: (TicketView | null)[] = writes.map(() => null);
  for (const { ord, ...row } of result.rows) views[ord] = tickets.viewOfColumns(row);
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
const createBatches = part('tickets.createBatches', () => batcher<TicketWrite, TicketView | null>(
  async (writes) => runWrites(writes[0]!.ctx, writes).catch((err: unknown) => {
    // The callers still get their tickets (step by step); the log says group commit failed.
    writes[0]!.ctx.log?.warn({ err, creates: writes.length }, 'a batch of ticket creates failed as a whole: each goes step by step');
    return writes.map(() => null);
  }),
  { maxSize: MAX_CREATE_BATCH, concurrency: CREATE_BATCHES_AT_ONCE, exclusive: (w) => w.idempotency?.key ?? null, affinity: (w) => w.brandId },
));

/**
 * The usual create, as one statement committed on its own (batched with concurrent creates), or
 * inside the caller's transaction (inbound mail) alone: one round trip. When a check fails, a tag
 * is new or the key is taken, nothing is written and it returns null: the step-by-step create
 * then gives the precise answer (a 400 or 404, new tags, the replay). Watchers and pending
 * attachments always go step by step.
 */
async function createInOneStatement(ctx: TenantCtx, brandId: string, title: string, email: string | null, input: CreateTicketInput,
  idempotency: { key: string; fingerprint: string } | undefined): Promise<TicketView | null> {
  if (input.watchers?.length || input.attachmentIds?.length) return null;
  const given = input.tags ?? [];
  const tagIds = [...new Set(given.filter((t) => tickets.TAG_ID.test(t)))];
  const tagNames = [...new Set(given.filter((t) => !tickets.TAG_ID.test(t)).map((t) => t.trim().toLowerCase()))];
  if (tagNames.some((n) => !n || n.length > tags.MAX_TAG_NAME_LENGTH)) return null;
  const w = ticketWrite(ctx, brandId, title, email, input, { tagIds, tagNames, idempotency });
  if (ctx.db.isTransaction) return (await runWrites(ctx, [w]))[0]!;
  return ctx.services.get(createBatches)(`${ctx.accountId}:${ctx.livemode}`, w);
}

/**
 * The create for everything else, in one transaction:
 *   1. claim the idempotency key (if any): INSERT … ON CONFLICT; a concurrent request with the
 *      same key blocks on the uncommitted row and then sees the committed ticket;
 *   2. every check and every side write (status, category, assignee, custom fields against the
 *      brand's schema, new tags, the customer contact, attachments, watchers): none of them locks
 *      the brand row (watcher rows and linked attachments reference the ticket through deferred
 *      foreign keys, checked at commit);
 *   3. LAST, writeStatement for this one create (everything it checks now holds); the commit
 *      follows at once, so the brand row lock is held for that statement and the commit. A failed
 *      create rolls the counter back with everything else: numbers have no gaps.
 */
async function createStepByStep(ctx: TenantCtx, brandId: string, title: string, email: string | null, input: CreateTicketInput,
  idempotency: { key: string; fingerprint: string } | undefined, brandKey: string): Promise<CreateResult> {
  const outcome = await withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    if (brand.ticketSchema !== null || (brand.fieldRules.ticket ?? []).length > 0) tx.services.get(brandsWithFieldSchema).set(brandKey, tx.services.now() + FIELD_SCHEMA_HINT_MS);
    const id = newId(ID_PREFIX.ticket);
    if (idempotency) {
      const claim = await claimIdempotencyKey(tx, idempotency.key, idempotency.fingerprint, id, 'ticket');
      if (!claim.claimed) return { created: false as const, id: claim.resourceId, brandId: brand.id };
    }

    const status = input.status ?? 'open';
    await statuses.assertStatusKey(tx, brand.id, status);
    if (input.categoryId) {
      await asFieldError('categoryId', 'invalid_category', `categoryId ${input.categoryId} is not a category of this brand`, () => categories.requireCategory(tx, brand.id, input.categoryId!));
    }
    if (input.assigneeId) await assertAssignee(tx, input.assigneeId);
    await fields.validateCustomFields(tx, brand.id, input.customFields);

    const tagIds = await resolveTags(tx, brand.id, input.tags ?? []);
    if (email) await contacts.findOrCreateByEmail(tx, brand.id, email, input.customerName ?? null);
    const attachmentCount = await attachments.linkPending(tx, brand.id, id, input.attachmentIds ?? []);
    // Its entry is made (and so ordered) before the watchers' entries, though written by the last statement.
    const w = ticketWrite(tx, brand.id, title, email, input, { id, tagIds: [...tagIds], tagNames: [], attachmentCount, fieldsChecked: true });
    if (input.watchers?.length) await watchers.addToNewTicket(tx, brand.id, id, input.watchers);

    const [ticket] = await runWrites(tx, [w]);
    if (!ticket) throw notFound('Brand');
    forgetFound(tx, brand.id); // its next_ticket_number moved
    return { created: true as const, ticket };
  });

  // A replay answers with the ticket as it is now, even if it was deleted since.
  if (!outcome.created) return { created: false, ticket: await tickets.fetchView(ctx, outcome.brandId, outcome.id, true) };
  return outcome;
}
