import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, ownerWithBrand, type Reply, servicesOf, signup, testApp } from '../helpers/app.js';
import { deliverMail, mailsTo } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Every test signs up its own accounts: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const TICKET_ID = /^tkt_[0-9a-z]{26}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

const setup = () => ownerWithBrand(app);

const fieldsNamed = (res: Reply): string[] => (res.body?.errors ?? []).map((e: { field: string }) => e.field);

async function ticketRows(brandId: string): Promise<number> {
  const row = (await db('tickets').where({ brandId }).count({ n: '*' }).first()) as { n: string };
  return Number(row.n);
}

for (const prefix of ['/v1/brands', '/v1/workspaces'] as const) {
  t.test(`${prefix}: create returns 201 with the full ticket; get reads it back`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const brandPath = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}`;
    const category = (await owner.live('POST', `/v1/brands/${brand.id}/categories`, { name: 'Billing' })).body;
    const existingTag = (await owner.live('POST', `/v1/brands/${brand.id}/tags`, { name: 'vip' })).body;
    const company = (await owner.live('POST', `/v1/brands/${brand.id}/companies`, { name: 'Acme', domain: 'acme.com' })).body;
    t.ok(company.id, 'company made');

    const res = await owner.live('POST', `${brandPath}/tickets`, {
      title: '  Cannot log in  ',
      body: 'Since this morning.',
      customerEmail: '  Ann@Acme.COM ',
      customerName: 'Ann Example',
      priority: 'high',
      assigneeId: owner.ownerId,
      categoryId: category.id,
      tags: [existingTag.id, 'Login', 'login'],
      links: [{ url: 'https://example.com/issue/1', title: 'Issue', type: 'github' }],
      customFields: { orderId: 'A-1', nested: [1, { x: true }] },
      metadata: { plan: 'gold' },
      source: 'email',
      sourceId: 'msg-1',
      sourceData: { inbox: 'support' },
      createdBy: 'agent-7',
      notifyCustomer: true,
    });
    t.equal(res.status, 201);
    const tk = res.body;
    t.match(tk.id, TICKET_ID);
    t.equal(tk.brandId, brand.id);
    t.equal(tk.ticketNumber, 1000, 'the first number of a new brand');
    t.equal(tk.title, 'Cannot log in', 'title trimmed');
    t.equal(tk.body, 'Since this morning.');
    t.equal(tk.status, 'open');
    t.match(tk.statusRef, { key: 'open', name: 'Open', color: '#3b82f6' });
    t.match(tk.statusRef.id, /^st_/);
    t.equal(tk.priority, 'high');
    t.equal(tk.assigneeId, owner.ownerId);
    t.equal(tk.createdBy, 'agent-7');
    t.match(tk.customerId, /^cus_/);
    t.same(tk.customer, { id: tk.customerId, email: 'ann@acme.com', name: 'Ann Example', avatarUrl: null, companyId: company.id, company: { id: company.id, name: 'Acme' } });
    t.equal(tk.categoryId, category.id);
    t.same(tk.category, { id: category.id, name: 'Billing', color: category.color });
    t.equal(tk.tags.length, 2, 'one existing tag, one created by name (once, ignoring case)');
    t.ok(tk.tags.some((g: { id: string }) => g.id === existingTag.id));
    const created = tk.tags.find((g: { name: string }) => g.name === 'Login');
    t.match(created, { id: /^tag_/, name: 'Login', color: '#6b7280' });
    t.same(tk.links, [{ url: 'https://example.com/issue/1', title: 'Issue', type: 'github' }]);
    t.same(tk.customFields, { orderId: 'A-1', nested: [1, { x: true }] });
    t.same(tk.metadata, { plan: 'gold' });
    t.equal(tk.source, 'email');
    t.equal(tk.sourceId, 'msg-1');
    t.same(tk.sourceData, { inbox: 'support' });
    t.equal(tk.commentCount, 0);
    t.equal(tk.attachmentCount, 0);
    t.equal(tk.isSpam, false);
    t.match(tk.createdAt, ISO);
    t.match(tk.updatedAt, ISO);
    t.equal(tk.deletedAt, null);
    t.equal(tk.mergedIntoId, null);
    t.notOk('notifyCustomer' in tk, 'notifyCustomer is not part of the ticket');

    const got = await owner.live('GET', `${brandPath}/tickets/${tk.id}`);
    t.equal(got.status, 200);
    t.same(got.body, tk, 'get returns what create returned');

    const tagList = (await owner.live('GET', `/v1/brands/${brand.id}/tags`)).body;
    t.ok(
      tagList.some((g: { name: string }) => g.name === 'Login'),
      'the tag named on create now exists',
    );
  });
}

t.test('defaults: status open, source api, no customer, nothing else', async (t) => {
  const { owner, base } = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'Hello' });
  t.match(tk, {
    status: 'open',
    source: 'api',
    priority: null,
    body: null,
    customerId: null,
    customer: null,
    categoryId: null,
    category: null,
    assigneeId: null,
    isSpam: false,
    tags: [],
    links: [],
    metadata: {},
    customFields: null,
    sourceData: null,
  });
  const second = await makeTicket(owner.live, base, { title: 'Again' });
  t.equal(second.ticketNumber, tk.ticketNumber + 1);
});

t.test('the customer is found or created by normalized email; custom statuses are accepted', async (t) => {
  const { owner, brand, base } = await setup();
  const a = await makeTicket(owner.live, base, { title: 'One', customerEmail: 'bob@example.com', customerName: 'Bob' });
  const b = await makeTicket(owner.live, base, { title: 'Two', customerEmail: ' BOB@example.com' });
  t.equal(a.customerId, b.customerId, 'same contact');
  t.equal(b.customer.name, 'Bob', 'the existing contact is reused as is');
  const contact = await owner.live('GET', `${base}/contacts/${a.customerId}`);
  t.same(contact.body._count, { tickets: 2 }, 'contact _count.tickets counts its tickets');

  const st = await owner.live('POST', `${base}/statuses`, { key: 'waiting', name: 'Waiting', color: '#123456' });
  t.equal(st.status, 201);
  const c = await makeTicket(owner.live, base, { title: 'Custom', status: 'waiting' });
  t.match(c.statusRef, { key: 'waiting', name: 'Waiting', color: '#123456' });
  t.equal(brand.id, c.brandId);
});

t.test('a blocked sender (email or domain) makes the ticket spam', async (t) => {
  const { owner, base } = await setup();
  t.equal((await owner.live('POST', `${base}/blocked-sources`, { value: 'spam@example.com' })).status, 201);
  t.equal((await owner.live('POST', `${base}/blocked-sources`, { value: 'bad.test' })).status, 201);
  t.equal((await makeTicket(owner.live, base, { title: 'x', customerEmail: 'spam@example.com' })).isSpam, true);
  t.equal((await makeTicket(owner.live, base, { title: 'x', customerEmail: 'a@mail.bad.test' })).isSpam, true, 'subdomain of a blocked domain');
  t.equal((await makeTicket(owner.live, base, { title: 'x', customerEmail: 'ok@example.com' })).isSpam, false);
});

t.test('bad input is a 400 naming the field, and creates nothing', async (t) => {
  const { owner, brand, base } = await setup();
  const other = await makeBrand(owner.live, 'Other');
  const otherCategory = (await owner.live('POST', `/v1/brands/${other.id}/categories`, { name: 'Elsewhere' })).body;
  const otherTag = (await owner.live('POST', `/v1/brands/${other.id}/tags`, { name: 'elsewhere' })).body;
  const stranger = await signup(app);

  const cases: [string, Record<string, unknown>, string, string?][] = [
    ['missing title', {}, 'title'],
    ['empty title', { title: '' }, 'title'],
    ['blank title', { title: '   ' }, 'title'],
    ['huge title', { title: 'x'.repeat(501) }, 'title'],
    ['huge body', { title: 'x', body: 'x'.repeat(100_001) }, 'body'],
    ['unknown status', { title: 'x', status: 'nope' }, 'status', 'invalid_status'],
    ['unknown priority', { title: 'x', priority: 'critical' }, 'priority'],
    ['unknown source', { title: 'x', source: 'fax' }, 'source'],
    ['assignee of another account', { title: 'x', assigneeId: stranger.ownerId }, 'assigneeId', 'invalid_assignee'],
    ['unknown assignee', { title: 'x', assigneeId: 'mem_nope' }, 'assigneeId', 'invalid_assignee'],
    ['category of another brand', { title: 'x', categoryId: otherCategory.id }, 'categoryId', 'invalid_category'],
    ['tag id of another brand', { title: 'x', tags: [otherTag.id] }, 'tags', 'invalid_tags'],
    ['invalid email', { title: 'x', customerEmail: 'not-an-email' }, 'customerEmail'],
    ['unknown field', { title: 'x', colour: 'red' }, 'colour'],
    ['link without url', { title: 'x', links: [{ title: 'a' }] }, 'links/0/url'],
  ];
  for (const [label, body, field, code] of cases) {
    const res = await owner.live('POST', `${base}/tickets`, body);
    t.equal(res.status, 400, `${label}: 400`);
    if (code) t.equal(res.body.code, code, `${label}: ${code}`);
    t.ok(
      fieldsNamed(res).some((f) => f.includes(field.replace('/', '.').replace('/', '.')) || f.includes(field)),
      `${label}: names ${field} (${JSON.stringify(fieldsNamed(res))})`,
    );
  }
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'x', status: 'nope' }), 400, 'invalid_status');
  t.equal(await ticketRows(brand.id), 0, 'nothing was created');
  const fresh = await makeTicket(owner.live, base, { title: 'after the failures' });
  t.equal(fresh.ticketNumber, 1000, 'failed creates used no numbers');
});

t.test('bad input is explained in words a client can act on, not in regular expressions', async (t) => {
  const { owner, base } = await setup();
  const said = async (body: Record<string, unknown>) => (await owner.live('POST', `${base}/tickets`, body)).body.errors;
  t.same(await said({ title: '   ' }), [{ field: 'title', message: 'must not be blank' }]);
  t.same(await said({ title: 'x', customerEmail: 'not-an-email' }), [{ field: 'customerEmail', message: 'must be an email address' }]);
  t.same(await said({ title: 'x', priority: 'critical' }), [{ field: 'priority', message: 'must be one of: low, normal, medium, high, urgent (or null)' }]);
  t.same(await said({ title: 'x', source: 'fax' }), [{ field: 'source', message: 'must be one of: api, web, email, slack, sms, discord, instagram, twitter, whatsapp, custom' }]);
});

t.test('customFields of any JSON reads back as given, alike from create, get and the list', async (t) => {
  const { owner, base } = await setup();
  for (const customFields of ['42', 'plain text', 7, [1, '2'], true, { a: '{"b":1}' }]) {
    const made = await makeTicket(owner.live, base, { title: `fields ${JSON.stringify(customFields)}`, customFields });
    t.same(made.customFields, customFields, `create: ${JSON.stringify(customFields)}`);
    t.same((await owner.live('GET', `${base}/tickets/${made.id}`)).body.customFields, customFields, `get: ${JSON.stringify(customFields)}`);
    const listed = (await owner.live('GET', `${base}/tickets?limit=1`)).body.data[0];
    t.equal(listed.id, made.id);
    t.same(listed.customFields, customFields, `list: ${JSON.stringify(customFields)}`);
  }
});

t.test('customFields: too deep or too large is a 400; a brand schema is enforced with paths', async (t) => {
  const { owner, base } = await setup();
  let deep: unknown = 'leaf';
  for (let i = 0; i < 11; i++) deep = { d: deep };
  const tooDeep = await owner.live('POST', `${base}/tickets`, { title: 'x', customFields: deep });
  assertErrorShape(t, tooDeep, 400, 'custom_fields_too_deep');
  t.same(fieldsNamed(tooDeep), ['customFields']);
  let ok: unknown = 'leaf';
  for (let i = 0; i < 10; i++) ok = { d: ok };
  t.equal((await owner.live('POST', `${base}/tickets`, { title: 'x', customFields: ok })).status, 201, 'depth 10 is fine');
  const tooLarge = await owner.live('POST', `${base}/tickets`, { title: 'x', customFields: { blob: 'x'.repeat(70_000) } });
  assertErrorShape(t, tooLarge, 400, 'custom_fields_too_large');

  const put = await owner.live('PUT', `${base}/schema`, {
    schema: { type: 'object', properties: { orderId: { type: 'string', pattern: '^A-' }, qty: { type: 'integer' } }, required: ['orderId'] },
  });
  t.equal(put.status, 200, 'schema set');
  const bad = await owner.live('POST', `${base}/tickets`, { title: 'x', customFields: { orderId: 'B-1', qty: 'many' } });
  assertErrorShape(t, bad, 400, 'invalid_custom_fields');
  t.ok(fieldsNamed(bad).includes('customFields.orderId'), `names customFields.orderId (${JSON.stringify(fieldsNamed(bad))})`);
  t.ok(fieldsNamed(bad).includes('customFields.qty'), 'names customFields.qty');
  const missing = await owner.live('POST', `${base}/tickets`, { title: 'x' });
  t.equal(missing.status, 400, 'a required custom field is required');
  t.equal((await owner.live('POST', `${base}/tickets`, { title: 'x', customFields: { orderId: 'A-7', qty: 2 } })).status, 201);
});

t.test('ticket numbers under concurrency: 30 creates get start..start+29, no gaps, no duplicates', async (t) => {
  const { owner, brand, base } = await setup();
  const first = await makeTicket(owner.live, base, { title: 'first' });
  const results = await Promise.all(
    Array.from({ length: 30 }, (_, i) => owner.live('POST', `${base}/tickets`, { title: `t${i}`, customerEmail: `c${i % 3}@example.com`, tags: ['shared', `own-${i}`] })),
  );
  t.same(
    results.map((r) => r.status),
    Array(30).fill(201),
    'all created',
  );
  const numbers = results.map((r) => r.body.ticketNumber as number).sort((a, b) => a - b);
  t.same(
    numbers,
    Array.from({ length: 30 }, (_, i) => first.ticketNumber + 1 + i),
    'consecutive, no gaps, no duplicates',
  );
  const brandRow = (await owner.live('GET', `/v1/brands/${brand.id}`)).body;
  t.equal(brandRow.nextTicketNumber, first.ticketNumber + 31, 'the counter moved by exactly the number of tickets');
  t.equal(new Set(results.map((r) => r.body.customerId)).size, 3, 'concurrent find-or-create made one contact per email');
  const shared = new Set(results.map((r) => r.body.tags.find((g: { name: string }) => g.name === 'shared').id));
  t.equal(shared.size, 1, 'concurrent creates of one tag name made one tag');
});

t.test('idempotency: replay returns the same ticket (200), another body is a 409, keys are per mode', async (t) => {
  const { owner, brand, base } = await setup();
  const key = { 'x-idempotency-key': 'order-42' };
  const created = await owner.live('POST', `${base}/tickets`, { title: 'Once', metadata: { a: 1, b: 2 } }, key);
  t.equal(created.status, 201);
  const replay = await owner.live('POST', `${base}/tickets`, { metadata: { b: 2, a: 1 }, title: 'Once' }, key);
  t.equal(replay.status, 200, 'same body (keys in another order) replays');
  t.same(replay.body, created.body, 'the original ticket');
  const viaWorkspace = await owner.live('POST', `/v1/workspaces/ws_${brand.id.slice(3)}/tickets`, { title: 'Once', metadata: { a: 1, b: 2 } }, key);
  t.equal(viaWorkspace.status, 200, 'the workspace spelling is the same request');
  t.equal(await ticketRows(brand.id), 1, 'one ticket');

  const reused = await owner.live('POST', `${base}/tickets`, { title: 'Different' }, key);
  assertErrorShape(t, reused, 409, 'idempotency_key_reused');
  const otherBrand = await makeBrand(owner.live, 'Other');
  assertErrorShape(t, await owner.live('POST', `/v1/brands/${otherBrand.id}/tickets`, { title: 'Once', metadata: { a: 1, b: 2 } }, key), 409, 'idempotency_key_reused');

  const testBrand = await makeBrand(owner.test);
  const inTest = await owner.test('POST', `/v1/brands/${testBrand.id}/tickets`, { title: 'Once' }, key);
  t.equal(inTest.status, 201, 'the same key in test mode creates its own ticket');
  t.not(inTest.body.id, created.body.id);
  const stranger = await setup();
  t.equal((await stranger.owner.live('POST', `${stranger.base}/tickets`, { title: 'Once' }, key)).status, 201, 'another account has its own keys');

  const failed = await owner.live('POST', `${base}/tickets`, { title: 'x', status: 'nope' }, { 'x-idempotency-key': 'failing' });
  t.equal(failed.status, 400);
  t.equal((await owner.live('POST', `${base}/tickets`, { title: 'x' }, { 'x-idempotency-key': 'failing' })).status, 201, 'a failed request does not use up its key');

  t.equal((await owner.live('POST', `${base}/tickets`, { title: 'x' }, { 'x-idempotency-key': '' })).status, 400, 'empty key');
  t.equal((await owner.live('POST', `${base}/tickets`, { title: 'x' }, { 'x-idempotency-key': 'k'.repeat(256) })).status, 400, 'key over 255 characters');

  await db('idempotency_keys')
    .where({ key: 'order-42' })
    .update({ expiresAt: db.raw("now() - interval '1 second'") });
  const afterExpiry = await owner.live('POST', `${base}/tickets`, { title: 'Once', metadata: { a: 1, b: 2 } }, key);
  t.equal(afterExpiry.status, 201, 'an expired key is a new request');
  t.not(afterExpiry.body.id, created.body.id);
});

t.test('idempotency under concurrency: 50 identical requests create exactly one ticket', async (t) => {
  const { owner, brand, base } = await setup();
  const before = await ticketRows(brand.id);
  const key = { 'x-idempotency-key': 'concurrent-key' };
  const results = await Promise.all(
    Array.from({ length: 50 }, () => owner.live('POST', `${base}/tickets`, { title: 'Only once', customerEmail: 'race@example.com', tags: ['race'] }, key)),
  );
  const statuses = results.map((r) => r.status);
  t.equal(statuses.filter((s) => s === 201).length, 1, 'one 201');
  t.equal(statuses.filter((s) => s === 200).length, 49, '49 replays');
  t.equal(new Set(results.map((r) => r.body.id)).size, 1, 'every caller got the same ticket');
  t.equal(await ticketRows(brand.id), before + 1, 'exactly one row');
});

t.test('GET is 404 across account, mode, brand and for unknown ids; 401 without a key', async (t) => {
  const { owner, brand, base } = await setup();
  const tk = await makeTicket(owner.live, base, { title: 'Mine' });
  const other = await makeBrand(owner.live, 'Other');
  const stranger = await setup();
  assertNotFound(t, await owner.live('GET', `/v1/brands/${other.id}/tickets/${tk.id}`), 'another brand');
  assertNotFound(t, await stranger.owner.live('GET', `${base}/tickets/${tk.id}`), 'another account (brand)');
  assertNotFound(t, await stranger.owner.live('GET', `${stranger.base}/tickets/${tk.id}`), 'another account (own brand)');
  assertNotFound(t, await owner.test('GET', `${base}/tickets/${tk.id}`), 'the other mode');
  const testBrand = await makeBrand(owner.test);
  assertNotFound(t, await owner.test('GET', `/v1/brands/${testBrand.id}/tickets/${tk.id}`), 'the other mode (own brand)');
  assertNotFound(t, await owner.live('GET', `${base}/tickets/tkt_nope`), 'unknown id');
  await db('tickets')
    .where({ id: tk.id })
    .update({ deletedAt: new Date(testNow()) });
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${tk.id}`), 'deleted');
  assertErrorShape(t, await anonymous('GET', `${base}/tickets/${tk.id}`), 401, 'missing_credentials');
  assertErrorShape(t, await anonymous('POST', `${base}/tickets`, { title: 'x' }), 401, 'missing_credentials');
  t.equal(await ticketRows(brand.id), 1);
});

