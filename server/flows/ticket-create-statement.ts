import type { TenantCtx } from '../core/context.js';
import * as audit from '../core/audit.js';
import { blockedDomainsOf, isBlockedText } from '../core/blocked.js';
import { statementText, withValues, type NativeStatement, type StatementText } from '../core/db.js';
import { claimRowsSql } from '../core/idempotency.js';
import { countChangesSql, resolvedAtSql } from '../core/ticket-writes.js';
import { newId, ID_PREFIX } from '../core/ids.js';
import { accountIs, sameTenant, tenantIs } from '../core/model.js';
import { part } from '../core/services.js';
import { emailDomain, foldText } from '../core/text.js';
import { ticketsCreatedEvents } from '../core/outbox/events.js';
import { eventsInsertSql, eventsJson, wakeDispatchersJoin } from '../core/outbox/service.js';
import { GIVEN_COLUMNS, VIEW_COLUMNS } from '../domains/tickets/columns.js';
import type { CreateTicketInput } from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import { NO_LEVEL_ASSUMED } from '../domains/tickets/service-level.js';
import * as billing from '../domains/billing/service.js';
import * as rules from '../domains/rules/tallies.js';
import { autoLinkSql, namedOrdersJson, orderNumbersNamed, type NamedOrders } from './order-links.js';

/** One ticket for the create statement to write, with what its request asked for. */
export interface TicketWrite {
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
  /** Spam whoever the sender is; otherwise spam only when the sender is blocked. */
  spam: boolean;
  /** Its deadline: given by hand, or from the brand's service level (null: none). */
  dueAt: string | null;
  dueAtManual: boolean;
  /** The brand's settings revision the service level was read at; null: read in this transaction. */
  slaRevision: number | null;
  /** The brand's rules revision its triggers were run at; null: read in this transaction. */
  rulesRevision: number | null;
  /** The triggers that fired on it (each counted once), their entries after its own. */
  firedRuleIds: readonly string[];
  /** Audit rows made before the statement (so their ids order them before later entries). */
  contactEntry: Record<string, unknown>[];
  ticketEntry: Record<string, unknown>[];
}

export function ticketWrite(
  ctx: TenantCtx,
  brandId: string,
  title: string,
  email: string | null,
  input: CreateTicketInput,
  given: {
    id?: string;
    tagIds: readonly string[];
    tagNames: readonly string[];
    idempotency?: { key: string; fingerprint: string };
    attachmentCount?: number;
    fieldsChecked?: boolean;
    spam?: boolean;
    due: { dueAt: string | null; dueAtManual: boolean; slaRevision: number | null };
    rules: { revision: number | null; firedRuleIds: readonly string[]; entries: Record<string, unknown>[] };
  },
): TicketWrite {
  const id = given.id ?? newId(ID_PREFIX.ticket);
  const contactId = newId(ID_PREFIX.contact);
  return {
    ctx,
    id,
    brandId,
    title,
    email,
    contactId,
    input,
    tagIds: given.tagIds,
    tagNames: given.tagNames,
    idempotency: given.idempotency,
    attachmentCount: given.attachmentCount ?? 0,
    fieldsChecked: given.fieldsChecked ?? false,
    spam: given.spam ?? false,
    ...given.due,
    contactEntry: email ? audit.entryRows(ctx, [{ brandId, entityType: 'contact', entityId: contactId, event: 'contact.created', metadata: { email } }]) : [],
    rulesRevision: given.rules.revision,
    firedRuleIds: given.rules.firedRuleIds,
    ticketEntry: [...audit.entryRows(ctx, [{ brandId, ticketId: id, entityType: 'ticket', entityId: id, event: 'ticket.created', metadata: { title } }]), ...given.rules.entries],
  };
}

/** The values of the ticket columns a create supplies (see columns.ts), with their defaults. */
function givenValues(w: TicketWrite): Record<string, unknown> {
  const { input } = w;
  return {
    id: w.id,
    brand_id: w.brandId,
    title: w.title,
    body: input.body ?? null,
    status: input.status ?? 'open',
    priority: input.priority ?? null,
    assignee_id: input.assigneeId ?? null,
    created_by: input.createdBy ?? null,
    category_id: input.categoryId ?? null,
    links: input.links ?? [],
    custom_fields: input.customFields ?? null,
    metadata: input.metadata ?? {},
    source: input.source ?? 'api',
    source_id: input.sourceId ?? null,
    source_data: input.sourceData ?? null,
    close_reason: input.closeReason ?? null,
    due_at: w.dueAt,
    due_at_manual: w.dueAtManual,
    attachment_count: w.attachmentCount,
  };
}

