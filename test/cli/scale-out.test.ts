import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startServer, statusAfterNotify, type Server } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { receiver } from '../helpers/receiver.js';

// Two `--role api` and two `--role dispatcher` processes of the real bin/ticketd on one database,
// the API processes behind a loopback round robin, as an operator would run them.

const { url, db } = await freshDatabase(t);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-scale-out-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = { DATABASE_URL: url, TICKETD_DATA_DIR: dataDir, TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' };

function stopAtEnd(t: Test, server: Server): Server {
  t.teardown(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
  });
  return server;
}

/** A loopback HTTP proxy sending each request to the next upstream in turn; counts what each served. */
async function roundRobin(t: Test, upstreams: string[]): Promise<{ url: string; served: number[] }> {
  const agent = new http.Agent({ keepAlive: true });
  const served = upstreams.map(() => 0);
  const sockets = new Set<Socket>();
  let next = 0;
  const proxy = http.createServer((req, res) => {
    const i = next++ % upstreams.length;
    served[i]!++;
    const target = new URL(upstreams[i]!);
    const forward = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', (err) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy: ${err.message}`);
    });
    req.pipe(forward);
  });
  proxy.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        agent.destroy();
        proxy.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, served };
}

interface Answer {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** A client of one base URL and one key. */
function client(base: string, key: string) {
  return async (method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
}

// All four start at once, as a deployment would: migrations and bootstrap take their locks.
const processes = ['api', 'api', 'dispatcher', 'dispatcher'].map((role) => stopAtEnd(t, startServer(env, ['--role', role])));
const started = await Promise.all(processes.map((p) => p.ready.catch(() => null)));
if (!started.every((s) => s !== null)) {
  for (const p of processes) p.child.kill('SIGKILL');
  throw new Error(`a process did not start:\n${processes.map((p) => p.stderr()).join('\n')}`);
}
const [api1, api2] = started;
const bootstraps = started.filter((s) => s.bootstrap);
t.equal(bootstraps.length, 1, 'exactly one process bootstrapped the empty database');
const ownerKey: string = bootstraps[0].bootstrap.apiKeys.live.key;
const proxy = await roundRobin(t, [api1.url, api2.url]);
const owner = client(proxy.url, ownerKey);

async function must(answer: Promise<Answer>, status: number, what: string) {
  const a = await answer;
  if (a.status !== status) throw new Error(`${what}: ${a.status} ${JSON.stringify(a.body)}`);
  return a.body;
}

t.test('under load through the round robin: every request answered, numbers gapless, every event delivered once per webhook-id', async (t) => {
  const hook = await receiver(t);
  const brandIds: string[] = [bootstraps[0].bootstrap.brand.id];
  for (const name of ['Second', 'Third']) brandIds.push((await must(owner('POST', '/v1/brands', { name, slug: `scale-${name.toLowerCase()}-${process.pid}` }), 201, 'brand')).id);
  for (const [i, brandId] of brandIds.entries())
    await must(owner('POST', `/v1/brands/${brandId}/webhooks`, { url: `${hook.url}/brand-${i}`, events: ['ticket.created'] }), 201, 'webhook');

  const CREATES = 120;
  const WORKERS = 12;
  const failures: string[] = [];
  const created = new Map<string, { brandId: string; number: number }>();
  let issued = 0;
  const check = (what: string, a: Answer, ok: number[]) => {
    if (!ok.includes(a.status)) failures.push(`${what}: ${a.status} ${JSON.stringify(a.body)}`);
  };
  const worker = async () => {
    for (let n = issued++; n < CREATES; n = issued++) {
      const brandId = brandIds[n % brandIds.length]!;
      const request = { title: `Load ${n}`, customerEmail: `customer${n % 17}@example.com`, tags: ['load'], priority: 'high' };
      const headers = { 'x-idempotency-key': randomUUID() };
      const res = await owner('POST', `/v1/brands/${brandId}/tickets`, request, headers);
      check(`create ${n}`, res, [201]);
      if (res.status === 201) created.set(res.body.id, { brandId, number: res.body.ticketNumber });
      // The same request again goes to the other process: the same ticket, created once.
      if (n % 10 === 0) {
        const again = await owner('POST', `/v1/brands/${brandId}/tickets`, request, headers);
        check(`repeat ${n}`, again, [200]);
        if (again.status === 200 && again.body.id !== res.body?.id) failures.push(`repeat ${n} answered another ticket`);
      }
      if (n % 4 === 0) check(`list ${n}`, await owner('GET', `/v1/brands/${brandId}/tickets?limit=20`), [200]);
    }
  };
  const loadStarted = Date.now();
  await Promise.all(Array.from({ length: WORKERS }, worker));
  t.comment(`load: ${Date.now() - loadStarted} ms`);
  t.same(failures, [], 'every request answered as it should be');
  t.equal(created.size, CREATES, 'every create made a ticket');
  t.ok(
    proxy.served.every((n) => n > CREATES / 4),
    'both API processes served',
    { served: proxy.served },
  );

  const numbers = await db('tickets').select('brandId').select(db.raw('array_agg(ticket_number order by ticket_number) as numbers')).groupBy('brandId');
  t.equal(numbers.length, brandIds.length);
  for (const { brandId, numbers: got } of numbers as { brandId: string; numbers: number[] }[]) {
    t.same(
      got,
      Array.from({ length: got.length }, (_, i) => got[0]! + i),
      `brand ${brandId}: ${got.length} numbers from ${got[0]}, none twice, no gap`,
    );
    const answered = [...created.values()].filter((c) => c.brandId === brandId).map((c) => c.number);
    t.same(
      answered.sort((a, b) => a - b),
      got,
      'the numbers the API answered are the ones stored',
    );
  }

  // Both dispatchers claim from one outbox: wait for every ticket's event (bounded by the outbox lease, not a timing claim).
  const deadline = Date.now() + 60_000;
  const ticketsSeen = () => new Set(hook.received.map((r) => JSON.parse(r.body).data.id)).size;
  while (ticketsSeen() < CREATES && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.comment(`deliveries: ${Date.now() - loadStarted} ms`);
  const webhookIdsByEvent = new Map<string, Set<string>>();
  const eventsByTicket = new Map<string, Set<string>>();
  const misrouted: string[] = [];
  for (const r of hook.received) {
    const body = JSON.parse(r.body);
    if (r.path !== `/brand-${brandIds.indexOf(body.brand_id)}`) misrouted.push(`${body.id} to ${r.path}`);
    if (!webhookIdsByEvent.has(body.id)) webhookIdsByEvent.set(body.id, new Set());
    webhookIdsByEvent.get(body.id)!.add(String(r.headers['webhook-id']));
    if (!eventsByTicket.has(body.data.id)) eventsByTicket.set(body.data.id, new Set());
    eventsByTicket.get(body.data.id)!.add(body.id);
  }
  t.same(misrouted, [], 'each delivery went to its brand’s webhook');
  t.same([...eventsByTicket.keys()].sort(), [...created.keys()].sort(), 'every created ticket was announced, nothing else');
  t.ok(
    [...eventsByTicket.values()].every((events) => events.size === 1),
    'one event per ticket',
  );
  t.ok(
    [...webhookIdsByEvent.values()].every((ids) => ids.size === 1),
    'a repeated delivery carries the same webhook-id',
  );
  t.equal(new Set(hook.received.map((r) => r.headers['webhook-id'])).size, CREATES, 'one webhook-id per event');
});

t.test('a key revoked through one API process answers 401 on the other, without waiting for the cache TTL', async (t) => {
  const key = await must(client(api1.url, ownerKey)('POST', '/v1/accounts/me/api-keys', { name: 'revoked soon' }), 201, 'key');
  const onApi2 = client(api2.url, key.key);
  t.equal((await onApi2('GET', '/v1/brands')).status, 200, 'works on api 2');
  t.equal((await onApi2('GET', '/v1/brands')).status, 200, 'now from api 2’s cache');
  t.equal((await client(api1.url, ownerKey)('DELETE', `/v1/accounts/me/api-keys/${key.id}`)).status, 200, 'revoked through api 1');
  t.equal(await statusAfterNotify(() => onApi2('GET', '/v1/brands'), 401), 401, 'api 2 refuses it, long before its cache TTL');
});

t.test('a key rotated through one API process stops on the other; the new one works there', async (t) => {
  const key = await must(client(api1.url, ownerKey)('POST', '/v1/accounts/me/api-keys', { name: 'rotated' }), 201, 'key');
  const onApi1 = client(api1.url, key.key);
  t.equal((await onApi1('GET', '/v1/brands')).status, 200);
  t.equal((await onApi1('GET', '/v1/brands')).status, 200, 'cached on api 1');
  const rotated = await must(client(api2.url, ownerKey)('POST', `/v1/accounts/me/api-keys/${key.id}/rotate`, {}), 200, 'rotate');
  t.equal(await statusAfterNotify(() => onApi1('GET', '/v1/brands'), 401), 401, 'the old key is refused on api 1');
  t.equal((await client(api1.url, rotated.newKey.key)('GET', '/v1/brands')).status, 200, 'the new key works on api 1');
});

t.test('a narrowed key scope applies on the other API process', async (t) => {
  const admin = client(api1.url, ownerKey);
  const one = await must(admin('POST', '/v1/brands', { name: 'Scope one', slug: `scope-one-${process.pid}` }), 201, 'brand');
  const two = await must(admin('POST', '/v1/brands', { name: 'Scope two', slug: `scope-two-${process.pid}` }), 201, 'brand');
  const key = await must(admin('POST', '/v1/accounts/me/api-keys', { name: 'scoped', brandIds: [one.id, two.id] }), 201, 'key');
  const onApi2 = client(api2.url, key.key);
  t.equal((await onApi2('GET', `/v1/brands/${two.id}`)).status, 200, 'brand two in scope on api 2');
  t.equal((await admin('PATCH', `/v1/accounts/me/api-keys/${key.id}/scope`, { brandIds: [one.id] })).status, 200, 'narrowed through api 1');
  t.equal(await statusAfterNotify(() => onApi2('GET', `/v1/brands/${two.id}`), 404), 404, 'brand two is out of scope on api 2');
  t.equal((await onApi2('GET', `/v1/brands/${one.id}`)).status, 200, 'brand one still in scope');
});

t.test('a ticket schema set through one API process applies to creates on the other', async (t) => {
  const admin = client(api1.url, ownerKey);
  const brand = await must(admin('POST', '/v1/brands', { name: 'Schema', slug: `schema-${process.pid}` }), 201, 'brand');
  const base = `/v1/brands/${brand.id}`;
  t.equal((await admin('POST', `${base}/tickets`, { title: 'Before the schema' })).status, 201, 'api 1 creates freely');
  const schema = { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] };
  t.equal((await client(api2.url, ownerKey)('PUT', `${base}/schema`, { schema })).status, 200, 'schema set through api 2');
  const refused = await admin('POST', `${base}/tickets`, { title: 'Without an order id' });
  t.equal(refused.status, 400, 'api 1 applies it to the next create');
  t.equal(refused.body.code, 'invalid_custom_fields');
  t.equal((await admin('POST', `${base}/tickets`, { title: 'With one', customFields: { orderId: 'A-1' } })).status, 201);
});

t.test('every process stops gracefully', async (t) => {
  for (const p of processes) p.child.kill('SIGTERM');
  t.same(await Promise.all(processes.map((p) => p.exited)), [0, 0, 0, 0]);
});
