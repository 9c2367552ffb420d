import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, type Reply, type Signup, signup, testApp } from '../helpers/app.js';

// Every test signs up its own account: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const PREFIXES = ['/v1/brands', '/v1/workspaces'] as const;
type Call = Signup['live'];
let seq = 0;

async function makeField(call: Call, brandId: string, entityType = 'ticket', body: Record<string, unknown> = {}) {
  const res = await call('POST', `/v1/brands/${brandId}/fields/${entityType}`, { key: `field_${++seq}`, label: 'Order number', type: 'text', ...body });
  if (res.status !== 201) throw new Error(`field create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { key: string; id: string };
}

const keysOf = (res: Reply) => (res.body as { key: string }[]).map((f) => f.key);
const fieldsNamed = (res: Reply) => (res.body?.errors ?? []).map((e: { field: string }) => e.field);

async function fieldRows(brandId: string): Promise<number> {
  const row = await db('field_definitions').where({ brandId }).count({ n: '*' }).first();
  return Number(row!.n);
}

/** Every field and schema route of a brand, with a body that would succeed. */
function everyRoute(prefix: string, brandId: string, key: string): [string, string, unknown?][] {
  const base = `${prefix}/${brandId}`;
  return [
    ['GET', `${base}/fields`],
    ['GET', `${base}/fields/ticket`],
    ['POST', `${base}/fields/ticket`, { key: `never${++seq}`, label: 'Never', type: 'text' }],
    ['POST', `${base}/fields/ticket/reorder`, { keys: [key] }],
    ['PATCH', `${base}/fields/ticket/${key}`, { label: 'Hijacked' }],
    ['DELETE', `${base}/fields/ticket/${key}`],
    ['GET', `${base}/schema`],
    ['PUT', `${base}/schema`, { schema: { type: 'object' } }],
    ['DELETE', `${base}/schema`],
  ];
}

for (const prefix of PREFIXES) {
  t.test(`${prefix}: field definitions per entity type: create, list, patch, delete`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `${prefix}/${brand.id}/fields`;
    const empty = await owner.live('GET', base);
    t.equal(empty.status, 200);
    t.same(empty.body, { ticket: [], customer: [], contact: [], company: [] });

    const created = await owner.live('POST', `${base}/ticket`, {
      key: 'plan',
      label: 'Plan',
      type: 'select',
      required: true,
      options: ['free', 'pro'],
      defaultValue: 'free',
      description: 'Customer plan',
      placeholder: 'Pick one',
      showInTable: false,
      source: 'api',
    });
    t.equal(created.status, 201);
    t.match(created.body, {
      object: 'field_definition',
      brandId: brand.id,
      entityType: 'ticket',
      key: 'plan',
      label: 'Plan',
      type: 'select',
      required: true,
      options: ['free', 'pro'],
      defaultValue: 'free',
      description: 'Customer plan',
      placeholder: 'Pick one',
      visible: true,
      showOnCreate: true,
      showInTable: false,
      showInDetail: true,
      sortOrder: 0,
      source: 'api',
    });
    t.match(created.body.id, /^fld_[0-9a-z]{26}$/);
    t.ok(!Number.isNaN(Date.parse(created.body.createdAt)));
    const second = await owner.live('POST', `${base}/ticket`, { key: 'orderId', label: 'Order', type: 'number' });
    t.match(second.body, { key: 'orderId', type: 'number', required: false, options: null, defaultValue: null, sortOrder: 1 });
    const viaContact = await owner.live('POST', `${base}/contact`, { key: 'vip', label: 'VIP', type: 'boolean' });
    t.equal(viaContact.status, 201);
    t.equal(viaContact.body.entityType, 'customer', 'contact is an alias of customer');
    const company = await owner.live('POST', `${base}/company`, { key: 'tier', label: 'Tier', type: 'text' });
    t.equal(company.status, 201);

    const ticketList = await owner.live('GET', `${base}/ticket`);
    t.equal(ticketList.status, 200);
    t.same(keysOf(ticketList), ['plan', 'orderId'], 'a bare array in sortOrder');
    t.same(keysOf(await owner.live('GET', `${base}/customer`)), ['vip']);
    t.same(keysOf(await owner.live('GET', `${base}/contact`)), ['vip']);
    const all = (await owner.live('GET', base)).body;
    t.same(
      all.ticket.map((f: { key: string }) => f.key),
      ['plan', 'orderId'],
    );
    t.same(
      all.customer.map((f: { key: string }) => f.key),
      ['vip'],
    );
    t.same(all.contact, all.customer, 'contact repeats customer');
    t.same(
      all.company.map((f: { key: string }) => f.key),
      ['tier'],
    );

    const patched = await owner.live('PATCH', `${base}/ticket/plan`, { label: 'Plan name', options: ['free', 'pro', 'team'], showInTable: true, required: false });
    t.equal(patched.status, 200);
    t.match(patched.body, { key: 'plan', label: 'Plan name', options: ['free', 'pro', 'team'], showInTable: true, required: false, defaultValue: 'free' });
    const toText = await owner.live('PATCH', `${base}/ticket/plan`, { type: 'text' });
    t.equal(toText.status, 200);
    t.match(toText.body, { type: 'text', options: null }, 'leaving select drops the options');
    const patchedContact = await owner.live('PATCH', `${base}/contact/vip`, { visible: false });
    t.equal(patchedContact.body.visible, false);

    const deleted = await owner.live('DELETE', `${base}/ticket/plan`);
    t.equal(deleted.status, 200);
    t.equal(deleted.body.key, 'plan', 'DELETE returns the definition');
    assertNotFound(t, await owner.live('DELETE', `${base}/ticket/plan`), 'second delete');
    assertNotFound(t, await owner.live('PATCH', `${base}/ticket/plan`, { label: 'Ghost' }), 'patch after delete');
    t.same(keysOf(await owner.live('GET', `${base}/ticket`)), ['orderId']);
    t.equal(await fieldRows(brand.id), 3);
  });

  t.test(`${prefix}: ticket schema: GET, PUT, clear`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const url = `${prefix}/${brand.id}/schema`;
    const initial = await owner.live('GET', url);
    t.equal(initial.status, 200);
    t.same(initial.body, { brandId: brand.id, schema: null, ticketSchema: null, generatedSchema: null, effectiveSchema: null });

    const hand = { type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] };
    const put = await owner.live('PUT', url, { schema: hand });
    t.equal(put.status, 200);
    t.same(put.body.schema, hand);
    t.same(put.body.ticketSchema, hand);
    t.same(put.body.effectiveSchema, hand, 'without fields the effective schema is the hand-written one');
    t.same((await owner.live('GET', `/v1/brands/${brand.id}`)).body.ticketSchema, hand, 'stored on the brand');

    const bare = { type: 'object', properties: { sku: { type: 'string' } } };
    t.same((await owner.live('PUT', url, bare)).body.schema, bare, 'a bare JSON Schema is accepted');
    t.same((await owner.live('PUT', url, { ticketSchema: hand })).body.schema, hand, '{ ticketSchema } is accepted');

    await makeField(owner.live, brand.id, 'ticket', { key: 'tier', type: 'select', options: ['a', 'b'], required: true });
    const withFields = (await owner.live('GET', url)).body;
    t.same(withFields.generatedSchema, { type: 'object', properties: { tier: { type: 'string', enum: ['a', 'b'] } }, required: ['tier'] });
    t.same(withFields.effectiveSchema, { allOf: [hand, withFields.generatedSchema] }, 'both apply');
    await makeField(owner.live, brand.id, 'customer', { key: 'ignored' });
    t.same((await owner.live('GET', url)).body.generatedSchema, withFields.generatedSchema, 'customer fields are not part of the ticket schema');

    const cleared = await owner.live('PUT', url, { schema: null });
    t.equal(cleared.status, 200);
    t.equal(cleared.body.schema, null);
    t.same(cleared.body.effectiveSchema, withFields.generatedSchema, 'the fields still apply');
    await owner.live('PUT', url, hand);
    const deleted = await owner.live('DELETE', url);
    t.equal(deleted.status, 200);
    t.equal(deleted.body.schema, null, 'DELETE clears too');
    t.equal((await owner.live('GET', `/v1/brands/${brand.id}`)).body.ticketSchema, null);
  });
}

t.test('schema: what is not a JSON Schema is 400 invalid_ticket_schema and changes nothing', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const url = `/v1/brands/${brand.id}/schema`;
  const hand = { type: 'object' };
  await owner.live('PUT', url, { schema: hand });
  for (const [label, body] of [
    ['type is a number', { type: 5 }],
    ['required is not an array', { schema: { required: 'x' } }],
    ['properties is a string', { properties: 'nope' }],
    ['minimum is a string', { schema: { minimum: 'one' } }],
    ['schema is a number', { schema: 5 }],
    ['schema is an array', { schema: [1] }],
  ] as [string, unknown][]) {
    const res = await owner.live('PUT', url, body);
    assertErrorShape(t, res, 400, 'invalid_ticket_schema');
    t.pass(label);
  }
  const res = await owner.live('PUT', url, '[1,2]');
  t.equal(res.status, 400, 'an array body is refused');
  assertErrorShape(t, await owner.live('PUT', url), 400, 'validation_failed');
  t.equal((await owner.live('PUT', url, 'null')).status, 400, 'a bare null is refused: it looks like a missing body');
  t.same((await owner.live('GET', url)).body.schema, hand, 'the stored schema did not change');
});

t.test('bad field input is 400 naming the field, and creates nothing', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}/fields`;
  const good = { key: 'orderId', label: 'Order', type: 'text' };
  const cases: [string, Record<string, unknown>, string][] = [
    ['key with a space', { ...good, key: 'order id' }, 'key'],
    ['key starting with a digit', { ...good, key: '1order' }, 'key'],
    ['key with a hyphen', { ...good, key: 'order-id' }, 'key'],
    ['key too long', { ...good, key: 'k'.repeat(51) }, 'key'],
    ['missing key', { label: 'Order', type: 'text' }, 'key'],
    ['missing label', { key: 'orderId', type: 'text' }, 'label'],
    ['unknown type', { ...good, type: 'email' }, 'type'],
    ['unknown field', { ...good, hidden: true }, 'hidden'],
    ['select without options', { ...good, type: 'select' }, 'options'],
    ['multiselect with empty options', { ...good, type: 'multiselect', options: [] }, 'options'],
    ['options on a text field', { ...good, options: ['a'] }, 'options'],
    ['duplicate options', { ...good, type: 'select', options: ['a', 'a'] }, 'options'],
    ['default not among the options', { ...good, type: 'select', options: ['a'], defaultValue: 'b' }, 'defaultValue'],
    ['default of the wrong type', { ...good, type: 'number', defaultValue: 'ten' }, 'defaultValue'],
  ];
  for (const [label, body, field] of cases) {
    const res = await owner.live('POST', `${base}/ticket`, body);
    t.equal(res.status, 400, `${label}: 400`);
    t.ok(['validation_failed'].includes(res.body.code), `${label}: validation_failed`);
    t.ok(fieldsNamed(res).includes(field), `${label}: names ${field} (${fieldsNamed(res).join(', ')})`);
  }
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, good), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('GET', `${base}/user`), 400, 'validation_failed');
  await makeField(owner.live, brand.id, 'ticket', { key: 'plan', type: 'select', options: ['a', 'b'] });
  for (const [label, body, field] of [
    ['empty body', {}, '(body)'],
    ['unknown type', { type: 'email' }, 'type'],
    ['key is not patchable', { key: 'other' }, 'key'],
    ['default outside the options', { defaultValue: 'c' }, 'defaultValue'],
    ['options removed from a select', { options: null }, 'options'],
  ] as [string, Record<string, unknown>, string][]) {
    const res = await owner.live('PATCH', `${base}/ticket/plan`, body);
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(fieldsNamed(res).includes(field), `patch ${label}: names ${field}`);
  }
  t.equal(await fieldRows(brand.id), 1, 'only the one good field exists');
  t.same((await owner.live('GET', `${base}/ticket`)).body[0].options, ['a', 'b'], 'failed patches changed nothing');
});

