import t from 'tap';
import { buildApp } from '../../server/app.js';
import { createDb } from '../../server/core/db.js';
import { freePort } from '../../server/integrations/embedded-postgres.js';
import { buildDispatcherHttp } from '../../server/dispatcher-http.js';
import { assertErrorShape, client, makeTicket, ownerWithBrand, servicesOf, testApp, testConfig } from '../helpers/app.js';
import { testNow } from '../helpers/clock.js';

const { app, db, url } = await testApp(t);
const TOKEN = 'metrics-token-0123456789';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition. */
function parse(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
      if (!match) throw new Error(`not an exposition line: ${line}`);
      const labels: Record<string, string> = {};
      for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
      return { name: match[1]!, labels, value: Number(match[3]) };
    });
}

/** The samples named `name` whose labels include `labels`. */
function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

const one = (samples: Sample[], name: string, labels: Record<string, string> = {}) => find(samples, name, labels)[0]?.value;

async function scrape(target = app): Promise<{ status: number; contentType: string; text: string; samples: Sample[] }> {
  const res = await target.inject({ method: 'GET', url: '/metrics' });
  return { status: res.statusCode, contentType: String(res.headers['content-type']), text: res.body, samples: res.statusCode === 200 ? parse(res.body) : [] };
}

const { owner, base } = await ownerWithBrand(app);
const TICKET_ROUTE = '/v1/brands/:brandId/tickets/:ticketId';

t.test('requests are counted and timed by route pattern and status, not by URL', async (t) => {
  const first = await makeTicket(owner.live, base, { title: 'First' });
  const second = await makeTicket(owner.live, base, { title: 'Second' });
  for (const id of [first.id, second.id, first.id]) t.equal((await owner.live('GET', `${base}/tickets/${id}`)).status, 200);
  t.equal((await owner.live('GET', `${base}/tickets/tkt_00000000000000000000000000`)).status, 404);
  t.equal((await client(app)('GET', '/no/such/route/tkt_12345')).status, 404);

  const { status, contentType, text, samples } = await scrape();
  t.equal(status, 200);
  t.match(contentType, /^text\/plain; version=0\.0\.4/, 'Prometheus text format');
  const ok = { method: 'GET', route: TICKET_ROUTE, status: '200' };
  t.equal(one(samples, 'ticketd_http_requests_total', ok), 3, 'three reads of two tickets: one series');
  t.equal(one(samples, 'ticketd_http_requests_total', { ...ok, status: '404' }), 1, 'the miss has its own status');
  t.equal(one(samples, 'ticketd_http_requests_total', { method: 'POST', route: '/v1/brands/:brandId/tickets', status: '201' }), 2);
  t.equal(one(samples, 'ticketd_http_request_duration_seconds_count', ok), 3, 'the histogram counts the same requests');
  t.equal(one(samples, 'ticketd_http_request_duration_seconds_bucket', { ...ok, le: '+Inf' }), 3);
  t.ok(one(samples, 'ticketd_http_request_duration_seconds_sum', ok)! > 0, 'with their time');
  t.ok(find(samples, 'ticketd_http_request_duration_seconds_bucket', ok).length > 10, 'in buckets');
  t.equal(one(samples, 'ticketd_http_requests_total', { method: 'GET', route: '(unmatched)', status: '404' }), 1, 'an unknown URL is one "(unmatched)" series');
  for (const id of [first.id, second.id, 'tkt_00000000000000000000000000', 'tkt_12345', owner.accountId]) t.notOk(text.includes(id), `no label carries ${id}`);
  t.equal(find(samples, 'ticketd_http_requests_total', { route: TICKET_ROUTE }).length, 2, 'one series per status');
});

