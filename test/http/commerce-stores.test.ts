import t from 'tap';
import { systemCtx } from '../../server/core/context.js';
import { syncDue } from '../../server/flows/commerce-sync.js';
import { assertErrorShape, assertNotFound, makeBrand, makeTicket, ownerWithBrand, servicesOf, signup, statementsDuring, testApp } from '../helpers/app.js';
import { fakeBigCommerceStore, type FakeBigCommerceStore } from '../helpers/bigcommerce-store.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Connected stores through the real app, against a fake BigCommerce store on a loopback port: connect
// (credentials checked at the store, hooks registered), syncs run by the dispatcher's job in this
// process (paging, a 429 waited out, a revoked token, a failing store), notifications (the order
// fetched again; a wrong secret changes nothing), disconnect, and who may do what.

// One fake store and one app pointed at it (the connector's base URL is configuration); each test
// starts from a store of its own size (reset) and leaves no store connected behind it.
const store: FakeBigCommerceStore = await fakeBigCommerceStore({ deliver: (hook, body) => deliver(hook.destination, hook.headers, body) });
t.teardown(() => store.close());
const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_COMMERCE_BIGCOMMERCE_API_URL: store.url, TICKETD_PUBLIC_URL: 'https://desk.example.com' });
const services = servicesOf(db);
/** Notifications reach ticketd as the store sends them, through the app. */
async function deliver(destination: string, headers: Record<string, string>, body: string) {
  const res = await app.inject({ method: 'POST', url: new URL(destination).pathname, headers: { 'content-type': 'application/json', ...headers }, payload: body });
  return { status: res.statusCode, body: res.body };
}
/** The dispatcher's job, once, in this process. */
const sync = (options: { pageSize?: number } = {}) => syncDue(systemCtx(services), { now: () => testNow(), ...options });
/** The start of each test: no store connected anywhere (the syncs scan every account), the fake store as asked. */
async function fresh(options: { orders?: number; products?: number }) {
  await db('commerceStores').delete();
  store.reset(options);
}

const connectBody = (store: FakeBigCommerceStore, over: Record<string, unknown> = {}) => ({ platform: 'BIGCOMMERCE', accessToken: store.token, storeHash: store.hash, ...over });

t.test('no store: [] in one read of the stores table', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  let res;
  const statements = await statementsDuring(db, async () => {
    res = await owner.live('GET', `${base}/ecommerce/stores`);
  });
  t.equal(res!.status, 200);
  t.same(res!.body, []);
  t.equal(statements.filter((s) => s.includes('commerce_stores')).length, 1, 'one statement reads the stores');
  const ws = await owner.live('GET', `${base.replace('/brands/br_', '/workspaces/ws_')}/ecommerce/stores`);
  t.equal(ws.status, 200, 'the workspaces path answers too');
});

