import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { createDb } from '../../server/core/db.js';
import { rateLimiterOf } from '../../server/core/rate-limit.js';
import { createServices } from '../../server/compose.js';
import { freshDatabase } from '../helpers/db.js';
import { assertErrorShape, client, signup, testConfig, type Reply } from '../helpers/app.js';

/** 12:00:15 UTC: 15 s into a one-minute window, 45 s before it ends. */
const START = Date.UTC(2030, 0, 1, 12, 0, 15);
const WINDOW_END_SECONDS = String(Date.UTC(2030, 0, 1, 12, 1, 0) / 1000);

interface Clock {
  ms: number;
}

/**
 * An app whose services read `clock` (windows move only when a test moves it), on a database of its
 * own or on `shared` (another process's). The limiter syncs when a test says so: the timer's
 * interval is the longest the configuration allows.
 */
async function limitedApp(t: Test, env: Record<string, string>, shared?: { url: string; clock: Clock }) {
  const clock = shared?.clock ?? { ms: START };
  const own = shared ? null : await freshDatabase(t);
  const url = shared?.url ?? own!.url;
  const db = own?.db ?? createDb(url, { poolMax: 3, poolMin: 0 });
  const config = testConfig({ DATABASE_URL: url, TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000', TICKETD_RATE_LIMIT_SYNC_MS: '10000', ...env });
  const services = createServices({ config, db, clock: () => clock.ms });
  const app = await buildApp({ config, db, services });
  t.teardown(async () => {
    await app.close();
    await services.close();
    if (shared) await db.destroy();
  });
  return { app, db, url, clock, limiter: rateLimiterOf(services) };
}

const header = (res: Reply, name: string) => (res.headers[name] === undefined ? undefined : String(res.headers[name]));

function assertBudget(t: Test, res: Reply, limit: number, remaining: number, reset = WINDOW_END_SECONDS) {
  t.equal(header(res, 'x-ratelimit-limit'), String(limit), `limit ${limit}`);
  t.equal(header(res, 'x-ratelimit-remaining'), String(remaining), `remaining ${remaining}`);
  t.equal(header(res, 'x-ratelimit-reset'), reset, 'reset: the end of the window, in unix seconds');
}

function assertLimited(t: Test, res: Reply, limit: number, retryAfter: number) {
  assertErrorShape(t, res, 429, 'rate_limited');
  assertBudget(t, res, limit, 0);
  t.equal(header(res, 'retry-after'), String(retryAfter), `Retry-After ${retryAfter} s: until the window ends`);
}

t.test('an API key gets its budget in headers on every response, then 429 with Retry-After', async (t) => {
  const { app, db } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_API_KEY: '3' });
  const owner = await signup(app);
  const first = await owner.live('GET', '/v1/brands');
  t.equal(first.status, 200);
  assertBudget(t, first, 3, 2);
  t.equal(header(first, 'retry-after'), undefined, 'no Retry-After while within the budget');
  const missing = await owner.live('GET', `/v1/brands/br_${'0'.repeat(26)}`);
  t.equal(missing.status, 404);
  assertBudget(t, missing, 3, 1);
  assertBudget(t, await owner.live('GET', '/v1/brands'), 3, 0);

  const refused = await owner.live('POST', '/v1/brands', { name: 'Too Many', slug: 'too-many' });
  assertLimited(t, refused, 3, 45);
  t.match(refused.body.message, /this API key/, 'the message says whose budget ran out');
  t.equal((await db('brands').where({ slug: 'too-many' })).length, 0, 'the refused request did nothing');
  assertLimited(t, await owner.live('GET', '/v1/brands'), 3, 45);
});

t.test('each API key has a budget of its own', async (t) => {
  const { app } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_API_KEY: '2' });
  const owner = await signup(app);
  const other = await signup(app);
  for (let i = 0; i < 2; i++) t.equal((await owner.live('GET', '/v1/brands')).status, 200);
  t.equal((await owner.live('GET', '/v1/brands')).status, 429, 'the live key is spent');
  assertBudget(t, await owner.test('GET', '/v1/brands'), 2, 1);
  assertBudget(t, await other.live('GET', '/v1/brands'), 2, 1);
});

t.test('the budget comes back when the window ends', async (t) => {
  const { app, clock } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_API_KEY: '2' });
  const owner = await signup(app);
  for (let i = 0; i < 2; i++) await owner.live('GET', '/v1/brands');
  clock.ms += 44_999;
  assertLimited(t, await owner.live('GET', '/v1/brands'), 2, 1);
  clock.ms += 1;
  const next = await owner.live('GET', '/v1/brands');
  t.equal(next.status, 200, 'a new window');
  assertBudget(t, next, 2, 1, String(Number(WINDOW_END_SECONDS) + 60));
});

