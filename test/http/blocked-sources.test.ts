import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as blockedSources from '../../server/domains/blocked-sources/service.js';
import { assertErrorShape, assertNotFound, client, makeBrand, mustCreate, ownerWithBrand, type Reply, signup, testApp, servicesOf } from '../helpers/app.js';

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

const PREFIXES = ['/v1/brands', '/v1/workspaces'] as const;

const setup = () => ownerWithBrand(app);

const post = mustCreate;

const emails = (res: Reply): string[] => res.body.data.map((c: { email: string }) => c.email).sort();

for (const prefix of PREFIXES) {
  t.test(`${prefix}/:id/blocked-sources: block, list, unblock`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `${prefix}/${brand.id}/blocked-sources`;
    const email = await owner.live('POST', base, { value: '  Spammer@Example.COM ', reason: 'abuse' });
    t.equal(email.status, 201);
    t.match(email.body, { brandId: brand.id, type: 'email', value: 'spammer@example.com', reason: 'abuse' });
    t.match(email.body.id, /^blk_[0-9a-z]{26}$/);
    const domain = await owner.live('POST', base, { value: 'Spam.COM' });
    t.match(domain.body, { type: 'domain', value: 'spam.com', reason: null });
    const at = await owner.live('POST', base, { value: '@junk.example.org' });
    t.match(at.body, { type: 'domain', value: 'junk.example.org' }, 'a leading @ means a domain');

    const listed = await owner.live('GET', base);
    t.equal(listed.status, 200);
    t.ok(Array.isArray(listed.body), 'a bare array');
    t.same(listed.body, [email.body, domain.body, at.body], 'oldest first');

    const removed = await owner.live('DELETE', `${base}/${domain.body.id}`);
    t.equal(removed.status, 200);
    t.same(removed.body, domain.body, 'DELETE returns what was unblocked');
    t.same((await owner.live('GET', base)).body, [email.body, at.body]);
    assertNotFound(t, await owner.live('DELETE', `${base}/${domain.body.id}`), 'unblocking twice');
  });
}

t.test('duplicates are 409 after normalization; bad values are 400', async (t) => {
  const { owner, brand, base } = await setup();
  const url = `${base}/blocked-sources`;
  await post(owner.live, url, { value: 'spam.com' });
  await post(owner.live, url, { value: 'x@spam.com' });
  for (const value of ['SPAM.com', '@spam.com', ' spam.com. ']) assertErrorShape(t, await owner.live('POST', url, { value }), 409, 'blocked_source_exists');
  assertErrorShape(t, await owner.live('POST', url, { value: 'X@Spam.Com' }), 409, 'blocked_source_exists');
  const other = await makeBrand(owner.live, 'Other');
  t.equal((await owner.live('POST', `/v1/brands/${other.id}/blocked-sources`, { value: 'spam.com' })).status, 201, 'per brand');

  for (const value of ['not a domain', 'localhost', 'a@b', '@', 'a@', 'http://spam.com', 'sp am.com', '1.2.3.4']) {
    const res = await owner.live('POST', url, { value });
    assertErrorShape(t, res, 400, 'invalid_blocked_source');
    t.same(res.body.errors, [{ field: 'value', message: 'is not an email address or a domain' }], `refused: ${value}`);
  }
  assertErrorShape(t, await owner.live('POST', url, {}), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', url, { value: '' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', url, { value: 'ok.com', type: 'domain' }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', url, { value: 42 }), 400, 'validation_failed');
  t.equal(Number((await db('blockedSources').where({ brandId: brand.id }).count({ n: '*' }).first())!.n), 2, 'nothing else stored');
});

t.test('blocking a domain flags and hides its contacts; unblocking restores them', async (t) => {
  const { owner, base } = await setup();
  for (const email of ['x@spam.com', 'y@mail.spam.com', 'ok@notspam.com', 'fine@example.com', 'bad@example.com']) {
    await post(owner.live, `${base}/contacts`, { email });
  }
  const all = ['bad@example.com', 'fine@example.com', 'ok@notspam.com', 'x@spam.com', 'y@mail.spam.com'];
  t.same(emails(await owner.live('GET', `${base}/contacts`)), all, 'nothing blocked yet');

  const domain = await post(owner.live, `${base}/blocked-sources`, { value: 'spam.com' });
  const address = await post(owner.live, `${base}/blocked-sources`, { value: 'BAD@example.com' });
  t.same(emails(await owner.live('GET', `${base}/contacts`)), ['fine@example.com', 'ok@notspam.com'], 'blocked contacts hidden by default');
  t.same(emails(await owner.live('GET', `${base}/customers?hideBlocked=true`)), ['fine@example.com', 'ok@notspam.com']);
  const shown = await owner.live('GET', `${base}/contacts?hideBlocked=false`);
  t.same(emails(shown), all, 'hideBlocked=false shows them');
  const flags = Object.fromEntries(shown.body.data.map((c: { email: string; isBlocked: boolean }) => [c.email, c.isBlocked]));
  t.same(
    flags,
    { 'bad@example.com': true, 'fine@example.com': false, 'ok@notspam.com': false, 'x@spam.com': true, 'y@mail.spam.com': true },
    'isBlocked per contact; subdomains covered, notspam.com not',
  );
  const x = shown.body.data.find((c: { email: string }) => c.email === 'x@spam.com');
  t.equal((await owner.live('GET', `${base}/contacts/${x.id}`)).body.isBlocked, true, 'GET reports it too');
  t.equal((await owner.live('GET', `${base}/contacts/search?q=x@`)).body[0].isBlocked, true, 'autocomplete includes blocked contacts, flagged');
  t.equal((await post(owner.live, `${base}/contacts`, { email: 'new@spam.com' })).isBlocked, true, 'a new contact of a blocked domain is flagged');

  await owner.live('DELETE', `${base}/blocked-sources/${domain.id}`);
  await owner.live('DELETE', `${base}/blocked-sources/${address.id}`);
  const restored = await owner.live('GET', `${base}/contacts`);
  t.same(emails(restored), [...all, 'new@spam.com'].sort(), 'unblocking restores them');
  t.ok(restored.body.data.every((c: { isBlocked: boolean }) => c.isBlocked === false));
});

t.test('isBlocked(ctx, brandId, email): addresses, domains and subdomains, per brand', async (t) => {
  const { owner, brand, base } = await setup();
  const other = await makeBrand(owner.live, 'Other');
  await post(owner.live, `${base}/blocked-sources`, { value: 'example.com' });
  await post(owner.live, `${base}/blocked-sources`, { value: 'one@good.org' });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), owner.accountId, true);
  const cases: [string, boolean][] = [
    ['a@example.com', true],
    ['  A@EXAMPLE.COM ', true],
    ['a@mail.example.com', true],
    ['a@deep.mail.example.com', true],
    ['a@notexample.com', false],
    ['a@example.com.evil.net', false],
    ['a@example.co', false],
    ['one@good.org', true],
    ['ONE@Good.Org', true],
    ['two@good.org', false],
    ['one@sub.good.org', false],
  ];
  for (const [email, expected] of cases) t.equal(await blockedSources.isBlocked(ctx, brand.id, email), expected, `${email}: ${expected}`);
  t.equal(await blockedSources.isBlocked(ctx, other.id, 'a@example.com'), false, 'another brand is not affected');
  await t.rejects(
    blockedSources.isBlocked(tenantCtx(systemCtx(servicesOf(db)), owner.accountId, false), brand.id, 'a@example.com'),
    { statusCode: 404, code: 'not_found' },
    'the other mode cannot see the brand',
  );
});

