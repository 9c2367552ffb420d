import type { BaseCtx, TenantCtx } from '../context.js';
import type { Knex } from 'knex';
import type { SqlFragment } from '../db.js';
import { sourceOf } from '../audit.js';
import { notFound, conflict } from '../errors.js';
import { eachAtOnce } from '../each-at-once.js';
import { onCitus } from '../citus.js';
import { newId, ID_PREFIX } from '../ids.js';
import { isoText, sameTenant, scopeOf, tenantIs, tenantScope } from '../model.js';
import { notifyAtCommit } from '../notify.js';
import { OutboxMessage, type OutboxKind, type OutboxStatus } from './model.js';

export { OUTBOX_STATUSES, type OutboxStatus } from './model.js';

/**
 * The transactional outbox: messages are inserted in the transaction of the change they announce
 * (enqueue refuses to run outside one) and a NOTIFY in that transaction (outboxAdded) wakes the
 * dispatchers when, and only if, it commits. The dispatcher claims, delivers and settles them (dispatcher.ts); the
 * kind of a message picks its handler (handlers/), so new kinds need no change here.
 */

export const OUTBOX_CHANNEL = 'ticketd_outbox';

/**
 * For a statement that inserts outbox rows and ends in `(select 1 from <its rows> … limit 1)`: the
 * lateral join that wakes the dispatchers when it commits, or nothing when `wake` is false (on
 * Citus such a statement runs on the account's worker, where a NOTIFY reaches no dispatcher: the
 * caller wakes them after it, outboxAdded).
 */
export const wakeDispatchersJoin = (wake: boolean) => (wake ? `, lateral (select pg_notify('${OUTBOX_CHANNEL}', 'new')::text) wake` : '');

/**
 * Wakes the dispatchers when the transaction that inserted `added` outbox rows commits: every
 * insert into outbox calls this (an insert inside a larger statement, with that statement's count).
 */
export async function outboxAdded(ctx: BaseCtx, added: number): Promise<void> {
  if (added > 0) await notifyAtCommit(ctx, OUTBOX_CHANNEL, ['new']);
}

function assertInTransaction(ctx: BaseCtx, what: string): void {
  if (!ctx.db.isTransaction) throw new Error(`outbox message ${what} must be enqueued inside the change's transaction`);
}

export interface Message {
  kind: OutboxKind;
  brandId: string | null;
  event: string;
  /** The exact body to deliver (for mail: whatever its handler needs), fixed now. */
  payload: Record<string, unknown>;
  webhookId?: string | null;
}

/**
 * Changes an import makes (actor source `import`) announce nothing: the history they copy
 * happened elsewhere, so no webhook fires and no mail goes out for them (decision 0123).
 */
export const announces = (ctx: Pick<TenantCtx, 'actor'>): boolean => sourceOf(ctx) !== 'import';

/** One message (e.g. a mail); same transaction rules as enqueueEvents. Returns its id (none queued for an import). */
export async function enqueue(tx: TenantCtx, message: Message): Promise<string> {
  assertInTransaction(tx, message.event);
  const id = newId(ID_PREFIX.delivery);
  if (!announces(tx)) return id;
  await OutboxMessage.query(tx.db).insert({
    id,
    ...scopeOf(tx),
    brandId: message.brandId,
    kind: message.kind,
    event: message.event,
    webhookId: message.webhookId ?? null,
    payload: message.payload,
  });
  await outboxAdded(tx, 1);
  return id;
}

/** A domain event to fan out to the webhooks of its brand that subscribe to it. */
export interface EventSpec {
  brandId: string;
  /** The names a webhook may subscribe to this event by; each subscriber gets the first one it chose. */
  names: readonly string[];
  /** The ticket the event is about: its fields (ticketFields) are read in the same statement. */
  ticketId: string | null;
  /** Which of TICKET_FIELDS go into data (null when the ticket is gone). */
  ticketFields: readonly string[];
  /** The rest of data; wins over ticket fields of the same name. */
  data: Record<string, unknown>;
  /** Sent to this webhook of the brand alone, under its first name, whatever it subscribes to (a rule's webhook action). */
  webhookId?: string;
  /** Where the change came from when not from the ctx's actor (a rule's change announced with its caller's). */
  source?: string;
}

