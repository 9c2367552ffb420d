import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, mustCreate, ownerWithBrand, type Reply, signup, testApp } from '../helpers/app.js';

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const COMPANY_ID = /^co_[0-9a-z]{26}$/;
const PREFIXES = ['/v1/brands', '/v1/workspaces'] as const;

const setup = () => ownerWithBrand(app);

const post = mustCreate;

const ids = (res: Reply): string[] => res.body.data.map((c: { id: string }) => c.id);

for (const prefix of PREFIXES) {
  t.test(`${prefix}/:id/companies: create, get, list, patch, delete`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `${prefix}/${brand.id}/companies`;
    const created = await owner.live('POST', base, { name: 'Acme Inc', domain: 'Acme.COM', metadata: { notes: 'big' } });
    t.equal(created.status, 201);
    const co = created.body;
    t.match(co.id, COMPANY_ID);
    t.equal(co.brandId, brand.id);
    t.equal(co.name, 'Acme Inc');
    t.equal(co.domain, 'acme.com', 'domain stored lower-case');
    t.same(co.metadata, { notes: 'big' });
    t.same(co._count, { customers: 0 });
    t.ok(!Number.isNaN(Date.parse(co.createdAt)));

    t.same((await owner.live('GET', `${base}/${co.id}`)).body, co, 'GET returns what create returned');
    const listed = await owner.live('GET', base);
    t.equal(listed.status, 200);
    t.same(ids(listed), [co.id]);
    t.same(listed.body.pagination, { cursor: null, nextCursor: null, hasMore: false });

    const patched = await owner.live('PATCH', `${base}/${co.id}`, { name: 'Acme Corp', metadata: { notes: 'bigger' } });
    t.equal(patched.status, 200);
    t.equal(patched.body.name, 'Acme Corp');
    t.same(patched.body.metadata, { notes: 'bigger' });
    t.equal(patched.body.domain, 'acme.com');
    const cleared = await owner.live('PATCH', `${base}/${co.id}`, { domain: null });
    t.equal(cleared.body.domain, null, 'domain: null clears it');

    const deleted = await owner.live('DELETE', `${base}/${co.id}`);
    t.equal(deleted.status, 200);
    t.same(deleted.body, cleared.body, 'DELETE returns the deleted company');
    assertNotFound(t, await owner.live('GET', `${base}/${co.id}`), 'after delete');
    t.same(ids(await owner.live('GET', base)), []);
  });
}

t.test('_count.customers, domain auto-link both ways, delete unlinks contacts', async (t) => {
  const { owner, brand, base } = await setup();
  // Contacts first: creating the company links the unlinked ones of its domain.
  const early = await post(owner.live, `${base}/contacts`, { email: 'early@acme.com', name: 'Early' });
  const sub = await post(owner.live, `${base}/contacts`, { email: 'x@mail.acme.com' });
  const elsewhere = await post(owner.live, `${base}/companies`, { name: 'Elsewhere' });
  const pinned = await post(owner.live, `${base}/contacts`, { email: 'pinned@acme.com', companyId: elsewhere.id });
  const acme = await post(owner.live, `${base}/companies`, { name: 'Acme', domain: 'acme.com' });
  t.same(acme._count, { customers: 1 }, 'the existing acme.com contact was linked on create');
  t.equal((await owner.live('GET', `${base}/contacts/${early.id}`)).body.companyId, acme.id);
  t.equal((await owner.live('GET', `${base}/contacts/${sub.id}`)).body.companyId, null, 'a subdomain is not the domain');
  t.equal((await owner.live('GET', `${base}/contacts/${pinned.id}`)).body.companyId, elsewhere.id, 'a contact with a company stays');

  // Contacts after: a new contact of the domain is linked when no companyId is given.
  const late = await post(owner.live, `${base}/customers`, { email: 'Late@ACME.com' });
  t.equal(late.companyId, acme.id);
  t.same(late.company, { id: acme.id, name: 'Acme' });
  const optOut = await post(owner.live, `${base}/contacts`, { email: 'optout@acme.com', companyId: null });
  t.equal(optOut.companyId, null, 'companyId: null opts out of auto-linking');
  const explicit = await post(owner.live, `${base}/contacts`, { email: 'explicit@acme.com', companyId: elsewhere.id });
  t.equal(explicit.companyId, elsewhere.id, 'an explicit companyId wins');
  t.equal((await post(owner.live, `${base}/contacts`, { email: 'z@other.com' })).companyId, null, 'no company for other domains');

  t.same((await owner.live('GET', `${base}/companies/${acme.id}`)).body._count, { customers: 2 });
  const listed = await owner.live('GET', `${base}/companies?sort=name&order=asc`);
  t.same(
    listed.body.data.map((c: { name: string; _count: { customers: number } }) => [c.name, c._count.customers]),
    [
      ['Acme', 2],
      ['Elsewhere', 2],
    ],
  );
  const byCompany = await owner.live('GET', `${base}/contacts?companyId=${acme.id}&sort=email&order=asc`);
  t.same(
    byCompany.body.data.map((c: { email: string }) => c.email),
    ['early@acme.com', 'late@acme.com'],
    'contacts filtered by companyId',
  );

  // Setting a domain later links that domain's unlinked contacts.
  const moved = await owner.live('PATCH', `${base}/companies/${elsewhere.id}`, { domain: 'other.com' });
  t.equal(moved.status, 200);
  t.same(moved.body._count, { customers: 3 });

  const deleted = await owner.live('DELETE', `${base}/companies/${acme.id}`);
  t.equal(deleted.status, 200);
  t.same(deleted.body._count, { customers: 2 }, 'the deleted company as it was');
  for (const c of [early, late]) {
    const after = await owner.live('GET', `${base}/contacts/${c.id}`);
    t.equal(after.status, 200, 'the contact stays');
    t.equal(after.body.companyId, null, 'and is unlinked');
    t.equal(after.body.company, null);
  }
  t.equal(Number((await db('contacts').where({ brandId: brand.id }).count({ n: '*' }).first())!.n), 7, 'no contact deleted');
});

