import t, { type Test } from 'tap';
import { assertErrorShape, client, signup, testApp, type Reply, type Signup } from '../helpers/app.js';

// Every test signs up its own accounts: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const PREFIXES = ['/v1/brands', '/v1/workspaces'] as const;
const BRAND_ID = /^br_[0-9a-z]{26}$/;

type Call = Signup['live'];

let seq = 0;
/** A slug no other test uses. */
const uniqueSlug = (base = 'brand') => `${base}-${++seq}`;

/** Creates a brand and fails loudly when that does not work. */
async function makeBrand(call: Call, body: Record<string, unknown> = {}, prefix = '/v1/brands') {
  const res = await call('POST', prefix, { name: 'Acme Support', slug: uniqueSlug(), ...body });
  if (res.status !== 201) throw new Error(`brand create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** 404 in exactly the documented error shape, saying nothing about the brand. */
function assertNotFound(t: Test, res: Reply, what = 'brand') {
  assertErrorShape(t, res, 404, 'not_found');
  t.same(Object.keys(res.body ?? {}).sort(), ['code', 'error', 'message', 'requestId', 'statusCode'], `${what}: 404 has only the error fields`);
  t.equal(res.body?.error, 'Not Found');
}

function fieldsOf(res: Reply): string[] {
  return (res.body?.errors ?? []).map((e: { field: string }) => e.field).sort();
}

/**
 * The errors name every expected field and nothing unrelated. A nullable object may also be named
 * itself (its "or null" branch failed), so a parent of an expected field is tolerated.
 */
function assertFields(t: Test, res: Reply, expected: string[], label: string) {
  const got = fieldsOf(res);
  for (const f of expected) t.ok(got.includes(f), `${label}: names ${f}`);
  const unrelated = got.filter((f) => !expected.some((e) => e === f || e.startsWith(`${f}.`)));
  t.same(unrelated, [], `${label}: names no other field`);
}

async function brandRows(accountId: string): Promise<number> {
  const row = await db('brands').where({ accountId }).count({ n: '*' }).first();
  return Number(row!.n);
}

for (const prefix of PREFIXES) {
  t.test(`${prefix}: create with only { name, slug } fills in the defaults`, async (t) => {
    const owner = await signup(app);
    const res = await owner.live('POST', prefix, { name: 'Acme Support', slug: 'acme-support' });
    t.equal(res.status, 201);
    const b = res.body;
    t.match(b.id, BRAND_ID, 'br_ id');
    t.equal(b.object, 'brand');
    t.equal(b.accountId, owner.accountId);
    t.equal(b.livemode, true);
    t.equal(b.name, 'Acme Support');
    t.equal(b.slug, 'acme-support');
    t.equal(b.ticketPrefix, 'ACME', 'prefix derived from the name, upper-case');
    t.match(b.ticketPrefix, /^[A-Z0-9]+$/);
    t.equal(b.nextTicketNumber, 1000);
    t.same(b.portalOrigins, []);
    t.same(b.metadata, {});
    t.same(b.settings, {});
    t.equal(b.ticketSchema, null);
    t.equal(b.url, null);
    t.equal(b.iconUrl, null);
    t.equal(b.inboundEmailEnabled, true);
    t.equal(b.autoresponseEnabled, false);
    t.equal(b.csatEnabled, false);
    t.equal(b.csatType, 'thumbs');
    t.equal(b.slaEnabled, false);
    t.equal(b.slaBusinessHours, null);
    t.ok(!Number.isNaN(Date.parse(b.createdAt)), 'createdAt is a timestamp');
    t.ok(!Number.isNaN(Date.parse(b.updatedAt)), 'updatedAt is a timestamp');

    const got = await owner.live('GET', `${prefix}/${b.id}`);
    t.equal(got.status, 200);
    t.same(got.body, b, 'GET returns what create returned');
    t.equal(await brandRows(owner.accountId), 1, 'one row stored');
  });

  t.test(`${prefix}: CRUD round trip`, async (t) => {
    const owner = await signup(app);
    const created = await owner.live('POST', prefix, { name: 'Round Trip', slug: 'round-trip' });
    t.equal(created.status, 201);
    const id = created.body.id;

    const listed = await owner.live('GET', prefix);
    t.equal(listed.status, 200);
    t.same(
      listed.body.map((b: { id: string }) => b.id),
      [id],
    );

    const patched = await owner.live('PATCH', `${prefix}/${id}`, { name: 'Round Trip Renamed', slug: 'renamed' });
    t.equal(patched.status, 200);
    t.equal(patched.body.name, 'Round Trip Renamed');
    t.equal(patched.body.slug, 'renamed');
    t.equal((await owner.live('GET', `${prefix}/${id}`)).body.slug, 'renamed', 'the change is stored');

    const preview = await owner.live('DELETE', `${prefix}/${id}`);
    t.equal(preview.status, 200);
    t.equal(preview.body.deleted, false);
    t.equal((await owner.live('GET', `${prefix}/${id}`)).status, 200, 'still there after the preview');

    const deleted = await owner.live('DELETE', `${prefix}/${id}?confirm=true`);
    t.equal(deleted.status, 200);
    t.equal(deleted.body.deleted, true);
    assertNotFound(t, await owner.live('GET', `${prefix}/${id}`));
    t.same((await owner.live('GET', prefix)).body, []);
    t.equal(await brandRows(owner.accountId), 0, 'the row is gone');
  });

  t.test(`${prefix}: 401 without a key on every brand route`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const calls: [string, string, unknown?][] = [
      ['GET', prefix],
      ['POST', prefix, { name: 'Nope', slug: 'nope' }],
      ['GET', `${prefix}/${brand.id}`],
      ['PATCH', `${prefix}/${brand.id}`, { name: 'Hijacked' }],
      ['DELETE', `${prefix}/${brand.id}`],
      ['DELETE', `${prefix}/${brand.id}?confirm=true`],
    ];
    for (const [method, url, body] of calls) {
      assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
    }
    const bogus = client(app, 'sk_live_' + 'x'.repeat(43));
    assertErrorShape(t, await bogus('GET', `${prefix}/${brand.id}`), 401, 'invalid_api_key');
    assertErrorShape(t, await bogus('DELETE', `${prefix}/${brand.id}?confirm=true`), 401, 'invalid_api_key');
    const after = await owner.live('GET', `${prefix}/${brand.id}`);
    t.equal(after.status, 200, 'the brand survived');
    t.equal(after.body.name, brand.name, 'and was not renamed');
    t.equal(await brandRows(owner.accountId), 1, 'nothing was created');
  });
}

t.test('create: ticketPrefix is stored upper-case; ticketNumberStart sets nextTicketNumber', async (t) => {
  const owner = await signup(app);
  const b = await makeBrand(owner.live, { ticketPrefix: 'abc', ticketNumberStart: 5000 });
  t.equal(b.ticketPrefix, 'ABC');
  t.equal(b.nextTicketNumber, 5000);
  const mixed = await makeBrand(owner.live, { ticketPrefix: 'Ab9' }, '/v1/workspaces');
  t.equal(mixed.ticketPrefix, 'AB9');
  t.equal(mixed.nextTicketNumber, 1000);
});

t.test('create: with only a name the slug is derived, accents folded', async (t) => {
  const owner = await signup(app);
  const res = await owner.live('POST', '/v1/brands', { name: 'Café Ünïcode Support' });
  t.equal(res.status, 201);
  t.equal(res.body.slug, 'cafe-unicode-support');
  t.equal(res.body.ticketPrefix, 'CAFE');
});

t.test('create: a name without latin letters or digits still gets the fallback ticket prefix', async (t) => {
  const owner = await signup(app);
  const res = await owner.live('POST', '/v1/brands', { name: 'サポート窓口' });
  t.equal(res.status, 201);
  t.equal(res.body.ticketPrefix, 'TKT');
  t.match(res.body.slug, /^[a-z0-9]+(?:-[a-z0-9]+)*$/, 'a usable slug is derived');
  const mixed = await owner.live('POST', '/v1/brands', { name: '** Ölçü 7 **' });
  t.equal(mixed.body.ticketPrefix, 'OLCU', 'punctuation skipped, accents folded');
});

t.test('create: a second brand with the same name gets a suffixed slug, not a 409', async (t) => {
  const owner = await signup(app);
  const first = await owner.live('POST', '/v1/brands', { name: 'Help Desk' });
  const second = await owner.live('POST', '/v1/workspaces', { name: 'Help Desk' });
  t.equal(first.status, 201);
  t.equal(second.status, 201);
  t.equal(first.body.slug, 'help-desk');
  t.match(second.body.slug, /^help-desk-[0-9a-z]+$/);
  t.not(second.body.slug, first.body.slug);
  t.equal(await brandRows(owner.accountId), 2);
});

t.test('create: derived slugs always follow the slug format, even from long names', async (t) => {
  const owner = await signup(app);
  // The hyphen of this name falls exactly where a derived slug is cut before its suffix.
  const name = `${'a'.repeat(42)} ${'b'.repeat(20)}`;
  const slugs: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await owner.live('POST', '/v1/brands', { name });
    t.equal(res.status, 201);
    slugs.push(res.body.slug);
  }
  t.equal(new Set(slugs).size, 3, 'three different slugs');
  for (const slug of slugs) {
    t.match(slug, /^[a-z0-9]+(?:-[a-z0-9]+)*$/, `${slug} has only single hyphens`);
    t.ok(slug.length <= 64, 'and fits the slug length');
  }
  // A derived slug is one the API itself would accept.
  const reuse = await owner.live('POST', '/v1/brands', { name: 'Other', slug: slugs[1] });
  assertErrorShape(t, reuse, 409, 'slug_taken');
});

t.test('slugs are unique per account and mode', async (t) => {
  const owner = await signup(app);
  const other = await signup(app);
  const first = await owner.live('POST', '/v1/brands', { name: 'Shop', slug: 'shop' });
  t.equal(first.status, 201);

  const again = await owner.live('POST', '/v1/brands', { name: 'Shop Again', slug: 'shop' });
  assertErrorShape(t, again, 409, 'slug_taken');
  t.match(again.body.message, /shop/);
  const viaAlias = await owner.live('POST', '/v1/workspaces', { name: 'Shop Again', slug: 'shop' });
  assertErrorShape(t, viaAlias, 409, 'slug_taken');
  t.equal(await brandRows(owner.accountId), 1, 'no second brand');

  const elsewhere = await other.live('POST', '/v1/brands', { name: 'Shop', slug: 'shop' });
  t.equal(elsewhere.status, 201, 'another account may use the slug');
  t.equal(elsewhere.body.accountId, other.accountId);

  const testMode = await owner.test('POST', '/v1/brands', { name: 'Shop', slug: 'shop' });
  t.equal(testMode.status, 201, 'test mode is a separate scope');
  t.equal(testMode.body.livemode, false);
  t.equal(testMode.body.accountId, owner.accountId);
  const testAgain = await owner.test('POST', '/v1/brands', { name: 'Shop', slug: 'shop' });
  assertErrorShape(t, testAgain, 409, 'slug_taken');
});

t.test('8 concurrent creates with the same slug: exactly one wins', async (t) => {
  const owner = await signup(app);
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => owner.live('POST', PREFIXES[i % 2]!, { name: `Race ${i}`, slug: 'race' })));
  const statuses = results.map((r) => r.status).sort();
  t.same(statuses, [201, 409, 409, 409, 409, 409, 409, 409]);
  for (const r of results.filter((r) => r.status === 409)) t.equal(r.body.code, 'slug_taken');
  t.equal(await brandRows(owner.accountId), 1, 'one row');
  const listed = await owner.live('GET', '/v1/brands');
  t.equal(listed.body.length, 1);
  t.equal(listed.body[0].slug, 'race');
});

t.test("list: bare array, oldest first, only the caller's brands of the caller's mode", async (t) => {
  const owner = await signup(app);
  const other = await signup(app);
  const created = [];
  for (const name of ['First', 'Second', 'Third']) created.push(await makeBrand(owner.live, { name }));
  await makeBrand(owner.test, { name: 'Test mode brand' });
  await makeBrand(other.live, { name: 'Foreign brand' });

  for (const prefix of PREFIXES) {
    const res = await owner.live('GET', prefix);
    t.equal(res.status, 200);
    t.ok(Array.isArray(res.body), 'bare array');
    t.same(
      res.body.map((b: { name: string }) => b.name),
      ['First', 'Second', 'Third'],
      `${prefix}: oldest first`,
    );
    t.same(
      res.body.map((b: { id: string }) => b.id),
      created.map((b) => b.id),
    );
    t.ok(
      res.body.every((b: { accountId: string; livemode: boolean }) => b.accountId === owner.accountId && b.livemode),
      'all live, all mine',
    );
    const times = res.body.map((b: { createdAt: string }) => Date.parse(b.createdAt));
    t.same(
      times,
      [...times].sort((a, b) => a - b),
      'createdAt ascending',
    );
  }
  const testList = await owner.test('GET', '/v1/workspaces');
  t.same(
    testList.body.map((b: { name: string }) => b.name),
    ['Test mode brand'],
  );
  t.equal(testList.body[0].livemode, false);
  const otherList = await other.live('GET', '/v1/brands');
  t.same(
    otherList.body.map((b: { name: string }) => b.name),
    ['Foreign brand'],
  );
  t.same((await other.test('GET', '/v1/brands')).body, [], 'empty list is []');
});

t.test('get and patch accept ws_ as an alias of br_', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const alias = `ws_${brand.id.slice(3)}`;
  for (const prefix of PREFIXES) {
    const got = await owner.live('GET', `${prefix}/${alias}`);
    t.equal(got.status, 200, `${prefix} GET by ws_`);
    t.equal(got.body.id, brand.id, 'answers with the br_ id');
  }
  const patched = await owner.live('PATCH', `/v1/workspaces/${alias}`, { name: 'Via Alias' });
  t.equal(patched.status, 200);
  t.equal(patched.body.id, brand.id);
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}`)).body.name, 'Via Alias');
  assertNotFound(t, await owner.live('GET', `/v1/brands/ws_${'0'.repeat(26)}`), 'unknown ws_ id');
  assertNotFound(t, await owner.live('GET', `/v1/brands/xx_${brand.id.slice(3)}`), 'other prefix');
});