t.test('outbox backlog, oldest age and messages by status, read at scrape time', async (t) => {
  await owner.live('POST', `${base}/webhooks`, { url: 'https://93.184.215.14/hooks', events: ['ticket.created'] });
  const before = await scrape();
  t.equal(one(before.samples, 'ticketd_outbox_backlog'), 0, 'nothing was subscribed before');
  t.equal(one(before.samples, 'ticketd_outbox_oldest_pending_age_seconds'), 0);
  t.equal(one(before.samples, 'ticketd_outbox_oldest_due_age_seconds'), 0);

  for (const title of ['A', 'B', 'C', 'D', 'E']) await makeTicket(owner.live, base, { title });
  // No dispatcher runs here: the deliveries wait. Then one is made old, one due for 45 s, one has
  // run out of attempts, one was delivered now and one two hours ago.
  const ids = (await db('outbox').orderBy('id').pluck('id')) as string[];
  t.equal(ids.length, 5);
  const ago = (interval: string) => ({ createdAt: db.raw(`now() - interval '${interval}'`) });
  await db('outbox').where({ id: ids[0] }).update(ago('90 seconds'));
  await db('outbox')
    .where({ id: ids[1] })
    .update({ availableAt: db.raw(`now() - interval '45 seconds'`) });
  await db('outbox').where({ id: ids[2] }).update({ status: 'dead' });
  await db('outbox').whereIn('id', ids.slice(3)).update({ status: 'success' });
  await db('outbox').where({ id: ids[4] }).update(ago('2 hours'));

  const { samples } = await scrape();
  t.equal(one(samples, 'ticketd_outbox_backlog'), 2, 'pending and retrying');
  t.equal(one(samples, 'ticketd_outbox_messages', { status: 'pending' }), 2);
  t.equal(one(samples, 'ticketd_outbox_messages', { status: 'dead' }), 1);
  t.equal(one(samples, 'ticketd_outbox_messages', { status: 'failed' }), 0, 'every status has a series');
  t.same(find(samples, 'ticketd_outbox_messages', { status: 'success' }), [], 'successes are not counted over the whole history');
  t.equal(one(samples, 'ticketd_outbox_messages_last_hour', { status: 'success' }), 1, 'the one delivered two hours ago is not in the last hour');
  t.equal(one(samples, 'ticketd_outbox_messages_last_hour', { status: 'pending' }), 2);
  t.equal(one(samples, 'ticketd_outbox_messages_last_hour', { status: 'dead' }), 1);
  t.equal(one(samples, 'ticketd_outbox_messages_last_hour', { status: 'retrying' }), 0);
  const age = one(samples, 'ticketd_outbox_oldest_pending_age_seconds')!;
  t.ok(age >= 90 && age < 3600, `the oldest waiting message is ${age} s old`);
  const lag = one(samples, 'ticketd_outbox_oldest_due_age_seconds')!;
  t.ok(lag >= 45 && lag < 90, `the longest due has waited ${lag} s`);
  t.equal(one(samples, 'ticketd_database_up'), 1);
});

t.test('pool use of this process', async (t) => {
  const { samples } = await scrape();
  t.equal(one(samples, 'ticketd_db_pool_max', { pool: 'main' }), 5, "the test pool's maximum");
  for (const state of ['used', 'free']) t.type(one(samples, 'ticketd_db_pool_connections', { pool: 'main', state }), 'number', `${state} connections`);
  t.equal(one(samples, 'ticketd_db_pool_pending_acquires', { pool: 'main' }), 0, 'nobody waits for a connection');
  t.same(find(samples, 'ticketd_db_pool_max', { pool: 'dispatcher' }), [], 'no dispatcher pool of its own in an API alone');
  t.type(one(samples, 'process_resident_memory_bytes'), 'number', "and the process's own figures");
});

t.test('not part of the tenant API: absent from the OpenAPI document', async (t) => {
  const doc = (await client(app)('GET', '/v1/openapi.json')).body;
  t.notOk('/metrics' in doc.paths);
});

t.test('without a token only loopback clients may scrape', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.7' });
  assertErrorShape(t, { status: res.statusCode, body: JSON.parse(res.body), headers: res.headers }, 403, 'metrics_loopback_only');
  const v6 = await app.inject({ method: 'GET', url: '/metrics', remoteAddress: '::1' });
  t.equal(v6.statusCode, 200, 'IPv6 loopback');
});

