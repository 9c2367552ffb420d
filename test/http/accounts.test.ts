import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { assertErrorShape, client, emptyDir, makeBrand, makeTicket, servicesOf, signup, testApp } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';

// The signup limit is per app; this file signs up more than the default 20 accounts per hour.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000' });
const anonymous = client(app);

async function countRows(table: string): Promise<number> {
  const row = await db(table).count({ n: '*' }).first();
  return Number((row as { n: string | number }).n);
}

const uniqueEmail = (tag: string) => `${tag}-${Math.random().toString(36).slice(2)}@example.com`;

t.test('POST /v1/accounts creates the account, its owner and a live and a test key', async (t) => {
  const email = `Ada.Lovelace-${Math.random().toString(36).slice(2)}@Example.COM`;
  const res = await anonymous('POST', '/v1/accounts', { email, name: 'Ada Lovelace', accountName: 'Analytical Engines' });
  t.equal(res.status, 201);
  const { account, owner, apiKeys } = res.body;

  t.match(account.id, /^acct_/);
  t.equal(account.object, 'account');
  t.equal(account.name, 'Analytical Engines');
  t.type(account.createdAt, 'string');

  t.match(owner.id, /^mem_/);
  t.equal(owner.object, 'member');
  t.equal(owner.role, 'owner');
  t.equal(owner.status, 'active');
  t.equal(owner.email, email.toLowerCase(), 'owner email is lower-cased');
  t.equal(owner.name, 'Ada Lovelace');
  t.equal(owner.firstName, 'Ada');
  t.equal(owner.lastName, 'Lovelace');

  t.match(apiKeys.live.key, /^sk_live_[0-9A-Za-z]{43}$/);
  t.match(apiKeys.test.key, /^sk_test_[0-9A-Za-z]{43}$/);
  t.equal(apiKeys.live.livemode, true);
  t.equal(apiKeys.test.livemode, false);
  t.not(apiKeys.live.key, apiKeys.test.key);

  const live = await client(app, apiKeys.live.key)('GET', '/v1/accounts/me');
  t.equal(live.status, 200, 'the live key works at once');
  t.equal(live.body.id, account.id);
  t.equal(live.body.livemode, true);
  const test = await client(app, apiKeys.test.key)('GET', '/v1/accounts/me');
  t.equal(test.status, 200, 'the test key works at once');
  t.equal(test.body.id, account.id);
  t.equal(test.body.livemode, false);
});

t.test('account name defaults to the owner name, then the email', async (t) => {
  const named = await anonymous('POST', '/v1/accounts', { email: uniqueEmail('named'), name: 'Grace Hopper' });
  t.equal(named.status, 201);
  t.equal(named.body.account.name, 'Grace Hopper');
  const email = uniqueEmail('bare');
  const bare = await anonymous('POST', '/v1/accounts', { email });
  t.equal(bare.status, 201);
  t.equal(bare.body.account.name, email);
  t.equal(bare.body.owner.name, null);
});

t.test('invalid signups are 400 validation_failed naming the field, and create nothing', async (t) => {
  const before = { accounts: await countRows('accounts'), members: await countRows('members'), keys: await countRows('api_keys') };
  const cases: [string, unknown, string[]][] = [
    ['missing email', { name: 'No Email' }, ['email']],
    ['invalid email', { email: 'not-an-email' }, ['email']],
    ['unknown field', { email: uniqueEmail('x'), plan: 'enterprise' }, ['plan']],
    ['wrong types', { email: uniqueEmail('y'), name: 5 }, ['name']],
    ['several problems at once', { email: 42, name: 5, accountName: '' }, ['accountName', 'email', 'name']],
    ['no body at all', undefined, ['email']],
  ];
  for (const [label, body, fields] of cases) {
    const res = await anonymous('POST', '/v1/accounts', body);
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(Array.isArray(res.body.errors), `${label}: errors is a list`);
    t.same(res.body.errors.map((e: { field: string }) => e.field).sort(), fields, `${label}: names ${fields.join(', ')}`);
    for (const e of res.body.errors) t.type(e.message, 'string');
  }
  t.equal(await countRows('accounts'), before.accounts, 'no account was created');
  t.equal(await countRows('members'), before.members, 'no member was created');
  t.equal(await countRows('api_keys'), before.keys, 'no key was created');
});

