import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as contactsService from '../../server/domains/contacts/service.js';
import { findOrCreateContact } from '../../server/flows/customers.js';
import { assertErrorShape, assertNotFound, client, makeBrand, ownerWithBrand, type Reply, type Signup, signup, testApp, servicesOf } from '../helpers/app.js';

// Every test signs up its own accounts: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

type Call = Signup['live'];
const CONTACT_ID = /^cus_[0-9a-z]{26}$/;
const PREFIXES = ['/v1/brands', '/v1/workspaces'] as const;
const PATHS = ['contacts', 'customers'] as const;

let seq = 0;

/** An account with one brand and the base path of its contacts. */
const setup = () => ownerWithBrand(app);

async function makeContact(call: Call, base: string, body: Record<string, unknown>, path = 'contacts') {
  const res = await call('POST', `${base}/${path}`, body);
  if (res.status !== 201) throw new Error(`contact create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const ids = (res: Reply): string[] => res.body.data.map((c: { id: string }) => c.id);

for (const prefix of PREFIXES) {
  for (const path of PATHS) {
    t.test(`${prefix}/:id/${path}: create, get, list, patch, delete`, async (t) => {
      const owner = await signup(app);
      const brand = await makeBrand(owner.live);
      const base = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}/${path}`;

      const created = await owner.live('POST', base, { email: 'ann@example.com', name: 'Ann Example', metadata: { plan: 'gold' } });
      t.equal(created.status, 201);
      const c = created.body;
      t.match(c.id, CONTACT_ID, 'cus_ id');
      t.equal(c.brandId, brand.id);
      t.equal(c.email, 'ann@example.com');
      t.equal(c.name, 'Ann Example');
      t.equal(c.avatarUrl, null);
      t.equal(c.companyId, null);
      t.equal(c.company, null);
      t.equal(c.isBlocked, false);
      t.equal(c.notifyEmail, true);
      t.same(c.metadata, { plan: 'gold' });
      t.same(c._count, { tickets: 0 });
      t.ok(!Number.isNaN(Date.parse(c.createdAt)));
      t.ok(!Number.isNaN(Date.parse(c.updatedAt)));

      const got = await owner.live('GET', `${base}/${c.id}`);
      t.equal(got.status, 200);
      t.same(got.body, c, 'GET returns what create returned');

      const listed = await owner.live('GET', base);
      t.equal(listed.status, 200);
      t.same(ids(listed), [c.id]);
      t.same(listed.body.pagination, { cursor: null, nextCursor: null, hasMore: false });

      const patched = await owner.live('PATCH', `${base}/${c.id}`, { name: 'Ann Renamed', avatarUrl: 'https://img.example.com/a.png', notifyEmail: false });
      t.equal(patched.status, 200);
      t.equal(patched.body.name, 'Ann Renamed');
      t.equal(patched.body.avatarUrl, 'https://img.example.com/a.png');
      t.equal(patched.body.notifyEmail, false);
      t.equal(patched.body.email, 'ann@example.com', 'untouched fields stay');
      t.same((await owner.live('GET', `${base}/${c.id}`)).body, patched.body, 'the change is stored');

      const deleted = await owner.live('DELETE', `${base}/${c.id}`);
      t.equal(deleted.status, 200);
      t.same(deleted.body, patched.body, 'DELETE returns the deleted contact');
      assertNotFound(t, await owner.live('GET', `${base}/${c.id}`), 'after delete');
      t.same(ids(await owner.live('GET', base)), []);
      const other = path === 'contacts' ? 'customers' : 'contacts';
      assertNotFound(t, await owner.live('GET', `${prefix}/${brand.id}/${other}/${c.id}`), `gone under /${other} too`);
    });
  }
}

t.test('/contacts and /customers are one collection', async (t) => {
  const { owner, base } = await setup();
  const viaContacts = await makeContact(owner.live, base, { email: 'one@example.com' });
  const viaCustomers = await makeContact(owner.live, base, { email: 'two@example.com' }, 'customers');
  t.same((await owner.live('GET', `${base}/customers/${viaContacts.id}`)).body, viaContacts);
  t.same((await owner.live('GET', `${base}/contacts/${viaCustomers.id}`)).body, viaCustomers);
  t.same(ids(await owner.live('GET', `${base}/contacts`)), ids(await owner.live('GET', `${base}/customers`)));
  t.equal((await owner.live('GET', `${base}/customers`)).body.data.length, 2);
});

