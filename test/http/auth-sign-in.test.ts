import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { assertErrorShape, client, servicesOf, signup as apiSignup, testApp } from '../helpers/app.js';
import { DASHBOARD, deliverMail, from, linkIn, mailsTo, newestLinkToken, signIn } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// POST /v1/auth/check-email, signup, magic-link, verify; GET /v1/auth/session; POST /v1/auth/logout:
// a team member signs in with nothing but the mail file ticketd writes.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-sign-in-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
let now = testNow();
const advance = (ms: number) => {
  now += ms;
};
const { app, db } = await testApp(
  t,
  {
    TICKETD_DATA_DIR: dataDir,
    TICKETD_DASHBOARD_ORIGINS: DASHBOARD,
    TICKETD_TRUST_PROXY: 'true',
    TICKETD_SESSION_IDLE_TTL_SECONDS: '3600',
    TICKETD_SESSION_MAX_TTL_SECONDS: '10800',
    TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: '6',
    TICKETD_AUTH_RATE_LIMIT_PER_EMAIL_PER_HOUR: '3',
    TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  },
  { clock: () => now },
);
const services = servicesOf(db);
const anonymous = client(app);
const origin = { origin: DASHBOARD };

let seq = 0;
/** A fresh address, and a fresh client address: each test has budgets of its own. */
const fresh = () => {
  seq++;
  return { email: `person-${seq}-${process.pid}@example.com`, ip: `198.51.100.${seq}` };
};

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function count(table: string, where: Record<string, unknown> = {}): Promise<number> {
  const [{ n }] = await db(table).where(where).count({ n: '*' });
  return Number(n);
}

t.test('the whole flow with only the mail file: sign up, follow the mailed link, work, sign out', async (t) => {
  const { email, ip } = fresh();
  const call = from(app, ip);
  const signedUp = await call('POST', '/v1/auth/signup', { email, name: 'Ada Lovelace', organizationName: 'Analytical Engines' }, origin);
  t.equal(signedUp.status, 200, 'signup: 200');
  t.match(signedUp.body, { success: true, organizationId: /^acct_/ });

  await deliverMail(services);
  const mails = await mailsTo(services, email);
  t.equal(mails.length, 1, 'one mail, to the owner');
  const mail = mails[0]!;
  t.match(mail.subject, /Analytical Engines/);
  const link = linkIn(mail);
  t.equal(link.origin, DASHBOARD, 'the link points at the dashboard the request came from');
  t.equal(link.pathname, '/auth/callback');
  const token = link.searchParams.get('token')!;
  t.match(token, /^ml_[0-9A-Za-z]{43}$/);
  t.equal(await count('magic_links', { token_hash: sha256(token) }), 1, 'the token is stored as its hash');
  t.equal(await count('magic_links', { token_hash: token }), 0, 'and not as it is');

  const verified = await anonymous('POST', '/v1/auth/verify', { token });
  t.equal(verified.status, 200, 'verify: 200');
  const v = verified.body;
  t.match(v, {
    success: true,
    sessionToken: /^ts_[0-9A-Za-z]{43}$/,
    customerId: /^mem_/,
    memberId: v.customerId,
    email,
    organizationId: signedUp.body.organizationId,
    orgRole: 'owner',
    connected: true,
    firstName: 'Ada',
    lastName: 'Lovelace',
    session: { id: /^sess_/, object: 'session' },
    account: { id: signedUp.body.organizationId, name: 'Analytical Engines' },
    organization: { id: signedUp.body.organizationId, name: 'Analytical Engines' },
    member: { id: v.memberId, email, role: 'owner' },
  });
  t.equal(await count('sessions', { token_hash: sha256(v.sessionToken) }), 1, 'the session token is stored as its hash');

  const me = client(app, v.sessionToken);
  const session = await me('GET', '/v1/auth/session');
  t.equal(session.status, 200, 'session: 200');
  t.match(session.body, { valid: true, customerId: v.memberId, memberId: v.memberId, email, organizationId: v.organizationId, orgRole: 'owner', connected: true });
  t.ok(Date.parse(session.body.expiresAt) > now, 'expiresAt is in the future');

  const brand = await me('POST', '/v1/brands', { name: 'Engines', slug: `engines-${seq}` });
  t.equal(brand.status, 201, 'the owner creates a brand with the session');
  const ticket = await me('POST', `/v1/brands/${brand.body.id}/tickets`, { title: 'Difference engine jammed' });
  t.equal(ticket.status, 201, 'and a ticket in it');
  const logs = await me('GET', `/v1/brands/${brand.body.id}/tickets/${ticket.body.id}/logs`);
  t.match(
    logs.body[0],
    { event: 'ticket.created', performerType: 'user', source: 'dashboard', performedBy: { type: 'user', id: v.memberId, name: 'Ada Lovelace' } },
    'the audit log names the member',
  );

  const out = await me('POST', '/v1/auth/logout');
  t.equal(out.status, 200, 'logout: 200');
  t.same(out.body, { success: true });
  assertErrorShape(t, await me('GET', '/v1/auth/session'), 401, 'invalid_session');
  assertErrorShape(t, await me('GET', '/v1/brands'), 401, 'invalid_session');
  assertErrorShape(t, await me('POST', '/v1/auth/logout'), 401, 'invalid_session');
});

