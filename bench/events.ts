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
import { sql, startTicketd, withDatabase } from './server.js';

const TICKETS = 300;
const EVENTS = 3000;
const log = (s: string) => process.stderr.write(`${s}\n`);

/** The receiver listens on loopback, which webhooks may not target by default. */
const RECEIVER_ON_LOOPBACK = { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' };

async function stop(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise((r) => {
          c.once('exit', r);
          c.kill('SIGTERM');
        }),
    ),
  );
}

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
          from webhooks w, generate_series(1, $1) g returning 1)
        select pg_notify('ticketd_outbox', 'webhook') from (select 1 from ins limit 1) x`,
        [EVENTS],
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

    process.stdout.write(`\nticketd events bench: webhook deliveries to a loopback receiver, ${os.cpus().length} cores (dispatcher concurrency 16 each)\n`);
    console.table(rows);
    process.stdout.write(`${JSON.stringify({ tickets: TICKETS, events: EVENTS, results: rows })}\n`);
  } finally {
    await stop(children.filter((c) => c.exitCode === null && c.signalCode === null));
    server.close();
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
  }
}