t.test('emails are trimmed and lower-cased; unique per brand after normalization', async (t) => {
  const { owner, brand, base } = await setup();
  const ann = await makeContact(owner.live, base, { email: '  Ann@Example.COM ' });
  t.equal(ann.email, 'ann@example.com');
  assertErrorShape(t, await owner.live('POST', `${base}/contacts`, { email: 'ann@example.com' }), 409, 'contact_email_taken');
  assertErrorShape(t, await owner.live('POST', `${base}/customers`, { email: 'ANN@EXAMPLE.COM' }), 409, 'contact_email_taken');
  const bob = await makeContact(owner.live, base, { email: 'bob@example.com' });
  assertErrorShape(t, await owner.live('PATCH', `${base}/contacts/${bob.id}`, { email: ' Ann@example.com' }), 409, 'contact_email_taken');
  t.equal((await owner.live('GET', `${base}/contacts/${bob.id}`)).body.email, 'bob@example.com', 'the failed PATCH changed nothing');
  const moved = await owner.live('PATCH', `${base}/contacts/${bob.id}`, { email: 'Robert@Example.com ' });
  t.equal(moved.status, 200);
  t.equal(moved.body.email, 'robert@example.com');
  const same = await owner.live('PATCH', `${base}/contacts/${ann.id}`, { email: 'ANN@example.com' });
  t.equal(same.status, 200, 'a contact may keep its own email');

  const other = await makeBrand(owner.live, 'Other');
  t.equal((await owner.live('POST', `/v1/brands/${other.id}/contacts`, { email: 'ann@example.com' })).status, 201, 'another brand may have the same email');
  const testBrand = await makeBrand(owner.test, 'Test brand');
  t.equal((await owner.test('POST', `/v1/brands/${testBrand.id}/contacts`, { email: 'ann@example.com' })).status, 201, 'test mode is a separate scope');
  const rows = await db('contacts').where({ brandId: brand.id }).select('email');
  t.same(rows.map((r) => r.email).sort(), ['ann@example.com', 'robert@example.com'], 'stored normalized');
});