t.test('PATCH: partial updates of every settings group', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live, { name: 'Settings' });
  const id = brand.id;

  const changes: Record<string, unknown>[] = [
    { name: 'Settings Renamed' },
    { url: 'https://acme.example.com', iconUrl: 'http://cdn.example.com/icon.png' },
    { autoresponseEnabled: true, autoresponseSubject: 'We got ticket {{ticketNumber}}', autoresponseBody: 'Thanks for writing to {{brandName}}.' },
    { csatEnabled: true, csatType: 'scale10', csatDelayMinutes: 240, csatEmailSubject: 'How did we do?', csatEmailBody: 'Rate {{ticketTitle}}' },
    { slaEnabled: true, slaDefaultHours: 24, slaByPriority: { urgent: 4, high: 24, normal: 72, low: 168 }, slaNotifyOverdue: true },
    { slaBusinessHoursOnly: true, slaBusinessHours: { start: '09:00', end: '17:30', days: [1, 2, 3, 4, 5], timezone: 'Europe/Berlin' } },
    { portalOrigins: ['https://app.example.com', 'http://localhost:3000'] },
    { metadata: { plan: 'gold', seats: 12, nested: { a: [1, 2] } } },
    { fromName: 'Acme Help', fromEmail: 'help@acme.example.com' },
    { ticketPrefix: 'hlp' },
  ];
  let expected = { ...brand };
  for (const change of changes) {
    const res = await owner.live('PATCH', `/v1/brands/${id}`, change);
    t.equal(res.status, 200, `PATCH ${Object.keys(change).join(', ')}`);
    expected = { ...expected, ...change, ...(change.ticketPrefix ? { ticketPrefix: String(change.ticketPrefix).toUpperCase() } : {}) };
    const { updatedAt: _u, ...rest } = res.body;
    const { updatedAt: _e, ...want } = expected;
    t.same(rest, want, 'only the sent fields changed');
  }
  const stored = await owner.live('GET', `/v1/workspaces/${id}`);
  const { updatedAt: _s, ...storedRest } = stored.body;
  const { updatedAt: _x, ...wantRest } = expected;
  t.same(storedRest, wantRest, 'GET returns every change');
  t.equal(stored.body.ticketPrefix, 'HLP');
  t.same(stored.body.slaBusinessHours, { start: '09:00', end: '17:30', days: [1, 2, 3, 4, 5], timezone: 'Europe/Berlin' });
  t.same(stored.body.portalOrigins, ['https://app.example.com', 'http://localhost:3000']);
});

