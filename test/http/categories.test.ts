import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, type Signup, signup, testApp } from '../helpers/app.js';

// Every test signs up its own account: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const PREFIXES = ['/v1/brands', '/v1/workspaces'] as const;
const CAT_ID = /^cat_[0-9a-z]{26}$/;

type Call = Signup['live'];

let seq = 0;

async function makeCategory(call: Call, brandId: string, body: Record<string, unknown> = {}) {
  const res = await call('POST', `/v1/brands/${brandId}/categories`, { name: `Category ${++seq}`, ...body });
  if (res.status !== 201) throw new Error(`category create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; name: string; sortOrder: number };
}

/** Every category route, with a valid body, for one brand and category. */
function everyRoute(prefix: string, brandId: string, categoryId: string): [string, string, unknown][] {
  const base = `${prefix}/${brandId}/categories`;
  return [
    ['GET', base, undefined],
    ['POST', base, { name: 'Fresh name' }],
    ['GET', `${base}/stats`, undefined],
    ['POST', `${base}/reorder`, { categoryIds: [categoryId] }],
    ['GET', `${base}/${categoryId}`, undefined],
    ['PATCH', `${base}/${categoryId}`, { name: 'Renamed' }],
    ['DELETE', `${base}/${categoryId}`, undefined],
  ];
}

const categoryRows = async (brandId: string) => Number((await db('categories').where({ brandId }).count({ n: '*' }))[0]!.n);

for (const prefix of PREFIXES) {
  t.test(`${prefix}: create, list, get, update, delete`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `${prefix}/${brand.id}/categories`;

    const first = await owner.live('POST', base, { name: '  Billing  ', color: '#FF0000', description: 'Money questions' });
    t.equal(first.status, 201);
    t.match(first.body.id, CAT_ID, 'cat_ id');
    t.equal(first.body.object, 'category');
    t.equal(first.body.brandId, brand.id);
    t.equal(first.body.name, 'Billing', 'name is trimmed');
    t.equal(first.body.color, '#FF0000');
    t.equal(first.body.description, 'Money questions');
    t.equal(first.body.sortOrder, 0, 'first category sorts first');
    t.ok(!Number.isNaN(Date.parse(first.body.createdAt)));
    t.ok(!Number.isNaN(Date.parse(first.body.updatedAt)));

    const second = await owner.live('POST', base, { name: 'Bugs' });
    t.equal(second.status, 201);
    t.equal(second.body.color, '#6b7280', 'default colour');
    t.equal(second.body.description, null);
    t.equal(second.body.sortOrder, 1, 'new categories go last');

    const nullColor = await owner.live('POST', base, { name: 'Other', color: null, sortOrder: 0 });
    t.equal(nullColor.status, 201);
    t.equal(nullColor.body.color, '#6b7280', 'null colour means the default');

    const listed = await owner.live('GET', base);
    t.equal(listed.status, 200);
    t.ok(Array.isArray(listed.body), 'bare array');
    t.same(
      listed.body.map((c: { id: string }) => c.id),
      [first.body.id, nullColor.body.id, second.body.id],
      'by sortOrder, then age',
    );

    const got = await owner.live('GET', `${base}/${first.body.id}`);
    t.equal(got.status, 200);
    t.same(got.body, first.body, 'get returns what create returned');

    const patched = await owner.live('PATCH', `${base}/${first.body.id}`, { name: 'Payments', color: '#00ff00', description: null });
    t.equal(patched.status, 200);
    t.equal(patched.body.name, 'Payments');
    t.equal(patched.body.color, '#00ff00');
    t.equal(patched.body.description, null);
    t.equal(patched.body.createdAt, first.body.createdAt);
    t.ok(Date.parse(patched.body.updatedAt) >= Date.parse(first.body.updatedAt));
    t.equal((await owner.live('GET', `${base}/${first.body.id}`)).body.name, 'Payments', 'the change is stored');

    const renamedSameCase = await owner.live('PATCH', `${base}/${first.body.id}`, { name: 'PAYMENTS' });
    t.equal(renamedSameCase.status, 200, 'renaming a category to another case of its own name is fine');

    const deleted = await owner.live('DELETE', `${base}/${first.body.id}`);
    t.equal(deleted.status, 200);
    t.same(deleted.body, { success: true });
    assertNotFound(t, await owner.live('GET', `${base}/${first.body.id}`), 'deleted category');
    assertNotFound(t, await owner.live('DELETE', `${base}/${first.body.id}`), 'deleted twice');
    t.same(
      (await owner.live('GET', base)).body.map((c: { id: string }) => c.id),
      [nullColor.body.id, second.body.id],
    );
  });
}

t.test('bad input is 400 with the field named', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}/categories`;
  const cat = await makeCategory(owner.live, brand.id);
  const bad: [string, Record<string, unknown>, string][] = [
    ['colour word', { name: 'A', color: 'red' }, 'color'],
    ['colour with a non-hex digit', { name: 'A', color: '#12345g' }, 'color'],
    ['short colour', { name: 'A', color: '#fff' }, 'color'],
    ['empty name', { name: '' }, 'name'],
    ['blank name', { name: '   ' }, 'name'],
    ['too long name', { name: 'x'.repeat(101) }, 'name'],
    ['missing name', { color: '#123456' }, 'name'],
    ['unknown field', { name: 'A', icon: 'star' }, 'icon'],
    ['number as name', { name: 123 }, 'name'],
    ['string sortOrder', { name: 'A', sortOrder: '1' }, 'sortOrder'],
    ['negative sortOrder', { name: 'A', sortOrder: -1 }, 'sortOrder'],
    ['too long description', { name: 'A', description: 'x'.repeat(1001) }, 'description'],
  ];
  for (const [label, body, field] of bad) {
    const res = await owner.live('POST', base, body);
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(
      res.body.errors.some((e: { field: string }) => e.field === field),
      `POST ${label}: names ${field}`,
    );
    if (label === 'missing name') continue; // optional on PATCH
    const patch = await owner.live('PATCH', `${base}/${cat.id}`, body);
    assertErrorShape(t, patch, 400, 'validation_failed');
    t.ok(
      patch.body.errors.some((e: { field: string }) => e.field === field),
      `PATCH ${label}: names ${field}`,
    );
  }
  t.equal((await owner.live('PATCH', `${base}/${cat.id}`, {})).status, 400, 'PATCH with nothing to change');
  t.equal((await owner.live('POST', base, '{"name":')).status, 400, 'malformed JSON');
  t.equal((await owner.live('POST', `${base}/reorder`, { categoryIds: 'a,b' })).status, 400, 'reorder ids must be an array');
  t.equal((await owner.live('POST', `${base}/reorder`, { categoryIds: [cat.id], extra: 1 })).status, 400, 'reorder: unknown field');
  t.equal((await owner.live('POST', `${base}/reorder`, {})).status, 400, 'reorder: categoryIds required');
  t.equal(await categoryRows(brand.id), 1, 'nothing was stored');
  t.equal((await owner.live('GET', `${base}/${cat.id}`)).body.name, cat.name, 'nothing was changed');
});

