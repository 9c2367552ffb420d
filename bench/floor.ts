/**
 * The raw database floor of a ticket create: the same rows written by a plain pg client, no HTTP,
 * no JSON schema, no knex/objection. Two shapes:
 *  - 'statements': tickets.create step by step (its way for new tags, watchers, …), one round trip
 *    each in one transaction (read off the service with knex's query events);
 *  - 'one statement': the usual create as ONE statement for ONE ticket (the checks, idempotency
 *    key, tags by name, contact, brand counter, ticket with the blocked-sender test, tag links,
 *    audit entry, webhook fan-out and the ticket as the response shows it): what each create cost
 *    before group commit, so the brand row lock lives exactly as long as one statement. The API
 *    now sends concurrent creates together in one set-based statement (tickets/service.ts
 *    writeStatement), which is why it can pass this floor.
 *  - 'writes only': the least one create must write, in one statement.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { newId } from '../server/core/ids.js';
import { countChangesSql } from '../server/core/ticket-writes.js';

/** A create's count changes, as ticket create writes them (its tickets are open: not resolved). */
const COUNTED = countChangesSql({
  after: '(select t.account_id, t.livemode, t.brand_id, t.status, t.created_at, null::timestamptz as resolved_at, t.deleted_at, t.is_spam from t)',
});

export interface FloorInput {
  url: string;
  accountId: string;
  brandIds: string[];
  /** Existing customer emails per brand (same index as brandIds). */
  emails: string[][];
  /** Two existing tag ids and names per brand. */
  tags: { ids: string[]; names: string[] }[];
  words: string[];
}

export interface LoadResult {
  ops: number;
  perSec: number;
  p50: number;
  p99: number;
  errors: number;
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** p50 and p99 of `n` GETs one after another (after 20 not counted), in ms to two decimals. */
export async function readLatency(url: string, headers: Record<string, string>, n = 300): Promise<{ p50: number; p99: number }> {
  const times: number[] = [];
  for (let i = -20; i < n; i++) {
    const started = performance.now();
    const res = await fetch(url, { headers });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
    if (i >= 0) times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 100) / 100;
  return { p50: round(percentile(times, 50)), p99: round(percentile(times, 99)) };
}

export const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;
/** n words drawn from `words` (most frequent first) by a Zipf-like law. */
export const text = (words: string[], n: number) => Array.from({ length: n }, () => words[Math.floor(Math.exp(Math.random() * Math.log(words.length)))]!).join(' ');

/** Runs `op` on `concurrency` clients for `ms` milliseconds; worker w uses brand w % brands. */
export async function runLoad(url: string, concurrency: number, ms: number, op: (c: pg.Client, worker: number) => Promise<void>): Promise<LoadResult> {
  const clients = await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const c = new pg.Client({ connectionString: url, application_name: 'ticketd-bench-floor' });
      await c.connect();
      return c;
    }),
  );
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const deadline = started + ms;
  try {
    await Promise.all(
      clients.map(async (c, w) => {
        while (performance.now() < deadline) {
          const t0 = performance.now();
          try {
            await op(c, w);
            latencies.push(performance.now() - t0);
          } catch {
            errors++;
            await c.query('ROLLBACK').catch(() => undefined);
          }
        }
      }),
    );
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { ops: latencies.length, perSec: Math.round(latencies.length / elapsed), p50: percentile(latencies, 50), p99: percentile(latencies, 99), errors };
}

const SCOPE = 'account_id = $1 and livemode = $2';

/**
 * The derived columns a create fills itself (migration 2200), from its customer row `cu` (one
 * contact or none) and the title and body parameters: no assignee or category here.
 */
const DERIVED_COLUMNS = 'customer_sort, customer_text, company_sort, assignee_sort, category_sort, search_vector';
const derivedValues = (title: string, body: string) => `coalesce(ticketd_person_sort(cu.name, cu.email), ''), coalesce(ticketd_person_text(cu.name, cu.email), ''),
  coalesce((select lower(co.name) from companies co where co.account_id = cu.account_id and co.livemode = cu.livemode and co.brand_id = cu.brand_id and co.id = cu.company_id), ''),
  '', '', ticketd_ticket_vector(${title}, coalesce(ticketd_person_text(cu.name, cu.email), ''), ${body})`;