t.test('PATCH: SLA hours are kept exactly, or refused with 400 when fractional or out of range', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const whole = await owner.live('PATCH', `/v1/brands/${brand.id}`, { slaDefaultHours: 36, slaByPriority: { urgent: 0.5, low: 168 } });
  t.equal(whole.status, 200);
  t.equal(whole.body.slaDefaultHours, 36);
  t.same(whole.body.slaByPriority, { urgent: 0.5, low: 168 }, 'fractional per-priority hours are kept');
  // slaDefaultHours is whole hours: 1.5 is refused, naming the field, and nothing changes.
  const fractional = await owner.live('PATCH', `/v1/brands/${brand.id}`, { slaDefaultHours: 1.5 });
  assertErrorShape(t, fractional, 400, 'validation_failed');
  t.same(fieldsOf(fractional), ['slaDefaultHours']);
  const huge = await owner.live('PATCH', `/v1/brands/${brand.id}`, { slaDefaultHours: 10_000_000_000, slaByPriority: { urgent: 1e12 } });
  assertErrorShape(t, huge, 400, 'validation_failed');
  t.same(fieldsOf(huge).sort(), ['slaByPriority.urgent', 'slaDefaultHours']);
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}`)).body.slaDefaultHours, 36, 'unchanged');
  const negative = await owner.live('PATCH', `/v1/brands/${brand.id}`, { slaDefaultHours: -1 });
  assertErrorShape(t, negative, 400, 'validation_failed');
});

t.test('PATCH: null clears nullable fields', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live, {
    url: 'https://acme.example.com',
    iconUrl: 'https://acme.example.com/i.png',
    fromName: 'Acme',
    fromEmail: 'a@acme.example.com',
    autoresponseSubject: 'S',
    autoresponseBody: 'B',
    csatEmailSubject: 'CS',
    csatEmailBody: 'CB',
    slaDefaultHours: 8,
    slaByPriority: { high: 2 },
    slaBusinessHours: { start: '08:00', end: '16:00', days: [1], timezone: 'UTC' },
    ticketSchema: { type: 'object' },
  });
  t.equal(brand.url, 'https://acme.example.com', 'set on create');
  t.same(brand.slaByPriority, { high: 2 });
  const nullable = [
    'url',
    'iconUrl',
    'fromName',
    'fromEmail',
    'autoresponseSubject',
    'autoresponseBody',
    'csatEmailSubject',
    'csatEmailBody',
    'slaDefaultHours',
    'slaByPriority',
    'slaBusinessHours',
    'ticketSchema',
  ];
  const res = await owner.live('PATCH', `/v1/brands/${brand.id}`, Object.fromEntries(nullable.map((f) => [f, null])));
  t.equal(res.status, 200);
  const stored = (await owner.live('GET', `/v1/brands/${brand.id}`)).body;
  for (const f of nullable) t.equal(stored[f], null, `${f} cleared`);
  t.equal(stored.name, brand.name, 'other fields untouched');
  t.equal(stored.slug, brand.slug);
});

t.test('PATCH: updatedAt moves forward, createdAt stays', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  await owner.live('GET', `/v1/brands/${brand.id}`);
  const first = await owner.live('PATCH', `/v1/brands/${brand.id}`, { name: 'Later' });
  t.ok(Date.parse(first.body.updatedAt) > Date.parse(brand.updatedAt), 'later than on create');
  t.equal(first.body.createdAt, brand.createdAt);
  await owner.live('GET', `/v1/brands/${brand.id}`);
  const second = await owner.live('PATCH', `/v1/workspaces/${brand.id}`, { name: 'Even Later' });
  t.ok(Date.parse(second.body.updatedAt) > Date.parse(first.body.updatedAt), 'later than the previous update');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}`)).body.updatedAt, second.body.updatedAt, 'stored');
});

