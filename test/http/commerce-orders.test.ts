import t from 'tap';
import { encodeCursor } from '../../server/core/pagination.js';
import { assertErrorShape, assertNotFound, makeBrand, mustCreate, ownerWithBrand, servicesOf, signup, statementsDuring, testApp } from '../helpers/app.js';
import { seedOrder, seedProduct, seedStore } from '../helpers/commerce-seed.js';
import { postInbound } from '../helpers/inbound.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';

/**
 * A brand's orders beside its tickets, as the dashboard's ticket and contact pages read them
 * (section 23 of the dashboard facts): /v1/brands/{brandId}/ecommerce/orders… and …/products.
 * Stores, orders and products are fixture rows (helpers/commerce-seed.ts), as the sync leaves them.
 */

const SECRET = 'inbound-secret-commerce';
const DOMAIN = 'inbound.commerce.localhost';
const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_INBOUND_SECRET: SECRET, TICKETD_INBOUND_DOMAIN: DOMAIN });
const services = servicesOf(db);
const LINK_ID = /^olk_[0-9a-z]{26}$/;

/** An account with a live brand and a connected store. */
async function shop() {
  const { owner, brand, base } = await ownerWithBrand(app);
  const store = await seedStore(db, { accountId: owner.accountId, livemode: true, brandId: brand.id });
  return { owner, brand, base, store, orders: `${base}/ecommerce/orders` };
}

const ORDER_KEYS = [
  'id',
  'storeId',
  'brandId',
  'platformOrderId',
  'orderNumber',
  'customerId',
  'customerEmail',
  'customerName',
  'status',
  'platformStatus',
  'currency',
  'subtotal',
  'shippingTotal',
  'taxTotal',
  'discountTotal',
  'total',
  'refundTotal',
  'paymentStatus',
  'paymentMethod',
  'fulfillmentStatus',
  'shippingMethod',
  'platformCreatedAt',
  'platformUpdatedAt',
  'createdAt',
  'updatedAt',
  'items',
].sort();

t.test('by-ticket and by-customer answer [] when no store is connected, in one statement', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const ticket = await mustCreate(owner.live, `${base}/tickets`, { title: 'Where is #1234?', customerEmail: 'nostore@shop.example' });
  const contactId = ticket.customer.id;
  t.same((await owner.live('GET', `${base}/ecommerce/orders/by-ticket/${ticket.id}`)).body, []);
  t.same((await owner.live('GET', `${base}/ecommerce/orders/by-customer/${contactId}`)).body, []);
  const workspace = `/v1/workspaces/ws_${base.slice('/v1/brands/br_'.length)}`;
  t.same((await owner.live('GET', `${workspace}/ecommerce/orders/by-ticket/${ticket.id}`)).body, [], 'the /v1/workspaces twin');
  t.same((await owner.live('GET', `${base}/ecommerce/orders`)).body, { data: [], pagination: { cursor: null, nextCursor: null, hasMore: false } });
  const byTicket = await statementsDuring(db, () => owner.live('GET', `${base}/ecommerce/orders/by-ticket/${ticket.id}`));
  t.equal(byTicket.length, 1, 'by-ticket: one statement (the brand check is answered from memory)');
  const byCustomer = await statementsDuring(db, () => owner.live('GET', `${base}/ecommerce/orders/by-customer/${contactId}`));
  t.equal(byCustomer.length, 1, 'by-customer: one statement');
  t.equal((await db('commerceOrderTickets')).filter((l) => l.ticketId === ticket.id).length, 0, 'a #number without a store links nothing');
  // A create costs what it did: one statement, the order-links part only when the text names a number.
  const plain = await statementsDuring(db, () => mustCreate(owner.live, `${base}/tickets`, { title: 'No number here', customerEmail: 'nostore@shop.example' }));
  t.equal(plain.length, 1, 'a create without #number: one statement');
  t.notOk(plain[0]!.includes('commerce_order'), 'and no order lookup in it');
  const named = await statementsDuring(db, () => mustCreate(owner.live, `${base}/tickets`, { title: 'Order #55', customerEmail: 'nostore@shop.example' }));
  t.equal(named.length, 1, 'a create naming #55 in a brand without a store: still one statement');
  assertNotFound(t, await owner.live('GET', `${base}/ecommerce/orders/by-ticket/tkt_${'0'.repeat(26)}`), 'unknown ticket');
  assertNotFound(t, await owner.live('GET', `${base}/ecommerce/orders/by-customer/cus_${'0'.repeat(26)}`), 'unknown contact');
});

