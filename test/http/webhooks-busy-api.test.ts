import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import t from 'tap';
import { createServices } from '../../server/compose.js';
import { dispatcherPoolShare } from '../../server/core/config.js';
import { systemCtx } from '../../server/core/context.js';
import * as outbox from '../../server/core/outbox/service.js';
import { startServer } from '../../server/main.js';
import { testConfig } from '../helpers/app.js';
import { freshDatabase, onCitusCluster } from '../helpers/db.js';
import { receiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

/**
 * One `--role all` process (startServer: API and dispatcher) whose API has every connection held
 * by requests waiting on a lock, and more requests queued for one: a webhook delivery made due
 * meanwhile still goes out and is settled, on the dispatcher's own connections. With one pool for
 * both, its claim waits behind every queued request.
 */

const POOL_MAX = 6;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-busy-api-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { url, db } = await freshDatabase(t);
const config = testConfig({
  DATABASE_URL: url,
  PORT: '0',
  TICKETD_DATA_DIR: dataDir,
  TICKETD_DB_POOL_MAX: String(POOL_MAX),
  TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true',
  TICKETD_METRICS_ENABLED: 'true',
});
const running = await startServer(config, 'all');
t.teardown(() => running.stop());
const base = `${running.baseUrl}/v1/brands/${running.bootstrap!.brand!.id}`;
const key = running.bootstrap!.apiKeys.live.key;

async function call(method: string, route: string, body?: unknown): Promise<{ status: number; body: { id: string } }> {
  const res = await fetch(`${base}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as { id: string } };
}

/** Statements of this database waiting for a lock: requests that hold an API connection (on Citus, on the workers their statements run on). */
async function lockWaiters(): Promise<number> {
  const activity = onCitusCluster ? 'citus_stat_activity' : 'pg_stat_activity';
  const { rows } = await db.raw(`select count(*)::int as n from ${activity} where datname = current_database() and wait_event_type = 'Lock'`);
  return (rows as { n: number }[])[0]!.n;
}

t.test('with every API connection held, a webhook delivery still goes out within a bound', async (t) => {
  const share = dispatcherPoolShare(config);
  t.equal(share, 2, 'by default the dispatcher keeps 2 of the 6 connections');
  const apiPool = POOL_MAX - share;

  const hook = await receiver(t, () => ({ status: 400 }));
  t.equal((await call('POST', '/webhooks', { url: `${hook.url}/in`, events: ['ticket.created'] })).status, 201);
  const ticket = await call('POST', '/tickets', { title: 'Held', customerEmail: 'ann@example.com', customerName: 'Ann' });
  t.equal(ticket.status, 201);
  // End to end in the one process: the event reaches the receiver, whose 400 fails it for good.
  await until('the first delivery', async () => (await db('outbox').where({ status: 'failed' })).length === 1);
  t.equal(hook.received.length, 1, 'the event went out');
  const [failed] = await db('outbox').where({ status: 'failed' });
  hook.setAnswer(() => ({ status: 200 }));

  // The ticket's row locked: every update of it waits, holding an API connection; the rest queue for one.
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  await holder.query('begin');
  // Named by its account too: Citus locks a row only on the shard the account names.
  await holder.query('select 1 from tickets where account_id = $1 and id = $2 for update', [running.bootstrap!.account.id, ticket.body.id]);
  const updates = Array.from({ length: 3 * apiPool }, (_, i) => call('PATCH', `/tickets/${ticket.body.id}`, { title: `Held ${i}` }));
  let released = false;
  const release = async () => {
    if (!released) await holder.query('rollback');
    released = true;
  };
  t.teardown(async () => {
    await release();
    await holder.end();
  });
  await until('the API pool held', async () => (await lockWaiters()) >= apiPool, 5_000);

  // Made due again from another process (as `ticketd outbox retry` does): its NOTIFY wakes the dispatcher.
  await outbox.retry(systemCtx(createServices({ config, db }), 'cli'), failed.id);
  const asked = Date.now();
  await until('the delivery settled while the API is held', async () => (await db('outbox').where({ id: failed.id }).first()).status === 'success', 3_000);
  t.ok(Date.now() - asked < 3_000, 'delivered and settled within 3 s');
  t.equal(hook.received.length, 2, 'sent again');
  t.ok((await lockWaiters()) >= apiPool, 'the API connections were held all along');

  // A scrape answers meanwhile, and shows each pool apart: the API's queue, the dispatcher's none.
  const metrics = await (await fetch(`${running.baseUrl}/metrics`)).text();
  const gauge = (name: string, pool: string) => Number(new RegExp(`^${name}\\{pool="${pool}"\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
  t.equal(gauge('ticketd_db_pool_max', 'main'), apiPool, "the API's pool");
  t.equal(gauge('ticketd_db_pool_max', 'dispatcher'), share, "the dispatcher's pool");
  t.ok(gauge('ticketd_db_pool_pending_acquires', 'main') > 0, 'requests wait for an API connection');
  t.equal(gauge('ticketd_db_pool_pending_acquires', 'dispatcher'), 0, 'nothing waits for a dispatcher connection');
  t.match(metrics, /^ticketd_database_up 1$/m, "the outbox figures were read, on the dispatcher's connections");

  await release();
  const answered = await Promise.all(updates);
  t.same(
    answered.map((a) => a.status),
    answered.map(() => 200),
    'the held requests finish once the lock is gone',
  );
});

/**
 * A receiver on a thread of its own that answers 400, then 200, and records when each delivery
 * came; told a message id, it makes that message due again a little later (as `ticketd outbox
 * retry` does, NOTIFY included) while this thread may be busy.
 */
function receiverThread(databaseUrl: string): Worker {
  return new Worker(
    `
    const { parentPort, workerData } = require('node:worker_threads');
    const http = require('node:http');
    const pg = require('pg');
    let answered = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        parentPort.postMessage({ type: 'received', at: Date.now() });
        res.statusCode = answered++ === 0 ? 400 : 200;
        res.end();
      });
    });
    server.listen(0, '127.0.0.1', () => parentPort.postMessage({ type: 'listening', port: server.address().port }));
    parentPort.on('message', async ({ accountId, id, afterMs }) => {
      await new Promise((r) => setTimeout(r, afterMs));
      const client = new pg.Client({ connectionString: workerData.databaseUrl });
      await client.connect();
      await client.query("update outbox set status = 'pending', attempts = 0, available_at = now(), lease_owner = null, lease_expires_at = null where account_id = $1 and id = $2", [accountId, id]);
      await client.query('select pg_notify($1, $2)', [workerData.channel, 'webhook']);
      parentPort.postMessage({ type: 'due', at: Date.now() });
      await client.end();
    });
    `,
    { eval: true, workerData: { databaseUrl, channel: outbox.OUTBOX_CHANNEL } },
  );
}

t.test("with the API's event loop held, webhook deliveries still go out: the dispatcher runs on its own thread", async (t) => {
  const thread = receiverThread(url);
  t.teardown(() => thread.terminate());
  const heard: { type: string; at?: number; port?: number }[] = [];
  thread.on('message', (m: { type: string }) => heard.push(m));
  await until('the receiver listening', () => heard.some((m) => m.type === 'listening'));
  const port = heard.find((m) => m.type === 'listening')!.port!;

  const hook = await call('POST', '/webhooks', { url: `http://127.0.0.1:${port}/in`, events: ['ticket.updated'] });
  t.equal(hook.status, 201);
  const ticket = await call('POST', '/tickets', { title: 'Busy loop', customerEmail: 'bo@example.com', customerName: 'Bo' });
  t.equal((await call('PATCH', `/tickets/${ticket.body.id}`, { title: 'Busy loop, again' })).status, 200);
  const failedOne = async () => db('outbox').where({ status: 'failed', event: 'ticket.updated' }).first();
  await until('the first delivery refused', async () => (await failedOne()) !== undefined);
  const failed = await failedOne();

  // The receiver makes it due in 300 ms; meanwhile this thread (where the API runs) does not yield.
  thread.postMessage({ accountId: failed.accountId, id: failed.id, afterMs: 300 });
  const heldFrom = Date.now();
  while (Date.now() - heldFrom < 3_000);
  const heldUntil = Date.now();

  await until('the second delivery', () => heard.filter((m) => m.type === 'received').length === 2);
  const due = heard.find((m) => m.type === 'due')!.at!;
  const sent = heard.filter((m) => m.type === 'received')[1]!.at!;
  t.ok(due >= heldFrom && due < heldUntil, 'made due while the API thread was held');
  t.ok(sent >= due && sent < heldUntil, 'and delivered before the API thread ran again');
  await until('the delivery settled', async () => (await db('outbox').where({ id: failed.id }).first()).status === 'success');
});

t.test('with dispatcherDbPoolMax 0, one pool for both: the dispatcher runs beside the API and delivers', async (t) => {
  const fresh = await freshDatabase(t);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-one-pool-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const shared = testConfig({ DATABASE_URL: fresh.url, PORT: '0', TICKETD_DATA_DIR: dir, TICKETD_DISPATCHER_DB_POOL_MAX: '0', TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' });
  t.equal(dispatcherPoolShare(shared), 0);
  const server = await startServer(shared, 'all');
  t.teardown(() => server.stop());
  const hook = await receiver(t, () => ({ status: 200 }));
  const at = `${server.baseUrl}/v1/brands/${server.bootstrap!.brand!.id}`;
  const headers = { authorization: `Bearer ${server.bootstrap!.apiKeys.live.key}`, 'content-type': 'application/json' };
  const post = (route: string, body: unknown) => fetch(`${at}${route}`, { method: 'POST', headers, body: JSON.stringify(body) });
  t.equal((await post('/webhooks', { url: `${hook.url}/in`, events: ['ticket.created'] })).status, 201);
  t.equal((await post('/tickets', { title: 'One pool', customerEmail: 'op@example.com', customerName: 'Op' })).status, 201);
  await until('the delivery', () => hook.received.length === 1);
  // The receiver answers before the dispatcher counts the outcome, so the scrape may trail it briefly.
  const delivered = /^ticketd_dispatcher_deliveries_total\{kind="webhook",outcome="delivered"\} 1$/m;
  let metrics = '';
  await until('the delivery counted', async () => delivered.test((metrics = await (await fetch(`${server.baseUrl}/metrics`)).text())));
  t.match(metrics, delivered, "the dispatcher's figures in the process's scrape");
  t.notMatch(metrics, /pool="dispatcher"/, 'no pool of its own');
});