t.test('PATCH: an empty body is 400', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  for (const prefix of PREFIXES) {
    assertErrorShape(t, await owner.live('PATCH', `${prefix}/${brand.id}`, {}), 400, 'validation_failed');
    assertErrorShape(t, await owner.live('PATCH', `${prefix}/${brand.id}`), 400, 'validation_failed');
  }
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}`)).body.updatedAt, brand.updatedAt, 'nothing changed');
});

t.test('PATCH: ticketNumberStart may move nextTicketNumber up, never down', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live, { ticketNumberStart: 2000 });
  const lower = await owner.live('PATCH', `/v1/brands/${brand.id}`, { ticketNumberStart: 1999, name: 'Should Not Stick' });
  assertErrorShape(t, lower, 400, 'invalid_request');
  t.match(lower.body.message, /2000/, 'names the current number');
  t.same(fieldsOf(lower), ['ticketNumberStart']);
  const unchanged = (await owner.live('GET', `/v1/brands/${brand.id}`)).body;
  t.equal(unchanged.nextTicketNumber, 2000);
  t.equal(unchanged.name, brand.name, 'the rest of a refused PATCH is not applied');

  const same = await owner.live('PATCH', `/v1/brands/${brand.id}`, { ticketNumberStart: 2000 });
  t.equal(same.status, 200, 'the current number itself is fine');
  const higher = await owner.live('PATCH', `/v1/workspaces/${brand.id}`, { ticketNumberStart: 7500, ticketPrefix: 'up' });
  t.equal(higher.status, 200);
  t.equal(higher.body.nextTicketNumber, 7500);
  t.equal(higher.body.ticketPrefix, 'UP');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}`)).body.nextTicketNumber, 7500);
  assertErrorShape(t, await owner.live('PATCH', `/v1/brands/${brand.id}`, { ticketNumberStart: 7000 }), 400, 'invalid_request');
});

