import t from 'tap';
import { assertErrorShape, client, makeBrand, makeTicket, mustCreate, signup, testApp } from '../helpers/app.js';

// GET/POST /v1/portal/tickets, GET /v1/portal/tickets/{ticketId}, POST …/{ticketId}/comments: a
// customer's own tickets, called the way the hosted dashboard's support page and the SDK call them.

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const owner = await signup(app);
const brand = await makeBrand(owner.live, 'Acme');
const base = `/v1/brands/${brand.id}`;

async function customer(email: string, name?: string, where = base, minter = owner.live) {
  const minted = await mustCreate(minter, `${where}/portal/token`, { email, ...(name ? { name } : {}) });
  return { id: minted.customerId as string, call: client(app, minted.token as string) };
}

const ada = await customer('ada@example.com', 'Ada Lovelace');
const bob = await customer('bob@example.com', 'Bob');
// A webhook on every event the portal causes: they fire as for any other change.
await mustCreate(owner.live, `${base}/webhooks`, { url: 'https://93.184.215.14/hook', events: ['ticket.created', 'ticket.updated', 'comment.created'] });

const adaFirst = await makeTicket(owner.live, base, { title: 'Printer on fire', body: 'It smokes', customerEmail: 'ada@example.com', tags: ['vip'], priority: 'high' });
const adaSecond = await makeTicket(owner.live, base, { title: 'Invoice question', customerEmail: 'ada@example.com', status: 'resolved' });
const bobs = await makeTicket(owner.live, base, { title: "Bob's secret", customerEmail: 'bob@example.com' });
const nobodys = await makeTicket(owner.live, base, { title: 'No customer' });

await mustCreate(owner.live, `${base}/tickets/${adaFirst.id}/comments`, { body: 'We are on it', authorName: 'Sam Agent' });
await mustCreate(owner.live, `${base}/tickets/${adaFirst.id}/comments`, { body: 'Internal: she is a VIP', metadata: { isInternal: true } });
await mustCreate(owner.live, `${base}/tickets/${adaFirst.id}/comments`, { body: 'From the customer by API', authorType: 'CUSTOMER', authorName: 'Ada' });

t.test('the list: own tickets only, under data and tickets, with the brand; status filter and cursor', async (t) => {
  const res = await ada.call('GET', '/v1/portal/tickets?limit=20');
  t.equal(res.status, 200);
  t.same(
    res.body.data.map((x: { id: string }) => x.id),
    [adaSecond.id, adaFirst.id],
    "Ada's tickets, newest first",
  );
  t.same(res.body.tickets, res.body.data, 'the same tickets under tickets');
  t.match(res.body.data[1], {
    title: 'Printer on fire',
    body: 'It smokes',
    status: 'open',
    priority: 'high',
    ticketNumber: adaFirst.ticketNumber,
    brand: { name: 'Acme', ticketPrefix: /.+/ },
  });
  t.match(res.body.pagination, { hasMore: false, nextCursor: null });
  for (const hidden of ['tags', 'customFields', 'metadata', 'assigneeId', 'category', 'customer', 'sourceData']) t.notOk(hidden in res.body.data[1], `no ${hidden}`);

  t.same(
    (await ada.call('GET', '/v1/portal/tickets?status=resolved')).body.data.map((x: { id: string }) => x.id),
    [adaSecond.id],
    'status=resolved',
  );
  t.same(
    (await ada.call('GET', '/v1/portal/tickets?status=open,pending')).body.data.map((x: { id: string }) => x.id),
    [adaFirst.id],
    'status=open,pending',
  );
  t.same((await ada.call('GET', '/v1/portal/tickets?sort=updatedAt&order=asc')).body.data.length, 2);

  const first = await ada.call('GET', '/v1/portal/tickets?limit=1');
  t.match(first.body.pagination, { hasMore: true, nextCursor: /.+/ });
  const second = await ada.call('GET', `/v1/portal/tickets?limit=1&cursor=${encodeURIComponent(first.body.pagination.nextCursor)}`);
  t.same(
    [...first.body.data, ...second.body.data].map((x: { id: string }) => x.id),
    [adaSecond.id, adaFirst.id],
    'page by page',
  );
  t.equal(second.body.pagination.hasMore, false);
  const stolen = await bob.call('GET', `/v1/portal/tickets?limit=1&cursor=${encodeURIComponent(first.body.pagination.nextCursor)}`);
  assertErrorShape(t, stolen, 400, 'cursor_mismatch');
  t.comment("Ada's cursor is no use to Bob");

  t.same(
    (await bob.call('GET', '/v1/portal/tickets')).body.data.map((x: { id: string }) => x.id),
    [bobs.id],
    'Bob sees his only',
  );
  assertErrorShape(t, await ada.call('GET', '/v1/portal/tickets?limit=0'), 400, 'validation_failed');
  assertErrorShape(t, await ada.call('GET', '/v1/portal/tickets?sort=priority'), 400, 'validation_failed');
});