t.test('when sign-up is closed, POST /v1/accounts is 403 signup_closed and creates nothing', async (t) => {
  const closed = await testApp(t, { TICKETD_SIGNUP: 'closed' });
  const res = await client(closed.app)('POST', '/v1/accounts', { email: uniqueEmail('closed') });
  assertErrorShape(t, res, 403, 'signup_closed');
  const row = await closed.db('accounts').count({ n: '*' }).first();
  t.equal(Number((row as { n: string }).n), 0, 'no account exists');
});

t.test('sign-ups are rate limited per hour: 429 in the error shape with rate-limit headers', async (t) => {
  const limited = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '2' });
  const call = client(limited.app);
  const first = await call('POST', '/v1/accounts', { email: uniqueEmail('one') });
  t.equal(first.status, 201);
  t.equal(String(first.headers['x-ratelimit-limit']), '2');
  t.equal(String(first.headers['x-ratelimit-remaining']), '1');
  t.equal((await call('POST', '/v1/accounts', { email: uniqueEmail('two') })).status, 201);
  const third = await call('POST', '/v1/accounts', { email: uniqueEmail('three') });
  assertErrorShape(t, third, 429, 'rate_limited');
  t.equal(String(third.headers['x-ratelimit-limit']), '2');
  t.equal(String(third.headers['x-ratelimit-remaining']), '0');
  const retryAfter = Number(third.headers['retry-after']);
  t.ok(retryAfter > 0 && retryAfter <= 3600, `retry-after is within the hour (${retryAfter})`);
  const row = await limited.db('accounts').count({ n: '*' }).first();
  t.equal(Number((row as { n: string }).n), 2, 'the limited sign-up created nothing');
});

t.test('GET /v1/accounts/me returns the account of the key', async (t) => {
  const a = await signup(app);
  const b = await signup(app);
  const me = await a.live('GET', '/v1/accounts/me');
  t.equal(me.status, 200);
  t.equal(me.body.id, a.accountId);
  t.equal(me.body.object, 'account');
  t.equal(me.body.name, 'Test Owner');
  t.equal(me.body.livemode, true);
  t.ok(!Number.isNaN(Date.parse(me.body.createdAt)), 'createdAt is a timestamp');
  t.equal((await b.test('GET', '/v1/accounts/me')).body.id, b.accountId, "another account's key sees its own account");
});

t.test('GET /v1/accounts/me/usage counts the brands of the caller mode only', async (t) => {
  const a = await signup(app);
  const other = await signup(app);
  const empty = await a.live('GET', '/v1/accounts/me/usage');
  t.equal(empty.status, 200);
  t.equal(empty.body.brandsCount, 0);

  for (const name of ['Live One', 'Live Two']) t.equal((await a.live('POST', '/v1/brands', { name })).status, 201);
  t.equal((await a.test('POST', '/v1/brands', { name: 'Test One' })).status, 201);
  t.equal((await other.live('POST', '/v1/brands', { name: 'Elsewhere' })).status, 201);

  const live = await a.live('GET', '/v1/accounts/me/usage');
  t.equal(live.status, 200);
  t.equal(live.body.brandsCount, 2, 'live key counts the two live brands');
  t.equal(live.body.ticketsTotal, 0);
  t.equal(live.body.ticketsThisMonth, 0);
  t.same(live.body.plan, { name: 'Self-hosted', ticketLimit: null, brandLimit: null }, 'the default plan: no limits');
  const test = await a.test('GET', '/v1/accounts/me/usage');
  t.equal(test.body.brandsCount, 1, 'test key counts the one test brand');
  t.equal((await other.live('GET', '/v1/accounts/me/usage')).body.brandsCount, 1, 'another account counts only its own');
});

