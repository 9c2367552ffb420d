import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, client, makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
import { deliverMail, from, mailsTo, sessionToken } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// POST /v1/brands/{brandId}/portal/token and /portal/magic-link (and under /v1/workspaces),
// POST /v1/portal/verify, POST /v1/portal/refresh: how a customer gets a portal token, what it
// opens (the portal routes only), and everything that ends it.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-portal-tokens-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
let now = testNow();
const { app, db } = await testApp(
  t,
  { TICKETD_DATA_DIR: dataDir, TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: '10000' },
  { clock: () => now },
);
const services = servicesOf(db);
const PORTAL = 'https://help.acme.example';

const owner = await signup(app);
const brand = await makeBrand(owner.live, 'Acme');
const base = `/v1/brands/${brand.id}`;
t.equal((await owner.live('PATCH', base, { portalOrigins: [PORTAL, 'http://localhost:3000'] })).status, 200, 'the brand lists its portal origins');

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const hours = (ms: number) => ms / 3_600_000;

/** A portal token minted with the owner's live key, and a client holding it. */
async function customer(email: string, extra: Record<string, unknown> = {}, url = `${base}/portal/token`) {
  const minted = await mustCreate(owner.live, url, { email, ...extra });
  return { ...minted, call: client(app, minted.token as string) };
}

t.test("minting: both spellings, the contact found or created, the token's lifetime", async (t) => {
  const sdk = await owner.live('POST', `${base}/portal/token`, { email: ' Ada@Example.COM ', name: 'Ada Lovelace', companyName: 'Engines', sourceOrgId: 'org_1' });
  t.equal(sdk.status, 201);
  t.match(sdk.body, { object: 'portal_token', token: /^pt_[0-9A-Za-z]{43}$/, customerId: /^cus_/, email: 'ada@example.com', name: 'Ada Lovelace', brandId: brand.id });
  t.equal(sdk.body.accessToken, sdk.body.token, 'token and accessToken are the same value');
  t.equal(Math.round(hours(Date.parse(sdk.body.expiresAt) - now)), 24, 'default lifetime: 24 hours');
  t.equal(sdk.body.expiresIn, 24 * 3600);

  const contacts = (await owner.live('GET', `${base}/contacts?search=ada`)).body.data;
  t.equal(contacts.length, 1, 'the customer became a contact of the brand');
  t.match(contacts[0], { id: sdk.body.customerId, email: 'ada@example.com', name: 'Ada Lovelace' });

  const spec = await owner.live('POST', `/v1/workspaces/${brand.id.replace(/^br_/, 'ws_')}/portal/token`, {
    customerEmail: 'ada@example.com',
    customerName: 'Someone Else',
    expiresIn: '30m',
  });
  t.equal(spec.status, 201, "the interface's spelling, under /v1/workspaces");
  t.equal(spec.body.customerId, sdk.body.customerId, 'the same contact is found again');
  t.equal(spec.body.name, 'Ada Lovelace', "an existing contact's name is kept");
  t.equal(Math.round((Date.parse(spec.body.expiresAt) - now) / 60_000), 30, 'expiresIn 30m');
  t.not(spec.body.token, sdk.body.token, 'every mint is a new token');

  for (const [expiresIn, minutes] of [
    ['7d', 7 * 24 * 60],
    [3600, 60],
    ['5m', 5],
    [' 2 h ', 120],
  ] as const) {
    const res = await owner.live('POST', `${base}/portal/token`, { email: 'ada@example.com', expiresIn });
    t.equal(res.status, 201, `expiresIn ${JSON.stringify(expiresIn)}`);
    t.equal(Math.round((Date.parse(res.body.expiresAt) - now) / 60_000), minutes);
  }

  const stored = (await db('portal_tokens').where({ brandId: brand.id, contactId: sdk.body.customerId }).select('tokenHash')) as { tokenHash: string }[];
  t.ok(
    stored.some((r) => r.tokenHash === sha256(sdk.body.token)),
    'stored as its SHA-256',
  );
  const text = JSON.stringify(await db('portal_tokens').select('*'));
  t.notOk(text.includes(sdk.body.token.slice(3)), 'the token itself is stored nowhere');

  const logged = (await owner.live('GET', `${base}/logs?event=portal_token.created`)).body.data;
  t.ok(logged.length >= 2, 'each mint is in the audit log');
  t.match(logged[0], { entityType: 'portal_token', performerType: 'api', metadata: { contactId: sdk.body.customerId } });
});