/** What else each create carries into the statement, beside its ticket columns. */
const REQUEST_COLUMNS = `ord int, tag_ids text[], tag_names text[], fields_checked boolean, sla_revision int, rules_revision int, rule_ids text[], spam boolean, key text, fingerprint text,
  by_customer boolean, email text, email_domain text, blocked_domains text[], contact_id text, customer_name text, customer_name_key text`;
const ITEM_COLUMNS = `${REQUEST_COLUMNS}, ${GIVEN_COLUMNS.map((c) => `${c.column} ${c.type}`).join(', ')}`;

/** A write's row of the statement's `items` relation; `contactId`: the id its new customer would take. */
function itemOf(w: TicketWrite, ord: number, contactId: string | null): Record<string, unknown> {
  const values = givenValues(w);
  return {
    ...Object.fromEntries(GIVEN_COLUMNS.map((c) => [c.column, values[c.column] ?? null])),
    ord,
    tag_ids: w.tagIds,
    tag_names: w.tagNames,
    fields_checked: w.fieldsChecked,
    sla_revision: w.slaRevision,
    rules_revision: w.rulesRevision,
    rule_ids: w.firedRuleIds,
    spam: w.spam,
    key: w.idempotency?.key ?? null,
    fingerprint: w.idempotency?.fingerprint ?? null,
    // The customer opened it (inbound mail, the portal, a form): its body is their first message.
    by_customer: w.ctx.actor.type === 'customer',
    email: w.email,
    email_domain: w.email ? emailDomain(w.email) : null,
    blocked_domains: w.email ? blockedDomainsOf(w.email) : [],
    contact_id: contactId,
    customer_name: w.input.customerName ?? null,
    customer_name_key: foldText(w.input.customerName ?? ''),
  };
}

/** What the statement reads of a customer contact (the ticket view, webhook bodies). */
const CUSTOMER_COLUMNS = ['id', 'account_id', 'livemode', 'brand_id', 'email', 'name', 'avatar_url', 'company_id'];

/**
 * The statement's last part while tickets are metered (billing.ticketsMetered), after every
 * insert: its tickets (spam left out) counted per brand against the plan's allowance (see the
 * migration ticket_usage_by_brand), `ok` once counted.
 *
 * The usual way: each brand adds to its own count within the budget it was granted, its row
 * locked in brand id order (usage_locked, when there are several), so batches of different brands
 * never wait for each other. When a brand cannot (its first tickets of the period, no room left,
 * another plan), the statement raises (billing.isOutsideBrandBudget) and writes nothing: its
 * creates go step by step, the exact way.
 *
 * The exact way (inside a caller's transaction: step by step, inbound mail): ticketd_count_tickets,
 * one create at a time per account, granting budgets; over the allowance it raises
 * (billing.allowanceRefusal) and nothing of the statement stays.
 */
function countAgainstAllowance(way: Counting): string {
  const allowanceAndCounts = `, allowance as materialized (${billing.allowanceText({ now: ':now', account: ':accountId', plans: ':plans', defaultPlan: ':defaultPlan' })}
    ), counted as materialized (
      select t.brand_id, count(*)::int as n from t where not t.is_spam group by t.brand_id
    )`;
  if (way === 'exact') {
    return `${allowanceAndCounts}, counted_ok as materialized (
      select ticketd_count_tickets(:accountId, al.period_start, al.plan_name, al.allowance,
        array(select c.brand_id from counted c order by c.brand_id), array(select c.n from counted c order by c.brand_id),
        array(select t.id from t where not t.is_spam)) as ok
      from allowance al
    )`;
  }
  // Rows locked in brand id order by a subquery of the update itself: on Citus a locking step of
  // its own (a CTE) whose rows a later step reads fails the statement (docs/citus-inventory.md).
  const lockFirst = way === 'usual, brands locked first';
  const locked = `(select u.brand_id from ticket_usage_brands u
        where ${accountIs('u', ':accountId')} and u.period_start = (select period_start from allowance) and u.brand_id in (select brand_id from counted)
        order by u.brand_id for update) l, `;
  return `${allowanceAndCounts}, usage as (
      update ticket_usage_brands u set used = u.used + c.n from ${lockFirst ? locked : ''}counted c, allowance al
      where ${accountIs('u', ':accountId')} and u.period_start = al.period_start and u.brand_id = c.brand_id${lockFirst ? ' and u.brand_id = l.brand_id' : ''}
        and u.allowance is not distinct from al.allowance and (al.allowance is null or u.used + c.n <= u.budget)
      returning u.brand_id
    ), counted_ok as materialized (
      select ticketd_counted_within_budgets((select count(*) from counted)::int, (select count(*) from usage)::int) as ok
    )`;
}