t.test('two processes on one database share one budget', async (t) => {
  const env = { TICKETD_RATE_LIMIT_PER_API_KEY: '5' };
  const a = await limitedApp(t, env);
  const b = await limitedApp(t, env, a);
  const owner = await signup(a.app);
  const onA = client(a.app, owner.liveKey);
  const onB = client(b.app, owner.liveKey);

  for (let i = 0; i < 3; i++) t.equal((await onA('GET', '/v1/brands')).status, 200, `A: request ${i + 1}`);
  await a.limiter.sync();
  assertBudget(t, await onB('GET', '/v1/brands'), 5, 4); // B has not heard of A's requests yet
  await b.limiter.sync();
  assertBudget(t, await onB('GET', '/v1/brands'), 5, 0); // now it has: 3 + 1 + this one
  assertLimited(t, await onB('GET', '/v1/brands'), 5, 45);

  // A decides from what it knew at its last sync (over-admission is bounded by one interval) …
  assertBudget(t, await onA('GET', '/v1/brands'), 5, 1);
  await a.limiter.sync();
  // … and refuses once it has heard: 6 requests across both.
  assertLimited(t, await onA('GET', '/v1/brands'), 5, 45);
  await b.limiter.sync();
  const [row] = await a.db('rate_limit_counters').where('bucket', 'like', 'api/key:%').select('hits');
  t.equal(row.hits, 6, 'the shared count holds every admitted request, of both processes');
});

t.test('routes without credentials are limited per client address; health checks never', async (t) => {
  const { app } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_IP: '2', TICKETD_RATE_LIMIT_PER_API_KEY: '2' });
  const owner = await signup(app);
  const from = async (remoteAddress: string, url = '/v1/openapi.json', headers: Record<string, string> = {}): Promise<Reply> => {
    const res = await app.inject({ method: 'GET', url, remoteAddress, headers });
    return { status: res.statusCode, body: res.json(), headers: res.headers };
  };
  assertBudget(t, await from('192.0.2.1'), 2, 1);
  assertBudget(t, await from('192.0.2.1'), 2, 0);
  const refused = await from('192.0.2.1');
  assertLimited(t, refused, 2, 45);
  t.match(refused.body.message, /this address/);
  assertBudget(t, await from('192.0.2.2'), 2, 1); // another address, another budget

  const keyed = await from('192.0.2.1', '/v1/brands', { authorization: `Bearer ${owner.liveKey}` });
  t.equal(keyed.status, 200, "a request with an API key spends the key's budget, not the address's");
  assertBudget(t, keyed, 2, 1);

  for (let i = 0; i < 3; i++) {
    const live = await from('192.0.2.1', '/v1/health/live');
    t.equal(live.status, 200, 'health answers past the address budget');
    t.equal(header(live, 'x-ratelimit-limit'), undefined, 'and carries no budget');
  }
});

t.test('requests whose credentials fail spend the address budget, so guessing keys is slowed down', async (t) => {
  const { app } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_IP: '2', TICKETD_RATE_LIMIT_PER_API_KEY: '100' });
  const owner = await signup(app);
  const from = async (remoteAddress: string, authorization?: string): Promise<Reply> => {
    const res = await app.inject({ method: 'GET', url: '/v1/brands', remoteAddress, headers: authorization ? { authorization } : {} });
    return { status: res.statusCode, body: res.json(), headers: res.headers };
  };
  const guess = await from('198.51.100.7', 'Bearer sk_live_notakeyatall');
  assertErrorShape(t, guess, 401, 'invalid_api_key');
  assertBudget(t, guess, 2, 1);
  assertErrorShape(t, await from('198.51.100.7'), 401, 'missing_credentials');
  const third = await from('198.51.100.7', 'Bearer sk_live_anotherguess');
  assertLimited(t, third, 2, 45);
  t.match(third.body.message, /this address/, 'the third failure from the address is refused before its key is looked up');
  const good = await from('198.51.100.7', `Bearer ${owner.liveKey}`);
  t.equal(good.status, 200, "a valid key still works from that address: it spends the key's budget");
});