t.test('connect: credentials checked at the store, the token sealed, the hooks registered; bad ones refused with nothing saved', async (t) => {
  await fresh({ orders: 3 });
  const { owner, base } = await ownerWithBrand(app);

  const wrong = await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store, { accessToken: 'not-the-token' }));
  assertErrorShape(t, wrong, 400, 'store_credentials_refused');
  t.match(wrong.body.message, /not authorized to access this resource/, "the store's own words");
  const unknown = await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store, { storeHash: 'nosuchstore' }));
  assertErrorShape(t, unknown, 400, 'store_credentials_refused');
  assertErrorShape(t, await owner.live('POST', `${base}/ecommerce/stores/connect`, { platform: 'BIGCOMMERCE', storeHash: store.hash }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store, { platform: 'SHOPIFY' })), 400, 'platform_unavailable');
  assertErrorShape(t, await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store, { storeHash: '../../v3/hooks' })), 400, 'validation_failed');
  t.same((await owner.live('GET', `${base}/ecommerce/stores`)).body, [], 'nothing saved');
  t.equal(store.hooks.size, 0, 'no hook registered');

  const res = await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store));
  t.equal(res.status, 201, JSON.stringify(res.body));
  t.match(res.body, {
    brandId: base.split('/').pop(),
    name: 'Fake Outfitters',
    platform: 'BIGCOMMERCE',
    storeUrl: 'https://shop.fake-outfitters.example',
    storeId: store.hash,
    status: 'PENDING_SETUP',
    lastSyncAt: null,
    errorMessage: null,
    errorCount: 0,
  });
  t.same(Object.keys(res.body).sort(), [
    'brandId',
    'createdAt',
    'errorCount',
    'errorMessage',
    'id',
    'lastSyncAt',
    'name',
    'platform',
    'status',
    'storeId',
    'storeUrl',
    'updatedAt',
  ]);
  t.notOk(JSON.stringify(res.body).includes(store.token), 'the token never comes out');
  const row = await db('commerceStores').where({ id: res.body.id }).first();
  t.match(row.accessToken, /^v1:/, 'sealed at rest');
  t.notOk(row.accessToken.includes(store.token));
  t.match(row.notifySecretHash, /^[0-9a-f]{64}$/, 'only the SHA-256 of the notification secret');
  t.ok(row.nextSyncAt <= new Date(testNow()), 'due a sync now');
  const [hook] = [...store.hooks.values()];
  t.equal(hook!.scope, 'store/order/*');
  t.equal(hook!.destination, `https://desk.example.com/v1/ecommerce/notifications/bigcommerce/${owner.accountId}/${res.body.id}`);
  t.same(row.hookIds, [String(hook!.id)]);
  const secret = hook!.headers['x-ticketd-notify-secret']!;
  t.ok(secret.length >= 40, 'a secret of the server’s choosing');
  t.notOk(JSON.stringify(row).includes(secret), 'the secret itself is not stored');
  const listed = (await owner.live('GET', `${base}/ecommerce/stores`)).body;
  t.same(listed, [res.body]);
  const log = (await owner.live('GET', `${base}/logs?limit=10`)).body;
  t.ok(JSON.stringify(log).includes('commerce_store.connected'), 'audited');

  // The same store again: the new token, one row, the old hook replaced.
  const again = await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store));
  t.equal(again.status, 201);
  t.equal(again.body.id, res.body.id, 'the same store');
  t.equal((await owner.live('GET', `${base}/ecommerce/stores`)).body.length, 1);
  t.equal(store.hooks.size, 1, 'the old hook removed at the store');

  // Five connects of another brand's store at once: one row, each answer a Store or 409 store_connecting, one hook per saved connection.
  const other = await makeBrand(owner.live, 'Other desk');
  const answers = await Promise.all(Array.from({ length: 5 }, () => owner.live('POST', `/v1/brands/${other.id}/ecommerce/stores/connect`, connectBody(store))));
  t.ok(
    answers.every((a) => a.status === 201 || (a.status === 409 && a.body.code === 'store_connecting')),
    answers.map((a) => a.status).join(' '),
  );
  const rows = await db('commerceStores').where({ brandId: other.id });
  t.equal(rows.length, 1, 'one store');
  t.same(new Set(answers.filter((a) => a.status === 201).map((a) => a.body.id)), new Set([rows[0].id]), 'every success names it');
  t.equal(store.hooks.size, 2, "one hook for each brand's connection: the others were removed");
});

