import t from 'tap';
import { buildApp } from '../../server/app.js';
import { createDb } from '../../server/core/db.js';
import { readRoutingOf, type ReadRouting } from '../../server/core/read-replica.js';
import { createServices } from '../../server/compose.js';
import { client, makeBrand, makeTicket, signup, testConfig } from '../helpers/app.js';
import { primaryWithStandby } from '../helpers/replica.js';
import { testNow } from '../helpers/clock.js';

// Real streaming replication: a primary and a hot standby of the embedded PostgreSQL. Pausing the
// standby's replay makes "read from the replica" visible: what was written since is not there.

const replication = await primaryWithStandby();
const config = testConfig({ DATABASE_URL: replication.primaryUrl, DATABASE_READ_URL: replication.standbyUrl });
const closing: (() => Promise<unknown>)[] = [];
t.teardown(async () => {
  for (const close of closing.reverse()) await close();
  await replication.stop();
});

/** An API process: its own pools on the primary and on the standby. */
async function instance(): Promise<{ app: Awaited<ReturnType<typeof buildApp>>; routing: ReadRouting }> {
  const db = createDb(replication.primaryUrl, { poolMax: 4, poolMin: 0 });
  const readDb = createDb(replication.standbyUrl, { poolMax: 4, poolMin: 0, applicationName: 'ticketd-read' });
  const services = createServices({ clock: testNow, config, db, readDb });
  const app = await buildApp({ config, db, services });
  closing.push(async () => {
    await app.close();
    await services.close();
    await db.destroy();
    await readDb.destroy();
  });
  const routing = readRoutingOf(services)!;
  await routing.ready();
  return { app, routing };
}

const one = await instance();
const two = await instance();
const owner = await signup(one.app);
const brand = await makeBrand(owner.live);
const base = `/v1/brands/${brand.id}`;
const readerKey = (await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'reader' })).body.key;
const otherKey = (await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'another writer' })).body.key;
const first = await makeTicket(owner.live, base, { title: 'Before the pause' });
await replication.caughtUp();
await replication.pauseReplay();

const titles = async (call: ReturnType<typeof client>) => {
  const res = await call('GET', `${base}/tickets?limit=100`);
  if (res.status !== 200) throw new Error(`list: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body.data as { title: string }[]).map((x) => x.title).sort();
};
const openCount = async (call: ReturnType<typeof client>) => (await call('GET', `${base}/statuses/stats`)).body.find((s: { key: string }) => s.key === 'open').ticketCount;

const reader = client(one.app, readerKey);
let second: { id: string };

t.test('a credential reads its own writes; the others read the replica', async (t) => {
  const before = { ...one.routing.stats };
  second = await makeTicket(owner.live, base, { title: 'After the pause' });
  t.same(await titles(owner.live), ['After the pause', 'Before the pause'], 'the writer lists its new ticket (from the primary)');
  t.same(await titles(reader), ['Before the pause'], 'another credential lists what the replica has');
  t.equal(await openCount(owner.live), 2, 'stats: the writer counts its ticket');
  t.equal(await openCount(reader), 1, 'stats: the replica does not have it yet');
  t.equal((await owner.live('GET', `${base}/tickets?search=pause`)).body.data.length, 2, 'search: the writer finds it');
  t.equal((await reader('GET', `${base}/tickets?search=pause`)).body.data.length, 1, 'search on the replica');
  const logged = async (call: ReturnType<typeof client>) =>
    (await call('GET', `${base}/logs?limit=100`)).body.data.filter((e: { entityId: string }) => e.entityId === second.id).length;
  t.ok((await logged(owner.live)) > 0, 'audit log: the writer sees its entry');
  t.equal(await logged(reader), 0, 'audit log on the replica');
  t.equal((await owner.live('GET', `${base}/tickets/${second.id}/logs`)).status, 200, 'ticket history: the writer reads it');
  t.equal((await reader('GET', `${base}/tickets/${first.id}/logs`)).status, 200, 'ticket history from the replica');
  t.ok(one.routing.stats.replica - before.replica >= 5, 'the reader’s reads went to the replica', { stats: one.routing.stats });
  t.ok(one.routing.stats.primary - before.primary >= 5, 'the writer’s went to the primary');
});

t.test('another API process knows the write too', async (t) => {
  // The fence travels by NOTIFY, like a revoked key: applied before the next request in practice; sync() makes it certain here.
  await two.routing.sync();
  t.same(await titles(client(two.app, owner.liveKey)), ['After the pause', 'Before the pause'], 'the writer, served by the other process');
  t.same(await titles(client(two.app, readerKey)), ['Before the pause'], 'the reader there still reads the replica');
});

t.test('once the replica has replayed past the write, the writer reads from the replica again', async (t) => {
  await replication.resumeReplay();
  await replication.caughtUp();
  await replication.pauseReplay();
  await makeTicket(client(one.app, otherKey), base, { title: 'By another writer' });
  t.same(await titles(owner.live), ['After the pause', 'Before the pause'], 'the first writer reads the replica: the newest ticket is not there yet');
  t.same(await titles(reader), ['After the pause', 'Before the pause'], 'the reader sees the replayed ticket');
  t.same(await titles(client(one.app, otherKey)), ['After the pause', 'Before the pause', 'By another writer'], 'the new writer reads its own write');
});

t.test('a replica that fails fails no read: it is made on the primary', async (t) => {
  const before = { ...one.routing.stats };
  await replication.stopStandby();
  t.same(await titles(reader), ['After the pause', 'Before the pause', 'By another writer'], 'the reader gets the primary’s list');
  t.equal(await openCount(reader), 3, 'and its stats');
  t.ok(one.routing.stats.fallbacks + one.routing.stats.primary > before.fallbacks + before.primary, 'counted as the primary’s');
});