/** The ticket fields an event may carry, as the API spells them. */
const TICKET_JSON = `jsonb_build_object(
  'id', t.id, 'ticketId', t.id, 'ticketNumber', t.ticket_number, 'title', t.title, 'status', t.status, 'priority', t.priority,
  'assigneeId', t.assignee_id, 'source', t.source, 'createdAt', ${isoText('t.created_at')}, 'updatedAt', ${isoText('t.updated_at')},
  'deletedAt', ${isoText('t.deleted_at')}, 'dueAt', ${isoText('t.due_at')}, 'customerId', t.customer_id, 'customerEmail', c.email, 'customerName', c.name)`;

/**
 * Fans events out: one outbox row per (event, enabled webhook of its brand and mode subscribed to
 * one of its names), in ONE statement that also builds each body and reads the ticket's fields.
 * An event nobody subscribes to costs that one indexed statement and inserts nothing. Each body is
 * `{ id, event, brand_id, data, timestamp, source }`, with the name the webhook subscribed to as
 * `event`, the event's id shared by all its deliveries, and `source` the change's (its audit
 * entry's: api, dashboard, portal, email, system, automation). The insert wakes the dispatchers
 * (outboxAdded).
 */
export async function enqueueEvents(tx: TenantCtx, events: readonly EventSpec[]): Promise<void> {
  if (!events.length) return;
  assertInTransaction(tx, events[0]!.names[0] ?? 'event');
  const { sql, bindings } = eventsInsert(tx, events);
  const result = (await tx.db.raw(sql, bindings as never[])) as { rowCount: number | null };
  await outboxAdded(tx, result.rowCount ?? 0);
}

/** A part of a statement (a data-modifying CTE) written by another module: the change's audit rows, its rule tallies. */
export interface NamedPart extends SqlFragment {
  name: string;
}

/** The WITH clause of a statement made of parts (with a trailing space), or nothing for none. */
function withParts(parts: readonly NamedPart[]): string {
  return parts.length ? `with ${parts.map((p) => `${p.name} as (${p.sql})`).join(', ')} ` : '';
}

/**
 * enqueueEvents with other writes of the same change (its audit rows, `parts`) in the same
 * statement: one round trip for both. With no event, the parts alone.
 */
export async function enqueueEventsWith(tx: TenantCtx, parts: readonly NamedPart[], events: readonly EventSpec[]): Promise<void> {
  if (!events.length && !parts.length) return;
  assertInTransaction(tx, events[0]?.names[0] ?? parts[0]!.name);
  const main = events.length ? eventsInsert(tx, events) : { sql: 'select 1', bindings: [] };
  const sql = `${withParts(parts)}${main.sql}`;
  const result = (await tx.db.raw(sql, [...parts.flatMap((p) => p.bindings), ...main.bindings] as never[])) as { rowCount: number | null };
  if (events.length) await outboxAdded(tx, result.rowCount ?? 0);
}

/**
 * enqueueEvents' INSERT, for a statement that also makes the change (a single statement commits
 * as a whole): ticket create, whose new ticket (and perhaps new contact) is not in `tickets` (and
 * `contacts`) yet for the statement's other parts, passes the names of the CTEs holding them. No
 * row in the tickets CTE, no delivery. Its caller counts the rows it inserted for outboxAdded.
 */
export function eventsInsert(tx: TenantCtx, events: readonly EventSpec[], ticketsRelation = 'tickets', contactsRelation = 'contacts'): SqlFragment {
  return {
    sql: eventsInsertSql({ timestamp: '?', events: '?', tenant: { account: '?', livemode: '?' } }, ticketsRelation, contactsRelation),
    bindings: [new Date(tx.services.now()).toISOString(), eventsJson(tx, events), tx.accountId, tx.livemode],
  };
}

/** The events as eventsInsertSql reads them (each event's id fixed now), as JSON text. */
export function eventsJson(tx: TenantCtx, events: readonly EventSpec[]): string {
  if (!announces(tx)) return '[]';
  const specs = events.map((e, ord) => ({
    ord,
    event_id: newId(ID_PREFIX.event),
    brand_id: e.brandId,
    names: e.names,
    ticket_id: e.ticketId,
    ticket_fields: e.ticketFields,
    data: e.data,
    webhook_id: e.webhookId ?? null,
    source: e.source ?? sourceOf(tx),
  }));
  return JSON.stringify(specs);
}