/**
 * The statements of tickets.create step by step, one round trip each (7): BEGIN, the brand,
 * the idempotency claim, the tags by name, the contact by email, the last statement (counter,
 * ticket with the blocked-sender test, tag links, audit entry, webhook fan-out, and the ticket as
 * the response shows it), COMMIT.
 */
export function statementsOp(input: FloorInput) {
  return async (c: pg.Client, w: number) => {
    const b = w % input.brandIds.length;
    const brandId = input.brandIds[b]!;
    const email = pick(input.emails[b]!);
    const id = newId('tkt');
    const s = [input.accountId, true, brandId];
    await c.query('BEGIN');
    await c.query(`select brands.* from brands where ${SCOPE} and id = $3`, s);
    await c.query(
      `insert into idempotency_keys (account_id, livemode, key, fingerprint, resource_id, created_at, expires_at)
      values ($1, $2, $3, $4, $5, now(), now() + make_interval(hours => $6))
      on conflict (account_id, livemode, key) do update set fingerprint = excluded.fingerprint, resource_id = excluded.resource_id,
        created_at = excluded.created_at, expires_at = excluded.expires_at where idempotency_keys.expires_at <= now() returning key`,
      [input.accountId, true, randomUUID(), 'f'.repeat(64), id, 24],
    );
    await c.query(`select tags.* from tags where ${SCOPE} and brand_id = $3 and lower(tags.name) in ($4, $5)`, [...s, ...input.tags[b]!.names.map((n) => n.toLowerCase())]);
    const contact = await c.query(`select contacts.id from contacts where ${SCOPE} and brand_id = $3 and email = $4`, [...s, email]);
    const title = text(input.words, 6);
    await c.query(
      `with n as (update brands set next_ticket_number = next_ticket_number + 1 where account_id = $1 and livemode = $2 and id = $3
        returning next_ticket_number - 1 as num),
      t as (insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, customer_id, links, metadata, source, source_data, is_spam, ${DERIVED_COLUMNS})
        select $4, $1, $2, $3, n.num, $5, $6, 'open', 'high', $7, '[]'::jsonb, '{}'::jsonb, 'api', 'null'::jsonb,
          exists (select 1 from blocked_sources where ${SCOPE} and brand_id = $3 and (type = 'email' and value = $9 or (type = 'domain' and value = $10))),
          ${derivedValues('$5', '$6')}
        from n left join contacts cu on cu.account_id = $1 and cu.livemode = $2 and cu.brand_id = $3 and cu.id = $7
        returning *),
      tt as (insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority) select t.account_id, t.livemode, t.brand_id, t.id, tag, t.status, t.priority from t, unnest($8::text[]) as tag),
      cc as (${COUNTED}),
      a as (insert into audit_log (id, account_id, livemode, brand_id, ticket_id, entity_type, entity_id, event, changes, metadata, performer_type, performer_id, performer_name, request_id, source)
        values ($11, $1, $2, $3, $4, 'ticket', $4, 'ticket.created', '[]', json_build_object('title', $5::text), 'api', 'key_bench', 'bench', 'req_bench', 'api')),
      e as (insert into outbox (id, account_id, livemode, brand_id, kind, event, webhook_id, payload)
        select ticketd_new_id('dlv'), w.account_id, w.livemode, w.brand_id, 'webhook', 'ticket.created', w.id, jsonb_build_object('id', t.id, 'ticketNumber', t.ticket_number)
        from t join webhooks w on w.account_id = t.account_id and w.livemode = t.livemode and w.brand_id = t.brand_id and w.enabled and w.events && array['ticket.created'])
      select t.*,
        (select json_build_object('id', st.id, 'key', st.key, 'name', st.name, 'color', st.color) from statuses st where st.account_id = t.account_id and st.livemode = t.livemode and st.brand_id = t.brand_id and st.key = t.status) as status_ref,
        (select json_build_object('id', c.id, 'email', c.email, 'name', c.name, 'company', (select json_build_object('id', co.id, 'name', co.name) from companies co where co.account_id = c.account_id and co.livemode = c.livemode and co.brand_id = c.brand_id and co.id = c.company_id))
          from contacts c where c.account_id = t.account_id and c.livemode = t.livemode and c.brand_id = t.brand_id and c.id = t.customer_id) as customer,
        coalesce((select json_agg(json_build_object('id', tg.id, 'name', tg.name, 'color', tg.color) order by lower(tg.name), tg.id)
          from tags tg where tg.account_id = t.account_id and tg.livemode = t.livemode and tg.brand_id = t.brand_id and tg.id = any($8::text[])), '[]'::json) as tag_list
      from t`,
      [...s, id, title, text(input.words, 40), contact.rows[0]?.id ?? null, input.tags[b]!.ids, email, email.slice(email.indexOf('@') + 1), newId('log')],
    );
    await c.query('COMMIT');
  };
}

