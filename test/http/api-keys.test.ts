import t from 'tap';
import { keyCacheOf, KEYS_CHANNEL } from '../../server/domains/api-keys/service.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { assertErrorShape, client, signup, testApp, type Signup, servicesOf } from '../helpers/app.js';
import { testNow } from '../helpers/clock.js';

// The signup limit is per app; this file signs up more accounts than the default 20 per hour.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000' });
const quietLog = { info() {}, error() {} };
const KEYS = '/v1/accounts/me/api-keys';

type KeyView = {
  id: string;
  name: string;
  keyPreview: string;
  livemode: boolean;
  allBrands: boolean;
  brandIds: string[];
  lastUsedAt: string | null;
  expiresAt: string | null;
  key?: string;
};

async function listKeys(call: Signup['live']): Promise<KeyView[]> {
  const res = await call('GET', KEYS);
  if (res.status !== 200) throw new Error(`list failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function keyIdOf(call: Signup['live'], secret: string): Promise<string> {
  const preview = `${secret.slice(0, 8)}…${secret.slice(-4)}`;
  const match = (await listKeys(call)).filter((k) => k.keyPreview === preview);
  if (match.length !== 1) throw new Error(`no unique key with preview ${preview}`);
  return match[0]!.id;
}

async function newBrand(call: Signup['live'], name: string): Promise<string> {
  const res = await call('POST', '/v1/brands', { name });
  if (res.status !== 201) throw new Error(`brand failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id;
}

t.test('list: a bare array of the mode keys, never a secret or its hash', async (t) => {
  const a = await signup(app);
  const res = await a.live('GET', KEYS);
  t.equal(res.status, 200);
  t.ok(Array.isArray(res.body), 'a bare array');
  t.equal(res.body.length, 1, 'the default live key only');
  const [key] = res.body;
  t.match(key, { object: 'api_key', name: 'Default live key', livemode: true, allBrands: true, brandIds: [], expiresAt: null });
  t.match(key.id, /^key_/);
  t.notOk('key' in key, 'no key field');
  const json = JSON.stringify(res.body);
  t.notOk(json.includes('secretHash') || json.includes('secret_hash'), 'no secretHash anywhere');
  t.notOk(json.includes(a.liveKey), 'the secret is not shown');
  t.notOk(json.includes(a.liveKey.slice(8, 30)), 'no part of the random secret beyond its preview');
});

t.test('create: 201, the key is returned once and authenticates at once', async (t) => {
  const a = await signup(app);
  const res = await a.live('POST', KEYS, {});
  t.equal(res.status, 201);
  t.match(res.body.key, /^sk_live_[0-9A-Za-z]{43}$/);
  t.match(res.body.id, /^key_/);
  t.equal(res.body.name, 'Live key', 'default name');
  t.equal(res.body.allBrands, true);
  t.same(res.body.brandIds, []);
  t.equal(res.body.livemode, true);
  t.equal(res.body.lastUsedAt, null);
  t.equal(res.body.keyPreview, `sk_live_…${res.body.key.slice(-4)}`, 'preview is the prefix and the last four characters');
  t.match(res.body.keyPreview, /^sk_live_…[0-9A-Za-z]{4}$/);
  t.equal(res.body.prefix, res.body.keyPreview);

  const me = await client(app, res.body.key)('GET', '/v1/accounts/me');
  t.equal(me.status, 200, 'the new key works');
  t.equal(me.body.id, a.accountId);

  const named = await a.live('POST', KEYS, { name: 'CI deploys' });
  t.equal(named.status, 201);
  t.equal(named.body.name, 'CI deploys');
  t.not(named.body.key, res.body.key);

  const listed = await listKeys(a.live);
  t.equal(listed.length, 3);
  t.same(listed.map((k) => k.id).sort(), [named.body.id, res.body.id, await keyIdOf(a.live, a.liveKey)].sort());
  t.notOk(JSON.stringify(listed).includes(res.body.key), 'the secret is never shown again');
  t.equal(listed.find((k) => k.id === res.body.id)!.keyPreview, res.body.keyPreview);
});

t.test('mode isolation: test keys see and make only test keys, and cannot touch live keys', async (t) => {
  const a = await signup(app);
  const liveId = await keyIdOf(a.live, a.liveKey);
  const testId = await keyIdOf(a.test, a.testKey);

  const testList = await listKeys(a.test);
  t.same(
    testList.map((k) => k.id),
    [testId],
    'test key lists only the test key',
  );
  t.equal(testList[0]!.livemode, false);
  t.match(testList[0]!.keyPreview, /^sk_test_…/);

  const made = await a.test('POST', KEYS, { name: 'Sandbox' });
  t.equal(made.status, 201);
  t.match(made.body.key, /^sk_test_/);
  t.equal(made.body.livemode, false);
  t.equal(made.body.name, 'Sandbox');
  t.match(made.body.keyPreview, /^sk_test_…/);
  t.equal((await client(app, made.body.key)('GET', '/v1/accounts/me')).body.livemode, false);
  t.equal((await a.test('POST', KEYS, {})).body.name, 'Test key', 'default test key name');
  t.notOk(
    (await listKeys(a.live)).some((k) => !k.livemode),
    'the live list has no test key',
  );

  assertErrorShape(t, await a.test('DELETE', `${KEYS}/${liveId}`), 404, 'not_found');
  assertErrorShape(t, await a.test('PATCH', `${KEYS}/${liveId}/scope`, { allBrands: true }), 404, 'not_found');
  assertErrorShape(t, await a.test('POST', `${KEYS}/${liveId}/rotate`, {}), 404, 'not_found');
  assertErrorShape(t, await a.live('DELETE', `${KEYS}/${testId}`), 404, 'not_found');
  assertErrorShape(t, await a.live('PATCH', `${KEYS}/${testId}/scope`, { allBrands: true }), 404, 'not_found');
  assertErrorShape(t, await a.live('POST', `${KEYS}/${testId}/rotate`, {}), 404, 'not_found');
  t.equal((await a.live('GET', '/v1/accounts/me')).status, 200, 'live key still works');
  t.equal((await a.test('GET', '/v1/accounts/me')).status, 200, 'test key still works');
});

t.test('cross-account: B cannot revoke, scope or rotate A keys', async (t) => {
  const a = await signup(app);
  const b = await signup(app);
  const aLiveId = await keyIdOf(a.live, a.liveKey);
  const aTestId = await keyIdOf(a.test, a.testKey);
  for (const id of [aLiveId, aTestId]) {
    for (const call of [b.live, b.test]) {
      assertErrorShape(t, await call('DELETE', `${KEYS}/${id}`), 404, 'not_found');
      assertErrorShape(t, await call('PATCH', `${KEYS}/${id}/scope`, { allBrands: true }), 404, 'not_found');
      assertErrorShape(t, await call('POST', `${KEYS}/${id}/rotate`, {}), 404, 'not_found');
    }
  }
  t.equal((await a.live('GET', '/v1/accounts/me')).status, 200, "A's live key still works");
  t.equal((await a.test('GET', '/v1/accounts/me')).status, 200, "A's test key still works");
  t.equal((await listKeys(a.live)).length, 1, 'A got no extra key');
  t.notOk(
    (await listKeys(b.live)).some((k) => k.id === aLiveId),
    "A's key never shows in B's list",
  );
});

t.test('revoke: the key fails with 401 on its next request and leaves the list', async (t) => {
  const a = await signup(app);
  const made = await a.live('POST', KEYS, { name: 'Doomed' });
  const doomed = client(app, made.body.key);
  t.equal((await doomed('GET', '/v1/accounts/me')).status, 200, 'works before');

  const res = await a.live('DELETE', `${KEYS}/${made.body.id}`);
  t.equal(res.status, 200);
  t.equal(res.body.success, true);
  t.equal(res.body.id, made.body.id);
  t.ok(!Number.isNaN(Date.parse(res.body.revokedAt)), 'revokedAt is a timestamp');

  assertErrorShape(t, await doomed('GET', '/v1/accounts/me'), 401, 'invalid_api_key');
  t.equal((await doomed('GET', KEYS)).status, 401);
  t.notOk(
    (await listKeys(a.live)).some((k) => k.id === made.body.id),
    'gone from the list',
  );
  assertErrorShape(t, await a.live('DELETE', `${KEYS}/${made.body.id}`), 404, 'not_found');
  assertErrorShape(t, await a.live('DELETE', `${KEYS}/key_doesnotexist`), 404, 'not_found');
  t.equal((await a.live('GET', '/v1/accounts/me')).status, 200, 'other keys keep working');

  // A key may revoke itself; its next request fails.
  const self = await a.live('POST', KEYS, { name: 'Self' });
  const selfCall = client(app, self.body.key);
  t.equal((await selfCall('DELETE', `${KEYS}/${self.body.id}`)).status, 200);
  t.equal((await selfCall('GET', '/v1/accounts/me')).status, 401);
});

t.test('scope: a key limited to one brand sees only it and cannot make account-wide changes', async (t) => {
  const a = await signup(app);
  const b = await signup(app);
  const one = await newBrand(a.live, 'Brand One');
  const two = await newBrand(a.live, 'Brand Two');
  const made = await a.live('POST', KEYS, { name: 'Support desk' });
  const restricted = client(app, made.body.key);

  const res = await a.live('PATCH', `${KEYS}/${made.body.id}/scope`, { brandIds: [one] });
  t.equal(res.status, 200);
  t.equal(res.body.success, true);
  t.match(res.body.apiKey, { id: made.body.id, allBrands: false, brandIds: [one], name: 'Support desk' });
  t.same(res.body.apiKey.brandIds, [one]);
  t.notOk('key' in res.body.apiKey);
  t.match(
    (await listKeys(a.live)).find((k) => k.id === made.body.id),
    { allBrands: false, brandIds: [one] },
    'the list shows the scope',
  );

  const brands = await restricted('GET', '/v1/brands');
  t.equal(brands.status, 200);
  t.same(
    brands.body.map((x: { id: string }) => x.id),
    [one],
    'sees only its brand',
  );
  t.equal((await restricted('GET', `/v1/brands/${one}`)).status, 200);
  assertErrorShape(t, await restricted('GET', `/v1/brands/${two}`), 404, 'not_found');
  assertErrorShape(t, await restricted('PATCH', `/v1/brands/${two}`, { name: 'Hijacked' }), 404, 'not_found');
  assertErrorShape(t, await restricted('DELETE', `/v1/brands/${two}?confirm=true`), 404, 'not_found');
  assertErrorShape(t, await restricted('POST', '/v1/brands', { name: 'Three' }), 403, 'insufficient_scope');
  assertErrorShape(t, await restricted('POST', KEYS, {}), 403, 'insufficient_scope');
  assertErrorShape(t, await restricted('PATCH', `${KEYS}/${made.body.id}/scope`, { allBrands: true }), 403, 'insufficient_scope');
  assertErrorShape(t, await restricted('POST', `${KEYS}/${made.body.id}/rotate`, {}), 403, 'insufficient_scope');
  t.equal((await a.live('GET', `/v1/brands/${two}`)).body.name, 'Brand Two', 'brand two untouched');
  t.equal((await a.live('GET', '/v1/brands')).body.length, 2, 'no brand was created');
  t.equal((await listKeys(a.live)).length, 2, 'no key was created');
  t.match(
    (await listKeys(a.live)).find((k) => k.id === made.body.id),
    { allBrands: false },
    'the key did not widen its own scope',
  );

  // A PATCH that names no brand never widens the key.
  assertErrorShape(t, await a.live('PATCH', `${KEYS}/${made.body.id}/scope`, {}), 400, 'validation_failed');
  assertErrorShape(t, await a.live('PATCH', `${KEYS}/${made.body.id}/scope`, { brandIds: [] }), 400, 'invalid_request');
  t.same(
    (await restricted('GET', '/v1/brands')).body.map((x: { id: string }) => x.id),
    [one],
    'still limited to brand one',
  );

  // Widening again with allBrands: true restores every brand.
  const widened = await a.live('PATCH', `${KEYS}/${made.body.id}/scope`, { allBrands: true });
  t.equal(widened.status, 200);
  t.match(widened.body.apiKey, { allBrands: true, brandIds: [] });
  t.equal((await restricted('GET', '/v1/brands')).body.length, 2);

  // Invalid scopes are 400 and change nothing.
  const testBrand = await newBrand(a.test, 'Test Brand');
  const foreign = await newBrand(b.live, 'Foreign');
  const bad: [string, unknown][] = [
    ['unknown brand id', { brandIds: ['br_doesnotexist'] }],
    ['allBrands with brandIds', { allBrands: true, brandIds: [one] }],
    ['brand of the other mode', { brandIds: [testBrand] }],
    ['brand of another account', { brandIds: [foreign] }],
    ['one good, one foreign', { brandIds: [one, foreign] }],
    ['limited to no brand', { allBrands: false }],
  ];
  for (const [label, body] of bad) {
    const r = await a.live('PATCH', `${KEYS}/${made.body.id}/scope`, body);
    t.equal(r.status, 400, `${label}: 400`);
    t.ok(Array.isArray(r.body.errors) && r.body.errors.some((e: { field: string }) => e.field === 'brandIds'), `${label}: names brandIds`);
  }
  t.match(
    (await listKeys(a.live)).find((k) => k.id === made.body.id),
    { allBrands: true, brandIds: [] },
    'scope unchanged by the failures',
  );
  t.equal((await b.live('GET', `/v1/brands/${foreign}`)).status, 200, "the other account's brand is untouched");
});

t.test('list: a key limited to brands sees only the keys that reach no further than it does', async (t) => {
  const a = await signup(app);
  const one = await newBrand(a.live, 'One');
  const two = await newBrand(a.live, 'Two');
  const made = async (name: string, body: object) => (await a.live('POST', KEYS, { name, ...body })).body as KeyView;
  const oneOnly = await made('One desk', { brandIds: [one] });
  const oneToo = await made('One bot', { brandIds: [one] });
  const both = await made('Both desks', { brandIds: [one, two] });
  const twoOnly = await made('Two desk', { brandIds: [two] });
  const wide = await made('Everything', {});
  const ids = async (key: string) => (await listKeys(client(app, key))).map((k) => k.id).sort();

  t.same(await ids(oneOnly.key!), [oneOnly.id, oneToo.id].sort(), 'limited to one brand: itself and the keys limited to that brand');
  const seen = await client(app, oneOnly.key!)('GET', KEYS);
  t.notOk(JSON.stringify(seen.body).includes(two), 'never the id of a brand outside its scope');
  t.same(await ids(both.key!), [oneOnly.id, oneToo.id, both.id, twoOnly.id].sort(), 'limited to two brands: every key limited to them, none wider');
  t.same(await ids(twoOnly.key!), [twoOnly.id]);
  const all = await ids(wide.key!);
  t.ok(
    [oneOnly.id, oneToo.id, both.id, twoOnly.id, wide.id, await keyIdOf(a.live, a.liveKey)].every((id) => all.includes(id)),
    'a key for all brands sees every key',
  );
});

t.test('create with brandIds limits the new key; ws_ ids are accepted as br_ ids', async (t) => {
  const a = await signup(app);
  const one = await newBrand(a.live, 'Alpha');
  const two = await newBrand(a.live, 'Beta');
  const res = await a.live('POST', KEYS, { name: 'Alpha only', brandIds: [one.replace(/^br_/, 'ws_')] });
  t.equal(res.status, 201);
  t.equal(res.body.allBrands, false);
  t.same(res.body.brandIds, [one], 'stored under the br_ id');
  const call = client(app, res.body.key);
  t.same(
    (await call('GET', '/v1/brands')).body.map((x: { id: string }) => x.id),
    [one],
  );
  t.equal((await call('GET', `/v1/brands/${two}`)).status, 404);

  const aliased = await a.live('POST', KEYS, { brandIds: [one, one.replace(/^br_/, 'ws_')] });
  t.equal(aliased.status, 201);
  t.same(aliased.body.brandIds, [one], 'the br_ and ws_ spellings of one brand count once');

  const both = await a.live('POST', KEYS, { brandIds: [one, two] });
  t.equal(both.status, 201);
  t.same([...both.body.brandIds].sort(), [one, two].sort());

  const testBrand = await newBrand(a.test, 'Test Alpha');
  const before = (await listKeys(a.live)).length;
  assertErrorShape(t, await a.live('POST', KEYS, { brandIds: ['br_nope'] }), 400, 'invalid_request');
  assertErrorShape(t, await a.live('POST', KEYS, { brandIds: [testBrand] }), 400, 'invalid_request');
  assertErrorShape(t, await a.live('POST', KEYS, { allBrands: true, brandIds: [one] }), 400, 'invalid_request');
  assertErrorShape(t, await a.live('POST', KEYS, { brandIds: [] }), 400, 'invalid_request');
  t.equal((await listKeys(a.live)).length, before, 'no key was created by the failures (an empty brand list never means all brands)');
});

t.test('deleting a brand removes it from every key scope', async (t) => {
  const a = await signup(app);
  const keep = await newBrand(a.live, 'Keep');
  const gone = await newBrand(a.live, 'Gone');
  const k1 = await a.live('POST', KEYS, { name: 'both', brandIds: [keep, gone] });
  const k2 = await a.live('POST', KEYS, { name: 'gone only', brandIds: [gone] });
  const k3 = await a.live('POST', KEYS, { name: 'keep only', brandIds: [keep] });

  const preview = await a.live('DELETE', `/v1/brands/${gone}`);
  t.equal(preview.status, 200);
  t.equal(preview.body.deleted, false);
  t.match(
    (await listKeys(a.live)).find((k) => k.id === k2.body.id),
    { brandIds: [gone] },
    'a preview changes no key',
  );

  const del = await a.live('DELETE', `/v1/brands/${gone}?confirm=true`);
  t.equal(del.status, 200);
  t.equal(del.body.deleted, true);
  const keys = await listKeys(a.live);
  t.same(keys.find((k) => k.id === k1.body.id)!.brandIds, [keep]);
  t.same(keys.find((k) => k.id === k2.body.id)!.brandIds, []);
  t.equal(keys.find((k) => k.id === k2.body.id)!.allBrands, false, 'a key limited to the deleted brand does not widen');
  t.same(keys.find((k) => k.id === k3.body.id)!.brandIds, [keep]);
  const rows = await db('api_keys').where({ accountId: a.accountId }).select('brandIds');
  t.notOk(JSON.stringify(rows).includes(gone), 'no row still names the deleted brand');
  t.same((await client(app, k2.body.key)('GET', '/v1/brands')).body, [], 'the key limited to it now sees no brand');

  // Such a key can still be rotated, and its successor keeps the (now empty) scope.
  const rotated = await a.live('POST', `${KEYS}/${k2.body.id}/rotate`, {});
  t.equal(rotated.status, 200, 'a key left with no brand can be rotated');
  t.match(rotated.body.newKey, { name: 'gone only', allBrands: false, brandIds: [] });
  t.same((await client(app, rotated.body.newKey.key)('GET', '/v1/brands')).body, [], 'the successor sees no brand either');
  t.equal((await client(app, k2.body.key)('GET', '/v1/accounts/me')).status, 401, 'the rotated key stops');
});

t.test('rotate without grace: the new key works, the old one is 401 at once, name and scope carry over', async (t) => {
  const a = await signup(app);
  const brand = await newBrand(a.live, 'Rotated');
  await newBrand(a.live, 'Other');
  const old = await a.live('POST', KEYS, { name: 'Webhook worker', brandIds: [brand] });
  const res = await a.live('POST', `${KEYS}/${old.body.id}/rotate`, {});
  t.equal(res.status, 200);
  const { newKey, oldKey } = res.body;
  t.match(newKey.key, /^sk_live_[0-9A-Za-z]{43}$/);
  t.not(newKey.key, old.body.key);
  t.not(newKey.id, old.body.id);
  t.equal(newKey.name, 'Webhook worker', 'same name');
  t.equal(newKey.allBrands, false, 'same scope');
  t.same(newKey.brandIds, [brand]);
  t.equal(oldKey.id, old.body.id);
  t.notOk('key' in oldKey, 'the old secret is not echoed');

  assertErrorShape(t, await client(app, old.body.key)('GET', '/v1/accounts/me'), 401, 'invalid_api_key');
  const fresh = client(app, newKey.key);
  t.equal((await fresh('GET', '/v1/accounts/me')).status, 200, 'the new key works');
  t.same(
    (await fresh('GET', '/v1/brands')).body.map((x: { id: string }) => x.id),
    [brand],
    'the new key has the old scope',
  );
  const ids = (await listKeys(a.live)).map((k) => k.id);
  t.ok(ids.includes(newKey.id) && !ids.includes(old.body.id), 'the list shows the new key and not the old one');
  assertErrorShape(t, await a.live('POST', `${KEYS}/${old.body.id}/rotate`, {}), 404, 'not_found');

  // A test key rotates into a test key.
  const testId = await keyIdOf(a.test, a.testKey);
  const rotatedTest = await a.test('POST', `${KEYS}/${testId}/rotate`, {});
  t.equal(rotatedTest.status, 200);
  t.match(rotatedTest.body.newKey.key, /^sk_test_/);
  t.equal(rotatedTest.body.newKey.livemode, false);
  t.equal((await a.test('GET', '/v1/accounts/me')).status, 401, 'a key that rotated itself stops at once');
});

t.test('rotate with a grace period: the old key works until it expires, then the dispatcher revokes it', async (t) => {
  const a = await signup(app);
  const old = await a.live('POST', KEYS, { name: 'Graceful' });
  const oldCall = client(app, old.body.key);
  const before = testNow();
  const res = await a.live('POST', `${KEYS}/${old.body.id}/rotate`, { graceMinutes: 5 });
  t.equal(res.status, 200);
  const expiresAt = Date.parse(res.body.oldKey.expiresAt);
  t.ok(Math.abs(expiresAt - (before + 5 * 60_000)) < 30_000, `old key expires about five minutes ahead (${res.body.oldKey.expiresAt})`);
  t.equal(res.body.newKey.expiresAt, null, 'the new key does not expire');
  t.equal(res.body.newKey.name, 'Graceful');
  t.equal((await oldCall('GET', '/v1/accounts/me')).status, 200, 'the old key still works during the grace period');
  t.equal((await client(app, res.body.newKey.key)('GET', '/v1/accounts/me')).status, 200, 'the new key works');
  const listed = (await listKeys(a.live)).find((k) => k.id === old.body.id);
  t.ok(listed, 'the old key is still listed during the grace period');
  t.equal(listed?.expiresAt, res.body.oldKey.expiresAt);

  // The clock moves on: expiry brought forward by hand, announced as any change to a key is.
  await db('api_keys')
    .where({ id: old.body.id })
    .update({ expiresAt: db.raw("now() - interval '1 second'") });
  await db.raw('select pg_notify(?, ?)', [KEYS_CHANNEL, old.body.id]);
  await keyCacheOf(servicesOf(db))?.sync();
  assertErrorShape(t, await oldCall('GET', '/v1/accounts/me'), 401, 'invalid_api_key');
  t.notOk(
    (await listKeys(a.live)).some((k) => k.id === old.body.id),
    'an expired key leaves the list',
  );
  assertErrorShape(t, await a.live('DELETE', `${KEYS}/${old.body.id}`), 404, 'not_found');

  const row = await db('api_keys').where({ id: old.body.id }).first();
  t.equal(row.revokedAt, null, 'not yet marked revoked');
  const result = await new Dispatcher(servicesOf(db), quietLog).tick();
  t.ok(result.revokedKeys >= 1, `the tick revoked the expired key (${result.revokedKeys})`);
  const after = await db('api_keys').where({ id: old.body.id }).first();
  t.ok(after.revokedAt instanceof Date, 'revoked_at is set');
  t.equal(after.revokedAt.getTime(), after.expiresAt.getTime(), 'revoked at its expiry');
  t.equal((await oldCall('GET', '/v1/accounts/me')).status, 401, 'still refused');
  const newRow = await db('api_keys').where({ id: res.body.newKey.id }).first();
  t.equal(newRow.revokedAt, null, 'the new key is left alone');
  t.equal((await new Dispatcher(servicesOf(db), quietLog).tick()).revokedKeys, 0, 'a second tick has nothing to do');
});

t.test('lastUsedAt is null until the key is used, then set', async (t) => {
  const a = await signup(app);
  const made = await a.live('POST', KEYS, { name: 'Tracked' });
  t.equal(made.body.lastUsedAt, null);
  t.equal((await listKeys(a.live)).find((k) => k.id === made.body.id)!.lastUsedAt, null, 'null in the list too');

  const before = testNow();
  t.equal((await client(app, made.body.key)('GET', '/v1/accounts/me')).status, 200);
  let lastUsedAt: string | null = null;
  for (let i = 0; i < 20 && !lastUsedAt; i++) {
    lastUsedAt = (await listKeys(a.live)).find((k) => k.id === made.body.id)!.lastUsedAt;
    if (!lastUsedAt) await new Promise((r) => setTimeout(r, 50));
  }
  t.type(lastUsedAt, 'string', 'lastUsedAt is set after use');
  const at = Date.parse(lastUsedAt ?? '');
  t.ok(at >= before - 1000 && at <= testNow() + 1000, `lastUsedAt is the time of use (${lastUsedAt})`);
});

t.test('10 concurrent key creations all succeed with distinct ids and secrets', async (t) => {
  const a = await signup(app);
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => a.live('POST', KEYS, { name: `Parallel ${i}` })));
  t.same(
    results.map((r) => r.status),
    Array(10).fill(201),
  );
  t.equal(new Set(results.map((r) => r.body.id)).size, 10, 'distinct ids');
  t.equal(new Set(results.map((r) => r.body.key)).size, 10, 'distinct secrets');
  t.equal((await listKeys(a.live)).length, 11, 'all ten are listed with the default key');
  const works = await Promise.all(results.map((r) => client(app, r.body.key)('GET', '/v1/accounts/me')));
  t.same(
    works.map((r) => r.status),
    Array(10).fill(200),
    'every one authenticates',
  );
});