t.test('an order reads in the dashboard’s shape: decimal strings, items, customerId from the contact of its email', async (t) => {
  const { owner, brand, base, store, orders } = await shop();
  const order = await seedOrder(db, store, {
    orderNumber: '1001',
    customerEmail: 'ann@shop.example',
    customerName: 'Ann Smith',
    status: 'SHIPPED',
    subtotal: '20.00',
    shippingTotal: '4.5',
    taxTotal: '1.25',
    discountTotal: '0',
    total: '25.75',
    paymentStatus: 'captured',
    paymentMethod: 'Card',
    fulfillmentStatus: 'shipped',
    shippingMethod: 'Ground',
  });
  const before = (await owner.live('GET', `${orders}/${order.id}`)).body;
  t.equal(before.customerId, null, 'no contact of that email yet');
  // The contact comes after the order: it finds the order by its email.
  const contact = await mustCreate(owner.live, `${base}/contacts`, { email: ' Ann@Shop.example ', name: 'Ann' });
  const byCustomer = (await owner.live('GET', `${orders}/by-customer/${contact.id}`)).body;
  t.equal(byCustomer.length, 1);
  const got = byCustomer[0];
  t.same(Object.keys(got).sort(), ORDER_KEYS, 'exactly the fields of an Order, with items');
  t.match(got, {
    id: order.id,
    storeId: store.id,
    brandId: brand.id,
    platformOrderId: String,
    orderNumber: '1001',
    customerId: contact.id,
    customerEmail: 'ann@shop.example',
    customerName: 'Ann Smith',
    status: 'SHIPPED',
    platformStatus: 'Completed',
    currency: 'USD',
    subtotal: '20.0000',
    shippingTotal: '4.5000',
    taxTotal: '1.2500',
    discountTotal: '0.0000',
    total: '25.7500',
    refundTotal: '0.0000',
    paymentStatus: 'captured',
    platformCreatedAt: /^\d{4}-\d\d-\d\dT/,
  });
  t.same(got.items, [
    { id: got.items[0].id, platformItemId: got.items[0].platformItemId, productId: null, sku: 'SKU-1', name: 'Blue mug', quantity: 2, price: '5.0000', total: '10.0000' },
  ]);

  const one = (await owner.live('GET', `${orders}/${order.id}`)).body;
  t.same(Object.keys(one).sort(), [...ORDER_KEYS, 'store', 'tickets'].sort(), 'GET one adds its store and tickets');
  t.same(one.store, {
    id: store.id,
    brandId: brand.id,
    name: 'Fixture store',
    platform: 'BIGCOMMERCE',
    storeUrl: 'https://fixture-store.example',
    storeId: one.store.storeId,
    status: 'ACTIVE',
    lastSyncAt: null,
    errorMessage: null,
    errorCount: 0,
    createdAt: one.store.createdAt,
    updatedAt: one.store.updatedAt,
  });
  t.same(one.tickets, []);
  t.equal(one.customerId, contact.id);
  t.equal(JSON.stringify(one).includes('sealed-placeholder'), false, 'the store token never shows');
  assertNotFound(t, await owner.live('GET', `${orders}/ord_${'0'.repeat(26)}`), 'unknown order');
});