t.test('check-email: whether the address is a member anywhere', async (t) => {
  const owner = await apiSignup(app);
  const { ip } = fresh();
  const call = from(app, ip);
  const email = (await db('members').where({ id: owner.ownerId }).first()).email as string;
  t.same((await call('POST', '/v1/auth/check-email', { email: ` ${email.toUpperCase()} ` })).body, { exists: true }, 'case and spaces do not matter');
  t.same((await call('POST', '/v1/auth/check-email', { email: `nobody-${seq}@example.com` })).body, { exists: false });
  assertErrorShape(t, await call('POST', '/v1/auth/check-email', { email: 'not an address' }), 400, 'validation_failed');
  assertErrorShape(t, await call('POST', '/v1/auth/check-email', {}), 400, 'validation_failed');
  assertErrorShape(t, await call('POST', '/v1/auth/check-email', { email, extra: 1 }), 400, 'validation_failed');
});

t.test('signup: 400 when the email is a member already, without or with a foreign origin; nothing is created', async (t) => {
  const { email, ip } = fresh();
  const call = from(app, ip);
  const accountsBefore = await count('accounts');
  const missing = await call('POST', '/v1/auth/signup', { email });
  assertErrorShape(t, missing, 400, 'validation_failed');
  t.match(missing.body.message, /origin/);
  for (const foreign of ['https://evil.example', 'https://dash.example.com.evil.example', 'null', 'https://dash.example.com/path']) {
    const res = await call('POST', '/v1/auth/signup', { email }, { origin: foreign });
    assertErrorShape(t, res, 400, 'origin_not_allowed');
  }
  t.equal(await count('accounts'), accountsBefore, 'no account for a refused origin');

  t.equal((await call('POST', '/v1/auth/signup', { email }, { origin: 'http://localhost:5173' })).status, 200, 'a loopback origin is allowed by default');
  const again = await call('POST', '/v1/auth/signup', { email: email.toUpperCase() }, origin);
  assertErrorShape(t, again, 400, 'email_exists');
  t.equal(await count('accounts'), accountsBefore + 1, 'one account for the address');
  assertErrorShape(t, await call('POST', '/v1/auth/signup', { email: 'nope' }, origin), 400, 'validation_failed');
  await deliverMail(services);
  t.equal(linkIn((await mailsTo(services, email))[0]!).origin, 'http://localhost:5173', 'the link points at the origin asked from');
});