t.test('with a token every client must send it, loopback included', async (t) => {
  const guarded = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url, TICKETD_METRICS_TOKEN: TOKEN }), db });
  t.teardown(() => guarded.close());
  const call = client(guarded);
  assertErrorShape(t, await call('GET', '/metrics'), 401, 'missing_credentials');
  assertErrorShape(t, await call('GET', '/metrics', undefined, { authorization: 'Bearer not-the-metrics-token' }), 401, 'invalid_metrics_token');
  const remote = await guarded.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.7', headers: { authorization: `Bearer ${TOKEN}` } });
  t.equal(remote.statusCode, 200, 'from anywhere with the token');
  t.match(remote.body, /ticketd_outbox_backlog 2/);
});

t.test('switched off: 404', async (t) => {
  const off = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url, TICKETD_METRICS_ENABLED: 'false' }), db });
  t.teardown(() => off.close());
  assertErrorShape(t, await client(off)('GET', '/metrics'), 404, 'metrics_disabled');
});

t.test('the database away: the process figures still come, database_up says 0', async (t) => {
  const unreachable = createDb(`postgres://nobody:secret@127.0.0.1:${await freePort()}/none`, { poolMin: 0, acquireTimeoutMs: 2000 });
  const away = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url }), db: unreachable });
  t.teardown(async () => {
    await away.close();
    await unreachable.destroy();
  });
  await away.inject({ method: 'GET', url: '/v1/health/live' });
  const { status, samples } = await scrape(away);
  t.equal(status, 200);
  t.equal(one(samples, 'ticketd_database_up'), 0);
  t.equal(one(samples, 'ticketd_http_requests_total', { route: '/v1/health/live', status: '200' }), 1);
});

t.test("a dispatcher's own listener: the API's health routes at /health, and /metrics under the same rules", async (t) => {
  const state = { shuttingDown: false, listening: false };
  const watch = async (env: Record<string, string> = {}) => {
    const listener = await buildDispatcherHttp({
      config: testConfig({ DATABASE_URL: url, ...env }),
      services: servicesOf(db),
      isShuttingDown: () => state.shuttingDown,
      isListening: () => state.listening,
    });
    t.teardown(() => listener.close());
    return listener;
  };
  const open = await watch();
  const call = client(open);
  t.same((await call('GET', '/health/live')).body, { status: 'ok' });
  assertErrorShape(t, await call('GET', '/health/ready'), 503, 'listener_down');
  state.listening = true;
  t.same((await call('GET', '/health/ready')).body, { status: 'ready' });
  t.match((await call('GET', '/health')).body, { status: 'ok', checks: { database: 'ok' } });
  state.shuttingDown = true;
  assertErrorShape(t, await call('GET', '/health/ready'), 503, 'shutting_down');
  assertErrorShape(t, await call('GET', '/v1/tickets'), 404, 'route_not_found');

  const local = await scrape(open);
  t.equal(local.status, 200, 'a loopback client scrapes without a token');
  t.equal(one(local.samples, 'ticketd_outbox_backlog'), 2, 'the figures read at scrape time');
  t.ok(find(local.samples, 'nodejs_eventloop_lag_seconds').length, "and the process's event-loop lag");
  for (const headers of [{}, { 'x-forwarded-for': '127.0.0.1' }]) {
    const res = await open.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.7', headers });
    assertErrorShape(t, { status: res.statusCode, body: JSON.parse(res.body), headers: res.headers }, 403, 'metrics_loopback_only');
  }

  const guarded = client(await watch({ TICKETD_METRICS_TOKEN: TOKEN }));
  assertErrorShape(t, await guarded('GET', '/metrics'), 401, 'missing_credentials');
  assertErrorShape(t, await guarded('GET', '/metrics', undefined, { authorization: 'Bearer not-the-metrics-token' }), 401, 'invalid_metrics_token');
  t.equal((await guarded('GET', '/metrics', undefined, { authorization: `Bearer ${TOKEN}` })).status, 200);
  assertErrorShape(t, await client(await watch({ TICKETD_METRICS_ENABLED: 'false' }))('GET', '/metrics'), 404, 'metrics_disabled');
});