t.test('the list: newest first, paged by cursor, filtered by status, store, customer and search', async (t) => {
  const { owner, base, store, orders, brand } = await shop();
  const other = await seedStore(db, { accountId: owner.accountId, livemode: true, brandId: brand.id }, { name: 'Second store' });
  const made = [];
  for (let i = 0; i < 7; i++)
    made.push(await seedOrder(db, i % 2 ? other : store, { customerEmail: i < 3 ? 'bob@shop.example' : `c${i}@shop.example`, status: i < 2 ? 'PENDING' : 'COMPLETED' }));
  // Orders without a platform time come first (the index's order), then by id.
  const undated = await seedOrder(db, store, { platformCreatedAt: null, orderNumber: '777', customerName: 'Zed Quinn' });
  const expected = [undated.id, ...made.map((o) => o.id).reverse()];

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await owner.live('GET', `${orders}?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    t.equal(res.status, 200);
    seen.push(...res.body.data.map((o: { id: string }) => o.id));
    t.equal(res.body.pagination.cursor, res.body.pagination.nextCursor);
    t.equal(res.body.pagination.hasMore, res.body.pagination.nextCursor !== null);
    cursor = res.body.pagination.nextCursor;
    pages++;
  } while (cursor);
  t.same(seen, expected, 'every order once, newest first');
  t.equal(pages, 3);

  const ids = async (query: string) => ((await owner.live('GET', `${orders}?${query}`)).body.data as { id: string }[]).map((o) => o.id);
  t.same(await ids('status=PENDING'), [made[1]!.id, made[0]!.id]);
  t.same(await ids(`storeId=${other.id}`), [made[5]!.id, made[3]!.id, made[1]!.id]);
  t.same(await ids(`search=${made[4]!.orderNumber}`), [made[4]!.id], 'an order number');
  t.same(await ids(`search=%23${made[4]!.orderNumber}`), [made[4]!.id], 'with its #');
  t.same(await ids('search=BOB@'), [made[2]!.id, made[1]!.id, made[0]!.id], 'the start of the email, any case');
  t.same(await ids('search=zed q'), [undated.id], 'part of the name');
  t.same(await ids('search=%25'), [], 'a % is a character, not a wildcard');
  const bob = await mustCreate(owner.live, `${base}/contacts`, { email: 'bob@shop.example' });
  t.same(await ids(`customerId=${bob.id}`), [made[2]!.id, made[1]!.id, made[0]!.id], 'a contact: the orders of its email');
  t.same(await ids(`customerId=${bob.id}&status=PENDING`), [made[1]!.id, made[0]!.id]);
  t.same(await ids(`customerId=cus_${'0'.repeat(26)}`), [], 'an unknown contact: an empty page');

  const first = (await owner.live('GET', `${orders}?limit=2&status=COMPLETED`)).body;
  assertErrorShape(t, await owner.live('GET', `${orders}?limit=2&cursor=${first.pagination.nextCursor}`), 400, 'cursor_mismatch');
  assertErrorShape(t, await owner.live('GET', `${orders}?cursor=nonsense`), 400, 'invalid_cursor');
  // Well formed, checksum and all, but no time: still the client's 400.
  const forged = encodeCursor(['2026-02-30 25:00:00+00', made[0]!.id], { brandId: brand.id, search: null, status: null, customerId: null, storeId: null });
  assertErrorShape(t, await owner.live('GET', `${orders}?cursor=${forged}`), 400, 'invalid_cursor');
  assertErrorShape(t, await owner.live('GET', `${orders}?limit=0`), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('GET', `${orders}?limit=101`), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('GET', `${orders}?status=LOST`), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('GET', `${orders}?sort=total`), 400, 'validation_failed');
});

t.test('link by hand, relink answers the same link, unlink; each audited', async (t) => {
  const { owner, base, store, orders } = await shop();
  const order = await seedOrder(db, store, { customerEmail: 'dan@shop.example' });
  const ticket = await mustCreate(owner.live, `${base}/tickets`, { title: 'A question' });
  const linked = await owner.live('POST', `${orders}/${order.id}/link`, { ticketId: ticket.id, linkType: 'MANUAL' });
  t.equal(linked.status, 201);
  t.match(linked.body, { id: LINK_ID, orderId: order.id, ticketId: ticket.id, linkType: 'MANUAL', createdBy: String, createdAt: /Z$/ });
  t.same(Object.keys(linked.body).sort(), ['createdAt', 'createdBy', 'id', 'linkType', 'orderId', 'ticketId']);
  const again = await owner.live('POST', `${orders}/${order.id}/link`, { ticketId: ticket.id });
  t.equal(again.status, 200, 'linked already: 200');
  t.same(again.body, linked.body, 'the same link');
  t.equal((await db('commerceOrderTickets').where({ orderId: order.id })).length, 1, 'no duplicate');

  t.same(
    (await owner.live('GET', `${orders}/by-ticket/${ticket.id}`)).body.map((o: { id: string }) => o.id),
    [order.id],
  );
  t.same((await owner.live('GET', `${orders}/${order.id}`)).body.tickets, [linked.body]);

  // Two links of the same pair at once: one made (201), the other answers it (200).
  const racing = await mustCreate(owner.live, `${base}/tickets`, { title: 'Raced' });
  const both = await Promise.all([0, 1].map(() => owner.live('POST', `${orders}/${order.id}/link`, { ticketId: racing.id })));
  t.same(both.map((r) => r.status).sort(), [200, 201], 'concurrent links: one 201, one 200');
  t.equal(both[0]!.body.id, both[1]!.body.id, 'the same link');
  t.equal((await db('commerceOrderTickets').where({ ticketId: racing.id })).length, 1);

  const removed = await owner.live('DELETE', `${orders}/${order.id}/link/${ticket.id}`);
  t.equal(removed.status, 204);
  t.equal(removed.body, undefined);
  t.same((await owner.live('GET', `${orders}/by-ticket/${ticket.id}`)).body, []);
  assertNotFound(t, await owner.live('DELETE', `${orders}/${order.id}/link/${ticket.id}`), 'no such link');
  const relinked = await owner.live('POST', `${orders}/${order.id}/link`, { ticketId: ticket.id });
  t.equal(relinked.status, 201, 'linked again after an unlink: a new link');
  t.equal(relinked.body.linkType, 'API', 'an API key that names no linkType links as API');
  t.equal((await owner.live('GET', `${orders}/${order.id}`)).body.tickets.find((l: { ticketId: string }) => l.ticketId === racing.id).linkType, 'API');

  const logs = (await owner.live('GET', `${base}/tickets/${ticket.id}/logs`)).body;
  const events = (Array.isArray(logs) ? logs : logs.data).map((e: { event?: string; action?: string }) => e.event ?? e.action);
  t.same(
    events.filter((e: string) => e.startsWith('order.')),
    ['order.linked', 'order.unlinked', 'order.linked'],
    'order.linked, order.unlinked, order.linked in the ticket’s history',
  );

  assertErrorShape(t, await owner.live('POST', `${orders}/${order.id}/link`, {}), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${orders}/${order.id}/link`, { ticketId: ticket.id, linkType: 'AUTOMATIC' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${orders}/${order.id}/link`, { ticketId: ticket.id, extra: 1 }), 400, 'validation_failed');
  assertNotFound(t, await owner.live('POST', `${orders}/ord_${'0'.repeat(26)}/link`, { ticketId: ticket.id }), 'unknown order');
  assertNotFound(t, await owner.live('POST', `${orders}/${order.id}/link`, { ticketId: `tkt_${'0'.repeat(26)}` }), 'unknown ticket');
  // A ticket of another brand of the same account: 404, as if it did not exist.
  const side = await makeBrand(owner.live, 'Side');
  const sideTicket = await mustCreate(owner.live, `/v1/brands/${side.id}/tickets`, { title: 'Elsewhere' });
  assertNotFound(t, await owner.live('POST', `${orders}/${order.id}/link`, { ticketId: sideTicket.id }), "another brand's ticket");
  assertNotFound(t, await owner.live('GET', `/v1/brands/${side.id}/ecommerce/orders/${order.id}`), 'the order under another brand');
  // A deleted ticket is gone for orders too.
  t.equal((await owner.live('DELETE', `${base}/tickets/${ticket.id}`)).status < 300, true);
  assertNotFound(t, await owner.live('GET', `${orders}/by-ticket/${ticket.id}`), 'a deleted ticket');
});

t.test('a merge links the target to the orders of the tickets merged into it', async (t) => {
  const { owner, base, store, orders } = await shop();
  const [first, second] = [await seedOrder(db, store), await seedOrder(db, store)];
  const target = await mustCreate(owner.live, `${base}/tickets`, { title: 'The one kept' });
  const source = await mustCreate(owner.live, `${base}/tickets`, { title: 'The one merged' });
  await mustCreate(owner.live, `${orders}/${first.id}/link`, { ticketId: source.id, linkType: 'MANUAL' });
  await mustCreate(owner.live, `${orders}/${second.id}/link`, { ticketId: source.id });
  await mustCreate(owner.live, `${orders}/${second.id}/link`, { ticketId: target.id });
  t.equal((await owner.live('POST', `${base}/tickets/${target.id}/merge`, { sourceTicketIds: [source.id] })).status, 200);
  const onTarget = (await owner.live('GET', `${orders}/by-ticket/${target.id}`)).body as { id: string }[];
  t.same(onTarget.map((o) => o.id).sort(), [first.id, second.id].sort(), "the target shows the source's orders, and its own once");
  t.same(
    (await db('commerceOrderTickets').where({ ticketId: target.id, orderId: first.id })).map((l: { linkType: string }) => l.linkType),
    ['MANUAL'],
    'the link as it was made',
  );
  t.equal((await owner.live('GET', `${orders}/by-ticket/${source.id}`)).body.length, 2, 'the merged ticket keeps its own');
});

t.test('auto-linking: a new ticket naming its customer’s order is linked to it, and to nothing else', async (t) => {
  const { owner, base, store, orders } = await shop();
  const mine = await seedOrder(db, store, { orderNumber: '4242', customerEmail: 'eve@shop.example' });
  const also = await seedOrder(db, store, { orderNumber: '4343', customerEmail: 'eve@shop.example' });
  const theirs = await seedOrder(db, store, { orderNumber: '5151', customerEmail: 'frank@shop.example' });
  const linksOf = async (ticketId: string) => db('commerceOrderTickets').where({ ticketId }).orderBy('orderId');

  const named = await mustCreate(owner.live, `${base}/tickets`, { title: 'Order #4242 never came', customerEmail: 'Eve@Shop.example' });
  const links = await linksOf(named.id);
  t.equal(links.length, 1);
  t.match(links[0], { orderId: mine.id, linkType: 'AUTOMATIC', createdBy: null, id: LINK_ID });
  const byTicket = (await owner.live('GET', `${orders}/by-ticket/${named.id}`)).body;
  t.same(
    byTicket.map((o: { id: string }) => o.id),
    [mine.id],
  );
  t.equal((await owner.live('GET', `${orders}/${mine.id}`)).body.tickets[0].linkType, 'AUTOMATIC');

  const inBody = await mustCreate(owner.live, `${base}/tickets`, {
    title: 'Two orders',
    body: 'About #4343 and (#4242), not #5151 or #9999 or abc#4242',
    customerEmail: 'eve@shop.example',
  });
  t.same((await linksOf(inBody.id)).map((l) => l.orderId).sort(), [mine.id, also.id].sort(), 'both of hers; not the other customer’s nor an unknown number');
  const someoneElses = await mustCreate(owner.live, `${base}/tickets`, { title: 'About #5151', customerEmail: 'eve@shop.example' });
  t.same(await linksOf(someoneElses.id), [], "another customer's order number: nothing");
  const noNumber = await mustCreate(owner.live, `${base}/tickets`, { title: 'About my order 4242', customerEmail: 'eve@shop.example' });
  t.same(await linksOf(noNumber.id), [], 'no #number: nothing');
  const noCustomer = await mustCreate(owner.live, `${base}/tickets`, { title: 'About #4242' });
  t.same(await linksOf(noCustomer.id), [], 'no customer: nothing');

  // Step by step (watchers send a create that way) links the same way.
  const members = (await owner.live('GET', '/v1/accounts/me/members')).body.data;
  const stepwise = await mustCreate(owner.live, `${base}/tickets`, { title: 'Re #4242', customerEmail: 'eve@shop.example', watchers: [{ memberId: members[0].id }] });
  t.same(
    (await linksOf(stepwise.id)).map((l) => l.orderId),
    [mine.id],
    'the step-by-step create',
  );
  // Idempotent replay: the same ticket, no second link.
  const key = { 'x-idempotency-key': 'order-link-replay' };
  const first = await mustCreate(owner.live, `${base}/tickets`, { title: 'Replay #4242', customerEmail: 'eve@shop.example' }, key);
  const replay = await owner.live('POST', `${base}/tickets`, { title: 'Replay #4242', customerEmail: 'eve@shop.example' }, key);
  t.equal(replay.body.id, first.id);
  t.equal((await linksOf(first.id)).length, 1, 'a replay links nothing more');

  // Mail: the subject names the order.
  const received = await postInbound(
    app,
    SECRET,
    `From: Eve <eve@shop.example>\r\nTo: ${store.brandId}@${DOMAIN}\r\nSubject: Where is order #4343?\r\nMessage-ID: <order-4343@shop.example>\r\n\r\nThanks\r\n`,
  );
  t.equal(received.action, 'ticket_created');
  t.same(
    (await linksOf(received.ticketId!)).map((l) => l.orderId),
    [also.id],
    'a ticket by mail',
  );
  // The portal: the customer's own ticket.
  const portal = (await mustCreate(owner.live, `${base}/portal/token`, { email: 'eve@shop.example' })).token as string;
  const viaPortal = await app.inject({ method: 'POST', url: '/v1/portal/tickets', payload: { title: 'Portal #4242', body: 'Hi' }, headers: { authorization: `Bearer ${portal}` } });
  t.equal(viaPortal.statusCode, 201);
  t.same(
    (await linksOf(JSON.parse(viaPortal.body).id)).map((l) => l.orderId),
    [mine.id],
    'a ticket from the portal',
  );
  void theirs;
});

t.test('isolation: another brand, another account, the other mode read 404', async (t) => {
  const { owner, base, store, orders, brand } = await shop();
  const order = await seedOrder(db, store, { customerEmail: 'gil@shop.example' });
  const ticket = await mustCreate(owner.live, `${base}/tickets`, { title: 'Mine', customerEmail: 'gil@shop.example' });
  await owner.live('POST', `${orders}/${order.id}/link`, { ticketId: ticket.id });
  const contactId = ticket.customer.id;

  const side = await makeBrand(owner.live, 'Side');
  const sideOrders = `/v1/brands/${side.id}/ecommerce/orders`;
  assertNotFound(t, await owner.live('GET', `${sideOrders}/${order.id}`), 'another brand: the order');
  assertNotFound(t, await owner.live('GET', `${sideOrders}/by-ticket/${ticket.id}`), 'another brand: the ticket');
  assertNotFound(t, await owner.live('GET', `${sideOrders}/by-customer/${contactId}`), 'another brand: the contact');
  assertNotFound(t, await owner.live('DELETE', `${sideOrders}/${order.id}/link/${ticket.id}`), 'another brand: the link');
  t.same((await owner.live('GET', sideOrders)).body.data, [], "another brand's list holds none of them");

  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  for (const [label, call, path] of [
    ['another account, through this brand', stranger.live, orders],
    ['another account, through its own brand', stranger.live, `/v1/brands/${strangerBrand.id}/ecommerce/orders`],
    ['the test mode', owner.test, orders],
  ] as const) {
    assertNotFound(t, await call('GET', `${path}/${order.id}`), `${label}: the order`);
    assertNotFound(t, await call('GET', `${path}/by-ticket/${ticket.id}`), `${label}: by-ticket`);
    assertNotFound(t, await call('GET', `${path}/by-customer/${contactId}`), `${label}: by-customer`);
    assertNotFound(t, await call('POST', `${path}/${order.id}/link`, { ticketId: ticket.id }), `${label}: link`);
    assertNotFound(t, await call('DELETE', `${path}/${order.id}/link/${ticket.id}`), `${label}: unlink`);
  }
  // The test mode's own brand, with its own store and order of the same number, stays apart.
  const testBrand = await makeBrand(owner.test, 'Test brand');
  const testStore = await seedStore(db, { accountId: owner.accountId, livemode: false, brandId: testBrand.id });
  const testOrder = await seedOrder(db, testStore, { customerEmail: 'gil@shop.example' });
  assertNotFound(t, await owner.live('GET', `${orders}/${testOrder.id}`), 'a test-mode order from live');
  t.same(
    (await owner.test('GET', `/v1/brands/${testBrand.id}/ecommerce/orders`)).body.data.map((o: { id: string }) => o.id),
    [testOrder.id],
  );
  t.same(
    (await owner.live('GET', orders)).body.data.map((o: { id: string }) => o.id),
    [order.id],
  );
  void brand;
});

t.test('roles: members read and link within their brands; outside them 404; API keys limited to a brand likewise', async (t) => {
  const team = await teamOf(app, services);
  const store = await seedStore(db, { accountId: team.owner.accountId, livemode: true, brandId: team.first.id });
  const order = await seedOrder(db, store);
  const ticket = await mustCreate(team.owner.live, `/v1/brands/${team.first.id}/tickets`, { title: 'For the member' });
  const first = `/v1/brands/${team.first.id}/ecommerce`;
  const second = `/v1/brands/${team.second.id}/ecommerce`;
  t.equal((await team.asMember('GET', `${first}/orders`)).status, 200, 'a member reads the orders of their brand');
  t.equal((await team.asMember('GET', `${first}/orders/by-ticket/${ticket.id}`)).status, 200);
  const byMember = await team.asMember('POST', `${first}/orders/${order.id}/link`, { ticketId: ticket.id });
  t.equal(byMember.status, 201, 'and links');
  t.equal(byMember.body.linkType, 'MANUAL', 'a member in the dashboard links as MANUAL');
  t.equal((await team.asMember('DELETE', `${first}/orders/${order.id}/link/${ticket.id}`)).status, 204, 'and unlinks');
  assertNotFound(t, await team.asMember('GET', `${second}/orders`), "a brand the member isn't assigned to");
  t.equal((await team.asAdmin('GET', `${first}/products`)).status, 200, 'an admin');
  const limited = await mustCreate(team.owner.live, '/v1/accounts/me/api-keys', { name: 'Second only', brandIds: [team.second.id] });
  const key = (method: string, url: string, body?: unknown) =>
    app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${limited.key}` }, ...(body ? { payload: body as object } : {}) });
  t.equal((await key('GET', `${first}/orders/${order.id}`)).statusCode, 404, 'a key limited to another brand');
  t.equal((await key('POST', `${first}/orders/${order.id}/link`, { ticketId: ticket.id })).statusCode, 404);
  t.equal((await key('GET', `${second}/orders`)).statusCode, 200, 'its own brand');
  t.equal((await app.inject({ method: 'GET', url: `${first}/orders` })).statusCode, 401, 'no credentials');
});

t.test('products: by name, paged, filtered by store, search and isActive', async (t) => {
  const { owner, brand, store, base } = await shop();
  const other = await seedStore(db, { accountId: owner.accountId, livemode: true, brandId: brand.id });
  const mug = await seedProduct(db, store, { name: 'Blue mug', sku: 'MUG-BLUE', price: '12.5' });
  const cap = await seedProduct(db, store, { name: 'Cap', sku: 'CAP-1', isActive: false, price: null, inventoryLevel: 3 });
  const tee = await seedProduct(db, other, { name: 'T-shirt', sku: 'TEE-1' });
  const products = `${base}/ecommerce/products`;
  const page = (await owner.live('GET', products)).body;
  t.same(
    page.data.map((p: { id: string }) => p.id),
    [mug.id, cap.id, tee.id],
  );
  t.same(page.data[0], {
    id: mug.id,
    storeId: store.id,
    brandId: brand.id,
    platformProductId: page.data[0].platformProductId,
    name: 'Blue mug',
    sku: 'MUG-BLUE',
    price: '12.5000',
    currency: 'USD',
    isActive: true,
    inventoryLevel: null,
    url: null,
    imageUrl: null,
    platformUpdatedAt: null,
    createdAt: page.data[0].createdAt,
    updatedAt: page.data[0].updatedAt,
  });
  t.match(page.data[1], { price: null, isActive: false, inventoryLevel: 3 });
  const ids = async (q: string) => ((await owner.live('GET', `${products}?${q}`)).body.data as { id: string }[]).map((p) => p.id);
  t.same(await ids(`storeId=${other.id}`), [tee.id]);
  t.same(await ids('isActive=false'), [cap.id]);
  t.same(await ids('isActive=true'), [mug.id, tee.id]);
  t.same(await ids('search=MUG'), [mug.id], 'part of the name, any case');
  t.same(await ids('search=CAP-'), [cap.id], 'the start of the SKU');
  const one = (await owner.live('GET', `${products}?limit=2`)).body;
  t.equal(one.pagination.hasMore, true);
  t.same(await ids(`limit=2&cursor=${one.pagination.nextCursor}`), [tee.id]);
  assertErrorShape(t, await owner.live('GET', `${products}?isActive=maybe`), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('GET', `${products}?limit=1000`), 400, 'validation_failed');
  const stranger = await signup(app);
  assertNotFound(t, await stranger.live('GET', products), 'another account');
});