t.test('one ticket: public comments with CUSTOMER or STAFF and names; internal notes never', async (t) => {
  const res = await ada.call('GET', `/v1/portal/tickets/${adaFirst.id}`);
  t.equal(res.status, 200);
  t.match(res.body, { id: adaFirst.id, title: 'Printer on fire', brand: { name: 'Acme' } });
  t.same(
    res.body.comments.map((c: { body: string; authorType: string; authorName: string }) => [c.body, c.authorType, c.authorName]),
    [
      ['We are on it', 'STAFF', 'Sam Agent'],
      ['From the customer by API', 'CUSTOMER', 'Ada'],
    ],
    'oldest first, the internal note left out',
  );
  t.notOk(JSON.stringify(res.body).includes('VIP'), 'nothing of the internal note anywhere');
});

t.test("another customer's ticket, a ticket without customer, a deleted one, another brand's: 404, and nothing changes", async (t) => {
  const other = await makeBrand(owner.live, 'Other');
  const elsewhere = await makeTicket(owner.live, `/v1/brands/${other.id}`, { title: 'Ada elsewhere', customerEmail: 'ada@example.com' });
  const gone = await makeTicket(owner.live, base, { title: 'Deleted', customerEmail: 'ada@example.com' });
  await owner.live('DELETE', `${base}/tickets/${gone.id}`);
  for (const [label, id] of [
    ["Bob's", bobs.id],
    ['without customer', nobodys.id],
    ["Ada's in another brand", elsewhere.id],
    ['deleted', gone.id],
    ['unknown', 'tkt_00000000000000000000000000'],
  ]) {
    t.test(label, async (t) => {
      assertErrorShape(t, await ada.call('GET', `/v1/portal/tickets/${id}`), 404, 'not_found');
      assertErrorShape(t, await ada.call('POST', `/v1/portal/tickets/${id}/comments`, { body: 'Let me in' }), 404, 'not_found');
      assertErrorShape(t, await ada.call('GET', `/v1/portal/tickets/${id}/attachments`), 404, 'not_found');
      assertErrorShape(t, await ada.call('POST', `/v1/portal/tickets/${id}/attachments`, { filename: 'a.txt', contentType: 'text/plain', size: 3 }), 404, 'not_found');
    });
  }
  const bobsNow = (await owner.live('GET', `${base}/tickets/${bobs.id}`)).body;
  t.equal(bobsNow.commentCount, 0, "no comment reached Bob's ticket");
  t.equal(bobsNow.attachmentCount, 0);
  t.equal(Number((await db('attachments').where({ ticketId: bobs.id }).count({ n: '*' }))[0]!.n), 0, 'no upload was declared on it');
});