t.test('401 and 404 (other account, other mode, other brand, limited key) on every blocked-source route', async (t) => {
  const { owner, brand, base } = await setup();
  const src = await post(owner.live, `${base}/blocked-sources`, { value: 'kept.com' });
  const stranger = await signup(app);
  const otherBrand = await makeBrand(owner.live, 'Other');
  const limited = client(app, (await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'other only', brandIds: [otherBrand.id] })).body.key);
  const bogus = client(app, 'sk_live_' + 'y'.repeat(43));
  for (const prefix of PREFIXES) {
    const b = `${prefix}/${brand.id}`;
    const routes: [string, string, unknown?][] = [
      ['POST', `${b}/blocked-sources`, { value: 'intruder.com' }],
      ['GET', `${b}/blocked-sources`],
      ['DELETE', `${b}/blocked-sources/${src.id}`],
    ];
    for (const [method, url, body] of routes) {
      assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
      assertErrorShape(t, await bogus(method, url, body), 401, 'invalid_api_key');
      assertNotFound(t, await stranger.live(method, url, body), `other account ${method} ${url}`);
      assertNotFound(t, await owner.test(method, url, body), `test mode ${method} ${url}`);
      assertNotFound(t, await limited(method, url, body), `limited key ${method} ${url}`);
    }
    assertNotFound(t, await owner.live('DELETE', `${prefix}/${otherBrand.id}/blocked-sources/${src.id}`), 'id of another brand');
    assertNotFound(t, await limited('DELETE', `${prefix}/${otherBrand.id}/blocked-sources/${src.id}`), 'limited key, foreign id');
    t.same((await limited('GET', `${prefix}/${otherBrand.id}/blocked-sources`)).body, [], 'the other brand has none');
  }
  t.same((await owner.live('GET', `${base}/blocked-sources`)).body, [src], 'still blocked, nothing added');
});

t.test('every blocked-source route is in /v1/openapi.json under both brand prefixes', async (t) => {
  const paths = (await anonymous('GET', '/v1/openapi.json')).body.paths;
  for (const prefix of PREFIXES) {
    const base = `${prefix}/{brandId}/blocked-sources`;
    t.ok(paths[base]?.get && paths[base]?.post, `${base}: GET and POST`);
    t.ok(paths[`${base}/{sourceId}`]?.delete, `${base}/{sourceId}: DELETE`);
  }
});