t.test('a full sync: every order and product, paged, a 429 waited out; then notifications and the periodic sync', async (t) => {
  await fresh({ orders: 230, products: 120 });
  const { owner, base } = await ownerWithBrand(app);
  const connected = (await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store))).body;
  store.rateLimit(/^v2\/orders$/, 300);
  store.rateLimit(/^v2\/orders\/\d+\/products$/, 50, 3);

  const stats = await sync({ pageSize: 100 });
  t.match(stats, { synced: 1, failed: 0, orders: 230, products: 120 });
  const limited = store.requests(/^v2\/orders$/).filter((r) => r.query.get('page') === '1');
  t.same(
    limited.map((r) => r.status),
    [429, 200],
    'the first page was refused once, then asked again',
  );
  t.ok(limited[1]!.at - limited[0]!.at >= 290, `after the reset the store named (${limited[1]!.at - limited[0]!.at} ms)`);
  t.same(
    store.requests(/^v2\/orders$/).map((r) => `${r.query.get('page')}:${r.query.get('limit')}:${r.query.get('sort')}`),
    ['1:100:id:asc', '1:100:id:asc', '2:100:id:asc', '3:100:id:asc'],
    'paged by id',
  );
  const count = async (table: string) => Number((await db(table).where({ storeId: connected.id }).count({ n: '*' }))[0]!.n);
  t.equal(await count('commerceOrders'), 230);
  t.equal(await count('commerceProducts'), 120);
  const o5 = await db('commerceOrders').where({ storeId: connected.id, platformOrderId: '5' }).first();
  t.match(o5, {
    orderNumber: '5',
    customerEmail: 'member1005@example.com',
    customerName: 'Pat Buyer 5',
    status: 'PROCESSING',
    platformStatus: 'Awaiting Fulfillment',
    currency: 'USD',
    subtotal: '20.0000',
    discountTotal: '1.5000',
    total: '31.0000',
    brandId: connected.brandId,
    livemode: true,
  });
  t.equal(o5.items.length, 2);
  t.match(o5.items[0], { platformItemId: '51', sku: 'SKU-6', quantity: 1, price: '12.0000', total: '12.0000' });
  const o7 = await db('commerceOrders').where({ storeId: connected.id, platformOrderId: '7' }).first();
  t.equal(o7.customerEmail, 'customer7@example.com', 'trimmed and lower-cased');
  let row = await db('commerceStores').where({ id: connected.id }).first();
  t.match(row, { status: 'ACTIVE', syncCursor: null, errorCount: 0, syncLeaseUntil: null });
  t.ok(row.syncedThrough && row.lastSyncAt, 'synced through its start');
  t.ok(row.nextSyncAt > new Date(testNow() + 50 * 60_000), 'due again after commerceSyncMinutes');
  t.match((await owner.live('GET', `${base}/ecommerce/stores`)).body[0], { status: 'ACTIVE', lastSyncAt: String });

  t.test('a notification of a changed order: fetched from the store and written', async (t) => {
    store.updateOrder(5, { status_id: 2, total_inc_tax: '99.9900' });
    const [answer] = await store.notify(5);
    t.equal(answer!.status, 200, answer!.body);
    t.same(JSON.parse(answer!.body), { received: true, action: 'updated' });
    t.match(await db('commerceOrders').where({ storeId: connected.id, platformOrderId: '5' }).first(), {
      status: 'SHIPPED',
      platformStatus: 'Shipped',
      total: '99.9900',
      id: o5.id,
    });
    // An order the store has no more, and an event that is not an order's: nothing.
    t.same(JSON.parse((await store.notify(9999))[0]!.body), { received: true, action: 'ignored' });
    t.equal(await count('commerceOrders'), 230);
    // A new order: its notification adds it.
    store.addOrder(231);
    t.same(JSON.parse((await store.notify(231, 'store/order/created'))[0]!.body), { received: true, action: 'updated' });
    t.equal(await count('commerceOrders'), 231);
    // The store cannot be asked right now: the store is due a sync, which will read the order.
    store.fail(/^v2\/orders\/4$/, 503);
    t.same(JSON.parse((await store.notify(4))[0]!.body), { received: true, action: 'deferred' });
    const due = await db('commerceStores').where({ id: connected.id }).first();
    t.ok(due.nextSyncAt <= new Date(testNow()), 'due now');
    await db('commerceStores').where({ id: connected.id }).update({ nextSyncAt: row.nextSyncAt });
  });

  t.test('a wrong secret, or no store by that id: 401, nothing changes, the store is not asked', async (t) => {
    store.updateOrder(6, { status_id: 5 });
    const hook = [...store.hooks.values()][0]!;
    const asked = store.seen.length;
    const path = new URL(hook.destination).pathname;
    const body = { scope: 'store/order/updated', data: { type: 'order', id: 6 } };
    const wrong = await app.inject({ method: 'POST', url: path, headers: { 'x-ticketd-notify-secret': 'guessed' }, payload: body });
    assertErrorShape(t, { status: wrong.statusCode, body: JSON.parse(wrong.body), headers: wrong.headers }, 401, 'invalid_notification_secret');
    const none = await app.inject({ method: 'POST', url: path, payload: body });
    t.equal(none.statusCode, 401, 'no secret');
    const stranger = await signup(app);
    const elsewhere = await app.inject({ method: 'POST', url: path.replace(owner.accountId, stranger.accountId), headers: hook.headers, payload: body });
    t.equal(elsewhere.statusCode, 401, 'the right secret in another account’s path');
    const unknown = await app.inject({ method: 'POST', url: path.replace(connected.id, 'store_unknown'), headers: hook.headers, payload: body });
    t.equal(unknown.statusCode, 401, 'an unknown store');
    t.equal(store.seen.length, asked, 'the store was not asked');
    t.match(await db('commerceOrders').where({ storeId: connected.id, platformOrderId: '6' }).first(), { status: 'PROCESSING' }, 'unchanged');
  });

  t.test('POST …/sync: due now; the next sync reads what was modified since the last', async (t) => {
    store.updateOrder(8, { status_id: 10 });
    const asked = store.seen.length;
    const res = await owner.live('POST', `${base}/ecommerce/stores/${connected.id}/sync`);
    t.equal(res.status, 202);
    t.equal(res.body.id, connected.id);
    const stats = await sync({ pageSize: 100 });
    t.match(stats, { synced: 1, failed: 0 });
    const listing = store.seen.slice(asked).filter((r) => r.path === 'v2/orders');
    t.ok(listing.length >= 1 && listing.every((r) => r.query.get('min_date_modified') && r.query.get('sort') === 'date_modified:asc'), 'by min_date_modified');
    t.match(await db('commerceOrders').where({ storeId: connected.id, platformOrderId: '8' }).first(), { status: 'COMPLETED' });
    t.equal(await count('commerceOrders'), 231, 'no duplicates');
    t.equal((await sync()).synced, 0, 'not due again before commerceSyncMinutes');
  });

  t.test('a store that fails: ERROR, counted, due again later; a revoked token: DISCONNECTED, no more syncs', async (t) => {
    store.fail(/^v2\/orders$/, 500);
    await owner.live('POST', `${base}/ecommerce/stores/${connected.id}/sync`);
    t.match(await sync(), { synced: 0, failed: 1 });
    row = await db('commerceStores').where({ id: connected.id }).first();
    t.match(row, { status: 'ERROR', errorCount: 1, errorMessage: /500/ });
    t.ok(row.nextSyncAt > new Date(testNow()), 'tried again later');
    t.match((await owner.live('GET', `${base}/ecommerce/stores`)).body[0], { status: 'ERROR', errorCount: 1, errorMessage: /500/ });

    store.revoke();
    await owner.live('POST', `${base}/ecommerce/stores/${connected.id}/sync`);
    t.match(await sync(), { failed: 1 });
    t.match((await owner.live('GET', `${base}/ecommerce/stores`)).body[0], { status: 'DISCONNECTED', errorCount: 2, errorMessage: /refused the access token/ });
    assertErrorShape(t, await owner.live('POST', `${base}/ecommerce/stores/${connected.id}/sync`), 409, 'store_disconnected');
    await db('commerceStores')
      .where({ id: connected.id })
      .update({ nextSyncAt: new Date(testNow() - 1000) });
    t.match(await sync(), { synced: 0, failed: 0 }, 'a DISCONNECTED store is not synced');

    // Connected again with the new token: CONNECTED, its orders kept, synced.
    const again = await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store));
    t.match(again.body, { id: connected.id, status: 'ACTIVE', errorCount: 0, errorMessage: null });
    t.match(await sync({ pageSize: 100 }), { synced: 1 });
    t.equal(await count('commerceOrders'), 231);
  });
});