t.test('create: the caller is the customer, source web; idempotent with X-Idempotency-Key', async (t) => {
  const key = `ticket-${Date.now()}-abc`;
  const created = await ada.call('POST', '/v1/portal/tickets', { title: ' Cannot log in ', body: 'Since Monday' }, { 'x-idempotency-key': key });
  t.equal(created.status, 201);
  t.match(created.body, { object: 'ticket', title: 'Cannot log in', body: 'Since Monday', status: 'open', source: 'web', customerId: ada.id, brand: { name: 'Acme' } });
  const staff = (await owner.live('GET', `${base}/tickets/${created.body.id}`)).body;
  t.match(staff, { source: 'web', customer: { email: 'ada@example.com', name: 'Ada Lovelace' } }, "the team sees it as Ada's");

  const again = await ada.call('POST', '/v1/portal/tickets', { title: ' Cannot log in ', body: 'Since Monday' }, { 'x-idempotency-key': key });
  t.equal(again.status, 200, 'the same request again: 200');
  t.equal(again.body.id, created.body.id, 'the first ticket');
  assertErrorShape(t, await ada.call('POST', '/v1/portal/tickets', { title: 'Something else' }, { 'x-idempotency-key': key }), 409, 'idempotency_key_reused');
  const bobsOwn = await bob.call('POST', '/v1/portal/tickets', { title: ' Cannot log in ', body: 'Since Monday' }, { 'x-idempotency-key': key });
  t.equal(bobsOwn.status, 201, "Bob's request with the same key is his own ticket");
  t.not(bobsOwn.body.id, created.body.id);
  t.equal(bobsOwn.body.customerId, bob.id);

  const audit = (await owner.live('GET', `${base}/logs?entityId=${created.body.id}&event=ticket.created`)).body.data;
  t.equal(audit.length, 1);
  t.match(audit[0], { performerType: 'customer', performedBy: { type: 'customer', id: ada.id, name: 'Ada Lovelace' }, source: 'portal' });
  const hooks = await db('outbox')
    .where({ kind: 'webhook', event: 'ticket.created' })
    .whereRaw(`payload::text like ?`, [`%${created.body.id}%`]);
  t.equal(hooks.length, 1, 'ticket.created went to the webhook');

  for (const [label, body] of [
    ['no title', { body: 'x' }],
    ['a blank title', { title: '   ' }],
    ['a field customers may not set', { title: 'x', priority: 'urgent' }],
    ['another customer', { title: 'x', customerEmail: 'bob@example.com' }],
    ['a status', { title: 'x', status: 'closed' }],
  ] as const) {
    t.test(label, async (t) => assertErrorShape(t, await ada.call('POST', '/v1/portal/tickets', body), 400, 'validation_failed'));
  }
});