t.test('an IPv6 /64 shares one address budget; IPv4, also mapped into IPv6, counts per address', async (t) => {
  const { app } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_IP: '2' });
  const from = async (remoteAddress: string) => (await app.inject({ method: 'GET', url: '/v1/openapi.json', remoteAddress })).statusCode;
  t.equal(await from('2001:db8:1:2::1'), 200);
  t.equal(await from('2001:db8:1:2:ffff:1:2:3'), 200);
  t.equal(await from('2001:db8:1:2:abcd::9'), 429, 'a third address in the same /64 is over the budget');
  t.equal(await from('2001:db8:1:3::1'), 200, 'the next /64 has a budget of its own');
  t.equal(await from('::ffff:192.0.2.10'), 200);
  t.equal(await from('192.0.2.10'), 200, 'an IPv4 address mapped into IPv6 is that IPv4 address');
  t.equal(await from('192.0.2.10'), 429);
  t.equal(await from('192.0.2.11'), 200, 'the neighbouring IPv4 address is another budget');
});

t.test('sign-ups keep their own hourly budget per address, apart from the general one', async (t) => {
  const { app } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_IP: '1', TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '2' });
  const call = client(app);
  t.equal((await call('GET', '/v1/openapi.json')).status, 200);
  t.equal((await call('GET', '/v1/openapi.json')).status, 429, 'the general budget is spent');
  const hourEnd = String(Date.UTC(2030, 0, 1, 13, 0, 0) / 1000);
  const first = await call('POST', '/v1/accounts', { email: 'one@example.com' });
  t.equal(first.status, 201, 'sign-up has a budget of its own');
  assertBudget(t, first, 2, 1, hourEnd);
  t.equal((await call('POST', '/v1/accounts', { email: 'two@example.com' })).status, 201);
  const third = await call('POST', '/v1/accounts', { email: 'three@example.com' });
  assertErrorShape(t, third, 429, 'rate_limited');
  assertBudget(t, third, 2, 0, hourEnd);
  t.equal(header(third, 'retry-after'), String(3600 - 15), 'Retry-After: until the hour ends');
});

t.test('behind a trusted proxy the forwarded address is the subject; otherwise the peer is', async (t) => {
  for (const trusted of [true, false]) {
    const { app } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_IP: '1', TICKETD_TRUST_PROXY: String(trusted) });
    const via = async (forwardedFor: string) => (await app.inject({ method: 'GET', url: '/v1/openapi.json', headers: { 'x-forwarded-for': forwardedFor } })).statusCode;
    t.equal(await via('203.0.113.1'), 200);
    t.equal(await via('203.0.113.2'), trusted ? 200 : 429, trusted ? 'trustProxy: each forwarded address has its budget' : 'no trustProxy: X-Forwarded-For is ignored');
  }
});

t.test('limits come from the configuration; 0 turns one off', async (t) => {
  const { app } = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_API_KEY: '0', TICKETD_RATE_LIMIT_PER_IP: '0', TICKETD_RATE_LIMIT_WINDOW_SECONDS: '3600' });
  const owner = await signup(app);
  for (let i = 0; i < 5; i++) {
    const res = await owner.live('GET', '/v1/brands');
    t.equal(res.status, 200);
    t.equal(header(res, 'x-ratelimit-limit'), undefined, 'no budget, no headers');
  }
  t.equal(header(await client(app)('GET', '/v1/openapi.json'), 'x-ratelimit-limit'), undefined);

  const hourly = await limitedApp(t, { TICKETD_RATE_LIMIT_PER_API_KEY: '7', TICKETD_RATE_LIMIT_WINDOW_SECONDS: '3600' });
  const res = await (await signup(hourly.app)).live('GET', '/v1/brands');
  assertBudget(t, res, 7, 6, String(Date.UTC(2030, 0, 1, 13, 0, 0) / 1000));
});

t.test('ended windows are deleted from the shared table', async (t) => {
  const { app, db, clock, limiter } = await limitedApp(t, {});
  const owner = await signup(app);
  await owner.live('GET', '/v1/brands');
  await limiter.sync();
  const buckets = async () => (await db('rate_limit_counters').select('bucket').orderBy('bucket')).map((r: { bucket: string }) => r.bucket.replace(/:.*/, ':…'));
  t.same(await buckets(), ['api/key:…', 'signup/ip:…'], 'the key and the sign-up were counted');
  clock.ms += 3 * 60_000;
  await limiter.sync();
  t.same(await buckets(), ['signup/ip:…'], "the key's ended window is gone; the sign-up's hour is not over");
  clock.ms += 60 * 60_000;
  await limiter.sync();
  t.same(await buckets(), [], 'nor is anything else left');
});