/**
 * One create in one statement (autocommit), as tickets.create sent it for an existing customer and
 * existing tags before it batched creates, prepared like it: the brand row is locked for one statement.
 */
export function oneStatementOp(input: FloorInput) {
  return async (c: pg.Client, w: number) => {
    const b = w % input.brandIds.length;
    const id = newId('tkt');
    const title = text(input.words, 6);
    const email = pick(input.emails[b]!);
    const created = await c.query({
      name: 'ticketd_bench_one_statement',
      text: `with given_tags as (
        select id, lower(name) as name_key from tags where ${SCOPE} and brand_id = $3 and (id = any($4::text[]) or lower(name) = any($5::text[]))
      ), checks as (
        select exists (select 1 from brands b where b.account_id = $1 and b.livemode = $2 and b.id = $3
              and b.ticket_schema is null and jsonb_array_length(coalesce(b.field_rules -> 'ticket', '[]'::jsonb)) = 0)
          and exists (select 1 from statuses s where s.account_id = $1 and s.livemode = $2 and s.brand_id = $3 and s.key = 'open')
          and $5::text[] <@ (select coalesce(array_agg(name_key), '{}') from given_tags) as ok
      ), claim as (
        insert into idempotency_keys (account_id, livemode, key, fingerprint, resource_id, created_at, expires_at)
        select $1, $2, $6, $7, $8, now(), now() + make_interval(hours => 24) where (select ok from checks)
        on conflict (account_id, livemode, key) do update set fingerprint = excluded.fingerprint, resource_id = excluded.resource_id,
          created_at = excluded.created_at, expires_at = excluded.expires_at where idempotency_keys.expires_at <= now()
        returning key
      ), go as (select (select ok from checks) and exists (select 1 from claim) as ok
      ), customer as (select * from contacts where ${SCOPE} and brand_id = $3 and email = $9
      ), n as (
        update brands set next_ticket_number = next_ticket_number + 1
        where account_id = $1 and livemode = $2 and id = $3 and (select ok from go) and exists (select 1 from customer)
        returning next_ticket_number - 1 as num
      ), t as (
        insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, customer_id, links, metadata, source, source_data, is_spam, attachment_count, ${DERIVED_COLUMNS})
        select $8, $1, $2, $3, n.num, $10, $11, 'open', 'high', cu.id, '[]'::jsonb, '{}'::jsonb, 'api', 'null'::jsonb,
          exists (select 1 from blocked_sources where ${SCOPE} and brand_id = $3 and (type = 'email' and value = $9 or (type = 'domain' and value = $12))), 0,
          ${derivedValues('$10', '$11')}
        from n left join customer cu on true
        returning *
      ), tt as (
        insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority) select t.account_id, t.livemode, t.brand_id, t.id, tag, t.status, t.priority from t, unnest(array(select id from given_tags)) as tag
      ), cc as (${COUNTED}
      ), a as (
        insert into audit_log (id, account_id, livemode, brand_id, ticket_id, entity_type, entity_id, event, changes, metadata, performer_type, performer_id, performer_name, request_id, source)
        select $13, t.account_id, t.livemode, t.brand_id, t.id, 'ticket', t.id, 'ticket.created', '[]', json_build_object('title', $10::text), 'api', 'key_bench', 'bench', 'req_bench', 'api' from t
      ), e as (
        insert into outbox (id, account_id, livemode, brand_id, kind, event, webhook_id, payload)
        select ticketd_new_id('dlv'), w.account_id, w.livemode, w.brand_id, 'webhook', 'ticket.created', w.id, jsonb_build_object('id', t.id, 'ticketNumber', t.ticket_number)
        from t join webhooks w on w.account_id = t.account_id and w.livemode = t.livemode and w.brand_id = t.brand_id and w.enabled and w.events && array['ticket.created']
      )
      select t.*,
        (select json_build_object('id', st.id, 'key', st.key, 'name', st.name, 'color', st.color) from statuses st where st.account_id = t.account_id and st.livemode = t.livemode and st.brand_id = t.brand_id and st.key = t.status) as status_ref,
        (select json_build_object('id', c.id, 'email', c.email, 'name', c.name, 'company', (select json_build_object('id', co.id, 'name', co.name) from companies co where co.account_id = c.account_id and co.livemode = c.livemode and co.brand_id = c.brand_id and co.id = c.company_id))
          from customer c where c.id = t.customer_id) as customer,
        coalesce((select json_agg(json_build_object('id', tg.id, 'name', tg.name, 'color', tg.color) order by lower(tg.name), tg.id)
          from tags tg where tg.account_id = t.account_id and tg.livemode = t.livemode and tg.brand_id = t.brand_id and tg.id = any(array(select id from given_tags))), '[]'::json) as tag_list
      from t`,
      values: [
        input.accountId,
        true,
        input.brandIds[b],
        [],
        input.tags[b]!.names.map((n) => n.toLowerCase()),
        randomUUID(),
        'f'.repeat(64),
        id,
        email,
        title,
        text(input.words, 40),
        email.slice(email.indexOf('@') + 1),
        newId('log'),
      ],
    });
    if (created.rowCount !== 1) throw new Error('the statement created no ticket'); // counted as an error
  };
}