t.test('comment: on own tickets, reopening a resolved one; idempotent; webhooks and audit as the customer', async (t) => {
  const res = await ada.call('POST', `/v1/portal/tickets/${adaSecond.id}/comments`, { body: 'It happened again' }, { 'x-idempotency-key': 'c-1' });
  t.equal(res.status, 201);
  t.match(res.body, { object: 'comment', body: 'It happened again', authorType: 'CUSTOMER', authorName: 'Ada Lovelace', authorId: ada.id });
  const ticket = (await owner.live('GET', `${base}/tickets/${adaSecond.id}`)).body;
  t.equal(ticket.status, 'open', 'the resolved ticket is open again');
  t.equal(ticket.commentCount, 1);

  const again = await ada.call('POST', `/v1/portal/tickets/${adaSecond.id}/comments`, { body: 'It happened again' }, { 'x-idempotency-key': 'c-1' });
  t.equal(again.status, 200, 'replayed: 200');
  t.equal(again.body.id, res.body.id, 'the first comment, though the ticket is open now');
  t.equal((await owner.live('GET', `${base}/tickets/${adaSecond.id}`)).body.commentCount, 1, 'no second comment');

  const staffView = (await owner.live('GET', `${base}/tickets/${adaSecond.id}/comments`)).body;
  t.match(staffView[0], { authorType: 'CUSTOMER', source: 'web', isInternal: false });
  const entries = (await owner.live('GET', `${base}/logs?performerType=customer&entityId=${res.body.id}`)).body.data;
  t.match(entries, [{ event: 'comment.created', performerType: 'customer', performedBy: { id: ada.id } }]);
  const reopened = (await owner.live('GET', `${base}/tickets/${adaSecond.id}/logs`)).body.find((e: { event: string }) => e.event === 'ticket.updated');
  t.match(reopened, { performerType: 'customer', changeList: [{ field: 'status', from: 'resolved', to: 'open' }] });
  t.equal(
    (
      await db('outbox')
        .where({ kind: 'webhook', event: 'comment.created' })
        .whereRaw(`payload::text like ?`, [`%${res.body.id}%`])
    ).length,
    1,
    'comment.created went out',
  );

  const open = await ada.call('POST', `/v1/portal/tickets/${adaFirst.id}/comments`, { body: 'Any news?' });
  t.equal(open.status, 201, 'without a key, on an open ticket');
  t.equal((await owner.live('GET', `${base}/tickets/${adaFirst.id}`)).body.status, 'open');
  const detail = (await ada.call('GET', `/v1/portal/tickets/${adaFirst.id}`)).body;
  t.equal(detail.comments.at(-1).body, 'Any news?', 'it shows in the thread');

  assertErrorShape(t, await ada.call('POST', `/v1/portal/tickets/${adaFirst.id}/comments`, { body: ' ' }), 400, 'validation_failed');
  assertErrorShape(t, await ada.call('POST', `/v1/portal/tickets/${adaFirst.id}/comments`, { body: 'x', metadata: { isInternal: true } }), 400, 'validation_failed');
  assertErrorShape(t, await ada.call('POST', `/v1/portal/tickets/${adaFirst.id}/comments`, { body: 'x', authorType: 'AGENT' }), 400, 'validation_failed');
});

t.test('a reply to a merged ticket goes to the ticket it was merged into', async (t) => {
  const target = await makeTicket(owner.live, base, { title: 'Main thread', customerEmail: 'ada@example.com', status: 'pending' });
  const source = await makeTicket(owner.live, base, { title: 'Duplicate', customerEmail: 'ada@example.com' });
  t.equal((await owner.live('POST', `${base}/tickets/${target.id}/merge`, { sourceTicketIds: [source.id] })).status, 200);
  const res = await ada.call('POST', `/v1/portal/tickets/${source.id}/comments`, { body: 'Same problem' });
  t.equal(res.status, 201);
  t.equal(res.body.ticketId, target.id, 'on the target');
  t.equal((await owner.live('GET', `${base}/tickets/${target.id}`)).body.status, 'open', 'which reopens');
  t.equal((await owner.live('GET', `${base}/tickets/${source.id}`)).body.status, 'closed', 'the merged one stays closed');
  const shown = (await ada.call('GET', `/v1/portal/tickets/${source.id}`)).body.comments;
  t.notOk(
    shown.some((c: { body: string }) => /Merged into/.test(c.body)),
    "the merge's internal note is not shown",
  );
});

t.test('a customer sees nothing of brand settings or of the team', async (t) => {
  for (const url of [base, `${base}/statuses`, `${base}/tags`, `${base}/categories`, `${base}/webhooks`, `${base}/contacts`, `${base}/logs`, '/v1/accounts/me/members']) {
    const res = await ada.call('GET', url);
    t.test(url, async (t) => assertErrorShape(t, res, 401, 'portal_token_not_allowed'));
  }
});

t.test("the other mode and another account's brand stay out of reach", async (t) => {
  const testBrand = await makeBrand(owner.test, 'Test Acme');
  const inTest = await customer('ada@example.com', 'Ada', `/v1/brands/${testBrand.id}`, owner.test);
  await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'Test mode ticket', customerEmail: 'ada@example.com' });
  const list = (await inTest.call('GET', '/v1/portal/tickets')).body.data;
  t.same(
    list.map((x: { title: string }) => x.title),
    ['Test mode ticket'],
    'the test-mode token sees test-mode tickets only',
  );
  assertErrorShape(t, await inTest.call('GET', `/v1/portal/tickets/${adaFirst.id}`), 404, 'not_found');
});
