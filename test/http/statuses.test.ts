import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, type Reply, type Signup, signup, testApp } from '../helpers/app.js';

// Every test signs up its own account: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const PREFIXES = ['/v1/brands', '/v1/workspaces'] as const;
const SYSTEM = [
  { key: 'open', name: 'Open', color: '#3b82f6' },
  { key: 'pending', name: 'Pending', color: '#f59e0b' },
  { key: 'resolved', name: 'Resolved', color: '#10b981' },
  { key: 'closed', name: 'Closed', color: '#6b7280' },
];

type Call = Signup['live'];
let seq = 0;

async function makeStatus(call: Call, brandId: string, body: Record<string, unknown> = {}) {
  const res = await call('POST', `/v1/brands/${brandId}/statuses`, { key: `custom_${++seq}`, name: 'In progress', color: '#123abc', ...body });
  if (res.status !== 201) throw new Error(`status create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; key: string; name: string; sortOrder: number };
}

const keysOf = (res: Reply) => (res.body as { key: string }[]).map((s) => s.key);
const idsOf = (res: Reply) => (res.body as { id: string }[]).map((s) => s.id);

async function statusRows(brandId: string): Promise<number> {
  const row = await db('statuses').where({ brandId }).count({ n: '*' }).first();
  return Number(row!.n);
}

/** Every status route of a brand, with a body that would succeed. */
function everyRoute(prefix: string, brandId: string, statusId: string): [string, string, unknown?][] {
  const base = `${prefix}/${brandId}/statuses`;
  return [
    ['GET', base],
    ['POST', base, { key: `never_${++seq}`, name: 'Never', color: '#000000' }],
    ['GET', `${base}/stats`],
    ['POST', `${base}/reorder`, { statusIds: [statusId] }],
    ['GET', `${base}/${statusId}`],
    ['PATCH', `${base}/${statusId}`, { name: 'Hijacked' }],
    ['DELETE', `${base}/${statusId}`],
  ];
}

for (const prefix of PREFIXES) {
  t.test(`${prefix}: a new brand has the four system statuses, in order`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const res = await owner.live('GET', `${prefix}/${brand.id}/statuses`);
    t.equal(res.status, 200);
    t.ok(Array.isArray(res.body), 'a bare array');
    t.same(keysOf(res), ['open', 'pending', 'resolved', 'closed']);
    res.body.forEach((s: Record<string, unknown>, i: number) => {
      t.match(s, { ...SYSTEM[i], object: 'status', brandId: brand.id, isSystem: true, isActive: true, sortOrder: i, description: null });
      t.match(s.id, /^st_[0-9a-z]{26}$/);
      t.ok(!Number.isNaN(Date.parse(String(s.createdAt))));
    });
    const one = await owner.live('GET', `${prefix}/${brand.id}/statuses/${res.body[2].id}`);
    t.equal(one.status, 200);
    t.same(one.body, res.body[2], 'GET by id returns the listed status');

    const stats = await owner.live('GET', `${prefix}/${brand.id}/statuses/stats`);
    t.equal(stats.status, 200);
    t.same(idsOf(stats), idsOf(res), 'stats lists the same statuses in the same order');
    for (const s of stats.body) t.equal(s.ticketCount, 0, `${s.key}: ticketCount 0 while there are no tickets`);
    t.match(stats.body[0], { key: 'open', name: 'Open', color: '#3b82f6' }, 'stats carry the status fields');
  });

  t.test(`${prefix}: custom status create, get, patch, delete`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `${prefix}/${brand.id}/statuses`;
    const created = await owner.live('POST', base, { key: 'in_progress', name: 'In progress', color: '#AbCdEf', description: 'Someone is on it' });
    t.equal(created.status, 201);
    t.match(created.body, {
      object: 'status',
      brandId: brand.id,
      key: 'in_progress',
      name: 'In progress',
      color: '#AbCdEf',
      description: 'Someone is on it',
      isSystem: false,
      isActive: true,
      sortOrder: 4,
    });
    const id = created.body.id;
    t.same(keysOf(await owner.live('GET', base)), ['open', 'pending', 'resolved', 'closed', 'in_progress'], 'new statuses go last');
    t.same((await owner.live('GET', `${base}/${id}`)).body, created.body);

    const patched = await owner.live('PATCH', `${base}/${id}`, { name: 'Working', color: '#000000', description: null, isActive: false, sortOrder: 0 });
    t.equal(patched.status, 200);
    t.match(patched.body, { id, key: 'in_progress', name: 'Working', color: '#000000', description: null, isActive: false, sortOrder: 0 });
    t.ok(Date.parse(patched.body.updatedAt) >= Date.parse(created.body.updatedAt), 'updatedAt moves forward');
    t.equal(patched.body.createdAt, created.body.createdAt);
    t.same((await owner.live('GET', `${base}/${id}`)).body, patched.body, 'the change is stored');
    t.same(keysOf(await owner.live('GET', base)), ['open', 'in_progress', 'pending', 'resolved', 'closed'], 'the list follows sortOrder, ties by age');

    const renamed = await owner.live('PATCH', `${base}/${id}`, { key: 'working' });
    t.equal(renamed.status, 200);
    t.equal(renamed.body.key, 'working', 'a custom status may change its key');

    const deleted = await owner.live('DELETE', `${base}/${id}`);
    t.equal(deleted.status, 200);
    t.equal(deleted.body.id, id, 'DELETE returns the deleted status');
    assertNotFound(t, await owner.live('GET', `${base}/${id}`), 'gone');
    assertNotFound(t, await owner.live('DELETE', `${base}/${id}`), 'second delete');
    assertNotFound(t, await owner.live('PATCH', `${base}/${id}`, { name: 'Ghost' }), 'patch after delete');
    t.equal(await statusRows(brand.id), 4, 'only the system statuses remain');
  });
}

t.test('ws_ brand ids reach the same statuses', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const status = await makeStatus(owner.live, brand.id);
  const res = await owner.live('GET', `/v1/workspaces/ws_${brand.id.slice(3)}/statuses/${status.id}`);
  t.equal(res.status, 200);
  t.equal(res.body.id, status.id);
});

t.test('bad input is 400 validation_failed naming the field, and creates nothing', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}/statuses`;
  const good = { key: 'waiting', name: 'Waiting', color: '#00ff00' };
  const cases: [string, Record<string, unknown>, string][] = [
    ['color word', { ...good, color: 'red' }, 'color'],
    ['short hex color', { ...good, color: '#fff' }, 'color'],
    ['color without #', { ...good, color: '00ff00' }, 'color'],
    ['non-hex color', { ...good, color: '#gggggg' }, 'color'],
    ['key with a space', { ...good, key: 'on hold' }, 'key'],
    ['upper-case key', { ...good, key: 'Waiting' }, 'key'],
    ['key with a hyphen', { ...good, key: 'on-hold' }, 'key'],
    ['key too long', { ...good, key: 'k'.repeat(51) }, 'key'],
    ['empty key', { ...good, key: '' }, 'key'],
    ['missing key', { name: 'Waiting', color: '#00ff00' }, 'key'],
    ['missing name', { key: 'waiting', color: '#00ff00' }, 'name'],
    ['empty name', { ...good, name: '' }, 'name'],
    ['missing color', { key: 'waiting', name: 'Waiting' }, 'color'],
    ['unknown field', { ...good, isSystem: true }, 'isSystem'],
    ['number as name', { ...good, name: 5 }, 'name'],
  ];
  for (const [label, body, field] of cases) {
    const res = await owner.live('POST', base, body);
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(
      res.body.errors.some((e: { field: string }) => e.field === field),
      `${label}: names ${field}`,
    );
  }
  const status = await makeStatus(owner.live, brand.id);
  for (const [label, body, field] of [
    ['empty body', {}, '(body)'],
    ['bad color', { color: 'blue' }, 'color'],
    ['bad key', { key: 'Has Space' }, 'key'],
    ['negative sortOrder', { sortOrder: -1 }, 'sortOrder'],
    ['unknown field', { isSystem: true }, 'isSystem'],
  ] as [string, Record<string, unknown>, string][]) {
    const res = await owner.live('PATCH', `${base}/${status.id}`, body);
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(
      res.body.errors.some((e: { field: string }) => e.field === field),
      `patch ${label}: names ${field}`,
    );
  }
  assertErrorShape(t, await owner.live('POST', base, '{"key":'), 400, 'invalid_json');
  t.equal(await statusRows(brand.id), 5, 'nothing but the one good status was created');
  t.equal((await owner.live('GET', `${base}/${status.id}`)).body.color, '#123abc', 'failed patches changed nothing');
});

