/**
 * `npm run bench -- --events`: webhook delivery through the real processes. An API server
 * (`ticketd start --role api`) and one or two dispatchers (`--role dispatcher`) on a fresh database;
 * a loopback receiver in this process. Prints a table; asserts nothing.
 *
 *  - latency: tickets created one after another through the API; for each, the time from the
 *    event's `timestamp` (set inside the create's transaction, just before its commit) to the
 *    receiver reading the request. One dispatcher.
 *  - throughput: EVENTS messages committed at once (one INSERT and its NOTIFY), delivered by one,
 *    then by two dispatcher processes; deliveries per second from the commit to the last receipt.
 *  - fairness: a second account whose receiver never answers (each request holds a slot until the
 *    webhook timeout) has HANGING_EVENTS messages queued ahead of FAIR_EVENTS of the first
 *    account; the first account's deliveries per second and latency from the commit, with one and
 *    two dispatchers, and with the per-account share turned off for comparison.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedPostgres } from '../server/integrations/embedded-postgres.js';
import { percentile } from './floor.js';
import { RECEIVER_ON_LOOPBACK, sql, startTicketd, stop, withDatabase } from './server.js';

const TICKETS = 300;
const EVENTS = 3000;
const FAIR_EVENTS = 1000;
const HANGING_EVENTS = 32;
const log = (s: string) => process.stderr.write(`${s}\n`);

export async function runEventsBench(): Promise<void> {
  let adminUrl = process.env.BENCH_DATABASE_URL;
  let cleanup = async () => undefined as void;
  if (!adminUrl) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-bench-events-'));
    chmodSync(dataDir, 0o755);
    const handle = await new EmbeddedPostgres({ dataDir, settings: { max_connections: '200' } }).acquire();
    adminUrl = withDatabase(handle.url, 'postgres');
    cleanup = async () => {
      await handle.release();
      rmSync(dataDir, { recursive: true, force: true });
    };
  }
  const database = `ticketd_bench_events_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);

  // The receiver: receipt time per event id.
  const receivedAt = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      receivedAt.set((JSON.parse(Buffer.concat(chunks).toString()) as { id: string }).id, Date.now());
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  const waitFor = async (n: number) => {
    while (receivedAt.size < n) await new Promise((r) => setTimeout(r, 2));
  };

  const children: ChildProcess[] = [];
  try {
    const api = await startTicketd('api', dbUrl, RECEIVER_ON_LOOPBACK);
    children.push(api.child);
    const key = api.info.bootstrap.apiKeys.live.key as string;
    const brandId = api.info.bootstrap.brand.id as string;
    const call = (method: string, url: string, body: unknown) =>
      fetch(`${api.info.url}${url}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any })); // eslint-disable-line @typescript-eslint/no-explicit-any
    const webhook = await call('POST', `/v1/brands/${brandId}/webhooks`, { url: receiverUrl, events: ['ticket.created'] });
    if (webhook.status !== 201) throw new Error(`webhook create failed: ${JSON.stringify(webhook.body)}`);

    // Latency, one dispatcher.
    let dispatchers = [await startTicketd('dispatcher', dbUrl, RECEIVER_ON_LOOPBACK)];
    children.push(dispatchers[0]!.child);
    const latencies: number[] = [];
    const events: { id: string; timestamp: number }[] = [];
    log(`latency: ${TICKETS} tickets, one at a time`);
    for (let i = 0; i < TICKETS; i++) {
      const created = await call('POST', `/v1/brands/${brandId}/tickets`, { title: `Bench ${i}` });
      if (created.status !== 201) throw new Error(`ticket create failed: ${JSON.stringify(created.body)}`);
    }
    await waitFor(TICKETS);
    const outbox = await sql(dbUrl, "select payload->>'id' as id, payload->>'timestamp' as ts from outbox");
    for (const row of outbox) events.push({ id: String(row.id), timestamp: Date.parse(String(row.ts)) });
    for (const e of events) latencies.push(receivedAt.get(e.id)! - e.timestamp);
    latencies.sort((a, b) => a - b);

    const rows: Record<string, string | number>[] = [
      { scenario: 'event → receiver, 1 dispatcher', events: TICKETS, 'p50 ms': percentile(latencies, 50), 'p99 ms': percentile(latencies, 99), 'deliveries/s': '' },
    ];

    // Throughput, one then two dispatchers: EVENTS rows committed at once.
    for (const count of [1, 2]) {
      await stop(dispatchers.map((d) => d.child));
      dispatchers = await Promise.all(Array.from({ length: count }, () => startTicketd('dispatcher', dbUrl, RECEIVER_ON_LOOPBACK)));
      children.push(...dispatchers.map((d) => d.child));
      receivedAt.clear();
      log(`throughput: ${EVENTS} events, ${count} dispatcher${count > 1 ? 's' : ''}`);
      const committed = Date.now();
      await sql(
        dbUrl,
        `
        with ins as (
          insert into outbox (id, account_id, livemode, brand_id, kind, event, webhook_id, payload)
          select ticketd_new_id('dlv'), w.account_id, w.livemode, w.brand_id, 'webhook', 'ticket.created', w.id,
            jsonb_build_object('id', 'evt_bench_${count}_' || g, 'event', 'ticket.created', 'brand_id', w.brand_id, 'data', jsonb_build_object('n', g), 'timestamp', now())
          from webhooks w, generate_series(1, $1) g where w.id = $2 returning 1)
        select pg_notify('ticketd_outbox', 'webhook') from (select 1 from ins limit 1) x`,
        [EVENTS, webhook.body.id],
      );
      await waitFor(EVENTS);
      const seconds = (Math.max(...receivedAt.values()) - committed) / 1000;
      rows.push({
        scenario: `${EVENTS} queued events, ${count} dispatcher${count > 1 ? 's' : ''}`,
        events: EVENTS,
        'p50 ms': '',
        'p99 ms': '',
        'deliveries/s': Math.round(EVENTS / seconds),
      });
    }

    await stop(dispatchers.map((d) => d.child));
    rows.push(...(await fairness(api.info.url, dbUrl, webhook.body.id as string, receivedAt, waitFor, children)));

    process.stdout.write(`\nticketd events bench: webhook deliveries to a loopback receiver, ${os.cpus().length} cores (dispatcher concurrency 16 each)\n`);
    console.table(rows);
    process.stdout.write(`${JSON.stringify({ tickets: TICKETS, events: EVENTS, fairEvents: FAIR_EVENTS, hangingEvents: HANGING_EVENTS, results: rows })}\n`);
  } finally {
    await stop(children.filter((c) => c.exitCode === null && c.signalCode === null));
    server.close();
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
  }
}

/**
 * The fairness scenarios: a second account (signed up through the API) whose webhook points at a
 * receiver that never answers. Before each run the hanging account's HANGING_EVENTS messages are
 * queued a second ahead of FAIR_EVENTS of the first account (`webhookId`), in one commit.
 */