t.test("PATCH: changing the slug to another brand's slug is 409, and changes nothing", async (t) => {
  const owner = await signup(app);
  const a = await makeBrand(owner.live, { name: 'A', slug: 'brand-a' });
  const b = await makeBrand(owner.live, { name: 'B', slug: 'brand-b' });
  for (const prefix of PREFIXES) {
    const res = await owner.live('PATCH', `${prefix}/${b.id}`, { slug: 'brand-a', name: 'B renamed', ticketNumberStart: 9000 });
    assertErrorShape(t, res, 409, 'slug_taken');
  }
  const stored = (await owner.live('GET', `/v1/brands/${b.id}`)).body;
  t.equal(stored.slug, 'brand-b');
  t.equal(stored.name, 'B');
  t.equal(stored.nextTicketNumber, 1000, 'the number move was rolled back too');
  t.equal((await owner.live('GET', `/v1/brands/${a.id}`)).body.slug, 'brand-a');
  const own = await owner.live('PATCH', `/v1/brands/${b.id}`, { slug: 'brand-b' });
  t.equal(own.status, 200, 'keeping its own slug is fine');
  const free = await owner.live('PATCH', `/v1/brands/${b.id}`, { slug: 'brand-c' });
  t.equal(free.status, 200);
  t.equal(free.body.slug, 'brand-c');
});

t.test('ticketSchema: a valid JSON Schema is stored and returned', async (t) => {
  const owner = await signup(app);
  const schema = {
    type: 'object',
    properties: { orderId: { type: 'string', pattern: '^ord_' }, priority: { enum: ['a', 'b'] }, qty: { type: 'integer', minimum: 1 } },
    required: ['orderId'],
    additionalProperties: false,
  };
  const created = await makeBrand(owner.live, { ticketSchema: schema });
  t.same(created.ticketSchema, schema);
  t.same((await owner.live('GET', `/v1/brands/${created.id}`)).body.ticketSchema, schema);
  const other = { type: 'object', properties: { sku: { type: 'string' } } };
  const patched = await owner.live('PATCH', `/v1/workspaces/${created.id}`, { ticketSchema: other });
  t.equal(patched.status, 200);
  t.same(patched.body.ticketSchema, other);
  t.same((await owner.live('GET', `/v1/brands/${created.id}`)).body.ticketSchema, other);
});