/**
 * The least a create must write, in one prepared statement (autocommit): idempotency key, counter,
 * ticket (with its derived columns), tag links by id, audit entry; no checks, no tag names, no blocked-sender test, no webhook
 * fan-out, no ticket view. A floor under the usual create's own statement, for reference.
 */
export function writesOnlyOp(input: FloorInput) {
  return async (c: pg.Client, w: number) => {
    const b = w % input.brandIds.length;
    const id = newId('tkt');
    const title = text(input.words, 6);
    const created = await c.query({
      name: 'ticketd_bench_writes_only',
      text: `with k as (
        insert into idempotency_keys (account_id, livemode, key, fingerprint, resource_id, created_at, expires_at)
        values ($1, $2, $4, $5, $6, now(), now() + interval '24 hours') on conflict do nothing returning key
      ), customer as (
        select * from contacts where account_id = $1 and livemode = $2 and brand_id = $3 and email = $7
      ), n as (
        update brands set next_ticket_number = next_ticket_number + 1
        where account_id = $1 and livemode = $2 and id = $3 and exists (select 1 from k)
        returning next_ticket_number - 1 as num
      ), t as (
        insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, customer_id, source, ${DERIVED_COLUMNS})
        select $6, $1, $2, $3, n.num, $8, $9, 'open', 'high', cu.id, 'api', ${derivedValues('$8', '$9')}
        from n left join customer cu on true
        returning id, account_id, livemode, brand_id, ticket_number, status, priority, created_at, deleted_at, is_spam
      ), tt as (
        insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority) select t.account_id, t.livemode, t.brand_id, t.id, tag, t.status, t.priority from t, unnest($10::text[]) as tag
      ), cc as (${COUNTED}
      ), a as (
        insert into audit_log (id, account_id, livemode, brand_id, ticket_id, entity_type, entity_id, event, changes, metadata, performer_type, performer_id, performer_name, request_id, source)
        select $11, t.account_id, t.livemode, t.brand_id, t.id, 'ticket', t.id, 'ticket.created', '[]', json_build_object('title', $8::text), 'api', 'key_bench', 'bench', 'req_bench', 'api' from t
      )
      select id, ticket_number from t`,
      values: [input.accountId, true, input.brandIds[b], randomUUID(), 'f'.repeat(64), id, pick(input.emails[b]!), title, text(input.words, 40), input.tags[b]!.ids, newId('log')],
    });
    if (created.rowCount !== 1) throw new Error('the statement created no ticket');
  };
}
