import t from 'tap';
import { buildApp } from '../../server/app.js';
import { ownerWithBrand, testConfig } from '../helpers/app.js';
import { fakeBigCommerceStore } from '../helpers/bigcommerce-store.js';
import { startServer, type Server } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { until } from '../helpers/wait.js';
import { testNow } from '../helpers/clock.js';

// A store's first full sync run by a real dispatcher process, killed (SIGKILL) in the middle of a
// page's transaction: the pages committed before stay, the one being written leaves nothing, and
// the next dispatcher goes on from the cursor (not from the first page) to exactly every order.

const ORDERS = 2_500;
const PAGE = 250;
const store = await fakeBigCommerceStore({ orders: ORDERS, products: 40 });
t.teardown(() => store.close());
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url, TICKETD_DNS_SERVERS: '127.0.0.1:9', TICKETD_COMMERCE_BIGCOMMERCE_API_URL: store.url };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

const dispatcher = (extra: Record<string, string> = {}): Server => {
  // At info: the test reads what the dispatcher logs.
  const server = startServer({ ...env, TICKETD_LOG_LEVEL: 'info', ...extra }, ['--role', 'dispatcher']);
  t.teardown(() => void server.child.kill('SIGKILL'));
  return server;
};
const orders = async (storeId: string) => Number((await db('commerceOrders').where({ storeId }).count({ n: '*' }))[0]!.n);
const pagesAsked = (page: number) => store.requests(/^v2\/orders$/).filter((r) => r.query.get('page') === String(page) && r.status === 200).length;
/** Whether no transaction holds the store's row. */
const unlocked = async (storeId: string) => Boolean(await db.transaction(async (trx) => trx('commerceStores').where({ id: storeId }).forUpdate().skipLocked().first()));

t.test('kill -9 in the middle of a full sync of 2,500 orders: resumed from its cursor, no duplicates', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const connect = await owner.live('POST', `${base}/ecommerce/stores/connect`, { platform: 'BIGCOMMERCE', accessToken: store.token, storeHash: store.hash });
  t.equal(connect.status, 201, JSON.stringify(connect.body));
  const storeId = connect.body.id as string;

  // Holds in the transaction of its fifth page: four committed (1,000 orders), the fifth written, not committed.
  const held = dispatcher({ TICKETD_TEST_HOLD_COMMERCE_PAGE: '4' });
  t.ok(await held.ready, held.stderr());
  await until('the fifth page is held before its commit', () => held.stderr().includes('test hook: holding a commerce sync page'), 60_000);
  t.equal(await orders(storeId), 4 * PAGE, 'four pages committed');
  t.notOk(await unlocked(storeId), 'the held page has the store row locked');
  let row = await db('commerceStores').where({ id: storeId }).first();
  t.match(row, { status: 'SYNCING', syncCursor: { mode: 'full', phase: 'orders', page: 5 } }, 'the cursor names the next page, committed with the fourth');
  t.ok(row.syncLeaseUntil > new Date(testNow()), 'leased');

  held.child.kill('SIGKILL');
  await held.exited;
  await until('PostgreSQL has ended the killed transaction', () => unlocked(storeId));
  t.equal(await orders(storeId), 4 * PAGE, 'nothing of the fifth page');
  // The lease would run out in minutes; the test does not wait for it.
  await db('commerceStores')
    .where({ id: storeId })
    .update({ syncLeaseUntil: new Date(testNow() - 1_000) });

  const next = dispatcher();
  t.ok(await next.ready, next.stderr());
  await until('the sync has finished', async () => (await db('commerceStores').where({ id: storeId }).first()).status === 'ACTIVE', 60_000);
  next.child.kill('SIGTERM');
  t.equal(await next.exited, 0);

  t.equal(await orders(storeId), ORDERS, 'exactly 2,500 orders');
  const distinct = await db('commerceOrders').where({ storeId }).countDistinct({ n: 'platformOrderId' });
  t.equal(Number(distinct[0]!.n), ORDERS, 'each once');
  t.equal(Number((await db('commerceProducts').where({ storeId }).count({ n: '*' }))[0]!.n), 40, 'and the products');
  row = await db('commerceStores').where({ id: storeId }).first();
  t.match(row, { status: 'ACTIVE', syncCursor: null, errorCount: 0, syncLeaseUntil: null });
  t.ok(row.syncedThrough, 'an incremental sync comes next');
  t.equal(pagesAsked(1), 1, 'the first page was read once: resumed, not restarted');
  t.equal(pagesAsked(5), 2, 'the fifth twice: once by the killed process, once after');
  t.equal(pagesAsked(10), 1);
});