/**
 * eventsInsert's text, with SQL expressions for the bodies' timestamp (ISO text), the events'
 * JSON (eventsJson) and the tenant: placeholders of the statement it goes into.
 */
export function eventsInsertSql(
  given: { timestamp: string; events: string; tenant: { account: string; livemode: string } },
  ticketsRelation = 'tickets',
  contactsRelation = 'contacts',
): string {
  return `
      insert into outbox (id, account_id, livemode, brand_id, kind, event, webhook_id, payload)
      select ticketd_new_id('dlv'), w.account_id, w.livemode, w.brand_id, 'webhook', s.name, w.id,
        jsonb_build_object('id', ev.event_id, 'event', s.name, 'brand_id', w.brand_id, 'timestamp', ${given.timestamp}::text, 'source', ev.source,
          'data', coalesce((select jsonb_object_agg(k, coalesce(tk.fields -> k, 'null'::jsonb)) from unnest(ev.ticket_fields) as k), '{}'::jsonb) || ev.data)
      from jsonb_to_recordset(${given.events}::jsonb) as ev(ord int, event_id text, brand_id text, names text[], ticket_id text, ticket_fields text[], data jsonb, webhook_id text, source text)
      join webhooks w on ${tenantIs('w', given.tenant)} and w.brand_id = ev.brand_id and w.enabled and (w.events && ev.names or w.id = ev.webhook_id)
        and (ev.webhook_id is null or w.id = ev.webhook_id)
      cross join lateral (select n as name from unnest(ev.names) with ordinality as a(n, i) where ev.webhook_id is not null or n = any(w.events) order by i limit 1) s
      left join lateral (
        select ${TICKET_JSON} as fields from ${ticketsRelation} t
        left join ${contactsRelation} c on ${sameTenant('c', 't')} and c.brand_id = t.brand_id and c.id = t.customer_id
        where ${sameTenant('t', 'w')} and t.brand_id = w.brand_id and t.id = ev.ticket_id
      ) tk on true${
        ticketsRelation === 'tickets'
          ? ''
          : `
      where ev.ticket_id is null or tk.fields is not null`
      }
      order by ev.ord, w.id`;
}

// ---------------------------------------------------------------------------------------------
// The dispatcher's side: claim, settle, release.

/** A claimed message as the dispatcher holds it. */
export interface Claimed {
  id: string;
  accountId: string;
  livemode: boolean;
  brandId: string | null;
  kind: OutboxKind;
  event: string;
  webhookId: string | null;
  /** The payload as the text to send: the same bytes on every attempt. */
  body: string;
  /** Including this one. */
  attempts: number;
  leaseOwner: string;
  /** What the claim read for the kind's handler (claim's `attached`), as JSON; null when it read nothing. */
  attached: unknown;
}

/** How many messages of each account the claiming dispatcher may hold at once, and holds now. */
export interface AccountShare {
  /** The most messages of one account one dispatcher holds (claimed and not yet settled) while others are due. */
  perAccount: number;
  /** Messages it holds now, by account id. */
  held: ReadonlyMap<string, number>;
  /**
   * Free slots no account may borrow: kept for an account whose messages come due while the others
   * are past their share. Without it (the default, `limit`) nothing is borrowed.
   */
  reserve?: number;
}

/** Due rows looked at per claimed row: room to pass over the rows of accounts that are at their share. */
const CANDIDATES_PER_ROW = 4;
/** Per-account claims in flight at once (each holds a connection for one statement). */
const ACCOUNT_CLAIMS_AT_ONCE = 4;
/** A row's due instant to the microsecond, as text that sorts like the instant. */
const DUE_KEY = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYYMMDDHH24MISSUS')`;

/** A due row seen by the look-out: whose, and its place in line. */
interface Candidate {
  accountId: string;
  id: string;
  dueKey: string;
}