t.test('minting: bad input is a 400 in the error shape and creates no contact', async (t) => {
  const before = Number((await db('contacts').count({ n: '*' }))[0]!.n);
  const cases: [string, unknown, string][] = [
    ['no email', { name: 'Nobody' }, 'email_required'],
    ['two different emails', { email: 'a@example.com', customerEmail: 'b@example.com' }, 'invalid_request'],
    ['a lifetime too short', { email: 'c@example.com', expiresIn: '1m' }, 'invalid_expires_in'],
    ['a lifetime too long', { email: 'c@example.com', expiresIn: '8d' }, 'invalid_expires_in'],
    ['seconds too long', { email: 'c@example.com', expiresIn: 10_000_000 }, 'invalid_expires_in'],
    ['a lifetime that is no duration', { email: 'c@example.com', expiresIn: 'tomorrow' }, 'validation_failed'],
    ['not an email', { email: 'not-an-email' }, 'validation_failed'],
    ['an unknown field', { email: 'c@example.com', role: 'admin' }, 'validation_failed'],
  ];
  for (const [label, body, code] of cases) {
    const res = await owner.live('POST', `${base}/portal/token`, body);
    t.test(label, async (t) => assertErrorShape(t, res, 400, code));
  }
  t.equal(Number((await db('contacts').count({ n: '*' }))[0]!.n), before, 'no contact was created');
});

