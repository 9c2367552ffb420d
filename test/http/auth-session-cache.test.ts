import { once } from 'node:events';
import t from 'tap';
import { credentialCacheOf } from '../../server/core/credential-cache.js';
import { client, secondInstance, servicesOf, testApp } from '../helpers/app.js';
import { testNow } from '../helpers/clock.js';
import { SIGN_IN_TEST_ENV, signIn, teamOf } from '../helpers/sign-in.js';

/**
 * Sessions are authenticated from memory after one read, like API keys; whatever ends or narrows a
 * session reaches every process. Instance A is the usual test app; instance B a second app with
 * its own pool on the same database.
 */

const a = await testApp(t, SIGN_IN_TEST_ENV);
const { app: appB, db: dbB } = await secondInstance(t, a);
const services = servicesOf(a.db);
const cacheA = credentialCacheOf(services, 'sessions')!;
const cacheB = credentialCacheOf(servicesOf(dbB), 'sessions')!;
if (!cacheA.live) await once(cacheA.events, 'up');
if (!cacheB.live) await once(cacheB.events, 'up');

/** An organization whose member (assigned to its first brand) is signed in on A; their token serves on B too. */
async function team() {
  const made = await teamOf(a.app, services);
  const sessionToken = await signIn(a.app, services, made.member.email);
  return { ...made, sessionToken, asMember: client(a.app, sessionToken) };
}

t.test('repeated requests with a session are answered from memory', async (t) => {
  const { asMember } = await team();
  const before = { ...cacheA.stats };
  for (let i = 0; i < 5; i++) t.equal((await asMember('GET', '/v1/brands')).status, 200);
  t.ok(cacheA.stats.misses - before.misses <= 1, 'at most one read of the session');
  t.ok(cacheA.stats.hits - before.hits >= 4, 'the rest from the cache');
});

t.test('sign-out through one instance ends the session on the other at once', async (t) => {
  const { asMember, sessionToken } = await team();
  const onB = client(appB, sessionToken);
  t.equal((await onB('GET', '/v1/brands')).status, 200, 'works on B');
  t.equal((await onB('GET', '/v1/brands')).status, 200, 'cached on B');
  const dropped = once(cacheB.events, 'drop');
  t.equal((await asMember('POST', '/v1/auth/logout')).status, 200, 'signed out through A');
  t.equal((await asMember('GET', '/v1/brands')).status, 401, 'A refuses it on its next request');
  await dropped;
  t.equal((await onB('GET', '/v1/brands')).status, 401, 'B refuses it without waiting for its cache to expire');
  t.ok(cacheB.ttl >= 10_000, 'the cache TTL is far away');
});

t.test('a role or brand change made in the database reaches a cached session', async (t) => {
  const { owner, first, second, member, sessionToken } = await team();
  const onB = client(appB, sessionToken);
  t.equal((await onB('GET', `/v1/brands/${second.id}`)).status, 404, 'assigned to the first brand only');
  t.equal((await onB('GET', '/v1/accounts/me')).status, 403, 'a member cannot read the account');
  t.equal((await onB('GET', `/v1/brands/${first.id}`)).status, 200);

  // An operator's SQL, not a service: no trigger tells the processes, its own NOTIFY does (docs/operations.md).
  const byHand = (change: Record<string, unknown>) =>
    a.db.transaction(async (trx) => {
      await trx('members').where({ id: member.id, account_id: owner.accountId }).update(change);
      await trx.raw(`select pg_notify('ticketd_sessions', ?)`, [member.id]);
    });
  await byHand({ role: 'admin' });
  await cacheB.sync();
  t.equal((await onB('GET', '/v1/accounts/me')).status, 200, 'the new role applies at once');
  t.equal((await onB('GET', `/v1/brands/${second.id}`)).status, 200, 'and an admin sees every brand');

  await byHand({ role: 'member', all_brands: false, brand_ids: [second.id] });
  await cacheB.sync();
  t.equal((await onB('GET', `/v1/brands/${first.id}`)).status, 404, 'the first brand is out of the new assignments');
  t.equal((await onB('GET', `/v1/brands/${second.id}`)).status, 200);
});

t.test("a session's sliding expiry writes do not empty the cache", async (t) => {
  const { asMember } = await team();
  t.equal((await asMember('GET', '/v1/brands')).status, 200);
  const drops = cacheA.stats.drops;
  for (let i = 0; i < 3; i++) t.equal((await asMember('GET', '/v1/brands')).status, 200);
  await cacheA.sync();
  t.equal(cacheA.stats.drops, drops, 'no drop while the session is only used');
});

t.test("a dashboard's requests at once, over a minute after the session's last use: one write moves its expiry", async (t) => {
  const { asMember, member } = await team();
  t.equal((await asMember('GET', '/v1/brands')).status, 200, 'cached');
  // Its last use a minute and a half ago; out of the cache, so every request reads that.
  const longAgo = new Date(testNow() - 90_000);
  const rows = (await a.db('sessions').where({ memberId: member.id }).update({ lastUsedAt: longAgo }).returning('id')) as { id: string }[];
  cacheA.drop(rows.map((r) => r.id));

  const touches: string[] = [];
  const listener = (q: { sql: string }) => void (/^\s*update "sessions"/.test(q.sql) && touches.push(q.sql));
  a.db.on('query', listener);
  const answers = await Promise.all(Array.from({ length: 6 }, () => asMember('GET', '/v1/brands'))).finally(() => a.db.removeListener('query', listener));
  t.same(
    answers.map((r) => r.status),
    answers.map(() => 200),
  );
  t.equal(touches.length, 1, 'one write for the six requests');
  const moved = await a
    .db('sessions')
    .whereIn(
      'id',
      rows.map((r) => r.id),
    )
    .where('lastUsedAt', '>', new Date(longAgo.getTime() + 60_000));
  t.equal(moved.length, 1, "the session's last use moved to now");
  t.ok(moved[0].expiresAt.getTime() > testNow(), 'and its expiry with it');
});

t.test('a request that read the session before its last write and reaches the touch after it writes nothing more', async (t) => {
  const { asMember, member } = await team();
  t.equal((await asMember('GET', '/v1/brands')).status, 200, 'cached');
  const longAgo = new Date(testNow() - 90_000);
  const staleRead = async () => {
    const rows = (await a.db('sessions').where({ memberId: member.id }).update({ lastUsedAt: longAgo }).returning('id')) as { id: string }[];
    cacheA.drop(rows.map((r) => r.id));
  };
  /** The writes of the session's row while one request is answered. */
  const touchesOf = async () => {
    const touches: string[] = [];
    const listener = (q: { sql: string }) => void (/^\s*update "sessions"/.test(q.sql) && touches.push(q.sql));
    a.db.on('query', listener);
    try {
      t.equal((await asMember('GET', '/v1/brands')).status, 200);
    } finally {
      a.db.removeListener('query', listener);
    }
    return touches.length;
  };
  await staleRead();
  t.equal(await touchesOf(), 1, 'the first request moves the expiry');
  // The next one reads the session as it was before that write (a slow read, on a cluster).
  await staleRead();
  t.equal(await touchesOf(), 0, 'and the next, within the minute, shares that write');
});