t.test('names are unique per brand ignoring case: 409 category_name_taken', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other');
  const base = `/v1/brands/${brand.id}/categories`;
  await makeCategory(owner.live, brand.id, { name: 'Billing' });
  const bugs = await makeCategory(owner.live, brand.id, { name: 'Bugs' });

  for (const name of ['Billing', 'billing', 'BILLING', ' bILLing ']) {
    assertErrorShape(t, await owner.live('POST', base, { name }), 409, 'category_name_taken');
  }
  assertErrorShape(t, await owner.live('PATCH', `${base}/${bugs.id}`, { name: 'BILLING' }), 409, 'category_name_taken');
  t.equal((await owner.live('GET', `${base}/${bugs.id}`)).body.name, 'Bugs', 'the failed rename changed nothing');
  t.equal(await categoryRows(brand.id), 2);

  t.equal((await owner.live('POST', `/v1/brands/${other.id}/categories`, { name: 'billing' })).status, 201, 'the same name in another brand is fine');
  const testBrand = await makeBrand(owner.test);
  t.equal((await owner.test('POST', `/v1/brands/${testBrand.id}/categories`, { name: 'Billing' })).status, 201, 'and in test mode');
});

t.test('concurrent creates of one name: one 201, the rest 409', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const names = ['Refunds', 'refunds', 'REFUNDS', 'Refunds', 'rEfunds', 'refundS'];
  const results = await Promise.all(names.map((name) => owner.live('POST', `/v1/brands/${brand.id}/categories`, { name })));
  t.same(results.map((r) => r.status).sort(), [201, 409, 409, 409, 409, 409]);
  for (const r of results.filter((r) => r.status === 409)) t.equal(r.body.code, 'category_name_taken');
  t.equal(await categoryRows(brand.id), 1, 'one row stored');
});