t.test('keys are unique per brand and entity type: 409 field_key_taken', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other');
  await makeField(owner.live, brand.id, 'ticket', { key: 'orderId' });
  assertErrorShape(t, await owner.live('POST', `/v1/brands/${brand.id}/fields/ticket`, { key: 'orderId', label: 'Again', type: 'number' }), 409, 'field_key_taken');
  await makeField(owner.live, brand.id, 'customer', { key: 'vip' });
  assertErrorShape(t, await owner.live('POST', `/v1/brands/${brand.id}/fields/contact`, { key: 'vip', label: 'Again', type: 'text' }), 409, 'field_key_taken');
  t.equal(
    (await owner.live('POST', `/v1/brands/${brand.id}/fields/company`, { key: 'orderId', label: 'Order', type: 'text' })).status,
    201,
    'another entity type may reuse the key',
  );
  t.equal((await owner.live('POST', `/v1/brands/${other.id}/fields/ticket`, { key: 'orderId', label: 'Order', type: 'text' })).status, 201, 'another brand may reuse the key');
  t.equal((await owner.live('POST', `/v1/brands/${brand.id}/fields/ticket`, { key: 'OrderId', label: 'Order', type: 'text' })).status, 201, 'keys are case-sensitive');
  t.equal(await fieldRows(brand.id), 4);
});