t.test('keys are unique per brand: 409 status_key_taken, and another brand may reuse them', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other');
  const base = `/v1/brands/${brand.id}/statuses`;
  const first = await makeStatus(owner.live, brand.id, { key: 'waiting' });
  assertErrorShape(t, await owner.live('POST', base, { key: 'waiting', name: 'Again', color: '#111111' }), 409, 'status_key_taken');
  assertErrorShape(t, await owner.live('POST', base, { key: 'open', name: 'Open again', color: '#111111' }), 409, 'status_key_taken');
  const second = await makeStatus(owner.live, brand.id, { key: 'blocked' });
  assertErrorShape(t, await owner.live('PATCH', `${base}/${second.id}`, { key: 'waiting' }), 409, 'status_key_taken');
  t.equal((await owner.live('GET', `${base}/${second.id}`)).body.key, 'blocked', 'the refused rename changed nothing');
  const reused = await owner.live('POST', `/v1/brands/${other.id}/statuses`, { key: 'waiting', name: 'Waiting', color: '#111111' });
  t.equal(reused.status, 201, 'the same key in another brand is fine');
  t.equal(await statusRows(brand.id), 6);
  t.equal(first.key, 'waiting');
});

t.test('system statuses: undeletable (403), key fixed (403), name and color editable', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}/statuses`;
  const listed = (await owner.live('GET', base)).body as { id: string; key: string }[];
  for (const s of listed) {
    assertErrorShape(t, await owner.live('DELETE', `${base}/${s.id}`), 403, 'system_status');
    assertErrorShape(t, await owner.live('PATCH', `${base}/${s.id}`, { key: `${s.key}_x` }), 403, 'system_status');
  }
  const open = listed[0]!;
  const patched = await owner.live('PATCH', `${base}/${open.id}`, { name: 'New', color: '#ff0000', key: 'open' });
  t.equal(patched.status, 200, 'restating the same key is fine');
  t.match(patched.body, { key: 'open', name: 'New', color: '#ff0000', isSystem: true });
  t.same(keysOf(await owner.live('GET', base)), ['open', 'pending', 'resolved', 'closed'], 'all four remain');
});

t.test('reorder: the exact set of ids in a new order; anything else is 400 and changes nothing', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other');
  const base = `/v1/brands/${brand.id}/statuses`;
  await makeStatus(owner.live, brand.id, { key: 'waiting' });
  const before = idsOf(await owner.live('GET', base));
  const reversed = [...before].reverse();
  const res = await owner.live('POST', `${base}/reorder`, { statusIds: reversed });
  t.equal(res.status, 200);
  t.same(idsOf(res), reversed, 'returns the reordered list');
  t.same(
    res.body.map((s: { sortOrder: number }) => s.sortOrder),
    [0, 1, 2, 3, 4],
  );
  t.same(idsOf(await owner.live('GET', `/v1/workspaces/${brand.id}/statuses`)), reversed, 'the list follows');

  const foreign = idsOf(await owner.live('GET', `/v1/brands/${other.id}/statuses`))[0]!;
  const bad: [string, string[]][] = [
    ['missing one', reversed.slice(1)],
    ['an extra id of another brand', [...reversed, foreign]],
    ['an unknown id', [...reversed.slice(1), 'st_nope']],
    ['a duplicate', [...reversed.slice(1), reversed[1]!]],
  ];
  for (const [label, statusIds] of bad) {
    const r = await owner.live('POST', `${base}/reorder`, { statusIds });
    assertErrorShape(t, r, 400, 'invalid_reorder');
    t.ok(r.body.errors.length >= 1, `${label}: errors listed`);
  }
  assertErrorShape(t, await owner.live('POST', `${base}/reorder`, { statusIds: [] }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/reorder`, {}), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/reorder`, { statusIds: reversed, extra: 1 }), 400, 'validation_failed');
  t.same(idsOf(await owner.live('GET', base)), reversed, 'failed reorders changed nothing');
  t.same(idsOf(await owner.live('GET', `/v1/brands/${other.id}/statuses`))[0], foreign, 'the other brand is untouched');
});

t.test('401 without a key, or with a bogus one, on every status route', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const status = await makeStatus(owner.live, brand.id);
  const bogus = client(app, 'sk_live_' + 'x'.repeat(43));
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of everyRoute(prefix, brand.id, status.id)) {
      assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
      assertErrorShape(t, await bogus(method, url, body), 401, 'invalid_api_key');
    }
  }
  t.equal(await statusRows(brand.id), 5, 'nothing created or deleted');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}/statuses/${status.id}`)).body.name, 'In progress', 'not renamed');
});