t.test('disconnect: the orders, their links to tickets and the products go; the hooks are removed at the store', async (t) => {
  await fresh({ orders: 20, products: 5 });
  const { owner, base } = await ownerWithBrand(app);
  const connected = (await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store))).body;
  await sync();
  const ticket = await makeTicket(owner.live, base, { title: 'Where is my order #3?' });
  const order = await db('commerceOrders').where({ storeId: connected.id, platformOrderId: '3' }).first();
  await db('commerceOrderTickets').insert({
    accountId: owner.accountId,
    id: 'cot_test',
    livemode: true,
    brandId: connected.brandId,
    orderId: order.id,
    ticketId: ticket.id,
    linkType: 'MANUAL',
  });
  t.equal(store.hooks.size, 1);

  const res = await owner.live('DELETE', `${base}/ecommerce/stores/${connected.id}`);
  t.equal(res.status, 200);
  t.match(res.body, { id: connected.id, status: 'DISCONNECTED' });
  t.same((await owner.live('GET', `${base}/ecommerce/stores`)).body, []);
  for (const table of ['commerceOrders', 'commerceProducts', 'commerceOrderTickets']) {
    t.equal(Number((await db(table).where({ accountId: owner.accountId }).count({ n: '*' }))[0]!.n), 0, `${table}: none left`);
  }
  t.equal(store.hooks.size, 0, 'the hook removed at the store');
  t.equal((await owner.live('GET', `${base}/tickets/${ticket.id}`)).status, 200, 'the ticket stays');
  assertNotFound(t, await owner.live('DELETE', `${base}/ecommerce/stores/${connected.id}`), 'a second time');
  const log = JSON.stringify((await owner.live('GET', `${base}/logs?limit=10`)).body);
  t.ok(log.includes('commerce_store.disconnected'), 'audited');

  // A store whose token was revoked meanwhile: it goes all the same (its hooks cannot be removed).
  const again = (await owner.live('POST', `${base}/ecommerce/stores/connect`, connectBody(store))).body;
  store.revoke();
  t.equal((await owner.live('DELETE', `${base}/ecommerce/stores/${again.id}`)).status, 200);
  t.same((await owner.live('GET', `${base}/ecommerce/stores`)).body, []);
});