/**
 * THE statement that creates tickets, for a batch of creates (the usual ones, grouped by
 * createInOneStatement) or for one (the last step of createStepByStep, in its transaction). Per
 * create, in order:
 *   1. checks: the brand (visible; no ticket schema or field rules unless fieldsChecked; still
 *      the service level its dueAt was computed with: its settings revision, or none; still the
 *      rules revision its triggers ran at), the
 *      status, category, assignee, and every tag by id or lower-cased name;
 *   2. its idempotency key claimed (keys are distinct within a batch);
 *   3. its customer contact found, or made in the company of its email's domain with its
 *      contact.created entry (`customer` holds both: the rest of the statement cannot see a new
 *      contact in `contacts`); a concurrent insert of the same email is waited for and its row
 *      returned (ON CONFLICT DO UPDATE to the same email: nothing changes);
 *   4. only then the brand counters (the rows locked in id order, so two batches cannot deadlock),
 *      bumped once per brand; the tickets numbered in batch order; nothing under those locks waits
 *      on another create;
 *   5. the ticket (spam if the sender is blocked) with its derived columns, resolved_at and the
 *      moments automations count from (status_changed_at; last_customer_message_at when the
 *      customer opened it), its
 *      count changes (core/ticket-writes.ts), its tag links, its ticket.created entry (and those of
 *      the triggers that fired on it, with their tally: domains/rules/tallies.ts) and webhook deliveries,
 *      and (only when its text names #1234) its links to those orders of its customer (order-links.ts);
 *   6. while metered, the tickets counted against the plan's allowance (countAgainstAllowance):
 *      over it, the statement raises and writes nothing.
 * Returns each created ticket as the response shows it, with its `ord`; `announced` when it queued
 * webhook deliveries, which (with `notify`) wake the dispatchers from the statement itself (the
 * NOTIFY of outboxAdded, without a round trip of its own; delivered at its commit); a create that failed a
 * check, or whose key was taken, is absent and wrote nothing.
 *
 * Its text depends on the batch's shape alone (Shape: metered, the way of counting, notify, rules
 * fired, orders named), everything else being a value: made once per shape, it comes back in
 * PostgreSQL's `$n` form with this batch's values, for runInAccount.
 */
export function createStatement(ctx: TenantCtx, writes: readonly TicketWrite[], notify: boolean): NativeStatement {
  // Every create of the batch naming one email makes (at most) one contact: the first one's.
  const emailKey = (w: TicketWrite) => `${w.brandId} ${w.email}`;
  const contactIds = new Map<string, string>();
  for (const w of writes) if (w.email && !contactIds.has(emailKey(w))) contactIds.set(emailKey(w), w.contactId);
  const madeContactEntries = writes.filter((w) => w.email && contactIds.get(emailKey(w)) === w.contactId).flatMap((w) => w.contactEntry);
  // Only a create whose text names an order number (#1234) carries the order-links part.
  const namedOrders: NamedOrders[] = [];
  for (const w of writes) {
    const numbers = w.email ? orderNumbersNamed(w.title, w.input.body) : [];
    if (numbers.length) namedOrders.push({ ticketId: w.id, email: w.email!, numbers });
  }
  const shape: Shape = {
    // The plan pays for live mode: test-mode tickets are never counted.
    metered: ctx.livemode && billing.ticketsMetered(ctx.services.config),
    // Inside a caller's transaction, the usual way's refusal to wait would end that transaction.
    counting: ctx.db.isTransaction ? 'exact' : new Set(writes.map((w) => w.brandId)).size > 1 ? 'usual, brands locked first' : 'usual',
    notify,
    fired: writes.some((w) => w.firedRuleIds.length),
    orders: namedOrders.length > 0,
  };
  const key = `${shape.metered} ${shape.counting} ${shape.notify} ${shape.fired} ${shape.orders}`;
  const texts = ctx.services.get(statementTexts);
  let text = texts.get(key);
  if (!text) texts.set(key, (text = statementText(ctx.db, statementSql(shape), SLOTS)));
  const now = new Date(ctx.services.now());
  return withValues(text, {
    items: JSON.stringify(writes.map((w, ord) => itemOf(w, ord, w.email ? contactIds.get(emailKey(w))! : null))),
    accountId: ctx.accountId,
    livemode: ctx.livemode,
    claimedAt: now,
    contactEntries: JSON.stringify(madeContactEntries),
    ticketEntries: JSON.stringify(writes.flatMap((w) => w.ticketEntry)),
    eventsAt: now.toISOString(),
    events: eventsJson(ctx, ticketsCreatedEvents(writes.map((w) => ({ brandId: w.brandId, ticketId: w.id })))),
    orders: shape.orders ? namedOrdersJson(namedOrders) : null,
    ...(shape.metered ? billing.allowanceValues(ctx) : { now: null, plans: null, defaultPlan: null }),
  });
}