t.test('another account, and the other mode, get 404 on every status route', async (t) => {
  const owner = await signup(app);
  const stranger = await signup(app);
  const brand = await makeBrand(owner.live);
  const status = await makeStatus(owner.live, brand.id);
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of everyRoute(prefix, brand.id, status.id)) {
      assertNotFound(t, await stranger.live(method, url, body), `other account: ${method} ${url}`);
      assertNotFound(t, await owner.test(method, url, body), `test key on a live brand: ${method} ${url}`);
    }
  }
  // And the other way round: a test-mode brand is invisible to the live key.
  const testBrand = await makeBrand(owner.test, 'Test brand');
  const testStatus = await makeStatus(owner.test, testBrand.id);
  for (const [method, url, body] of everyRoute('/v1/brands', testBrand.id, testStatus.id)) {
    assertNotFound(t, await owner.live(method, url, body), `live key on a test brand: ${method} ${url}`);
  }
  t.equal(await statusRows(brand.id), 5, 'the live brand kept its statuses');
  t.equal(await statusRows(testBrand.id), 5, 'the test brand kept its statuses');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}/statuses/${status.id}`)).body.name, 'In progress', 'not renamed');
});

t.test('a status of another brand is 404 through this brand', async (t) => {
  const owner = await signup(app);
  const a = await makeBrand(owner.live, 'A');
  const b = await makeBrand(owner.live, 'B');
  const inB = await makeStatus(owner.live, b.id);
  const systemOfB = idsOf(await owner.live('GET', `/v1/brands/${b.id}/statuses`))[0]!;
  for (const id of [inB.id, systemOfB, 'st_unknown']) {
    const base = `/v1/brands/${a.id}/statuses/${id}`;
    assertNotFound(t, await owner.live('GET', base), `GET ${id}`);
    assertNotFound(t, await owner.live('PATCH', base, { name: 'Moved' }), `PATCH ${id}`);
    assertNotFound(t, await owner.live('DELETE', base), `DELETE ${id}`);
  }
  const still = await owner.live('GET', `/v1/brands/${b.id}/statuses/${inB.id}`);
  t.equal(still.status, 200);
  t.equal(still.body.name, 'In progress', 'untouched');
  assertNotFound(t, await owner.live('GET', `/v1/brands/br_unknown/statuses`), 'unknown brand');
});

t.test("a key limited to one brand: its statuses work, another brand's are 404", async (t) => {
  const owner = await signup(app);
  const a = await makeBrand(owner.live, 'A');
  const b = await makeBrand(owner.live, 'B');
  const inB = await makeStatus(owner.live, b.id);
  const key = await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'A only', brandIds: [a.id] });
  t.equal(key.status, 201);
  const limited = client(app, key.body.key);
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of everyRoute(prefix, b.id, inB.id)) {
      assertNotFound(t, await limited(method, url, body), `limited key: ${method} ${url}`);
    }
  }
  const mine = await limited('POST', `/v1/brands/${a.id}/statuses`, { key: 'mine', name: 'Mine', color: '#222222' });
  t.equal(mine.status, 201, 'the key works on its own brand');
  t.equal((await limited('GET', `/v1/workspaces/${a.id}/statuses`)).body.length, 5);
  t.equal(await statusRows(b.id), 5, 'brand b kept its statuses');
});

t.test('brand delete: the preview counts custom statuses, confirm removes every status row', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  await makeStatus(owner.live, brand.id);
  await makeStatus(owner.live, brand.id);
  const preview = await owner.live('DELETE', `/v1/brands/${brand.id}`);
  t.equal(preview.status, 200);
  t.equal(preview.body.statusCount, 2, 'custom statuses only');
  t.equal(await statusRows(brand.id), 6);
  const deleted = await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=true`);
  t.equal(deleted.body.statusCount, 2);
  t.equal(await statusRows(brand.id), 0, 'cascaded');
});

t.test('statuses appear in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  for (const p of [
    '/v1/brands/{brandId}/statuses',
    '/v1/brands/{brandId}/statuses/stats',
    '/v1/brands/{brandId}/statuses/reorder',
    '/v1/brands/{brandId}/statuses/{statusId}',
    '/v1/workspaces/{brandId}/statuses/{statusId}',
  ]) {
    t.ok(doc.paths[p], `${p} is documented`);
  }
  t.ok(doc.paths['/v1/brands/{brandId}/statuses/{statusId}'].delete, 'DELETE documented');
});