t.test('ticketSchema: an invalid schema is 400 invalid_ticket_schema on create and patch, and changes nothing', async (t) => {
  const owner = await signup(app);
  const invalid = [{ type: 'not-a-type' }, { properties: { a: { type: 12 } } }, { type: 'object', properties: { a: { $ref: '#/definitions/missing' } } }];
  for (const prefix of PREFIXES) {
    for (const ticketSchema of invalid) {
      const res = await owner.live('POST', prefix, { name: 'Bad Schema', slug: uniqueSlug('bad'), ticketSchema });
      assertErrorShape(t, res, 400, 'invalid_ticket_schema');
      t.same(fieldsOf(res), ['ticketSchema']);
    }
  }
  t.equal(await brandRows(owner.accountId), 0, 'nothing created');

  const good = { type: 'object', properties: { a: { type: 'string' } } };
  const brand = await makeBrand(owner.live, { ticketSchema: good });
  for (const prefix of PREFIXES) {
    for (const ticketSchema of invalid) {
      const res = await owner.live('PATCH', `${prefix}/${brand.id}`, { ticketSchema, name: 'Changed' });
      assertErrorShape(t, res, 400, 'invalid_ticket_schema');
    }
  }
  const stored = (await owner.live('GET', `/v1/brands/${brand.id}`)).body;
  t.same(stored.ticketSchema, good, 'schema unchanged');
  t.equal(stored.name, brand.name, 'name unchanged');
  t.equal(stored.updatedAt, brand.updatedAt);
});

t.test('ticketSchema: a refused schema does not stop a later valid one with the same $id', async (t) => {
  const owner = await signup(app);
  const other = await signup(app);
  const $id = 'https://schemas.example.com/ticket.json';
  const broken = await owner.live('POST', '/v1/brands', { name: 'Broken', ticketSchema: { $id, type: 'object', properties: { a: { $ref: '#/definitions/missing' } } } });
  assertErrorShape(t, broken, 400, 'invalid_ticket_schema');
  const valid = { $id, type: 'object', properties: { a: { type: 'string' } } };
  const mine = await owner.live('POST', '/v1/brands', { name: 'Fine', ticketSchema: valid });
  t.equal(mine.status, 201, 'the same account can use the $id');
  const theirs = await other.live('POST', '/v1/brands', { name: 'Fine too', ticketSchema: valid });
  t.equal(theirs.status, 201, 'another account is not affected by the refused schema');
  const twice = await other.live('PATCH', `/v1/brands/${theirs.body.id}`, { ticketSchema: valid });
  t.equal(twice.status, 200, 'the same valid schema can be saved again');
  t.same(twice.body.ticketSchema, valid);
});

t.test('bad input is 400 validation_failed naming the fields, and creates nothing', async (t) => {
  const owner = await signup(app);
  const base = { name: 'Valid Name', slug: 'valid-slug' };
  const cases: [string, Record<string, unknown>, string[]][] = [
    ['slug with spaces', { slug: 'has spaces' }, ['slug']],
    ['slug with upper-case', { slug: 'UpperCase' }, ['slug']],
    ['slug with a double hyphen', { slug: 'a--b' }, ['slug']],
    ['ticketPrefix with a hyphen', { ticketPrefix: 'AB-C' }, ['ticketPrefix']],
    ['unknown field', { colour: 'red' }, ['colour']],
    ['empty name', { name: '' }, ['name']],
    ['numeric name', { name: 42 }, ['name']],
    ['missing name', { name: undefined }, ['name']],
    ['ftp url', { url: 'ftp://x' }, ['url']],
    ['portal origin with a path', { portalOrigins: ['https://app.example.com/portal'] }, ['portalOrigins.0']],
    ['portal origin with a trailing slash', { portalOrigins: ['https://ok.example.com', 'https://app.example.com/'] }, ['portalOrigins.1']],
    ['csatType stars', { csatType: 'stars' }, ['csatType']],
    ['metadata with 51 keys', { metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])) }, ['metadata']],
    ['fromEmail nope', { fromEmail: 'nope' }, ['fromEmail']],
    ['metadata key longer than 40', { metadata: { ['k'.repeat(41)]: 1 } }, ['metadata']],
    ['ticketNumberStart 0', { ticketNumberStart: 0 }, ['ticketNumberStart']],
    ['business hours 25:00', { slaBusinessHours: { start: '25:00', end: '17:00', days: [1], timezone: 'UTC' } }, ['slaBusinessHours.start']],
    ['several at once', { name: 7, slug: 'Not A Slug', url: 'ftp://x', surprise: true }, ['name', 'slug', 'surprise', 'url']],
  ];
  for (const prefix of PREFIXES) {
    for (const [label, change, fields] of cases) {
      const res = await owner.live('POST', prefix, { ...base, ...change });
      assertErrorShape(t, res, 400, 'validation_failed');
      assertFields(t, res, fields, `${prefix} ${label}`);
      for (const e of res.body.errors ?? []) t.type(e.message, 'string');
    }
  }
  t.equal(await brandRows(owner.accountId), 0, 'nothing created');

  // The same rules on PATCH, which changes nothing either.
  const brand = await makeBrand(owner.live, { name: 'Keep Me' });
  for (const [label, change, fields] of cases) {
    if ('ticketNumberStart' in change || ('name' in change && change.name === undefined)) continue;
    const res = await owner.live('PATCH', `/v1/brands/${brand.id}`, change);
    assertErrorShape(t, res, 400, 'validation_failed');
    assertFields(t, res, fields, `PATCH ${label}`);
  }
  t.same((await owner.live('GET', `/v1/brands/${brand.id}`)).body, brand, 'brand unchanged');
  t.equal(await brandRows(owner.accountId), 1);
});