t.test('401 without a key or with a bad key, on every route', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const cat = await makeCategory(owner.live, brand.id);
  const bogus = client(app, 'sk_live_not_a_real_key');
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of everyRoute(prefix, brand.id, cat.id)) {
      assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
      assertErrorShape(t, await bogus(method, url, body), 401, 'invalid_api_key');
    }
  }
  t.equal(await categoryRows(brand.id), 1, 'nothing created');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}/categories/${cat.id}`)).body.name, cat.name, 'nothing changed');
});

t.test('another account, the other mode, and a key limited to another brand all get 404 on every route', async (t) => {
  const owner = await signup(app);
  const intruder = await signup(app);
  const brand = await makeBrand(owner.live);
  const otherBrand = await makeBrand(owner.live, 'Other');
  const cat = await makeCategory(owner.live, brand.id);
  const limitedKey = (await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'other only', brandIds: [otherBrand.id] })).body.key;
  const limited = client(app, limitedKey);
  const callers: [string, Call][] = [
    ['another account', intruder.live],
    ['another account (test)', intruder.test],
    ['test mode of the owner', owner.test],
    ['key of another brand', limited],
  ];
  for (const prefix of PREFIXES) {
    for (const [who, call] of callers) {
      for (const [method, url, body] of everyRoute(prefix, brand.id, cat.id)) {
        assertNotFound(t, await call(method, url, body), `${who}: ${method} ${url}`);
      }
    }
  }
  t.equal(await categoryRows(brand.id), 1, 'nothing created or deleted');
  const still = await owner.live('GET', `/v1/brands/${brand.id}/categories/${cat.id}`);
  t.equal(still.body.name, cat.name, 'nothing renamed');
  t.equal(still.body.sortOrder, cat.sortOrder);

  // The limited key does work on its own brand.
  t.equal((await limited('POST', `/v1/workspaces/${otherBrand.id}/categories`, { name: 'Mine' })).status, 201, 'limited key works on its brand');
  t.equal((await limited('GET', `/v1/brands/${otherBrand.id}/categories`)).body.length, 1);
});

t.test("another brand's category id is 404 under this brand, also inside reorder", async (t) => {
  const owner = await signup(app);
  const a = await makeBrand(owner.live, 'A');
  const b = await makeBrand(owner.live, 'B');
  const catA = await makeCategory(owner.live, a.id);
  const catB = await makeCategory(owner.live, b.id);
  for (const prefix of PREFIXES) {
    const base = `${prefix}/${a.id}/categories`;
    assertNotFound(t, await owner.live('GET', `${base}/${catB.id}`), 'GET');
    assertNotFound(t, await owner.live('PATCH', `${base}/${catB.id}`, { name: 'Hijacked' }), 'PATCH');
    assertNotFound(t, await owner.live('DELETE', `${base}/${catB.id}`), 'DELETE');
    assertNotFound(t, await owner.live('POST', `${base}/reorder`, { categoryIds: [catA.id, catB.id] }), 'reorder with a foreign id');
    assertNotFound(t, await owner.live('POST', `${base}/reorder`, { categoryIds: [catB.id] }), 'reorder with only a foreign id');
    assertNotFound(t, await owner.live('GET', `${base}/cat_doesnotexist`), 'unknown id');
  }
  const stillB = await owner.live('GET', `/v1/brands/${b.id}/categories/${catB.id}`);
  t.equal(stillB.status, 200);
  t.equal(stillB.body.name, catB.name, 'brand B category untouched');
});

t.test("reorder: exactly the brand's categories, else 400; returns the new order", async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/workspaces/${brand.id}/categories`;
  t.same((await owner.live('POST', `${base}/reorder`, { categoryIds: [] })).body, [], 'an empty brand reorders to an empty list');
  const [c1, c2, c3] = [await makeCategory(owner.live, brand.id), await makeCategory(owner.live, brand.id), await makeCategory(owner.live, brand.id)];

  const res = await owner.live('POST', `${base}/reorder`, { categoryIds: [c3!.id, c1!.id, c2!.id] });
  t.equal(res.status, 200);
  t.same(
    res.body.map((c: { id: string }) => c.id),
    [c3!.id, c1!.id, c2!.id],
    'the reordered list',
  );
  t.same(
    res.body.map((c: { sortOrder: number }) => c.sortOrder),
    [0, 1, 2],
  );
  t.same(
    (await owner.live('GET', base)).body.map((c: { id: string }) => c.id),
    [c3!.id, c1!.id, c2!.id],
    'list follows the new order',
  );

  const before = (await owner.live('GET', base)).body;
  assertErrorShape(t, await owner.live('POST', `${base}/reorder`, { categoryIds: [c1!.id, c2!.id] }), 400, 'invalid_reorder');
  assertErrorShape(t, await owner.live('POST', `${base}/reorder`, { categoryIds: [c1!.id, c2!.id, c3!.id, c1!.id] }), 400, 'invalid_reorder');
  assertErrorShape(t, await owner.live('POST', `${base}/reorder`, { categoryIds: [c1!.id, c1!.id, c2!.id] }), 400, 'invalid_reorder');
  assertErrorShape(t, await owner.live('POST', `${base}/reorder`, { categoryIds: [] }), 400, 'invalid_reorder');
  assertNotFound(t, await owner.live('POST', `${base}/reorder`, { categoryIds: [c1!.id, c2!.id, c3!.id, 'cat_unknown'] }), 'an extra unknown id');
  t.same((await owner.live('GET', base)).body, before, 'failed reorders changed nothing');
});