t.test('GET /v1/accounts/me/usage counts the tickets the caller sees, this month and in all, from the kept counts, and names the plan', async (t) => {
  // Its own app: a plan with limits, and a clock fixed in mid-March 2031.
  const config = path.join(emptyDir, `usage-${process.pid}.json`);
  const plan = { currency: 'usd', interval: 'month', members: null, customDomain: false };
  writeFileSync(config, JSON.stringify({ defaultPlan: 'free', plans: [{ ...plan, slug: 'free', name: 'Free', price: 0, ticketsPerPeriod: 50, brands: 3 }] }));
  const now = Date.parse('2031-03-15T12:00:00Z');
  const { app, db } = await testApp(t, { TICKETD_CONFIG: config }, { clock: () => now });
  const email = `usage-${process.pid}@example.com`;
  const owner = await signup(app, email);
  const [a, b] = [await makeBrand(owner.live, 'Alpha'), await makeBrand(owner.live, 'Beta')];
  const testBrand = await makeBrand(owner.test, 'Test mode');
  const limited = client(app, (await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'Alpha only', brandIds: [a.id] })).body.key);
  const session = client(app, await sessionToken(app, servicesOf(db), owner.accountId, email));
  const usage = async (call: typeof owner.live) => (await call('GET', '/v1/accounts/me/usage')).body;
  t.same(await usage(owner.live), { ticketsThisMonth: 0, ticketsTotal: 0, brandsCount: 2, plan: { name: 'Free', ticketLimit: 50, brandLimit: 3 } }, 'nothing yet');

  // Tickets made now, then moved to fixed instants around the first of March and counted again.
  const at = async (call: typeof owner.live, brandId: string, createdAt: string) => {
    const ticket = await makeTicket(call, `/v1/brands/${brandId}`);
    await db('tickets').where({ id: ticket.id }).update({ createdAt });
    return ticket;
  };
  await at(owner.live, a.id, '2031-03-01T00:00:00Z');
  await at(owner.live, a.id, '2031-02-28T23:59:59Z');
  await at(owner.live, a.id, '2031-03-15T11:00:00Z');
  await at(owner.live, b.id, '2030-12-01T08:00:00Z');
  const spam = await at(owner.live, a.id, '2031-03-10T00:00:00Z');
  const deleted = await at(owner.live, b.id, '2031-03-10T00:00:00Z');
  await at(owner.test, testBrand.id, '2031-03-02T00:00:00Z');
  await db.raw('select ticketd_rebuild_ticket_counts()');
  t.equal((await owner.live('POST', `/v1/brands/${a.id}/tickets/${spam.id}/spam`, { isSpam: true })).status, 200);
  t.equal((await owner.live('DELETE', `/v1/brands/${b.id}/tickets/${deleted.id}`)).status, 200);

  const live = await usage(owner.live);
  t.same(
    live,
    { ticketsThisMonth: 2, ticketsTotal: 4, brandsCount: 2, plan: { name: 'Free', ticketLimit: 50, brandLimit: 3 } },
    'live key: March from its first instant; spam and deleted tickets left out',
  );
  t.same(await usage(session), live, 'a session counts what the live key does');
  t.match(await usage(limited), { ticketsThisMonth: 2, ticketsTotal: 3, brandsCount: 1 }, 'a key limited to Alpha counts Alpha only');
  t.match(await usage(owner.test), { ticketsThisMonth: 1, ticketsTotal: 1, brandsCount: 1 }, 'the test key counts test mode only');
  const billing = (await session('GET', '/v1/auth/usage')).body;
  t.same(
    [billing.planName, billing.planLimit, billing.brandLimit],
    [live.plan.name, live.plan.ticketLimit, live.plan.brandLimit],
    "the plan is the one the dashboard's billing page shows",
  );
  t.equal((await client(app)('GET', '/v1/accounts/me/usage')).status, 401, 'no credentials');
});

t.test('GET /v1/accounts/me/members lists the owner, and only members of the caller account', async (t) => {
  const a = await signup(app, uniqueEmail('owner-a'));
  const b = await signup(app, uniqueEmail('owner-b'));
  for (const call of [a.live, a.test]) {
    const res = await call('GET', '/v1/accounts/me/members');
    t.equal(res.status, 200);
    t.match(res.body.pagination, { hasMore: false });
    t.equal(res.body.pagination.hasMore, false);
    t.equal(res.body.data.length, 1, 'only the owner');
    const [owner] = res.body.data;
    t.equal(owner.id, a.ownerId);
    t.equal(owner.object, 'member');
    t.equal(owner.role, 'owner');
    t.equal(owner.status, 'active');
  }
  const bMembers = await b.live('GET', '/v1/accounts/me/members');
  const ids = bMembers.body.data.map((m: { id: string }) => m.id);
  t.same(ids, [b.ownerId], 'B sees only its own owner');
  t.notOk(ids.includes(a.ownerId), "A's owner never appears for B");
});