async function fairness(
  apiUrl: string,
  dbUrl: string,
  webhookId: string,
  receivedAt: Map<string, number>,
  waitFor: (n: number) => Promise<void>,
  children: ChildProcess[],
): Promise<Record<string, string | number>[]> {
  let hangingRequests = 0;
  const hangingServer = http.createServer((req) => {
    hangingRequests++;
    req.resume(); // read the request, never answer it
  });
  await new Promise<void>((r) => hangingServer.listen(0, '127.0.0.1', r));
  const post = async (url: string, body: unknown, key?: string) => {
    const res = await fetch(`${apiUrl}${url}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    if (res.status !== 201) throw new Error(`${url}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const slow = await post('/v1/accounts', { email: 'hanging@example.com' });
  const slowKey = slow.apiKeys.live.key as string;
  const slowBrand = (slow.brand ?? (await post('/v1/brands', { name: 'Hanging' }, slowKey))).id as string;
  const hangingHook = await post(
    `/v1/brands/${slowBrand}/webhooks`,
    { url: `http://127.0.0.1:${(hangingServer.address() as AddressInfo).port}/hook`, events: ['ticket.created'] },
    slowKey,
  );

  const rows: Record<string, string | number>[] = [];
  const runs = [
    { dispatchers: 1, share: '8' },
    { dispatchers: 2, share: '8' },
    { dispatchers: 1, share: '16' },
  ];
  try {
    for (const [n, run] of runs.entries()) {
      const env = { ...RECEIVER_ON_LOOPBACK, TICKETD_DISPATCHER_ACCOUNT_CONCURRENCY: run.share };
      const dispatchers = await Promise.all(Array.from({ length: run.dispatchers }, () => startTicketd('dispatcher', dbUrl, env)));
      children.push(...dispatchers.map((d) => d.child));
      receivedAt.clear();
      hangingRequests = 0;
      const label = `${run.dispatchers} dispatcher${run.dispatchers > 1 ? 's' : ''}, share ${run.share === '16' ? 'off (16)' : run.share}`;
      log(`fairness: ${HANGING_EVENTS} events to a hanging receiver ahead of ${FAIR_EVENTS} of another account, ${label}`);
      const committed = Date.now();
      await sql(
        dbUrl,
        `
        with ins as (
          insert into outbox (id, account_id, livemode, brand_id, kind, event, webhook_id, payload, available_at)
          select ticketd_new_id('dlv'), w.account_id, w.livemode, w.brand_id, 'webhook', 'ticket.created', w.id,
            jsonb_build_object('id', 'evt_fair_${n}_' || w.id || '_' || g, 'event', 'ticket.created', 'brand_id', w.brand_id, 'data', jsonb_build_object('n', g), 'timestamp', now()),
            case when w.id = $3 then now() - interval '1 second' else now() end
          from webhooks w, generate_series(1, greatest($1::int, $2::int)) g
          where (w.id = $3 and g <= $1) or (w.id = $4 and g <= $2) returning 1)
        select pg_notify('ticketd_outbox', 'webhook') from (select 1 from ins limit 1) x`,
        [HANGING_EVENTS, FAIR_EVENTS, hangingHook.id, webhookId],
      );
      await waitFor(FAIR_EVENTS);
      const latencies = [...receivedAt.values()].map((at) => at - committed).sort((a, b) => a - b);
      rows.push({
        scenario: `${FAIR_EVENTS} events while another account's receiver hangs, ${label}`,
        events: FAIR_EVENTS,
        'p50 ms': percentile(latencies, 50),
        'p99 ms': percentile(latencies, 99),
        'deliveries/s': Math.round(FAIR_EVENTS / ((latencies.at(-1)! || 1) / 1000)),
        'hanging requests': hangingRequests,
      });
      // Stopping cuts the hanging requests off and gives their messages back; then they go.
      await stop(dispatchers.map((d) => d.child));
      await sql(dbUrl, "delete from outbox where status in ('pending', 'retrying')");
    }
  } finally {
    hangingServer.closeAllConnections();
    hangingServer.close();
  }
  return rows;
}