t.test('who may mint: a key of the account (not the other mode, not another account), a member of the brand', async (t) => {
  t.equal((await owner.test('POST', `${base}/portal/token`, { email: 'x@example.com' })).status, 404, 'the test-mode key: 404');
  const stranger = await signup(app);
  t.equal((await stranger.live('POST', `${base}/portal/token`, { email: 'x@example.com' })).status, 404, 'another account: 404');

  const other = await makeBrand(owner.live, 'Other');
  const scoped = await mustCreate(owner.live, '/v1/accounts/me/api-keys', { name: 'Other desk', brandIds: [other.id] });
  t.equal((await client(app, scoped.key)('POST', `${base}/portal/token`, { email: 'x@example.com' })).status, 404, 'a key limited to another brand: 404');

  const ctx = tenantCtx(systemCtx(services), owner.accountId, true);
  const mine = await members.add(ctx, { email: 'desk@example.com', role: 'member', brandIds: [brand.id] });
  const theirs = await members.add(ctx, { email: 'elsewhere@example.com', role: 'member', brandIds: [other.id] });
  const asMine = client(app, await sessionToken(app, services, owner.accountId, mine.email));
  const asTheirs = client(app, await sessionToken(app, services, owner.accountId, theirs.email));
  const minted = await asMine('POST', `${base}/portal/token`, { email: 'member-made@example.com' });
  t.equal(minted.status, 201, 'a member of the brand, with a session');
  t.equal((await asTheirs('POST', `${base}/portal/token`, { email: 'x@example.com' })).status, 404, 'a member of another brand: 404');

  const token = client(app, minted.body.token);
  t.equal((await token('GET', '/v1/portal/tickets')).status, 200, 'the token works');
  const ownerEmail = (await owner.live('GET', '/v1/accounts/me/members')).body.data[0].email;
  const asOwner = client(app, await sessionToken(app, services, owner.accountId, ownerEmail));
  t.equal((await asOwner('DELETE', `/v1/auth/members/${mine.id}`)).status, 200, 'the owner removes the member');
  assertErrorShape(t, await token('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
  t.comment('a token minted by a member ends when the member is removed');
});

t.test('a portal token opens the portal routes and nothing else; nothing else opens them', async (t) => {
  const { call, token } = await customer('only-portal@example.com');
  t.equal((await call('GET', '/v1/portal/tickets')).status, 200);
  for (const [method, url] of [
    ['GET', '/v1/brands'],
    ['GET', base],
    ['GET', `${base}/tickets`],
    ['GET', `${base}/contacts`],
    ['GET', `${base}/statuses`],
    ['POST', `${base}/portal/token`],
    ['GET', '/v1/tickets'],
    ['GET', '/v1/auth/session'],
    ['GET', '/v1/accounts/me'],
  ] as const) {
    const res = await call(method, url, method === 'POST' ? { email: 'x@example.com' } : undefined);
    t.test(`${method} ${url}`, async (t) => assertErrorShape(t, res, 401, 'portal_token_not_allowed'));
  }
  assertErrorShape(t, await owner.live('GET', '/v1/portal/tickets'), 401, 'portal_token_required');
  const session = client(app, await sessionToken(app, services, owner.accountId, (await owner.live('GET', '/v1/accounts/me/members')).body.data[0].email));
  assertErrorShape(t, await session('GET', '/v1/portal/tickets'), 401, 'portal_token_required');
  assertErrorShape(t, await client(app)('GET', '/v1/portal/tickets'), 401, 'missing_credentials');
  const tampered = token.slice(0, -1) + (token.endsWith('a') ? 'b' : 'a');
  assertErrorShape(t, await client(app, tampered)('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
  assertErrorShape(t, await client(app, `${token}x`)('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
});

t.test('expiry, refresh, and what revokes a token', async (t) => {
  const first = await customer('refresh@example.com', { expiresIn: '1h' });
  now += 30 * 60_000;
  const refreshed = await first.call('POST', '/v1/portal/refresh');
  t.equal(refreshed.status, 200);
  t.match(refreshed.body, { object: 'portal_token', token: /^pt_/, customerId: first.customerId, email: 'refresh@example.com' });
  t.not(refreshed.body.token, first.token, 'a new token');
  t.equal(refreshed.body.expiresAt, new Date(now + 3600_000).toISOString(), 'the same lifetime, from now');
  t.equal((await first.call('GET', '/v1/portal/tickets')).status, 200, 'the old one works until its own expiry');

  now += 31 * 60_000;
  assertErrorShape(t, await first.call('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
  assertErrorShape(t, await first.call('POST', '/v1/portal/refresh'), 401, 'invalid_portal_token');
  t.comment('an expired token can neither be used nor refreshed');
  t.equal((await client(app, refreshed.body.token)('GET', '/v1/portal/tickets')).status, 200, 'the refreshed one works');
  now += 30 * 60_000;
  assertErrorShape(t, await client(app, refreshed.body.token)('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
});

t.test("deleting the contact or the brand, or revoking the minting key, ends the customer's tokens", async (t) => {
  const gone = await customer('deleted-contact@example.com');
  t.equal((await owner.live('DELETE', `${base}/contacts/${gone.customerId}`)).status, 200);
  assertErrorShape(t, await gone.call('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
  t.equal(Number((await db('portal_tokens').where({ contactId: gone.customerId }).count({ n: '*' }))[0]!.n), 0, 'its rows went with the contact');

  const key = await mustCreate(owner.live, '/v1/accounts/me/api-keys', { name: 'Portal backend' });
  const byKey = await mustCreate(client(app, key.key), `${base}/portal/token`, { email: 'by-key@example.com' });
  const byOwnerKey = await customer('by-key@example.com');
  const refreshed = await client(app, byKey.token)('POST', '/v1/portal/refresh');
  t.equal(refreshed.status, 200);
  t.equal((await owner.live('DELETE', `/v1/accounts/me/api-keys/${key.id}`)).status, 200, 'the key is revoked');
  assertErrorShape(t, await client(app, byKey.token)('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
  assertErrorShape(t, await client(app, refreshed.body.token)('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
  t.comment('a refresh carries its grantor: it does not outlive the key either');
  t.equal((await byOwnerKey.call('GET', '/v1/portal/tickets')).status, 200, "the same customer's token from another key still works");

  const doomed = await makeBrand(owner.live, 'Doomed');
  const inDoomed = await customer('doomed@example.com', {}, `/v1/brands/${doomed.id}/portal/token`);
  await makeTicket(owner.live, `/v1/brands/${doomed.id}`, { title: 'Soon gone', customerEmail: 'doomed@example.com' });
  t.equal((await inDoomed.call('GET', '/v1/portal/tickets')).body.data.length, 1);
  t.equal((await owner.live('DELETE', `/v1/brands/${doomed.id}?confirm=true`)).status, 200);
  assertErrorShape(t, await inDoomed.call('GET', '/v1/portal/tickets'), 401, 'invalid_portal_token');
});

t.test("CORS: only portal origins; a token works from its own brand's origins only", async (t) => {
  const { call } = await customer('cors@example.com');
  const preflight = (origin: string) =>
    app.inject({
      method: 'OPTIONS',
      url: '/v1/portal/tickets',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,x-idempotency-key' },
    });
  const ok = await preflight(PORTAL);
  t.equal(ok.headers['access-control-allow-origin'], PORTAL, "the brand's portal origin may call");
  t.match(String(ok.headers['access-control-allow-headers']), /X-Idempotency-Key/i);
  t.notOk((await preflight('https://evil.example')).headers['access-control-allow-origin'], 'an origin no brand lists gets no CORS headers');

  const other = await makeBrand(owner.live, 'Sister');
  await owner.live('PATCH', `/v1/brands/${other.id}`, { portalOrigins: ['https://sister.example'] });
  const fromOwn = await call('GET', '/v1/portal/tickets', undefined, { origin: PORTAL });
  t.equal(fromOwn.status, 200);
  t.equal(fromOwn.headers['access-control-allow-origin'], PORTAL);
  const fromSister = await call('GET', '/v1/portal/tickets', undefined, { origin: 'https://sister.example' });
  assertErrorShape(t, fromSister, 403, 'origin_not_allowed');
  t.comment("another brand's portal origin cannot use this brand's token");
  const fromEvil = await call('GET', '/v1/portal/tickets', undefined, { origin: 'https://evil.example' });
  assertErrorShape(t, fromEvil, 403, 'origin_not_allowed');
  t.notOk(fromEvil.headers['access-control-allow-origin'], 'and a browser there could not even read that');
  t.equal((await call('GET', '/v1/portal/tickets')).status, 200, 'a server (no Origin) may call');
});

t.test("the magic link: only to a page of the brand's portal, single use, through the outbox", async (t) => {
  const outboxRows = async () => Number((await db('outbox').where({ event: 'mail.portal_link' }).count({ n: '*' }))[0]!.n);
  const before = await outboxRows();
  for (const portalUrl of ['https://evil.example/help', 'https://help.acme.example.evil.example/', 'https://user:pw@help.acme.example/', 'javascript:alert(1)']) {
    const res = await owner.live('POST', `${base}/portal/magic-link`, { email: 'linked@example.com', portalUrl });
    t.test(portalUrl, async (t) => assertErrorShape(t, res, 400, portalUrl.startsWith('javascript') ? 'validation_failed' : 'portal_url_not_allowed'));
  }
  const bare = await makeBrand(owner.live, 'No portal');
  assertErrorShape(t, await owner.live('POST', `/v1/brands/${bare.id}/portal/magic-link`, { email: 'linked@example.com', portalUrl: `${PORTAL}/` }), 400, 'portal_url_not_allowed');
  t.equal(await outboxRows(), before, 'nothing was mailed');

  const sent = await owner.live('POST', `${base}/portal/magic-link`, { email: 'Linked@Example.com', name: 'Lin Ked', portalUrl: `${PORTAL}/support?lang=en` });
  t.equal(sent.status, 200);
  t.match(sent.body, { success: true, message: /linked@example\.com/ });
  t.equal(await outboxRows(), before + 1, 'one mail queued');
  await deliverMail(services);
  const mails = await mailsTo(services, 'linked@example.com');
  t.equal(mails.length, 1);
  t.match(mails[0]!.from?.value[0], { name: 'Acme' }, 'from the brand');
  const link = new URL(/https:\/\/help\.acme\.example\/support\?\S+/.exec(mails[0]!.text ?? '')![0]);
  t.equal(link.searchParams.get('lang'), 'en', 'the page keeps its own query');
  const linkToken = link.searchParams.get('token')!;
  t.match(linkToken, /^pl_/);

  const anon = from(app, '203.0.113.7');
  const foreign = await anon('POST', '/v1/portal/verify', { token: linkToken }, { origin: 'https://evil.example' });
  t.equal(foreign.status, 403, 'spent from another site: 403');
  const verified = await anon('POST', '/v1/portal/verify', { token: linkToken }, { origin: PORTAL });
  t.equal(verified.status, 200, 'the refused attempt did not spend the link');
  t.match(verified.body, { token: /^pt_/, email: 'linked@example.com', name: 'Lin Ked', customerId: /^cus_/ });
  t.equal((await client(app, verified.body.token)('GET', '/v1/portal/tickets')).status, 200, 'the token works');
  const again = await anon('POST', '/v1/portal/verify', { token: linkToken });
  t.equal(again.status, 400, 'a link works once');
  t.equal((again.body as { code: string }).code, 'invalid_token');

  await owner.live('POST', `${base}/portal/magic-link`, { email: 'late@example.com', portalUrl: PORTAL });
  await deliverMail(services);
  const late = new URL(/https:\/\/help\.acme\.example\S*/.exec((await mailsTo(services, 'late@example.com'))[0]!.text ?? '')![0]).searchParams.get('token')!;
  now += 16 * 60_000;
  t.equal((await anon('POST', '/v1/portal/verify', { token: late })).status, 400, 'an expired link: 400');
  for (const token of ['pl_short', `pt_${'a'.repeat(43)}`, `ml_${'a'.repeat(43)}`]) {
    t.equal((await anon('POST', '/v1/portal/verify', { token })).status, 400, `a malformed or foreign token (${token.slice(0, 3)}): 400`);
  }
});

t.test('every portal route is in the OpenAPI document, with the credential it takes', async (t) => {
  const doc = JSON.parse((await app.inject({ method: 'GET', url: '/v1/openapi.json' })).body) as {
    paths: Record<string, Record<string, { security?: Record<string, unknown>[] }>>;
    components: { securitySchemes: Record<string, unknown> };
  };
  t.ok(doc.components.securitySchemes.portalToken, 'the portalToken scheme');
  const portalRoutes = [
    ['post', '/v1/portal/refresh'],
    ['get', '/v1/portal/tickets'],
    ['post', '/v1/portal/tickets'],
    ['get', '/v1/portal/tickets/{ticketId}'],
    ['post', '/v1/portal/tickets/{ticketId}/comments'],
    ['post', '/v1/portal/tickets/attachments/pending'],
    ['post', '/v1/portal/tickets/attachments/pending/{attachmentId}/confirm'],
    ['post', '/v1/portal/tickets/{ticketId}/attachments'],
    ['post', '/v1/portal/tickets/{ticketId}/attachments/{attachmentId}/confirm'],
    ['get', '/v1/portal/tickets/{ticketId}/attachments'],
    ['get', '/v1/portal/tickets/{ticketId}/attachments/{attachmentId}'],
  ];
  for (const [method, path] of portalRoutes) t.same(doc.paths[path]?.[method]?.security, [{ portalToken: [] }], `${method.toUpperCase()} ${path}: portal token`);
  t.ok(doc.paths['/v1/portal/verify']?.post, 'POST /v1/portal/verify');
  t.notOk(doc.paths['/v1/portal/verify']?.post?.security, 'verify takes no credential');
  for (const family of ['brands', 'workspaces']) {
    for (const route of ['token', 'magic-link']) {
      const op = doc.paths[`/v1/${family}/{brandId}/portal/${route}`]?.post;
      t.same(op?.security, [{ apiKey: [] }, { session: [] }, { sessionCookie: [] }], `POST /v1/${family}/{brandId}/portal/${route}: a key or a session`);
    }
  }
});