t.test('invalid bodies are 400 validation_failed and change nothing', async (t) => {
  const a = await signup(app);
  const keyId = await keyIdOf(a.live, a.liveKey);
  const cases: [string, string, string, unknown, string][] = [
    ['name too long', 'POST', KEYS, { name: 'x'.repeat(101) }, 'name'],
    ['empty name', 'POST', KEYS, { name: '' }, 'name'],
    ['brandIds not an array', 'POST', KEYS, { brandIds: 'br_x' }, 'brandIds'],
    ['unknown field on create', 'POST', KEYS, { name: 'ok', role: 'admin' }, 'role'],
    ['allBrands not a boolean', 'POST', KEYS, { allBrands: 'yes' }, 'allBrands'],
    ['scope brandIds not an array', 'PATCH', `${KEYS}/${keyId}/scope`, { brandIds: 'br_x' }, 'brandIds'],
    ['unknown field on scope', 'PATCH', `${KEYS}/${keyId}/scope`, { everything: true }, 'everything'],
    ['graceMinutes negative', 'POST', `${KEYS}/${keyId}/rotate`, { graceMinutes: -1 }, 'graceMinutes'],
    ['graceMinutes not an integer', 'POST', `${KEYS}/${keyId}/rotate`, { graceMinutes: 1.5 }, 'graceMinutes'],
    ['graceMinutes a string', 'POST', `${KEYS}/${keyId}/rotate`, { graceMinutes: '5' }, 'graceMinutes'],
    ['unknown field on rotate', 'POST', `${KEYS}/${keyId}/rotate`, { now: true }, 'now'],
  ];
  for (const [label, method, url, body, field] of cases) {
    const res = await a.live(method, url, body);
    t.equal(res.status, 400, `${label}: 400`);
    t.equal(res.body.code, 'validation_failed', `${label}: validation_failed`);
    t.ok(
      res.body.errors?.some((e: { field: string }) => e.field === field),
      `${label}: names ${field}`,
    );
  }
  const keys = await listKeys(a.live);
  t.equal(keys.length, 1, 'no key was created');
  t.match(keys[0], { id: keyId, allBrands: true, expiresAt: null }, 'the key was not re-scoped or rotated');
  t.equal((await a.live('GET', '/v1/accounts/me')).status, 200, 'and still works');
});