/**
 * Claims up to `limit` due messages for `owner` until `leaseUntil`. A row is due when
 * available_at has passed: new, retry time reached, an earlier lease expired or its owner is gone
 * (reclaimGone). Two steps, so that no statement locks rows of more than one account (on a
 * cluster distributed by account a row lock across shards is refused): a look-out reads the
 * oldest due rows of every account without locking them, then each account found claims its part
 * in a statement of its own, filtered by its account_id, FOR UPDATE SKIP LOCKED: concurrent
 * dispatchers never claim the same row (one that another claimed after the look-out is skipped or
 * no longer due, and the next of that account is taken). Fair across accounts: the look-out
 * skips the accounts at `share` already, an account gets at most the rest of its share, and the
 * least busy accounts come first (rank within the account plus what it holds), so one account's
 * slow receivers never hold every delivery slot and a busy account does not starve a quiet one:
 * an account whose backlog fills the look-out is at its share after this claim, and the next
 * claim looks past it. The rows come back in that order. Slots no other account is waiting for are
 * lent: when the look-out finds no more due rows than it could take, the accounts at their share
 * may claim the free slots left over but `reserve`, the least busy first (a lone account, the
 * common self-hosted install, is not held to its share; a new account's messages find the
 * reserve free, and the accounts past their share borrow nothing while another is due).
 */
export async function claim(ctx: BaseCtx, owner: string, now: Date, leaseUntil: Date, limit: number, share?: AccountShare, attached: Attached = () => null): Promise<Claimed[]> {
  const perAccount = share?.perAccount ?? limit;
  const held = share?.held ?? new Map<string, number>();
  const full = [...held].filter(([, n]) => n >= perAccount).map(([accountId]) => accountId);
  const candidates = await lookOut(ctx, now, full, perAccount, limit * CANDIDATES_PER_ROW);
  const picked = pick(candidates, held, () => perAccount, limit);
  const quotas = new Map<string, number>();
  for (const c of picked) quotas.set(c.accountId, (quotas.get(c.accountId) ?? 0) + 1);
  const lent = candidates.length < limit * CANDIDATES_PER_ROW ? lend(held, quotas, full, perAccount, limit - picked.length - (share?.reserve ?? limit)) : new Map<string, number>();
  for (const [accountId, n] of lent) quotas.set(accountId, (quotas.get(accountId) ?? 0) + n);
  // What each account may hold after this claim: its share, or what was lent it on top of what it holds.
  const cap = (accountId: string) => (lent.has(accountId) ? (held.get(accountId) ?? 0) + quotas.get(accountId)! : perAccount);
  const claimed = await eachAtOnce([...quotas], ACCOUNT_CLAIMS_AT_ONCE, ([accountId, n]) =>
    claimOfAccount(ctx, accountId, owner, now, leaseUntil, n, attached).then(
      (rows) => ({ rows }),
      (err: unknown) => ({ rows: [], err }),
    ),
  );
  // The rows claimed are returned even if another account's claim failed: dropped, they would wait for their lease.
  const failed = claimed.find((c) => 'err' in c);
  if (failed && claimed.every((c) => !c.rows.length)) throw (failed as { err: unknown }).err;
  return pick(
    claimed.flatMap((c) => c.rows),
    held,
    cap,
    limit,
  ).map(({ dueKey: _, ...row }) => row);
}

/**
 * `spare` free slots lent to the accounts at their share (before this claim, or by it), one at a
 * time to the one that would then hold the fewest. Whether they have due rows their claim finds out.
 */
function lend(held: ReadonlyMap<string, number>, quotas: ReadonlyMap<string, number>, full: readonly string[], perAccount: number, spare: number): Map<string, number> {
  const lent = new Map<string, number>();
  const holding = new Map<string, number>(full.map((accountId) => [accountId, held.get(accountId) ?? 0]));
  for (const [accountId, n] of quotas) if ((held.get(accountId) ?? 0) + n >= perAccount) holding.set(accountId, (held.get(accountId) ?? 0) + n);
  for (let i = 0; i < spare && holding.size; i++) {
    const [accountId, n] = [...holding].reduce((a, b) => (b[1] < a[1] ? b : a));
    holding.set(accountId, n + 1);
    lent.set(accountId, (lent.get(accountId) ?? 0) + 1);
  }
  return lent;
}

