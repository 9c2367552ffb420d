import { once } from 'node:events';
import t from 'tap';
import { keyCacheOf, KEYS_CHANNEL } from '../../server/domains/api-keys/service.js';
import { client, makeBrand, signup, testApp, servicesOf, secondInstance } from '../helpers/app.js';

const KEYS = '/v1/accounts/me/api-keys';

// Instance A is the usual test app; instance B is a second app with its own pool on the same database.
const a = await testApp(t);
const { app: appB, db: dbB } = await secondInstance(t, a);
const cacheA = keyCacheOf(servicesOf(a.db))!;
const cacheB = keyCacheOf(servicesOf(dbB))!;
if (!cacheA.live) await once(cacheA.events, 'up');
if (!cacheB.live) await once(cacheB.events, 'up');

t.test('repeated requests are answered from memory', async (t) => {
  const owner = await signup(a.app);
  const before = { ...cacheA.stats };
  for (let i = 0; i < 5; i++) t.equal((await owner.live('GET', '/v1/accounts/me')).status, 200);
  t.ok(cacheA.stats.misses - before.misses <= 1, 'at most one database read');
  t.ok(cacheA.stats.hits - before.hits >= 4, 'the rest from the cache');
});

t.test('a key revoked through another instance answers 401 on the first instance at once', async (t) => {
  const owner = await signup(a.app);
  const key = (await owner.live('POST', KEYS, { name: 'shared' })).body;
  const onA = client(a.app, key.key);
  const onB = client(appB, key.key);
  t.equal((await onA('GET', '/v1/brands')).status, 200, 'works on A');
  t.equal((await onA('GET', '/v1/brands')).status, 200, 'cached on A');
  t.equal((await onB('GET', '/v1/brands')).status, 200, 'works on B');

  const dropped = once(cacheA.events, 'drop');
  const res = await client(appB, owner.liveKey)('DELETE', `${KEYS}/${key.id}`);
  t.equal(res.status, 200, 'revoked through B');
  t.equal((await onB('GET', '/v1/brands')).status, 401, 'B refuses it on its next request');
  t.same(await dropped, [key.id], 'A heard the NOTIFY for this key');
  t.equal((await onA('GET', '/v1/brands')).status, 401, 'A refuses it without waiting for the cache to expire');
  t.ok(cacheA.ttl >= 10_000, 'the cache TTL is far away');
});

t.test('a scope change through another instance applies on the first instance', async (t) => {
  const owner = await signup(a.app);
  const one = await makeBrand(owner.live, 'One');
  const two = await makeBrand(owner.live, 'Two');
  const key = (await owner.live('POST', KEYS, { name: 'scoped', brandIds: [one.id, two.id] })).body;
  const onA = client(a.app, key.key);
  t.equal((await onA('GET', `/v1/brands/${two.id}`)).status, 200, 'brand two in scope');
  const dropped = once(cacheA.events, 'drop');
  t.equal((await client(appB, owner.liveKey)('PATCH', `${KEYS}/${key.id}/scope`, { brandIds: [one.id] })).status, 200);
  await dropped;
  t.equal((await onA('GET', `/v1/brands/${two.id}`)).status, 404, 'brand two is out of scope on A');
  t.equal((await onA('GET', `/v1/brands/${one.id}`)).status, 200);
});

t.test('revoke and rotation send their NOTIFY in the same transaction', async (t) => {
  const owner = await signup(a.app);
  const k1 = (await owner.live('POST', KEYS, { name: 'k1' })).body;
  const k2 = (await owner.live('POST', KEYS, { name: 'k2' })).body;
  const heard: string[] = [];
  const onDrop = (id: string) => heard.push(id);
  cacheB.events.on('drop', onDrop);
  t.teardown(() => {
    cacheB.events.off('drop', onDrop);
  });
  t.equal((await owner.live('POST', `${KEYS}/${k1.id}/rotate`, { graceMinutes: 5 })).status, 200);
  t.equal((await owner.live('DELETE', `${KEYS}/${k2.id}`)).status, 200);
  // A refused revoke (already revoked) rolls back and notifies nothing.
  t.equal((await owner.live('DELETE', `${KEYS}/${k2.id}`)).status, 404);
  await cacheB.sync();
  t.same(heard, [k1.id, k2.id], 'B heard each committed change once');
});

t.test('a lost LISTEN connection empties the cache and bypasses it until it is back', async (t) => {
  const owner = await signup(a.app);
  const key = (await owner.live('POST', KEYS, { name: 'fragile' })).body;
  const onA = client(a.app, key.key);
  t.equal((await onA('GET', '/v1/brands')).status, 200);
  t.equal((await onA('GET', '/v1/brands')).status, 200);
  t.ok(cacheA.size > 0, 'cached');

  const down = once(cacheA.events, 'down');
  const up = once(cacheA.events, 'up');
  await a.db.raw("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'ticketd-listen' and datname = current_database()");
  await down;
  t.equal(cacheA.live, false, 'not live');
  t.equal(cacheA.size, 0, 'emptied');
  // A change nobody announces (the notification would be lost anyway): seen at once, no cache in the way.
  await a.db('api_keys').where({ id: key.id }).update({ revokedAt: a.db.fn.now() });
  const beforeHits = cacheA.stats.hits;
  t.equal((await onA('GET', '/v1/brands')).status, 401, 'read from the database');
  t.equal((await owner.live('GET', '/v1/brands')).status, 200);
  t.equal((await owner.live('GET', '/v1/brands')).status, 200);
  t.equal(cacheA.stats.hits, beforeHits, 'nothing served from memory while down');

  await up;
  t.equal(cacheA.live, true, 'reconnected');
  t.equal((await owner.live('GET', '/v1/brands')).status, 200);
  t.equal((await owner.live('GET', '/v1/brands')).status, 200);
  t.ok(cacheA.stats.hits > beforeHits, 'cached again');
  await a.db.raw('select pg_notify(?, ?)', [KEYS_CHANNEL, 'key_unknown']); // harmless
  await cacheA.sync();
});