type Counting = 'usual' | 'usual, brands locked first' | 'exact';

/** What the statement's text depends on: everything else about a batch is a value. */
interface Shape {
  metered: boolean;
  counting: Counting;
  notify: boolean;
  fired: boolean;
  orders: boolean;
}

/** The statement's values, by the names its text gives them. */
const SLOTS = ['items', 'accountId', 'livemode', 'claimedAt', 'contactEntries', 'ticketEntries', 'eventsAt', 'events', 'orders', 'now', 'plans', 'defaultPlan'];

/**
 * The statement's text per shape, made once (per Services) and sent with the values of each batch:
 * the text (about 13 kB) is neither built nor formatted by knex nor hashed for its prepared
 * statement's name on every create.
 */
const statementTexts = part('tickets.createStatementTexts', () => new Map<string, StatementText>());

const TENANT = { account: ':accountId', livemode: ':livemode' };

function statementSql({ metered, counting, notify, fired, orders }: Shape): string {
  return `
    with items as materialized (
      select * from jsonb_to_recordset(:items::jsonb) as i(${ITEM_COLUMNS})
    ), given_tags as materialized (
      select i.ord, tg.id, lower(tg.name) as name_key from items i
      join tags tg on ${tenantIs('tg', TENANT)} and tg.brand_id = i.brand_id and (tg.id = any(i.tag_ids) or lower(tg.name) = any(i.tag_names))
    ), checks as materialized (
      select i.ord, exists (select 1 from brands b where ${tenantIs('b', TENANT)} and b.id = i.brand_id
            and (i.fields_checked or (b.ticket_schema is null and jsonb_array_length(coalesce(b.field_rules -> 'ticket', '[]'::jsonb)) = 0))
            and (i.sla_revision is null or b.settings_revision = i.sla_revision or (i.sla_revision = ${NO_LEVEL_ASSUMED} and not b.sla_enabled))
            and (i.rules_revision is null or b.rules_revision = i.rules_revision))
        and exists (select 1 from statuses s where ${tenantIs('s', TENANT)} and s.brand_id = i.brand_id and s.key = i.status)
        and (i.category_id is null or exists (select 1 from categories ca where ${tenantIs('ca', TENANT)} and ca.brand_id = i.brand_id and ca.id = i.category_id))
        and (i.assignee_id is null or exists (select 1 from members m where ${accountIs('m', ':accountId')} and m.id = i.assignee_id and m.status = 'active'))
        and i.tag_ids <@ (select coalesce(array_agg(g.id), '{}') from given_tags g where g.ord = i.ord)
        and i.tag_names <@ (select coalesce(array_agg(g.name_key), '{}') from given_tags g where g.ord = i.ord) as ok
      from items i
    ), claim as (${claimRowsSql('select i.key, i.fingerprint, i.id as resource_id from items i join checks c on c.ord = i.ord where c.ok and i.key is not null', { ...TENANT, at: ':claimedAt' })}
    ), go as materialized (
      select i.ord from items i join checks c on c.ord = i.ord where c.ok and (i.key is null or i.key in (select key from claim))
    ), found_contact as (
      select ${CUSTOMER_COLUMNS.map((c) => `c.${c}`).join(', ')} from contacts c
      where ${tenantIs('c', TENANT)} and (c.brand_id, c.email) in (select i.brand_id, i.email from items i where i.email is not null)
    ), made_contact as (
      insert into contacts (id, account_id, livemode, brand_id, email, name, name_key, company_id)
      select distinct on (i.brand_id, i.email) i.contact_id, :accountId, :livemode, i.brand_id, i.email, i.customer_name, i.customer_name_key,
        (select co.id from companies co where ${tenantIs('co', TENANT)} and co.brand_id = i.brand_id and co.domain = i.email_domain)
      from items i
      where i.email is not null and i.ord in (select ord from go) and not exists (select 1 from found_contact f where f.brand_id = i.brand_id and f.email = i.email)
      order by i.brand_id, i.email, i.ord
      on conflict (account_id, livemode, brand_id, email) do update set email = excluded.email
      returning ${CUSTOMER_COLUMNS.join(', ')}
    ), contact_entry as (${audit.insertRowsSql(':contactEntries', 'exists (select 1 from made_contact m where m.id = entry.entity_id)')}
    ), customer as (
      select * from found_contact union all select * from made_contact
    ), ready as materialized (
      select r.*, c.id as customer_id,
        coalesce(ticketd_person_sort(c.name, c.email), '') as customer_sort, coalesce(ticketd_person_text(c.name, c.email), '') as customer_text,
        coalesce((select lower(co.name) from companies co where ${tenantIs('co', TENANT)} and ${sameTenant('co', 'c')} and co.brand_id = c.brand_id and co.id = c.company_id), '') as company_sort,
        coalesce((select ticketd_person_sort(m.name, m.email) from members m where ${accountIs('m', ':accountId')} and m.id = r.assignee_id), '') as assignee_sort,
        coalesce((select lower(ca.name) from categories ca where ${tenantIs('ca', TENANT)} and ca.brand_id = r.brand_id and ca.id = r.category_id), '') as category_sort
      from items r left join customer c on c.brand_id = r.brand_id and c.email = r.email
      where r.ord in (select ord from go) and (r.email is null or c.id is not null)
    ), n as (
      update brands b set next_ticket_number = b.next_ticket_number + counted.n
      from (
        select l.id as brand_id, c.n
        from (select b.id from brands b where ${tenantIs('b', TENANT)} and b.id in (select brand_id from ready) order by b.id for no key update) l
        join (select brand_id, count(*) as n from ready group by brand_id) c on c.brand_id = l.id
      ) counted
      where ${tenantIs('b', TENANT)} and b.id = counted.brand_id
      returning b.id as brand_id, b.next_ticket_number - counted.n as first
    ), t as (
      insert into tickets (${GIVEN_COLUMNS.map((c) => c.column).join(', ')}, account_id, livemode, ticket_number, customer_id, is_spam,
        customer_sort, customer_text, company_sort, assignee_sort, category_sort, search_vector, resolved_at, status_changed_at, last_customer_message_at)
      select ${GIVEN_COLUMNS.map((c) => `r.${c.column}`).join(', ')}, :accountId, :livemode,
        n.first + row_number() over (partition by r.brand_id order by r.ord) - 1, r.customer_id, r.spam or (r.email is not null and ${isBlockedText(TENANT, 'r.brand_id', 'r.email', 'r.blocked_domains')}),
        r.customer_sort, r.customer_text, r.company_sort, r.assignee_sort, r.category_sort, ticketd_ticket_vector(r.title, r.customer_text, r.body),
        ${resolvedAtSql('r.status')}, now(), case when r.by_customer then now() end
      from ready r join n on n.brand_id = r.brand_id
      returning ${VIEW_COLUMNS.join(', ')}
    ), tt as (
      insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority)
      select t.account_id, t.livemode, t.brand_id, t.id, g.id, t.status, t.priority from t join items i on i.id = t.id join given_tags g on g.ord = i.ord
    ), counts as (${countChangesSql({
      after: `(select t.account_id, t.livemode, t.brand_id, t.status, t.created_at, ${resolvedAtSql('t.status')} as resolved_at, t.deleted_at, t.is_spam from t)`,
    })}
    ), entry as (${audit.insertRowsSql(':ticketEntries', 'exists (select 1 from t where t.id = entry.entity_id)')}
    )${
      fired
        ? `, fired as (${rules.insertTalliesSql('(select t.account_id, t.livemode, t.brand_id, x.id as rule_id, t.created_at as fired_at from t join items i on i.id = t.id cross join unnest(i.rule_ids) as x (id))')}
    )`
        : ''
    }, announced as (${eventsInsertSql({ timestamp: ':eventsAt', events: ':events', tenant: TENANT }, 't', 'customer')}
      returning 1
    )${orders ? `, order_links as (${autoLinkSql(':orders', TENANT)})` : ''}${metered ? countAgainstAllowance(counting) : ''}
    select i.ord, (select 1 from announced${wakeDispatchersJoin(notify)} limit 1) as "announced", tickets.*, ${tickets.relatedColumns('array(select g.id from given_tags g where g.ord = i.ord)', 'customer', { account: ':accountId', livemode: ':livemode' })}
    from t as tickets join items i on i.id = tickets.id${metered ? ' where (select ok from counted_ok)' : ''}`;
}