/**
 * The oldest due rows, `n` at most, of the accounts not in `full`. None full: the due index in
 * order. Some full: the accounts with due rows one after the other (a recursive step through the
 * due-by-account index, one probe per account), each non-full one's oldest `perAccount` rows, so
 * the full accounts' backlog is never read. Citus runs no recursive query on a distributed table:
 * there the full accounts' rows are passed over as they are read, on every worker at once.
 */
async function lookOut(ctx: BaseCtx, now: Date, full: readonly string[], perAccount: number, n: number): Promise<Candidate[]> {
  const due = `c.status in ('pending', 'retrying') and c.available_at <= ?`;
  const columns = `c.account_id as "accountId", c.id, ${DUE_KEY('c.available_at')} as "dueKey"`;
  if (!full.length || (await onCitus(ctx))) {
    return (
      (await ctx.db.raw(`select ${columns} from outbox c where ${due} and c.account_id <> all(?::text[]) order by c.available_at, c.id limit ?`, [now, [...full], n])) as {
        rows: Candidate[];
      }
    ).rows;
  }
  return (
    (await ctx.db.raw(
      `with recursive accounts (account_id) as (
        (select c.account_id from outbox c where ${due} order by c.account_id limit 1)
        union all
        select (select c.account_id from outbox c where ${due} and c.account_id > a.account_id order by c.account_id limit 1)
        from accounts a where a.account_id is not null)
      select r."accountId", r.id, r."dueKey" from accounts a cross join lateral (
        select ${columns}, c.available_at from outbox c where c.account_id = a.account_id and ${due} order by c.available_at, c.id limit ?) r
      where a.account_id is not null and a.account_id <> all(?::text[])
      order by r.available_at, r.id limit ?`,
      [now, now, now, perAccount, [...full], n],
    )) as { rows: Candidate[] }
  ).rows;
}