t.test('reorder: every key once, in a new order; anything else is 400 and changes nothing', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}/fields`;
  for (const key of ['a', 'b', 'c']) await makeField(owner.live, brand.id, 'ticket', { key });
  await makeField(owner.live, brand.id, 'customer', { key: 'z' });
  const res = await owner.live('POST', `${base}/ticket/reorder`, { keys: ['c', 'a', 'b'] });
  t.equal(res.status, 200);
  t.same(keysOf(res), ['c', 'a', 'b']);
  t.same(
    res.body.map((f: { sortOrder: number }) => f.sortOrder),
    [0, 1, 2],
  );
  t.same(keysOf(await owner.live('GET', `${base}/ticket`)), ['c', 'a', 'b'], 'the list follows');
  for (const [label, keys] of [
    ['missing one', ['c', 'a']],
    ['a key of another entity type', ['c', 'a', 'b', 'z']],
    ['an unknown key', ['c', 'a', 'x']],
    ['a duplicate', ['c', 'a', 'a']],
  ] as [string, string[]][]) {
    const r = await owner.live('POST', `${base}/ticket/reorder`, { keys });
    assertErrorShape(t, r, 400, 'invalid_reorder');
    t.ok(r.body.errors.length >= 1, `${label}: errors listed`);
  }
  assertErrorShape(t, await owner.live('POST', `${base}/ticket/reorder`, { keys: [] }), 400, 'validation_failed');
  t.same(keysOf(await owner.live('GET', `${base}/ticket`)), ['c', 'a', 'b'], 'failed reorders changed nothing');
  const contacts = await owner.live('POST', `${base}/contact/reorder`, { keys: ['z'] });
  t.equal(contacts.status, 200, 'reorder through the contact alias');
});

t.test('401 without a key, or with a bogus one, on every field and schema route', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const field = await makeField(owner.live, brand.id);
  const bogus = client(app, 'sk_test_' + 'x'.repeat(43));
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of everyRoute(prefix, brand.id, field.key)) {
      assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
      assertErrorShape(t, await bogus(method, url, body), 401, 'invalid_api_key');
    }
  }
  t.equal(await fieldRows(brand.id), 1);
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}/schema`)).body.schema, null, 'schema not set');
});