t.test('who may: members read, owners and admins connect, sync and disconnect; other tenants and brands get 404', async (t) => {
  await fresh({ orders: 1 });
  const team = await teamOf(app, services);
  const base = `/v1/brands/${team.first.id}/ecommerce/stores`;
  const refused = await team.asMember('POST', `${base}/connect`, connectBody(store));
  assertErrorShape(t, refused, 403, 'insufficient_role');
  t.equal(store.hooks.size, 0, 'the store was not asked');
  const connected = await team.asAdmin('POST', `${base}/connect`, connectBody(store));
  t.equal(connected.status, 201, 'an admin connects');
  const id = connected.body.id as string;
  t.equal((await team.asMember('GET', base)).body.length, 1, 'a member of the brand reads the list');
  assertErrorShape(t, await team.asMember('POST', `${base}/${id}/sync`), 403, 'insufficient_role');
  assertErrorShape(t, await team.asMember('DELETE', `${base}/${id}`), 403, 'insufficient_role');
  assertNotFound(t, await team.asMember('GET', `/v1/brands/${team.second.id}/ecommerce/stores`), "a brand outside the member's assignments");
  t.equal((await team.asAdmin('POST', `${base}/${id}/sync`)).status, 202, 'an admin asks for a sync');

  const stranger = await ownerWithBrand(app);
  assertNotFound(t, await stranger.owner.live('DELETE', `${stranger.base}/ecommerce/stores/${id}`), "another account's store in its own brand");
  assertNotFound(t, await stranger.owner.live('POST', `${stranger.base}/ecommerce/stores/${id}/sync`), 'sync');
  assertNotFound(t, await stranger.owner.live('GET', `${base}`), "another account's brand");
  assertNotFound(t, await stranger.owner.live('DELETE', `${base}/${id}`), "another account's brand and store");
  assertNotFound(t, await team.owner.live('DELETE', `/v1/brands/${team.second.id}/ecommerce/stores/${id}`), "the account's other brand");
  assertNotFound(t, await team.owner.live('POST', `/v1/brands/${team.second.id}/ecommerce/stores/${id}/sync`), "the account's other brand (sync)");
  const testBrand = await makeBrand(team.owner.test, 'Test mode');
  assertNotFound(t, await team.owner.test('DELETE', `/v1/brands/${testBrand.id}/ecommerce/stores/${id}`), 'the other mode');
  t.equal((await team.owner.live('GET', base)).body.length, 1, 'still there');
  t.equal(store.hooks.size, 1, 'its hook too');
});