/** Ranks rows (in their accounts' line) by what their account would then hold, oldest first on a tie; at most each account's `cap`, and `limit` in all. */
function pick<T extends Candidate>(rows: readonly T[], held: ReadonlyMap<string, number>, cap: (accountId: string) => number, limit: number): T[] {
  const inLine = [...rows].sort((a, b) => compare(a.dueKey, b.dueKey) || compare(a.id, b.id));
  const rank = new Map<string, number>();
  const ranked: { row: T; nth: number }[] = [];
  for (const row of inLine) {
    const nth = (held.get(row.accountId) ?? 0) + (rank.get(row.accountId) ?? 0) + 1;
    rank.set(row.accountId, (rank.get(row.accountId) ?? 0) + 1);
    if (nth <= cap(row.accountId)) ranked.push({ row, nth });
  }
  // A stable sort: rows of the same rank stay oldest first.
  return ranked
    .sort((a, b) => a.nth - b.nth)
    .slice(0, limit)
    .map((r) => r.row);
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * For the FROM list of a statement of the outbox's own bookkeeping (a claim, a settle): its
 * transaction commits without waiting for its WAL to reach the disk (set at commit time, local to
 * the transaction). A crash of PostgreSQL may lose such a commit without harm: a lost claim or
 * settle means the message is delivered again, as when a dispatcher dies mid-delivery (delivery is
 * at least once, a repeat with the same id). Deliveries then no longer queue behind the API's
 * commits for the disk.
 */
const COMMIT_WITHOUT_FLUSH = `(select set_config('synchronous_commit', 'off', true)) commit_without_flush`;

/**
 * What a claim reads with its rows, for the handlers that ask: a SELECT of (id, attached) over
 * `picked`, the rows claimed (account_id, livemode, id, kind, webhook_id), all of one account,
 * `accountId`. A join, not a correlated subquery nor an expression in RETURNING: Citus plans
 * neither in the claim's statement. null: nothing to read.
 */
export type Attached = (picked: string, accountId: string) => SqlFragment | null;

/** Up to `n` due messages of one account, oldest first, locked and leased in one statement that names the account; `attached` read with each. */
async function claimOfAccount(
  ctx: BaseCtx,
  accountId: string,
  owner: string,
  now: Date,
  leaseUntil: Date,
  n: number,
  attached: Attached,
): Promise<(Claimed & { dueKey: string })[]> {
  const withClaim = attached('picked', accountId);
  const result = (await ctx.db.raw(
    `
    with picked as (
      select c.account_id, c.livemode, c.id, c.kind, c.webhook_id, ${DUE_KEY('c.available_at')} as due_key from outbox c
      where c.account_id = ? and c.status in ('pending', 'retrying') and c.available_at <= ?
      order by c.available_at, c.id limit ? for update skip locked)${withClaim ? `, with_claim as (${withClaim.sql})` : ''}
    update outbox o set lease_owner = ?, lease_expires_at = ?, available_at = ?, attempts = o.attempts + 1
    from picked p${withClaim ? ' left join with_claim x on x.id = p.id' : ''}, ${COMMIT_WITHOUT_FLUSH} where o.account_id = ? and ${sameTenant('o', 'p')} and o.id = p.id
    returning o.id, o.account_id as "accountId", o.livemode, o.brand_id as "brandId", o.kind, o.event, o.webhook_id as "webhookId",
      o.payload::text as body, o.attempts, o.lease_owner as "leaseOwner", ${withClaim ? 'x.attached' : 'null'} as attached, p.due_key as "dueKey"`,
    [accountId, now, n, ...((withClaim?.bindings ?? []) as Knex.RawBinding[]), owner, leaseUntil, leaseUntil, accountId],
  )) as { rows: (Claimed & { dueKey: string })[] };
  return result.rows;
}

/** The row of a claim: primary key, and the claim it must still be (same owner, same attempt). */
const claimOf = (row: Claimed) => ({ accountId: row.accountId, id: row.id, leaseOwner: row.leaseOwner, attempts: row.attempts });

/**
 * Extends the leases of rows still held by their owner (same owner, same attempt, not settled) to
 * `leaseUntil`, in one statement. Returns the ids renewed: a row missing was taken over by another
 * dispatcher (its lease had run out) or settled meanwhile.
 */
export async function renew(ctx: BaseCtx, rows: readonly Claimed[], leaseUntil: Date): Promise<Set<string>> {
  if (!rows.length) return new Set();
  const claims = JSON.stringify(rows.map((r) => ({ account_id: r.accountId, livemode: r.livemode, id: r.id, lease_owner: r.leaseOwner, attempts: r.attempts })));
  const result = (await ctx.db.raw(
    `
    update outbox o set lease_expires_at = ?, available_at = ?
    from jsonb_to_recordset(?::jsonb) as r(account_id text, livemode boolean, id text, lease_owner text, attempts int)
    where ${sameTenant('o', 'r')} and o.id = r.id and o.lease_owner = r.lease_owner and o.attempts = r.attempts and o.status in ('pending', 'retrying')
    returning o.id`,
    [leaseUntil, leaseUntil, claims],
  )) as { rows: { id: string }[] };
  return new Set(result.rows.map((r) => r.id));
}

const OWNER_LOCK_PREFIX = 'ticketd:dispatcher:';

/** The name of the session advisory lock every dispatcher holds while it lives (on its listener: see core/notify.ts). */
export const ownerLock = (owner: string) => `${OWNER_LOCK_PREFIX}${owner}`;

/**
 * Makes the leased rows of every owner that is gone due now, so they need not wait for their lease
 * to run out (a killed process). An owner is gone when its advisory lock (ownerLock, held on its
 * LISTEN connection while it lives) is free: PostgreSQL frees it when that session ends. The lock
 * is tried per owner for this transaction only, so the check works through a transaction-mode
 * pooler too. lease_owner stays: were the owner alive after all (only its lock connection lost),
 * its settle still counts until another dispatcher claims the row. `self` is never gone.
 */
export async function reclaimGone(ctx: BaseCtx, self: string, now: Date): Promise<number> {
  const result = (await ctx.db.raw(
    `
    with owners as (
      select distinct lease_owner as owner from outbox
      where lease_owner is not null and lease_owner <> ? and status in ('pending', 'retrying') and available_at > ?),
    gone as (select owner from owners where pg_try_advisory_xact_lock(hashtext(? || owner)))
    update outbox o set available_at = ?, lease_expires_at = ?
    from gone where o.lease_owner = gone.owner and o.status in ('pending', 'retrying') and o.available_at > ?`,
    [self, now, OWNER_LOCK_PREFIX, now, now, now],
  )) as { rowCount: number | null };
  return result.rowCount ?? 0;
}

export interface Settlement {
  status: OutboxStatus;
  /** Next attempt (retrying only). */
  availableAt: Date | null;
  error: string | null;
  responseCode: number | null;
  responseBody: string | null;
  attemptedAt: Date;
}

/** The relation of settle's statement that holds the settled row (none when the claim no longer held): what its parts are gated on. */
export const SETTLED = 'settled';

/**
 * Records the outcome of an attempt, if `row`'s claim still holds (same owner, same attempt): a
 * dispatcher whose lease expired and was taken over settles nothing. `parts`, the kind's own
 * bookkeeping, go in the same statement, each gated on SETTLED: one round trip, atomic with or
 * without a transaction around it, committed without waiting for the disk (COMMIT_WITHOUT_FLUSH).
 * Returns whether it settled.
 */
export async function settle(ctx: BaseCtx, row: Claimed, s: Settlement, parts: readonly NamedPart[] = []): Promise<boolean> {
  const update = ctx
    .db('outbox')
    .where(claimOf(row))
    .update(
      {
        status: s.status,
        availableAt: s.availableAt ?? s.attemptedAt,
        leaseOwner: null,
        leaseExpiresAt: null,
        lastError: s.error,
        responseCode: s.responseCode,
        responseBody: s.responseBody,
        lastAttemptAt: s.attemptedAt,
        deliveredAt: s.status === 'success' ? s.attemptedAt : null,
      },
      ['id'],
    )
    .toSQL();
  const ctes = [{ name: SETTLED, sql: update.sql, bindings: update.bindings }, ...parts];
  const result = (await ctx.db.raw(`${withParts(ctes)}select count(*)::int as n from ${SETTLED}, ${COMMIT_WITHOUT_FLUSH}`, ctes.flatMap((p) => p.bindings) as never[])) as {
    rows: { n: number }[];
  };
  return result.rows[0]!.n === 1;
}

/**
 * Gives a claimed row back (shutdown cut its attempt off), due at `now`. It keeps its attempt: the
 * receiver may have seen it (delivery is at least once). Returns whether the claim still held.
 */
export async function release(ctx: BaseCtx, row: Claimed, now: Date): Promise<boolean> {
  return (await ctx.db('outbox').where(claimOf(row)).update({ leaseOwner: null, leaseExpiresAt: null, availableAt: now })) === 1;
}

// ---------------------------------------------------------------------------------------------
// Webhook deliveries (for the webhooks domain).

/** A webhook's deliveries, newest first. */
export async function listForWebhook(ctx: TenantCtx, webhookId: string, limit: number): Promise<OutboxMessage[]> {
  return OutboxMessage.scoped(ctx).where('outbox.webhookId', webhookId).orderBy('outbox.id', 'desc').limit(limit);
}

export async function findForWebhook(ctx: TenantCtx, webhookId: string, deliveryId: string): Promise<OutboxMessage> {
  const row = await OutboxMessage.scoped(ctx).where({ 'outbox.webhookId': webhookId, 'outbox.id': deliveryId }).first();
  if (!row) throw notFound('Delivery');
  return row;
}

/**
 * A new delivery of the same body (a copy: the original keeps its own attempt log), due now. It
 * gets its own id, so receivers de-duplicating on webhook-id see it as a new message.
 */
export async function redeliver(tx: TenantCtx, original: OutboxMessage): Promise<OutboxMessage> {
  assertInTransaction(tx, original.event);
  const id = newId(ID_PREFIX.delivery);
  const copied = (await tx.db.raw(
    `insert into outbox (id, account_id, livemode, brand_id, kind, event, webhook_id, payload)
    select ?, account_id, livemode, brand_id, kind, event, webhook_id, payload from outbox where ? and id = ?`,
    [id, tenantScope(tx, 'outbox'), original.id],
  )) as { rowCount: number | null };
  await outboxAdded(tx, copied.rowCount ?? 0);
  return (await OutboxMessage.scoped(tx).findById(id))!;
}

// ---------------------------------------------------------------------------------------------
// Operators (CLI): across every account.

export interface OutboxStats {
  counts: { kind: string; status: string; count: number }[];
  /** Age in seconds of the oldest message still to deliver (pending or retrying); null when none. */
  oldestPendingAgeSeconds: number | null;
}

export async function stats(ctx: BaseCtx, now = new Date(ctx.services.now())): Promise<OutboxStats> {
  const counts = (await ctx.db('outbox').groupBy('kind', 'status').orderBy(['kind', 'status']).select('kind', 'status').count({ count: '*' })) as {
    kind: string;
    status: string;
    count: string;
  }[];
  const oldest = (await ctx.db('outbox').whereIn('status', ['pending', 'retrying']).min({ at: 'createdAt' }).first()) as { at: Date | null };
  return {
    counts: counts.map((c) => ({ kind: c.kind, status: c.status, count: Number(c.count) })),
    oldestPendingAgeSeconds: oldest.at ? Math.max(0, Math.round((now.getTime() - new Date(oldest.at).getTime()) / 1000)) : null,
  };
}

/** A message as operators see it (no payload: it may be large). */
export interface OperatorView {
  id: string;
  kind: string;
  event: string;
  status: OutboxStatus;
  attempts: number;
  accountId: string;
  livemode: boolean;
  brandId: string | null;
  webhookId: string | null;
  nextAttemptAt: string | null;
  lastAttemptAt: string | null;
  lastError: string | null;
  responseCode: number | null;
  createdAt: string;
  deliveredAt: string | null;
}

const isoOrNull = (d: Date | null) => (d ? new Date(d).toISOString() : null);

function operatorView(row: OutboxMessage): OperatorView {
  return {
    id: row.id,
    kind: row.kind,
    event: row.event,
    status: row.status,
    attempts: row.attempts,
    accountId: row.accountId,
    livemode: row.livemode,
    brandId: row.brandId,
    webhookId: row.webhookId,
    nextAttemptAt: row.status === 'pending' || row.status === 'retrying' ? isoOrNull(row.availableAt) : null,
    lastAttemptAt: isoOrNull(row.lastAttemptAt),
    lastError: row.lastError,
    responseCode: row.responseCode,
    createdAt: new Date(row.createdAt).toISOString(),
    deliveredAt: isoOrNull(row.deliveredAt),
  };
}

/** Newest first, optionally of one status. */
export async function listAll(ctx: BaseCtx, filter: { status?: OutboxStatus; limit: number }): Promise<OperatorView[]> {
  const q = OutboxMessage.query(ctx.db).orderBy('id', 'desc').limit(filter.limit);
  if (filter.status) q.where('status', filter.status);
  return (await q).map(operatorView);
}

/** A failed or dead message back to pending, due now, with a fresh set of attempts. */
export async function retry(ctx: BaseCtx, id: string): Promise<OperatorView> {
  const row = await OutboxMessage.query(ctx.db).findById(id);
  if (!row) throw notFound('Outbox message');
  const [updated] = (await OutboxMessage.query(ctx.db)
    .where({ id })
    .whereIn('status', ['failed', 'dead'])
    .patch({ status: 'pending', attempts: 0, availableAt: ctx.db.fn.now() as unknown as Date, leaseOwner: null, leaseExpiresAt: null })
    .returning('*')) as unknown as OutboxMessage[];
  if (!updated) throw conflict(`Outbox message ${id} is ${row.status}: only failed and dead messages can be retried`, 'not_retryable');
  await ctx.db.raw('select pg_notify(?, ?)', [OUTBOX_CHANNEL, updated.kind]);
  return operatorView(updated);
}

const PURGE_BATCH = 5_000;

/** Deletes finished messages (success, failed, dead) created before `before`, in batches (at most maxBatches). */
export async function purge(ctx: BaseCtx, before: Date, maxBatches = Infinity): Promise<number> {
  let total = 0;
  for (let batch = 1; ; batch++) {
    const n = await ctx
      .db('outbox')
      .whereIn(['accountId', 'id'], ctx.db('outbox').whereIn('status', ['success', 'failed', 'dead']).where('createdAt', '<', before).limit(PURGE_BATCH).select('accountId', 'id'))
      .delete();
    total += n;
    if (n < PURGE_BATCH || batch >= maxBatches) return total;
  }
}