t.test('another account, and the other mode, get 404 on every field and schema route', async (t) => {
  const owner = await signup(app);
  const stranger = await signup(app);
  const brand = await makeBrand(owner.live);
  const field = await makeField(owner.live, brand.id);
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of everyRoute(prefix, brand.id, field.key)) {
      assertNotFound(t, await stranger.live(method, url, body), `other account: ${method} ${url}`);
      assertNotFound(t, await owner.test(method, url, body), `test key on a live brand: ${method} ${url}`);
    }
  }
  const testBrand = await makeBrand(owner.test, 'Test');
  const testField = await makeField(owner.test, testBrand.id);
  for (const [method, url, body] of everyRoute('/v1/brands', testBrand.id, testField.key)) {
    assertNotFound(t, await owner.live(method, url, body), `live key on a test brand: ${method} ${url}`);
  }
  t.equal(await fieldRows(brand.id), 1);
  t.equal(await fieldRows(testBrand.id), 1);
  const kept = (await owner.live('GET', `/v1/brands/${brand.id}/fields/ticket`)).body[0];
  t.equal(kept.label, 'Order number', 'not renamed');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}/schema`)).body.schema, null, 'schema not set');
});

t.test('a field of another brand is 404 through this brand; a key limited to another brand gets 404', async (t) => {
  const owner = await signup(app);
  const a = await makeBrand(owner.live, 'A');
  const b = await makeBrand(owner.live, 'B');
  const inB = await makeField(owner.live, b.id, 'ticket', { key: 'onlyInB' });
  assertNotFound(t, await owner.live('PATCH', `/v1/brands/${a.id}/fields/ticket/onlyInB`, { label: 'Moved' }), 'PATCH through brand a');
  assertNotFound(t, await owner.live('DELETE', `/v1/brands/${a.id}/fields/ticket/onlyInB`), 'DELETE through brand a');
  assertNotFound(t, await owner.live('PATCH', `/v1/brands/${b.id}/fields/company/onlyInB`, { label: 'Moved' }), 'wrong entity type');
  assertErrorShape(t, await owner.live('POST', `/v1/brands/${a.id}/fields/ticket/reorder`, { keys: ['onlyInB'] }), 400, 'invalid_reorder');

  const key = await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'A only', brandIds: [a.id] });
  const limited = client(app, key.body.key);
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of everyRoute(prefix, b.id, inB.key)) {
      assertNotFound(t, await limited(method, url, body), `limited key: ${method} ${url}`);
    }
  }
  t.equal((await limited('POST', `/v1/brands/${a.id}/fields/ticket`, { key: 'mine', label: 'Mine', type: 'text' })).status, 201, 'the key works on its own brand');
  t.equal((await limited('PUT', `/v1/brands/${a.id}/schema`, { schema: { type: 'object' } })).status, 200);
  t.equal(await fieldRows(b.id), 1);
  t.equal((await owner.live('GET', `/v1/brands/${b.id}/fields/ticket`)).body[0].label, 'Order number', 'untouched');
});

t.test('brand delete: the preview counts field definitions, confirm removes them', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  await makeField(owner.live, brand.id, 'ticket');
  await makeField(owner.live, brand.id, 'customer');
  await makeField(owner.live, brand.id, 'company');
  const preview = await owner.live('DELETE', `/v1/brands/${brand.id}`);
  t.equal(preview.body.fieldCount, 3);
  t.equal(preview.body.statusCount, 0);
  t.equal((await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=true`)).body.fieldCount, 3);
  t.equal(await fieldRows(brand.id), 0, 'cascaded');
});

t.test('fields and schema appear in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  for (const p of [
    '/v1/brands/{brandId}/fields',
    '/v1/brands/{brandId}/fields/{entityType}',
    '/v1/brands/{brandId}/fields/{entityType}/reorder',
    '/v1/brands/{brandId}/fields/{entityType}/{key}',
    '/v1/brands/{brandId}/schema',
    '/v1/workspaces/{brandId}/schema',
  ]) {
    t.ok(doc.paths[p], `${p} is documented`);
  }
  t.ok(doc.paths['/v1/brands/{brandId}/schema'].put, 'PUT /schema documented');
});