t.test('domains are unique per brand (409), validated (400)', async (t) => {
  const { owner, base } = await setup();
  await post(owner.live, `${base}/companies`, { name: 'Acme', domain: 'acme.com' });
  assertErrorShape(t, await owner.live('POST', `${base}/companies`, { name: 'Acme 2', domain: '@ACME.com' }), 409, 'company_domain_taken');
  const other = await post(owner.live, `${base}/companies`, { name: 'Other' });
  assertErrorShape(t, await owner.live('PATCH', `${base}/companies/${other.id}`, { domain: 'acme.com' }), 409, 'company_domain_taken');
  t.equal(await post(owner.live, `${base}/companies`, { name: 'No domain' }).then((c) => c.domain), null, 'many companies may have no domain');
  t.equal((await owner.live('POST', `${base}/companies`, { name: 'Sub', domain: 'eu.acme.com' })).status, 201, 'a subdomain is another domain');
  const otherBrand = await makeBrand(owner.live, 'Other brand');
  t.equal((await owner.live('POST', `/v1/brands/${otherBrand.id}/companies`, { name: 'Acme', domain: 'acme.com' })).status, 201, 'another brand may use it');

  for (const domain of ['not a domain', 'acme', 'http://acme.com', 'acme..com', '-acme.com', 'acme.com/path', '1.2.3.4', 'a@b.com']) {
    const res = await owner.live('POST', `${base}/companies`, { name: 'Bad', domain });
    assertErrorShape(t, res, 400, 'invalid_domain');
    t.same(res.body.errors, [{ field: 'domain', message: 'is not a domain name' }], domain);
  }
  assertErrorShape(t, await owner.live('POST', `${base}/companies`, {}), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/companies`, { name: '' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/companies`, { name: 'X', website: 'x' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('PATCH', `${base}/companies/${other.id}`, {}), 400, 'validation_failed');
  for (const query of ['limit=0', 'limit=101', 'sort=bogus', 'sort=email', 'order=up', 'unknown=1']) {
    assertErrorShape(t, await owner.live('GET', `${base}/companies?${query}`), 400, 'validation_failed');
  }
});

t.test('list: search by name or domain, pagination walk across inserts, cursor checks', async (t) => {
  const { owner, base } = await setup();
  const originals: string[] = [];
  for (let i = 0; i < 18; i++) originals.push((await post(owner.live, `${base}/companies`, { name: `Firm ${i}`, domain: `firm${i}.example` })).id);
  const zurich = await post(owner.live, `${base}/companies`, { name: 'Zürich Versicherung', domain: 'zurich-ins.ch' });
  t.same(ids(await owner.live('GET', `${base}/companies?search=ZÜRICH`)), [zurich.id], 'name, case-insensitive');
  t.same(ids(await owner.live('GET', `${base}/companies?search=zurich`)), [zurich.id], 'accent-insensitive');
  t.same(ids(await owner.live('GET', `${base}/companies?search=INS.CH`)), [zurich.id], 'domain');
  t.equal((await owner.live('GET', `${base}/companies?search=firm1`)).body.data.length, 9, 'firm1, firm10..firm17');

  for (const [sort, order] of [
    ['createdAt', 'desc'],
    ['name', 'asc'],
  ] as const) {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: Reply = await owner.live('GET', `${base}/companies?limit=5&sort=${sort}&order=${order}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      t.equal(res.status, 200);
      seen.push(...ids(res));
      cursor = res.body.pagination.nextCursor;
      await post(owner.live, `${base}/companies`, { name: `AAA ${sort} ${pages}` });
      await post(owner.live, `${base}/companies`, { name: `zzz ${sort} ${pages}` });
      pages++;
    } while (cursor && pages < 20);
    t.equal(new Set(seen).size, seen.length, `${sort}: nothing repeated`);
    for (const id of [...originals, zurich.id]) t.equal(seen.filter((s) => s === id).length, 1, `${sort}: ${id} once`);
  }
  const first = await owner.live('GET', `${base}/companies?limit=2&search=firm`);
  const cursor = first.body.pagination.nextCursor as string;
  assertErrorShape(t, await owner.live('GET', `${base}/companies?limit=2&search=firm1&cursor=${encodeURIComponent(cursor)}`), 400, 'cursor_mismatch');
  assertErrorShape(t, await owner.live('GET', `${base}/companies?limit=2&search=firm&cursor=${encodeURIComponent(cursor.slice(1))}`), 400, 'invalid_cursor');
});

t.test('401 and 404 (other account, other mode, other brand, limited key) on every company route', async (t) => {
  const { owner, brand, base } = await setup();
  const co = await post(owner.live, `${base}/companies`, { name: 'Secret Co', domain: 'secret.com' });
  const stranger = await signup(app);
  const otherBrand = await makeBrand(owner.live, 'Other');
  const limited = client(app, (await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'other only', brandIds: [otherBrand.id] })).body.key);
  const bogus = client(app, 'sk_test_' + 'x'.repeat(43));
  const routes = (b: string): [string, string, unknown?][] => [
    ['POST', `${b}/companies`, { name: 'Intruder' }],
    ['GET', `${b}/companies`],
    ['GET', `${b}/companies/${co.id}`],
    ['PATCH', `${b}/companies/${co.id}`, { name: 'Stolen' }],
    ['DELETE', `${b}/companies/${co.id}`],
  ];
  for (const prefix of PREFIXES) {
    for (const [method, url, body] of routes(`${prefix}/${brand.id}`)) {
      assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
      assertErrorShape(t, await bogus(method, url, body), 401, 'invalid_api_key');
      assertNotFound(t, await stranger.live(method, url, body), `other account ${method} ${url}`);
      assertNotFound(t, await owner.test(method, url, body), `test mode ${method} ${url}`);
      assertNotFound(t, await limited(method, url, body), `limited key ${method} ${url}`);
    }
    for (const [method, url, body] of routes(`${prefix}/${otherBrand.id}`).slice(2)) {
      assertNotFound(t, await owner.live(method, url, body), `other brand ${method} ${url}`);
      assertNotFound(t, await limited(method, url, body), `limited key, foreign id ${method} ${url}`);
    }
  }
  const after = await owner.live('GET', `${base}/companies/${co.id}`);
  t.equal(after.body.name, 'Secret Co', 'unchanged');
  t.equal(Number((await db('companies').where({ name: 'Intruder' }).count({ n: '*' }).first())!.n), 0, 'nothing created');
});

t.test('every company route is in /v1/openapi.json under both brand prefixes', async (t) => {
  const paths = (await anonymous('GET', '/v1/openapi.json')).body.paths;
  for (const prefix of PREFIXES) {
    const base = `${prefix}/{brandId}/companies`;
    t.ok(paths[base]?.get && paths[base]?.post, `${base}: GET and POST`);
    const one = paths[`${base}/{companyId}`];
    t.ok(one?.get && one?.patch && one?.delete, `${base}/{companyId}: GET, PATCH, DELETE`);
  }
});