t.test('concurrent revokes of one key: exactly one succeeds, the rest find nothing', async (t) => {
  const a = await signup(app);
  const made = await a.live('POST', KEYS, { name: 'contested' });
  const results = await Promise.all(Array.from({ length: 6 }, () => a.live('DELETE', `${KEYS}/${made.body.id}`)));
  t.same(results.map((r) => r.status).sort(), [200, 404, 404, 404, 404, 404]);
});

t.test('concurrent rotations of one key: exactly one replacement is issued', async (t) => {
  const a = await signup(app);
  const made = await a.live('POST', KEYS, { name: 'rotated once' });
  const results = await Promise.all(Array.from({ length: 5 }, () => a.live('POST', `${KEYS}/${made.body.id}/rotate`, {})));
  t.same(results.map((r) => r.status).sort(), [200, 404, 404, 404, 404]);
  t.equal((await listKeys(a.live)).filter((k) => k.name === 'rotated once').length, 1, 'one active key of that name');
});

t.test('a key in its rotation grace period cannot be rotated again (its expiry never moves out)', async (t) => {
  const a = await signup(app);
  const made = await a.live('POST', KEYS, { name: 'grace' });
  const first = await a.live('POST', `${KEYS}/${made.body.id}/rotate`, { graceMinutes: 5 });
  t.equal(first.status, 200);
  const again = await a.live('POST', `${KEYS}/${made.body.id}/rotate`, { graceMinutes: 60 });
  assertErrorShape(t, again, 409, 'key_already_rotated');
  const old = (await listKeys(a.live)).find((k) => k.id === made.body.id)!;
  t.equal(old.expiresAt, first.body.oldKey.expiresAt, 'the grace period is unchanged');
});

t.test('usage counts only the brands a limited key may see', async (t) => {
  const a = await signup(app);
  const one = await newBrand(a.live, 'Usage One');
  await newBrand(a.live, 'Usage Two');
  const limited = await a.live('POST', KEYS, { brandIds: [one] });
  t.equal((await a.live('GET', '/v1/accounts/me/usage')).body.brandsCount, 2);
  t.equal((await client(app, limited.body.key)('GET', '/v1/accounts/me/usage')).body.brandsCount, 1);
});