t.test('magic-link: a link for a member; 400 for a stranger or a foreign origin, and no mail', async (t) => {
  const { email, ip } = fresh();
  const call = from(app, ip);
  await call('POST', '/v1/auth/signup', { email }, origin);
  const sent = await call('POST', '/v1/auth/magic-link', { email }, origin);
  t.equal(sent.status, 200);
  t.match(sent.body, { success: true, message: /sign-in link/ });

  const stranger = `stranger-${seq}@example.com`;
  const unknown = await call('POST', '/v1/auth/magic-link', { email: stranger }, origin);
  assertErrorShape(t, unknown, 400, 'member_not_found');
  t.match(unknown.body.message, /not found/, 'the dashboard recognises "not found"');
  assertErrorShape(t, await call('POST', '/v1/auth/magic-link', { email }, { origin: 'https://evil.example' }), 400, 'origin_not_allowed');
  assertErrorShape(t, await call('POST', '/v1/auth/magic-link', { email }), 400, 'validation_failed');
  assertErrorShape(t, await call('POST', '/v1/auth/magic-link', { email, organizationId: 'acct_nope' }, origin), 400, 'member_not_found');

  await deliverMail(services);
  t.equal((await mailsTo(services, email)).length, 2, 'the signup link and this one');
  t.equal((await mailsTo(services, stranger)).length, 0, 'nothing to a stranger');
});

t.test('a link works once', async (t) => {
  const { email, ip } = fresh();
  await from(app, ip)('POST', '/v1/auth/signup', { email }, origin);
  const token = await newestLinkToken(services, email);
  const sessionsBefore = await count('sessions');
  t.equal((await anonymous('POST', '/v1/auth/verify', { token })).status, 200);
  const again = await anonymous('POST', '/v1/auth/verify', { token });
  assertErrorShape(t, again, 400, 'invalid_token');
  t.match(again.body.message, /already used or expired/);
  t.equal(await count('sessions'), sessionsBefore + 1, 'one session, not two');
});

t.test('a link expires after 15 minutes', async (t) => {
  const { email, ip } = fresh();
  const call = from(app, ip);
  await call('POST', '/v1/auth/signup', { email }, origin);
  const first = await newestLinkToken(services, email);
  advance(14 * 60_000 + 59_000);
  t.equal((await anonymous('POST', '/v1/auth/verify', { token: first })).status, 200, 'at 14:59 it works');

  await call('POST', '/v1/auth/magic-link', { email }, origin);
  const second = await newestLinkToken(services, email);
  advance(15 * 60_000);
  assertErrorShape(t, await anonymous('POST', '/v1/auth/verify', { token: second }), 400, 'invalid_token');
});

t.test('tampered, unknown and malformed tokens: 400, no session', async (t) => {
  const { email, ip } = fresh();
  await from(app, ip)('POST', '/v1/auth/signup', { email }, origin);
  const token = await newestLinkToken(services, email);
  const flipped = token.slice(0, -1) + (token.endsWith('a') ? 'b' : 'a');
  const sessionsBefore = await count('sessions');
  for (const bad of [flipped, `ml_${'A'.repeat(43)}`, 'ml_short', token.replace('ml_', 'ts_'), `${token}x`]) {
    assertErrorShape(t, await anonymous('POST', '/v1/auth/verify', { token: bad }), 400, 'invalid_token');
  }
  assertErrorShape(t, await anonymous('POST', '/v1/auth/verify', {}), 400, 'validation_failed');
  assertErrorShape(t, await anonymous('POST', '/v1/auth/verify?setCookies=maybe', { token }), 400, 'validation_failed');
  t.equal(await count('sessions'), sessionsBefore, 'no session opened');
  t.equal((await anonymous('POST', '/v1/auth/verify', { token })).status, 200, 'the real token still works after the failed tries');
});