t.test('text PostgreSQL cannot store (NUL characters) is a client error, not a 500', async (t) => {
  const owner = await signup(app);
  const ok = await owner.live('POST', '/v1/brands', { name: 'Fine', metadata: { ['k'.repeat(40)]: 'a 40-character key is fine' } });
  t.equal(ok.status, 201);
  for (const body of [{ name: 'a\u0000b' }, { name: 'Nul Meta', metadata: { note: 'b\u0000' } }]) {
    assertErrorShape(t, await owner.live('POST', '/v1/brands', body), 400, 'invalid_request');
  }
  assertErrorShape(t, await owner.live('PATCH', `/v1/brands/${ok.body.id}`, { fromName: 'x\u0000' }), 400, 'invalid_request');
  for (const url of ['/v1/brands/%00', `/v1/workspaces/br_%00${ok.body.id.slice(3)}`]) {
    const res = await owner.live('GET', url);
    t.ok([400, 404].includes(res.status), `GET ${url}: ${res.status} is a client error`);
    t.equal(res.body.statusCode, res.status);
    t.equal(res.body.requestId, res.headers['x-request-id']);
  }
  t.equal(await brandRows(owner.accountId), 1, 'nothing else created');
  t.equal((await owner.live('GET', `/v1/brands/${ok.body.id}`)).body.fromName, null, 'nothing changed');
});

t.test("tenant isolation: another account's brand is 404 everywhere and survives", async (t) => {
  const owner = await signup(app);
  const intruder = await signup(app);
  const brand = await makeBrand(owner.live, { name: 'Private' });
  for (const prefix of PREFIXES) {
    for (const id of [brand.id, `ws_${brand.id.slice(3)}`]) {
      assertNotFound(t, await intruder.live('GET', `${prefix}/${id}`), `GET ${prefix}`);
      assertNotFound(t, await intruder.live('PATCH', `${prefix}/${id}`, { name: 'Pwned' }), `PATCH ${prefix}`);
      assertNotFound(t, await intruder.live('DELETE', `${prefix}/${id}`), `DELETE ${prefix}`);
      assertNotFound(t, await intruder.live('DELETE', `${prefix}/${id}?confirm=true`), `DELETE confirm ${prefix}`);
    }
  }
  // Same answer as for an id that does not exist at all.
  const missing = await intruder.live('GET', `/v1/brands/br_${'0'.repeat(26)}`);
  const foreign = await intruder.live('GET', `/v1/brands/${brand.id}`);
  t.equal(foreign.body.message, missing.body.message, 'indistinguishable from a missing brand');
  t.same((await intruder.live('GET', '/v1/brands')).body, []);

  const still = await owner.live('GET', `/v1/brands/${brand.id}`);
  t.equal(still.status, 200, 'the owner still has it');
  t.equal(still.body.name, 'Private', 'not renamed');
  t.equal(still.body.updatedAt, brand.updatedAt);
  t.equal(await brandRows(owner.accountId), 1);
});

t.test("tenant isolation: live and test mode cannot reach each other's brands", async (t) => {
  const owner = await signup(app);
  const live = await makeBrand(owner.live, { name: 'Live Brand' });
  const test = await makeBrand(owner.test, { name: 'Test Brand' });
  t.equal(test.livemode, false);
  for (const prefix of PREFIXES) {
    for (const [call, brand] of [
      [owner.test, live],
      [owner.live, test],
    ] as const) {
      assertNotFound(t, await call('GET', `${prefix}/${brand.id}`));
      assertNotFound(t, await call('PATCH', `${prefix}/${brand.id}`, { name: 'Crossed' }));
      assertNotFound(t, await call('DELETE', `${prefix}/${brand.id}`));
      assertNotFound(t, await call('DELETE', `${prefix}/${brand.id}?confirm=true`));
    }
  }
  t.equal((await owner.live('GET', `/v1/brands/${live.id}`)).body.name, 'Live Brand');
  t.equal((await owner.test('GET', `/v1/brands/${test.id}`)).body.name, 'Test Brand');
  t.same(
    (await owner.live('GET', '/v1/brands')).body.map((b: { id: string }) => b.id),
    [live.id],
  );
  t.same(
    (await owner.test('GET', '/v1/brands')).body.map((b: { id: string }) => b.id),
    [test.id],
  );
});