t.test('stats count live tickets per status, category and tag; tag merge relinks; brand preview counts', async (t) => {
  const { owner, brand, base } = await setup();
  const cat = (await owner.live('POST', `${base}/categories`, { name: 'Billing' })).body;
  const a = await makeTicket(owner.live, base, { title: 'a', categoryId: cat.id, tags: ['x', 'y'] });
  await makeTicket(owner.live, base, { title: 'b', categoryId: cat.id, status: 'pending', tags: ['x'] });
  await makeTicket(owner.live, base, { title: 'c', status: 'pending', tags: ['y'] });
  const gone = await makeTicket(owner.live, base, { title: 'd', categoryId: cat.id, tags: ['x'], customerEmail: 'z@example.com' });
  await db('tickets')
    .where({ id: gone.id })
    .update({ deletedAt: new Date(testNow()) });

  const byStatus = Object.fromEntries((await owner.live('GET', `${base}/statuses/stats`)).body.map((s: { key: string; ticketCount: number }) => [s.key, s.ticketCount]));
  t.same(byStatus, { open: 1, pending: 2, resolved: 0, closed: 0 });
  t.equal((await owner.live('GET', `${base}/categories/stats`)).body[cat.id].ticketCount, 2);
  const x = a.tags.find((g: { name: string }) => g.name === 'x').id;
  const y = a.tags.find((g: { name: string }) => g.name === 'y').id;
  const tagStats = (await owner.live('GET', `${base}/tags/stats`)).body;
  t.equal(tagStats[x].ticketCount, 2);
  t.equal(tagStats[y].ticketCount, 2);
  t.same((await owner.live('GET', `${base}/contacts/${gone.customerId}`)).body._count, { tickets: 0 }, 'deleted tickets do not count');

  const merged = await owner.live('POST', `${base}/tags/${x}/merge`, { sourceTagIds: [y] });
  t.equal(merged.status, 200);
  t.equal((await owner.live('GET', `${base}/tags/stats`)).body[x].ticketCount, 3, 'a, b, c carry x once each');
  t.same(
    (await owner.live('GET', `${base}/tickets/${a.id}`)).body.tags.map((g: { id: string }) => g.id),
    [x],
    'a has x once',
  );

  const preview = await owner.live('DELETE', `/v1/brands/${brand.id}`);
  t.equal(preview.body.ticketCount, 3);
  t.equal((await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=true`)).status, 200);
  t.equal(await ticketRows(brand.id), 0, 'tickets went with the brand');
});

t.test('the routes are in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  t.ok(doc.paths['/v1/brands/{brandId}/tickets']?.post, 'create');
  t.ok(doc.paths['/v1/brands/{brandId}/tickets/{ticketId}']?.get, 'get');
  t.ok(doc.paths['/v1/workspaces/{brandId}/tickets']?.post, 'create (workspaces)');
});

t.test("notifyCustomer: the customer gets the brand's confirmation once, from the create's transaction; without it, nothing", async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const services = servicesOf(db);
  const customer = `notify-${process.pid}@example.net`;
  const headers = { 'x-idempotency-key': `notify-${process.pid}` };
  const created = await owner.live('POST', `${base}/tickets`, { title: 'My parcel is late', customerEmail: customer, customerName: 'Nora', notifyCustomer: true }, headers);
  t.equal(created.status, 201);
  const replay = await owner.live('POST', `${base}/tickets`, { title: 'My parcel is late', customerEmail: customer, customerName: 'Nora', notifyCustomer: true }, headers);
  t.equal(replay.body.id, created.body.id, 'a replay answers the same ticket');
  const quiet = `quiet-${process.pid}@example.net`;
  await makeTicket(owner.live, base, { title: 'No mail please', customerEmail: quiet });
  await makeTicket(owner.live, base, { title: 'Nobody to tell', notifyCustomer: true });
  const rows = await db('mailMessages').where({ ticketId: created.body.id });
  t.equal(rows.length, 1, 'queued with the ticket, and not again by the replay');

  await deliverMail(services);
  const mails = await mailsTo(services, customer);
  t.equal(mails.length, 1);
  t.match(mails[0]!.subject, new RegExp(`${created.body.ticketNumber}`), "the subject names the ticket's number");
  t.match(mails[0]!.text, /My parcel is late|received/i);
  t.same(await mailsTo(services, quiet), [], 'without notifyCustomer the customer gets nothing');
});