t.test('400 on bad input, nothing stored', async (t) => {
  const { owner, brand, base } = await setup();
  const url = `${base}/contacts`;
  for (const email of ['not-an-email', 'a@b', 'a b@example.com', '@example.com', 'a@@example.com', 'a@example..com', '', 'x'.repeat(320) + '@example.com', 42]) {
    const res = await owner.live('POST', url, { email });
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(
      res.body.errors.some((e: { field: string }) => e.field === 'email'),
      `${JSON.stringify(email).slice(0, 30)}: names email`,
    );
  }
  assertErrorShape(t, await owner.live('POST', url, {}), 400, 'validation_failed');
  const unknown = await owner.live('POST', url, { email: 'a@example.com', nickname: 'x' });
  assertErrorShape(t, unknown, 400, 'validation_failed');
  t.same(unknown.body.errors, [{ field: 'nickname', message: 'is not a known field' }]);
  assertErrorShape(t, await owner.live('POST', url, { email: 'a@example.com', avatarUrl: 'ftp://x' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', url, '{"email":'), 400, 'invalid_json');
  t.equal(Number((await db('contacts').where({ brandId: brand.id }).count({ n: '*' }).first())!.n), 0, 'nothing stored');

  const c = await makeContact(owner.live, base, { email: 'ok@example.com' });
  assertErrorShape(t, await owner.live('PATCH', `${url}/${c.id}`, {}), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('PATCH', `${url}/${c.id}`, { email: 'nope' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('PATCH', `${url}/${c.id}`, { id: 'cus_x' }), 400, 'validation_failed');

  for (const query of ['limit=0', 'limit=101', 'limit=abc', 'limit=1.5', 'sort=bogus', 'order=sideways', 'hideBlocked=maybe', 'cursor=', 'search=', 'unknown=1']) {
    const res = await owner.live('GET', `${url}?${query}`);
    assertErrorShape(t, res, 400, 'validation_failed');
  }
  t.equal((await owner.live('GET', `${url}?limit=1`)).status, 200, 'limit=1 is fine');
  t.equal((await owner.live('GET', `${url}?limit=100`)).status, 200, 'limit=100 is fine');
  assertErrorShape(t, await owner.live('GET', `${url}/search`), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('GET', `${url}/search?q=`), 400, 'validation_failed');
});

t.test('tampered cursors and cursors reused with other filters are 400', async (t) => {
  const { owner, base } = await setup();
  for (let i = 0; i < 3; i++) await makeContact(owner.live, base, { email: `p${i}@example.com`, name: `Page ${i}` });
  const first = await owner.live('GET', `${base}/contacts?limit=1&search=example`);
  t.equal(first.body.pagination.hasMore, true);
  const cursor: string = first.body.pagination.nextCursor;
  t.equal(first.body.pagination.cursor, cursor);
  t.equal((await owner.live('GET', `${base}/contacts?limit=1&search=example&cursor=${encodeURIComponent(cursor)}`)).status, 200, 'the cursor works unchanged');

  const [payload, sum] = cursor.split('.');
  const flipped = payload!.slice(0, -2) + (payload!.slice(-2, -1) === 'A' ? 'B' : 'A') + payload!.slice(-1);
  for (const bad of [`${flipped}.${sum}`, `${payload}.AAAAAAAAAAAAAAAA`, 'garbage', `${payload}`, `${cursor}.x`, Buffer.from('{"p":[1,2]}').toString('base64url')]) {
    assertErrorShape(t, await owner.live('GET', `${base}/contacts?limit=1&search=example&cursor=${encodeURIComponent(bad)}`), 400, 'invalid_cursor');
  }
  for (const other of ['search=exam', 'search=example&sort=email', 'search=example&order=asc', 'search=example&hideBlocked=false', 'search=example&companyId=co_x', '']) {
    const res = await owner.live('GET', `${base}/customers?limit=1&${other}&cursor=${encodeURIComponent(cursor)}`);
    assertErrorShape(t, res, 400, 'cursor_mismatch');
  }
  const otherBrand = await makeBrand(owner.live, 'Other');
  assertErrorShape(t, await owner.live('GET', `/v1/brands/${otherBrand.id}/contacts?limit=1&search=example&cursor=${encodeURIComponent(cursor)}`), 400, 'cursor_mismatch');
});

t.test('401 without a valid key on every contact route', async (t) => {
  const { owner, base } = await setup();
  const c = await makeContact(owner.live, base, { email: 'keep@example.com', name: 'Keep' });
  const bogus = client(app, 'sk_live_' + 'x'.repeat(43));
  for (const path of PATHS) {
    const calls: [string, string, unknown?][] = [
      ['POST', `${base}/${path}`, { email: 'new@example.com' }],
      ['GET', `${base}/${path}`],
      ['GET', `${base}/${path}/search?q=ke`],
      ['GET', `${base}/${path}/${c.id}`],
      ['PATCH', `${base}/${path}/${c.id}`, { name: 'Hijacked' }],
      ['DELETE', `${base}/${path}/${c.id}`],
    ];
    for (const [method, url, body] of calls) {
      assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
      assertErrorShape(t, await bogus(method, url, body), 401, 'invalid_api_key');
    }
  }
  const after = await owner.live('GET', `${base}/contacts/${c.id}`);
  t.equal(after.body.name, 'Keep', 'unchanged');
  t.equal((await owner.live('GET', `${base}/contacts`)).body.data.length, 1, 'nothing created');
});

t.test('other accounts, the other mode, other brands and limited keys get 404 on every route', async (t) => {
  const { owner, brand, base } = await setup();
  const c = await makeContact(owner.live, base, { email: 'secret@example.com', name: 'Secret' });
  const stranger = await signup(app);
  const otherBrand = await makeBrand(owner.live, 'Other brand');
  const keyRes = await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'other brand only', brandIds: [otherBrand.id] });
  t.equal(keyRes.status, 201);
  const limited = client(app, keyRes.body.key);

  const routes = (b: string): [string, string, unknown?][] => [
    ['POST', `${b}/contacts`, { email: 'intruder@example.com' }],
    ['GET', `${b}/contacts`],
    ['GET', `${b}/customers/search?q=sec`],
    ['GET', `${b}/contacts/${c.id}`],
    ['PATCH', `${b}/customers/${c.id}`, { name: 'Stolen' }],
    ['DELETE', `${b}/contacts/${c.id}`],
  ];
  for (const prefix of PREFIXES) {
    const b = `${prefix}/${brand.id}`;
    for (const [method, url, body] of routes(b)) {
      assertNotFound(t, await stranger.live(method, url, body), `another account: ${method} ${url}`);
      assertNotFound(t, await owner.test(method, url, body), `test key: ${method} ${url}`);
      assertNotFound(t, await limited(method, url, body), `key limited to another brand: ${method} ${url}`);
    }
    // The contact's id under another brand of the same account.
    const ob = `${prefix}/${otherBrand.id}`;
    for (const [method, url, body] of routes(ob).slice(3)) {
      assertNotFound(t, await owner.live(method, url, body), `other brand: ${method} ${url}`);
      assertNotFound(t, await limited(method, url, body), `limited key, own brand, foreign id: ${method} ${url}`);
    }
    t.same((await limited('GET', `${ob}/customers/search?q=sec`)).body, [], 'search in the other brand finds nothing');
    t.same((await limited('GET', `${ob}/contacts`)).body.data, [], 'the other brand lists nothing');
  }
  const after = await owner.live('GET', `${base}/contacts/${c.id}`);
  t.equal(after.status, 200, 'the contact survived');
  t.equal(after.body.name, 'Secret', 'unchanged');
  t.equal(Number((await db('contacts').count({ n: '*' }).where({ email: 'intruder@example.com' }).first())!.n), 0, 'nothing was created');
});

t.test('companyId must be a company of the same brand (400 invalid_company_id)', async (t) => {
  const { owner, brand, base } = await setup();
  const otherBrand = await makeBrand(owner.live, 'Other');
  const foreign = (await owner.live('POST', `/v1/brands/${otherBrand.id}/companies`, { name: 'Foreign Co' })).body;
  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  const strangers = (await stranger.live('POST', `/v1/brands/${strangerBrand.id}/companies`, { name: 'Stranger Co' })).body;
  const own = (await owner.live('POST', `${base}/companies`, { name: 'Own Co' })).body;
  for (const companyId of [foreign.id, strangers.id, 'co_doesnotexist']) {
    const res = await owner.live('POST', `${base}/contacts`, { email: `x${++seq}@example.com`, companyId });
    assertErrorShape(t, res, 400, 'invalid_company_id');
    t.same(res.body.errors, [{ field: 'companyId', message: 'is not a company of this brand' }]);
  }
  const c = await makeContact(owner.live, base, { email: 'linked@example.com', companyId: own.id });
  t.equal(c.companyId, own.id);
  t.same(c.company, { id: own.id, name: 'Own Co' });
  assertErrorShape(t, await owner.live('PATCH', `${base}/contacts/${c.id}`, { companyId: foreign.id }), 400, 'invalid_company_id');
  t.equal((await owner.live('GET', `${base}/contacts/${c.id}`)).body.companyId, own.id, 'still linked to its own company');
  const unlinked = await owner.live('PATCH', `${base}/contacts/${c.id}`, { companyId: null });
  t.equal(unlinked.body.companyId, null, 'null unlinks');
  t.equal(unlinked.body.company, null);
  t.equal(Number((await db('contacts').where({ brandId: brand.id }).count({ n: '*' }).first())!.n), 1);
});

t.test('pagination walk across inserts: every original contact exactly once', async (t) => {
  const { owner, base } = await setup();
  const originals: string[] = [];
  for (let i = 0; i < 25; i++) originals.push((await makeContact(owner.live, base, { email: `walk${String(i).padStart(2, '0')}@example.com`, name: `Walker ${i}` })).id);

  for (const [sort, order] of [
    ['createdAt', 'desc'],
    ['createdAt', 'asc'],
    ['name', 'asc'],
    ['email', 'desc'],
  ] as const) {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    let inserted = 0;
    do {
      const q: string = `limit=7&sort=${sort}&order=${order}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const res = await owner.live('GET', `${base}/customers?${q}`);
      t.equal(res.status, 200);
      t.ok(res.body.data.length <= 7);
      seen.push(...ids(res));
      cursor = res.body.pagination.nextCursor;
      t.equal(res.body.pagination.hasMore, cursor !== null);
      // New contacts arrive between pages, sorting both before and after the current position.
      for (const email of [`aaa-${sort}-${order}-${pages}@example.com`, `zzz-${sort}-${order}-${pages}@example.com`]) {
        await makeContact(owner.live, base, { email, name: email.startsWith('a') ? 'Aaron' : 'Zed' });
        inserted++;
      }
      pages++;
      t.ok(pages < 20, 'the walk ends');
    } while (cursor && pages < 20);
    t.equal(new Set(seen).size, seen.length, `${sort} ${order}: no contact repeated`);
    for (const id of originals) t.equal(seen.filter((s) => s === id).length, 1, `${sort} ${order}: ${id} seen once`);
    t.ok(inserted > 0);
  }
});

t.test('sorting by name and email, ascending and descending', async (t) => {
  const { owner, base } = await setup();
  await makeContact(owner.live, base, { email: 'b@example.com', name: 'charlie' });
  await makeContact(owner.live, base, { email: 'c@example.com', name: 'Alice' });
  await makeContact(owner.live, base, { email: 'a@example.com', name: 'bob' });
  const emails = async (q: string) => (await owner.live('GET', `${base}/contacts?${q}`)).body.data.map((c: { email: string }) => c.email);
  t.same(await emails('sort=email&order=asc'), ['a@example.com', 'b@example.com', 'c@example.com']);
  t.same(await emails('sort=email&order=desc'), ['c@example.com', 'b@example.com', 'a@example.com']);
  t.same(await emails('sort=name&order=asc'), ['c@example.com', 'a@example.com', 'b@example.com'], 'case-insensitive name order');
  t.same(await emails(''), ['a@example.com', 'c@example.com', 'b@example.com'], 'default: newest first');
  t.same(await emails('order=asc'), ['b@example.com', 'c@example.com', 'a@example.com'], 'createdAt asc');
});

t.test('search is case-insensitive and unicode-aware, over email and name', async (t) => {
  const { owner, base } = await setup();
  const zoe = await makeContact(owner.live, base, { email: 'zoe.k@example.com', name: 'Zoë Kravitz' });
  const emile = await makeContact(owner.live, base, { email: 'e.zola@example.org', name: 'ÉMILE Zola' });
  const strasse = await makeContact(owner.live, base, { email: 'hans@beispiel.de', name: 'Hans an der Straße' });
  const plain = await makeContact(owner.live, base, { email: 'percent%under_score@example.net', name: 'Plain Person' });
  const found = async (search: string) => ids(await owner.live('GET', `${base}/contacts?search=${encodeURIComponent(search)}`)).sort();
  const cases: [string, string[]][] = [
    ['Zoë', [zoe.id]],
    ['zoë', [zoe.id]],
    ['ZOË', [zoe.id]],
    ['zoe', [zoe.id]],
    ['émile', [emile.id]],
    ['ÉMILE', [emile.id]],
    ['Emile', [emile.id]],
    ['ZOLA', [emile.id]],
    ['straße', [strasse.id]],
    ['STRASSE', [strasse.id]],
    ['Straße', [strasse.id]],
    ['STRAẞE', [strasse.id]],
    ['BEISPIEL.DE', [strasse.id]],
    ['EXAMPLE.ORG', [emile.id]],
    ['%', [plain.id]],
    ['_', [plain.id]],
    ['nobody', []],
    ['Z', [emile.id, zoe.id].sort()],
  ];
  for (const [q, expected] of cases) t.same(await found(q), expected, `search ${q}`);
});

t.test('/search?q= autocompletes by prefix of email or name, top 10, bare array', async (t) => {
  const { owner, base } = await setup();
  for (let i = 0; i < 12; i++) await makeContact(owner.live, base, { email: `sam${String(i).padStart(2, '0')}@example.com`, name: `Sam ${i}` });
  const ella = await makeContact(owner.live, base, { email: 'e.x@example.com', name: 'Ëlla Samson' });
  await makeContact(owner.live, base, { email: 'other@example.com', name: 'Not Sam' });
  for (const path of PATHS) {
    const res = await owner.live('GET', `${base}/${path}/search?q=SAM`);
    t.equal(res.status, 200);
    t.ok(Array.isArray(res.body), 'a bare array');
    t.equal(res.body.length, 10, 'top 10');
    t.same(
      res.body.map((c: { email: string }) => c.email),
      Array.from({ length: 10 }, (_, i) => `sam${String(i).padStart(2, '0')}@example.com`),
      'ordered by email',
    );
    t.match(res.body[0], { email: 'sam00@example.com', name: 'Sam 0', company: null, isBlocked: false });
  }
  t.same(
    (await owner.live('GET', `${base}/contacts/search?q=ella`)).body.map((c: { id: string }) => c.id),
    [ella.id],
    'name prefix, accent-insensitive',
  );
  t.same(
    (await owner.live('GET', `${base}/contacts/search?q=e.x@`)).body.map((c: { id: string }) => c.id),
    [ella.id],
    'email prefix',
  );
  t.same((await owner.live('GET', `${base}/contacts/search?q=samson`)).body, [], 'not a prefix of the name or the email');
  t.same((await owner.live('GET', `${base}/contacts/search?q=%25`)).body, [], 'wildcards match literally');
  t.equal((await owner.live('GET', `${base}/contacts/search?q=sam11`)).body.length, 1);
});

t.test('findOrCreateContact: one contact under concurrent calls, normalized, auto-linked', async (t) => {
  const { owner, brand, base } = await setup();
  const company = (await owner.live('POST', `${base}/companies`, { name: 'Acme', domain: 'acme.com' })).body;
  const ctx = tenantCtx(systemCtx(servicesOf(db)), owner.accountId, true);
  const results = await Promise.all(Array.from({ length: 8 }, () => findOrCreateContact(ctx, brand.id, '  New.Person@ACME.com', 'New Person')));
  t.equal(new Set(results.map((r) => r.id)).size, 1, 'every call returns the same contact');
  const created = await contactsService.get(ctx, brand.id, results[0]!.id);
  t.equal(created.email, 'new.person@acme.com');
  t.equal(created.name, 'New Person');
  t.equal(created.companyId, company.id, 'auto-linked by domain');
  t.equal(Number((await db('contacts').where({ brandId: brand.id }).count({ n: '*' }).first())!.n), 1, 'one row');
  const again = await findOrCreateContact(ctx, brand.id, 'new.person@acme.com');
  t.equal(again.id, results[0]!.id);
  t.equal((await contactsService.get(ctx, brand.id, again.id)).name, 'New Person', 'an existing contact is not renamed');
  await t.rejects(findOrCreateContact(ctx, brand.id, 'not an email'), { statusCode: 400, code: 'invalid_email' });
  const testCtx = tenantCtx(systemCtx(servicesOf(db)), owner.accountId, false);
  await t.rejects(findOrCreateContact(testCtx, brand.id, 'a@acme.com'), { statusCode: 404, code: 'not_found' }, 'the live brand is invisible in test mode');
});

t.test('brand delete preview counts contacts, companies and blocked sources; confirm removes them', async (t) => {
  const { owner, brand, base } = await setup();
  await makeContact(owner.live, base, { email: 'a@example.com' });
  await makeContact(owner.live, base, { email: 'b@example.com' });
  await owner.live('POST', `${base}/companies`, { name: 'Co' });
  await owner.live('POST', `${base}/blocked-sources`, { value: 'spam.com' });
  const keep = await makeBrand(owner.live, 'Keep');
  await makeContact(owner.live, `/v1/brands/${keep.id}`, { email: 'a@example.com' });
  const preview = await owner.live('DELETE', `/v1/workspaces/${brand.id}`);
  t.match(preview.body, { deleted: false, contactCount: 2, companyCount: 1, blockedSourceCount: 1 });
  const done = await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=true`);
  t.match(done.body, { deleted: true, contactCount: 2, companyCount: 1, blockedSourceCount: 1 });
  for (const table of ['contacts', 'companies', 'blockedSources']) {
    t.equal(Number((await db(table).where({ brandId: brand.id }).count({ n: '*' }).first())!.n), 0, `${table} removed`);
  }
  t.equal((await owner.live('GET', `/v1/brands/${keep.id}/contacts`)).body.data.length, 1, 'the other brand keeps its contact');
});

t.test('every contact route is in /v1/openapi.json under both brand prefixes and both names', async (t) => {
  const paths = (await anonymous('GET', '/v1/openapi.json')).body.paths;
  for (const prefix of PREFIXES) {
    for (const path of PATHS) {
      const base = `${prefix}/{brandId}/${path}`;
      t.ok(paths[base]?.get && paths[base]?.post, `${base}: GET and POST`);
      t.ok(paths[`${base}/search`]?.get, `${base}/search: GET`);
      const one = paths[`${base}/{contactId}`];
      t.ok(one?.get && one?.patch && one?.delete, `${base}/{contactId}: GET, PATCH, DELETE`);
      t.same(one?.get?.security, [{ apiKey: [] }, { session: [] }, { sessionCookie: [] }], 'an API key or a session');
    }
  }
});