t.test('stats list every category with ticketCount 0', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other');
  for (const prefix of PREFIXES) {
    t.same((await owner.live('GET', `${prefix}/${brand.id}/categories/stats`)).body, {}, `${prefix}: no categories, empty stats`);
  }
  const c1 = await makeCategory(owner.live, brand.id, { color: '#111111' });
  const c2 = await makeCategory(owner.live, brand.id);
  await makeCategory(owner.live, other.id);
  for (const prefix of PREFIXES) {
    const res = await owner.live('GET', `${prefix}/${brand.id}/categories/stats`);
    t.equal(res.status, 200);
    t.same(Object.keys(res.body).sort(), [c1.id, c2.id].sort(), "exactly this brand's categories");
    t.equal(res.body[c1.id].ticketCount, 0);
    t.equal(res.body[c2.id].ticketCount, 0);
    t.equal(res.body[c1.id].name, c1.name);
    t.equal(res.body[c1.id].color, '#111111');
  }
});

t.test('brand delete preview counts categories; confirm removes them', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const keep = await makeBrand(owner.live, 'Keep');
  await makeCategory(owner.live, brand.id);
  await makeCategory(owner.live, brand.id);
  await makeCategory(owner.live, keep.id);
  await owner.live('POST', `/v1/brands/${brand.id}/tags`, { name: 'vip' });

  const preview = await owner.live('DELETE', `/v1/brands/${brand.id}`);
  t.equal(preview.status, 200);
  t.equal(preview.body.deleted, false);
  t.equal(preview.body.categoryCount, 2);
  t.equal(preview.body.tagCount, 1);
  t.equal(await categoryRows(brand.id), 2, 'preview deletes nothing');

  const confirmed = await owner.live('DELETE', `/v1/workspaces/${brand.id}?confirm=true`);
  t.equal(confirmed.status, 200);
  t.equal(confirmed.body.deleted, true);
  t.equal(confirmed.body.categoryCount, 2);
  t.equal(await categoryRows(brand.id), 0, 'categories went with the brand');
  t.equal(await categoryRows(keep.id), 1, 'other brands keep theirs');
  assertNotFound(t, await owner.live('GET', `/v1/brands/${brand.id}/categories`), 'deleted brand');
});

t.test('the routes are in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  for (const prefix of PREFIXES) {
    for (const path of ['/categories', '/categories/stats', '/categories/reorder', '/categories/{categoryId}']) {
      t.ok(doc.paths[`${prefix}/{brandId}${path}`], `${prefix}/{brandId}${path}`);
    }
  }
});

t.test('the database refuses a category or tag whose scope differs from its brand (composite FK)', async (t) => {
  const owner = await signup(app);
  const intruder = await signup(app);
  const brand = await makeBrand(owner.live);
  const codeOf = (p: Promise<unknown>) =>
    p.then(
      () => 'inserted',
      (err: { code?: string; nativeError?: { code?: string } }) => err.nativeError?.code ?? err.code,
    );
  const row = (table: string, prefix: string, accountId: string, livemode: boolean) => ({
    id: `${prefix}_${++seq}x`,
    accountId,
    livemode,
    brandId: brand.id,
    name: `n${seq}`,
    color: '#000000',
  });
  for (const [table, prefix] of [
    ['categories', 'cat'],
    ['tags', 'tag'],
  ] as const) {
    t.equal(await codeOf(db(table).insert(row(table, prefix, intruder.accountId, true))), '23503', `${table}: another account's row cannot reference the brand`);
    t.equal(await codeOf(db(table).insert(row(table, prefix, owner.accountId, false))), '23503', `${table}: a test-mode row cannot reference a live brand`);
    t.equal(await codeOf(db(table).insert(row(table, prefix, owner.accountId, true))), 'inserted', `${table}: the brand's own scope is fine`);
  }
});