t.test('a key limited to one brand sees and edits only that brand', async (t) => {
  const owner = await signup(app);
  const a = await makeBrand(owner.live, { name: 'Brand A' });
  const b = await makeBrand(owner.live, { name: 'Brand B' });
  const keyRes = await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'A only', brandIds: [a.id] });
  t.equal(keyRes.status, 201);
  t.equal(keyRes.body.allBrands, false);
  t.same(keyRes.body.brandIds, [a.id]);
  const limited = client(app, keyRes.body.key);

  for (const prefix of PREFIXES) {
    const listed = await limited('GET', prefix);
    t.equal(listed.status, 200);
    t.same(
      listed.body.map((x: { id: string }) => x.id),
      [a.id],
      `${prefix}: list shows only brand a`,
    );
    t.equal((await limited('GET', `${prefix}/${a.id}`)).status, 200);
    assertNotFound(t, await limited('GET', `${prefix}/${b.id}`));
    assertNotFound(t, await limited('PATCH', `${prefix}/${b.id}`, { name: 'Out of scope' }));
    assertNotFound(t, await limited('DELETE', `${prefix}/${b.id}?confirm=true`));
    assertErrorShape(t, await limited('POST', prefix, { name: 'New', slug: uniqueSlug('scoped') }), 403, 'insufficient_scope');
  }
  const patched = await limited('PATCH', `/v1/brands/${a.id}`, { name: 'Brand A edited' });
  t.equal(patched.status, 200);
  t.equal(patched.body.name, 'Brand A edited');
  const viaAlias = await limited('PATCH', `/v1/workspaces/ws_${a.id.slice(3)}`, { url: 'https://a.example.com' });
  t.equal(viaAlias.status, 200, 'the ws_ alias is in scope too');

  t.equal(await brandRows(owner.accountId), 2, 'the limited key created nothing');
  const stillB = (await owner.live('GET', `/v1/brands/${b.id}`)).body;
  t.equal(stillB.name, 'Brand B', 'brand b untouched');
  t.equal((await owner.live('GET', '/v1/brands')).body.length, 2, 'the full key still sees both');
});

t.test('DELETE: preview by default, confirm=true deletes, anything else is refused', async (t) => {
  const owner = await signup(app);
  for (const prefix of PREFIXES) {
    const brand = await makeBrand(owner.live, { name: `Doomed ${prefix}` });
    const keeper = await makeBrand(owner.live, { name: `Keeper ${prefix}` });
    for (const query of ['', '?confirm=false']) {
      const preview = await owner.live('DELETE', `${prefix}/${brand.id}${query}`);
      t.equal(preview.status, 200, `preview with "${query}"`);
      t.same(Object.keys(preview.body).sort(), [
        'blockedSourceCount',
        'categoryCount',
        'companyCount',
        'contactCount',
        'deleted',
        'fieldCount',
        'id',
        'message',
        'statusCount',
        'tagCount',
        'ticketCount',
        'webhookCount',
      ]);
      t.match(preview.body, {
        id: brand.id,
        deleted: false,
        ticketCount: 0,
        webhookCount: 0,
        categoryCount: 0,
        tagCount: 0,
        statusCount: 0,
        fieldCount: 0,
        contactCount: 0,
        companyCount: 0,
        blockedSourceCount: 0,
      });
      t.type(preview.body.message, 'string');
      t.match(preview.body.message, /confirm=true/);
      t.equal((await owner.live('GET', `${prefix}/${brand.id}`)).status, 200, 'still exists');
    }
    const maybe = await owner.live('DELETE', `${prefix}/${brand.id}?confirm=maybe`);
    assertErrorShape(t, maybe, 400, 'validation_failed');
    t.equal((await owner.live('GET', `${prefix}/${brand.id}`)).status, 200, 'confirm=maybe deletes nothing');

    const deleted = await owner.live('DELETE', `${prefix}/${brand.id}?confirm=true`);
    t.equal(deleted.status, 200);
    t.match(deleted.body, { id: brand.id, deleted: true, ticketCount: 0, webhookCount: 0, categoryCount: 0, tagCount: 0 });
    t.type(deleted.body.message, 'string');
    assertNotFound(t, await owner.live('GET', `${prefix}/${brand.id}`));
    assertNotFound(t, await owner.live('DELETE', `${prefix}/${brand.id}?confirm=true`), 'second delete');
    assertNotFound(t, await owner.live('PATCH', `${prefix}/${brand.id}`, { name: 'Ghost' }), 'patch after delete');
    const listed = (await owner.live('GET', prefix)).body.map((b: { id: string }) => b.id);
    t.notOk(listed.includes(brand.id), 'gone from the list');
    t.ok(listed.includes(keeper.id), 'the other brand stays');
  }
  t.equal(await brandRows(owner.accountId), 2, 'only the keepers remain');
});

t.test('DELETE of a brand drops it from limited keys, which then see nothing', async (t) => {
  const owner = await signup(app);
  const a = await makeBrand(owner.live, { name: 'Scoped A' });
  const b = await makeBrand(owner.live, { name: 'Scoped B' });
  const key = (await owner.live('POST', '/v1/accounts/me/api-keys', { brandIds: [a.id] })).body;
  const limited = client(app, key.key);
  t.equal((await owner.live('DELETE', `/v1/brands/${a.id}?confirm=true`)).status, 200);
  const keys = (await owner.live('GET', '/v1/accounts/me/api-keys')).body;
  const stored = keys.find((k: { id: string }) => k.id === key.id);
  t.same(stored.brandIds, [], 'the deleted brand left the key scope');
  t.equal(stored.allBrands, false, 'and the key did not widen to all brands');
  t.same((await limited('GET', '/v1/brands')).body, [], 'the key sees no brand');
  assertNotFound(t, await limited('GET', `/v1/brands/${b.id}`));
});