t.test('a session slides with use, ends when idle, and never outlives its cap', async (t) => {
  const { email, ip } = fresh();
  await from(app, ip)('POST', '/v1/auth/signup', { email }, origin);
  const idle = client(app, (await anonymous('POST', '/v1/auth/verify', { token: await newestLinkToken(services, email) })).body.sessionToken);
  advance(50 * 60_000);
  t.equal((await idle('GET', '/v1/auth/session')).status, 200, 'used after 50 minutes');
  advance(50 * 60_000);
  t.equal((await idle('GET', '/v1/auth/session')).status, 200, 'still there 100 minutes in: each use moved the end forward');
  advance(61 * 60_000);
  assertErrorShape(t, await idle('GET', '/v1/auth/session'), 401, 'invalid_session');

  await from(app, ip)('POST', '/v1/auth/magic-link', { email }, origin);
  const busy = client(app, (await anonymous('POST', '/v1/auth/verify', { token: await newestLinkToken(services, email) })).body.sessionToken);
  for (let minutes = 50; minutes < 180; minutes += 50) {
    advance(50 * 60_000);
    const res = await busy('GET', '/v1/auth/session');
    t.equal(res.status, 200, `in use at ${minutes} minutes`);
    t.ok(Date.parse(res.body.expiresAt) <= Date.parse(res.body.session.maxExpiresAt), 'never past the cap');
  }
  advance(30 * 60_000);
  assertErrorShape(t, await busy('GET', '/v1/auth/session'), 401, 'invalid_session');
});

t.test('setCookies=true: an HttpOnly, SameSite=Lax cookie (Secure on https), no token in the body', async (t) => {
  const { email, ip } = fresh();
  await from(app, ip)('POST', '/v1/auth/signup', { email }, origin);
  const plain = await anonymous('POST', '/v1/auth/verify?setCookies=true', { token: await newestLinkToken(services, email) });
  t.equal(plain.status, 200);
  t.notOk('sessionToken' in plain.body, 'the token stays out of the body');
  const cookie = String(plain.headers['set-cookie']);
  t.match(cookie, /^ticketd_session=ts_[0-9A-Za-z]{43}; /);
  t.match(cookie, /; HttpOnly/);
  t.match(cookie, /; SameSite=Lax/);
  t.match(cookie, /; Path=\//);
  t.match(cookie, /; Max-Age=10800/, 'lasts as long as the cap');
  t.notMatch(cookie, /Secure/, 'not Secure over plain http');

  await from(app, ip)('POST', '/v1/auth/magic-link', { email }, origin);
  const secure = await anonymous('POST', '/v1/auth/verify?setCookies=true', { token: await newestLinkToken(services, email) }, { 'x-forwarded-proto': 'https' });
  t.match(String(secure.headers['set-cookie']), /; Secure/, 'Secure over https');

  const jar = { cookie: cookie.split(';')[0]! };
  t.match((await anonymous('GET', '/v1/auth/session', undefined, jar)).body, { valid: true, email }, 'the cookie is a session');
  t.equal((await anonymous('GET', '/v1/brands', undefined, jar)).status, 200, 'on brand routes too');
  const foreign = await anonymous('POST', '/v1/brands', { name: 'X' }, { ...jar, origin: 'https://evil.example' });
  assertErrorShape(t, foreign, 403, 'origin_not_allowed');
  const out = await anonymous('POST', '/v1/auth/logout', undefined, { ...jar, origin: DASHBOARD });
  t.equal(out.status, 200, 'a change from the dashboard origin is fine');
  t.match(String(out.headers['set-cookie']), /^ticketd_session=; Path=\/; Max-Age=0; HttpOnly; SameSite=Lax/, 'logout clears the cookie');
  assertErrorShape(t, await anonymous('GET', '/v1/auth/session', undefined, jar), 401, 'invalid_session');
});

t.test('session and logout: 401 without a session, with an API key, with garbage', async (t) => {
  const owner = await apiSignup(app);
  for (const [label, call, code] of [
    ['no credentials', anonymous, 'missing_credentials'],
    ['an API key', owner.live, 'session_required'],
    ['garbage', client(app, 'ts_garbage'), 'invalid_session'],
    ['a magic-link token', client(app, `ml_${'a'.repeat(43)}`), 'invalid_session'],
  ] as const) {
    assertErrorShape(t, await call('GET', '/v1/auth/session'), 401, code);
    assertErrorShape(t, await call('POST', '/v1/auth/logout'), 401, code);
    t.pass(label);
  }
});

t.test('rate limits: per address and per email, 429 with Retry-After, counted per route, reset after the hour', async (t) => {
  const { ip } = fresh();
  const call = from(app, ip);
  for (let i = 0; i < 6; i++) {
    const res = await call('POST', '/v1/auth/check-email', { email: `flood-${seq}-${i}@example.com` });
    t.equal(res.status, 200);
    // The headers tell the tighter budget: this address's (6 an hour), or this email's (3).
    t.equal(res.headers['x-ratelimit-remaining'], String(Math.min(5 - i, 2)), 'the remaining budget is told');
  }
  const limited = await call('POST', '/v1/auth/check-email', { email: `flood-${seq}-x@example.com` });
  assertErrorShape(t, limited, 429, 'rate_limited');
  t.equal(limited.headers['x-ratelimit-limit'], '6');
  t.equal(limited.headers['x-ratelimit-remaining'], '0');
  const retryAfter = Number(limited.headers['retry-after']);
  t.ok(retryAfter > 0 && retryAfter <= 3600, `Retry-After ${retryAfter} s`);
  // Retry-After is rounded up to whole seconds, so the two agree to within one.
  t.ok(Math.abs(Number(limited.headers['x-ratelimit-reset']) - (now / 1000 + retryAfter)) <= 1, 'X-RateLimit-Reset is when Retry-After ends');
  t.equal((await call('POST', '/v1/auth/magic-link', { email: `flood-${seq}-x@example.com` }, origin)).status, 400, 'another route has its own budget');

  // One address asked from many client addresses: the per-email budget stops the mail.
  const target = fresh();
  await from(app, target.ip)('POST', '/v1/auth/signup', { email: target.email }, origin);
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await from(app, `203.0.113.${seq * 10 + i}`)('POST', '/v1/auth/magic-link', { email: target.email }, origin)).status);
  t.same(statuses, [200, 200, 200, 429, 429], 'three links an hour for one address');
  await deliverMail(services);
  t.equal((await mailsTo(services, target.email)).length, 4, 'the signup mail and three links, no more');

  advance(60 * 60_000);
  t.equal((await call('POST', '/v1/auth/check-email', { email: `flood-${seq}-y@example.com` })).status, 200, 'a new hour, a new budget');
  t.equal((await from(app, '203.0.113.250')('POST', '/v1/auth/magic-link', { email: target.email }, origin)).status, 200);
});