t.test('every authenticated route is 401 without a valid key', async (t) => {
  const a = await signup(app);
  const brand = await a.live('POST', '/v1/brands', { name: 'Guarded' });
  const keys = await a.live('GET', '/v1/accounts/me/api-keys');
  const keyId = keys.body[0].id;
  const routes: [string, string, unknown?][] = [
    ['GET', '/v1/accounts/me'],
    ['GET', '/v1/accounts/me/usage'],
    ['GET', '/v1/accounts/me/members'],
    ['GET', '/v1/accounts/me/api-keys'],
    ['POST', '/v1/accounts/me/api-keys', { name: 'sneaky' }],
    ['PATCH', `/v1/accounts/me/api-keys/${keyId}/scope`, { allBrands: true }],
    ['POST', `/v1/accounts/me/api-keys/${keyId}/rotate`, {}],
    ['DELETE', `/v1/accounts/me/api-keys/${keyId}`],
    ['GET', '/v1/brands'],
    ['POST', '/v1/brands', { name: 'sneaky' }],
    ['GET', `/v1/brands/${brand.body.id}`],
    ['PATCH', `/v1/brands/${brand.body.id}`, { name: 'sneaky' }],
    ['DELETE', `/v1/brands/${brand.body.id}?confirm=true`],
    ['GET', '/v1/workspaces'],
  ];
  const unknownKey = `sk_live_${'A1b2C3d4E5'.repeat(4)}xyz`;
  t.equal(unknownKey.length, 'sk_live_'.length + 43);
  const credentials: [string, Record<string, string>, string][] = [
    ['no Authorization header', {}, 'missing_credentials'],
    ['Basic scheme', { authorization: 'Basic xyz' }, 'missing_credentials'],
    ['Bearer with nothing after it', { authorization: 'Bearer ' }, 'missing_credentials'],
    ['Bearer garbage', { authorization: 'Bearer garbage' }, 'invalid_api_key'],
    ['well-formed unknown key', { authorization: `Bearer ${unknownKey}` }, 'invalid_api_key'],
    ['unknown test key', { authorization: `Bearer ${unknownKey.replace('sk_live_', 'sk_test_')}` }, 'invalid_api_key'],
  ];
  for (const [method, url, body] of routes) {
    for (const [label, headers, code] of credentials) {
      const res = await anonymous(method, url, body, headers);
      t.equal(res.status, 401, `${method} ${url} with ${label}: 401`);
      t.equal(res.body.code, code, `${method} ${url} with ${label}: ${code}`);
      t.type(res.body.message, 'string');
    }
  }
  assertErrorShape(t, await anonymous('GET', '/v1/accounts/me'), 401, 'missing_credentials');
  assertErrorShape(t, await anonymous('GET', '/v1/accounts/me', undefined, { authorization: 'Bearer garbage' }), 401, 'invalid_api_key');

  // Nothing the refused calls asked for happened.
  t.equal((await a.live('GET', `/v1/brands/${brand.body.id}`)).body.name, 'Guarded', 'brand untouched');
  t.equal((await a.live('GET', '/v1/accounts/me/api-keys')).body.length, keys.body.length, 'no key created or revoked');
  t.equal((await a.live('GET', '/v1/accounts/me')).status, 200, 'the real key still works');
});

t.test('API key secrets are stored only as SHA-256 hashes', async (t) => {
  const a = await signup(app);
  const rows = await db('api_keys').where({ accountId: a.accountId });
  t.equal(rows.length, 2, 'one live and one test key');
  const dump = JSON.stringify(rows);
  for (const secret of [a.liveKey, a.testKey]) {
    const random = secret.slice('sk_live_'.length);
    t.notOk(dump.includes(secret), 'the full secret is not stored');
    t.notOk(dump.includes(random), 'the random part of the secret is not stored');
    const hash = createHash('sha256').update(secret).digest('hex');
    const row = rows.find((r: { livemode: boolean }) => r.livemode === secret.startsWith('sk_live_'));
    t.equal(row.secretHash, hash, 'secret_hash is the sha256 hex of the key');
  }
  const raw = await db.raw('SELECT secret_hash FROM api_keys WHERE account_id = ?', [a.accountId]);
  for (const r of raw.rows) t.match(r.secret_hash, /^[0-9a-f]{64}$/);
});