t.test('CORS: a dashboard origin is answered with credentials allowed; others without', async (t) => {
  const preflight = (o: string) =>
    app.inject({ method: 'OPTIONS', url: '/v1/auth/session', headers: { origin: o, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' } });
  const dash = await preflight(DASHBOARD);
  t.equal(dash.headers['access-control-allow-origin'], DASHBOARD);
  t.equal(dash.headers['access-control-allow-credentials'], 'true');
  t.match(String(dash.headers['access-control-allow-headers']), /Authorization/);
  const local = await preflight('http://127.0.0.1:3001');
  t.equal(local.headers['access-control-allow-origin'], 'http://127.0.0.1:3001', 'loopback origins count as dashboard origins');
  const other = await preflight('https://elsewhere.example');
  t.equal(other.headers['access-control-allow-origin'], '*', 'others get the configured corsOrigins (any, no credentials)');
  t.notOk(other.headers['access-control-allow-credentials']);
});

t.test('signIn helper round trip (used by other files) ends in a session', async (t) => {
  const { email, ip } = fresh();
  await from(app, ip)('POST', '/v1/auth/signup', { email }, origin);
  const token = await signIn(app, services, email);
  t.equal((await client(app, token)('GET', '/v1/auth/session')).body.email, email);
});

t.test('signup: 403 when sign-up is closed on the server; nothing is created', async (t) => {
  const closed = await testApp(t, { TICKETD_SIGNUP: 'closed', TICKETD_DASHBOARD_ORIGINS: DASHBOARD });
  const res = await client(closed.app)('POST', '/v1/auth/signup', { email: 'late@example.com' }, origin);
  assertErrorShape(t, res, 403, 'signup_closed');
  t.equal(Number((await closed.db('accounts').count({ n: '*' }))[0]!.n), 0);
});
