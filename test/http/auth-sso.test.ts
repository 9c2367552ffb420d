import t from 'tap';
import { buildApp } from '../../server/app.js';
import { createServices } from '../../server/compose.js';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, client, servicesOf, testApp, testConfig, type Reply } from '../helpers/app.js';
import { startProvider } from '../helpers/oidc-provider.js';
import { receiver } from '../helpers/receiver.js';
import { DASHBOARD, SIGN_IN_TEST_ENV, sessionToken, teamOfThree } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Single sign-on with OpenID Connect: the owner's configuration (GET, PUT, DELETE
// /v1/auth/organization/sso), POST /v1/auth/sso/start and GET /v1/auth/sso/callback, end to end
// against a real OpenID provider on a loopback port (test/helpers/oidc-provider.ts).

const PUBLIC_URL = 'https://ticketd.example.com';
const REDIRECT_URI = `${PUBLIC_URL}/v1/auth/sso/callback`;
let skew = 0;
const env = { ...SIGN_IN_TEST_ENV, TICKETD_PUBLIC_URL: PUBLIC_URL, TICKETD_SSO_ALLOW_PRIVATE: 'true', TICKETD_SSO_TIMEOUT_MS: '2000' };
const { app, db, url } = await testApp(t, env, { clock: () => testNow() + skew });
const services = servicesOf(db);
const idp = await startProvider(t, { redirectUri: REDIRECT_URI });
const anonymous = client(app);
const fromDashboard = { origin: DASHBOARD };

const a = await teamOfThree(app, services);
const b = await teamOfThree(app, services);
const inA = tenantCtx(systemCtx(services), a.owner.accountId, true);
const inB = tenantCtx(systemCtx(services), b.owner.accountId, true);
const alice = await members.add(inA, { email: 'alice@acme.test', name: 'Alice Acme', role: 'member', brandIds: [a.brand.id] });

const config = (fields: Record<string, unknown> = {}) => ({
  issuer: idp.issuer,
  clientId: idp.clientId,
  clientSecret: idp.clientSecret,
  allowedDomains: ['ACME.test', 'acme.test'],
  ...fields,
});
const entries = (accountId: string, event: string) => db('auditLog').where({ accountId, event }).orderBy('id');
const refusals = async (accountId: string) => (await entries(accountId, 'organization.sso_sign_in_refused')).map((e: { metadata: { reason: string } }) => e.metadata.reason);

/** The callback as the browser brings it back from the provider. */
const callback = async (back: URL): Promise<Reply> => anonymous('GET', `/v1/auth/sso/callback${back.search}`);

/** Where a callback sends the browser: the dashboard's page, and what it is told. */
function landing(res: Reply): { page: string; sessionToken: string | null; error: string | null } {
  const location = new URL(String(res.headers.location));
  return { page: `${location.origin}${location.pathname}`, sessionToken: location.searchParams.get('sessionToken'), error: location.searchParams.get('error') };
}

/** Starts single sign-on, logs in at the provider as `person`, and returns the provider's redirect back to ticketd. */
async function throughProvider(person: Parameters<typeof idp.signInAs>[0], start: Record<string, unknown> = { email: person.email }): Promise<URL> {
  const started = await anonymous('POST', '/v1/auth/sso/start', start, fromDashboard);
  if (started.status !== 200) throw new Error(`start failed: ${started.status} ${JSON.stringify(started.body)}`);
  idp.signInAs(person);
  return idp.authorize(started.body.url);
}

/** The whole sign-in: the callback's answer. */
const signInWithSso = async (person: Parameters<typeof idp.signInAs>[0], start?: Record<string, unknown>) => callback(await throughProvider(person, start));

t.test('configuration: owners only, the secret never returned, bad input 400', async (t) => {
  assertErrorShape(t, await a.asOwner('GET', '/v1/auth/organization/sso'), 404, 'sso_not_configured');
  for (const [who, call] of [
    ['admin', a.asAdmin],
    ['member', a.asMember],
  ] as const) {
    assertErrorShape(t, await call('GET', '/v1/auth/organization/sso'), 403, 'insufficient_role');
    assertErrorShape(t, await call('PUT', '/v1/auth/organization/sso', config()), 403, 'insufficient_role');
    assertErrorShape(t, await call('DELETE', '/v1/auth/organization/sso'), 403, 'insufficient_role');
    t.pass(`${who}: refused`);
  }
  assertErrorShape(t, await a.owner.live('PUT', '/v1/auth/organization/sso', config()), 401, 'session_required');

  for (const [body, code] of [
    [config({ allowedDomains: [] }), 'validation_failed'],
    [config({ allowedDomains: undefined }), 'validation_failed'],
    [config({ allowedDomains: ['acme.test', 'not a domain'] }), 'invalid_domain'],
    [config({ allowedDomains: ['alice@acme.test'] }), 'invalid_domain'],
    [config({ defaultRole: 'owner' }), 'validation_failed'],
    [config({ allowMagicLinks: 'no' }), 'validation_failed'],
    [config({ clientSecret: undefined }), 'validation_failed'],
    [config({ clientId: '  ' }), 'validation_failed'],
    [config({ extra: true }), 'validation_failed'],
    [config({ issuer: 'not a url' }), 'sso_issuer_invalid'],
    [config({ issuer: 'ftp://idp.example.com' }), 'sso_issuer_invalid'],
    [config({ issuer: `${idp.issuer}/?tenant=1` }), 'sso_issuer_invalid'],
  ] as const) {
    assertErrorShape(t, await a.asOwner('PUT', '/v1/auth/organization/sso', body), 400, code);
  }
  t.equal((await db('ssoConnections').where({ accountId: a.owner.accountId })).length, 0, 'nothing was stored');
});

t.test('configuration: the issuer is checked by discovery before anything is stored', async (t) => {
  const closed = await receiver(t, () => ({ status: 404, body: 'no such page' }));
  const refused = await a.asOwner('PUT', '/v1/auth/organization/sso', config({ issuer: closed.url }));
  assertErrorShape(t, refused, 400, 'sso_issuer_invalid');
  t.match(refused.body.errors, [{ field: 'issuer' }]);
  const down = await receiver(t, () => ({ status: 503, body: 'down' }));
  assertErrorShape(t, await a.asOwner('PUT', '/v1/auth/organization/sso', config({ issuer: down.url })), 400, 'sso_issuer_unreachable');
  assertErrorShape(t, await a.asOwner('PUT', '/v1/auth/organization/sso', config({ issuer: 'http://127.0.0.1:9' })), 400, 'sso_issuer_unreachable');

  // Without ssoAllowPrivate (the default) a provider on loopback is refused, at registration as on every request.
  const strictConfig = testConfig({ ...env, DATABASE_URL: url, TICKETD_SSO_ALLOW_PRIVATE: 'false' });
  const strictServices = createServices({ clock: testNow, config: strictConfig, db });
  const strict = await buildApp({ config: strictConfig, db, services: strictServices });
  t.teardown(async () => {
    await strict.close();
    await strictServices.close();
  });
  const ownerToken = await sessionToken(app, services, a.owner.accountId, a.ownerEmail);
  const private_ = await client(strict, ownerToken)('PUT', '/v1/auth/organization/sso', config());
  assertErrorShape(t, private_, 400, 'sso_issuer_invalid');
  t.match(private_.body.message, /ssoAllowPrivate/);
  t.equal((await db('ssoConnections').where({ accountId: a.owner.accountId })).length, 0, 'nothing was stored');
});

t.test('configuration: PUT stores it (the secret sealed), GET reads it back without the secret; audited', async (t) => {
  const put = await a.asOwner('PUT', '/v1/auth/organization/sso', config());
  t.equal(put.status, 200);
  t.same(put.body, {
    object: 'sso_connection',
    id: put.body.id,
    organizationId: a.owner.accountId,
    issuer: idp.issuer,
    clientId: idp.clientId,
    clientSecretSet: true,
    allowedDomains: ['acme.test'],
    defaultRole: 'member',
    allowMagicLinks: true,
    redirectUri: REDIRECT_URI,
    createdAt: put.body.createdAt,
    updatedAt: put.body.updatedAt,
  });
  const got = await a.asOwner('GET', '/v1/auth/organization/sso');
  t.same(got.body, put.body);
  t.notOk(JSON.stringify(got.body).includes(idp.clientSecret), 'the secret is not in the answer');
  const row = await db('ssoConnections').where({ accountId: a.owner.accountId }).first();
  t.match(row.clientSecret, /^v1:/, 'stored sealed');
  t.notOk(row.clientSecret.includes(idp.clientSecret));

  const [configured] = await entries(a.owner.accountId, 'organization.sso_configured');
  t.match(configured, { brandId: null, entityType: 'organization', entityId: a.owner.accountId, performerType: 'user', performerId: a.owner.ownerId });
  t.match(configured.metadata, { clientSecretChanged: true });
  t.match(configured.changes, [
    { field: 'issuer', to: idp.issuer },
    { field: 'clientId' },
    { field: 'allowedDomains', to: ['acme.test'] },
    { field: 'defaultRole' },
    { field: 'allowMagicLinks' },
  ]);
  t.notOk(JSON.stringify(configured).includes(idp.clientSecret), 'nor in the audit log');

  // Without clientSecret the stored one is kept (the sign-ins below exchange codes with it).
  const again = await a.asOwner('PUT', '/v1/auth/organization/sso', config({ clientSecret: undefined }));
  t.equal(again.status, 200);
  t.equal((await entries(a.owner.accountId, 'organization.sso_configured')).length, 1, 'no change: not audited again');
  t.equal((await db('ssoConnections').where({ accountId: a.owner.accountId }).first()).clientSecret, row.clientSecret, 'the secret is kept');
  assertErrorShape(t, await b.asOwner('GET', '/v1/auth/organization/sso'), 404, 'sso_not_configured');
  assertErrorShape(t, await b.asOwner('DELETE', '/v1/auth/organization/sso'), 404, 'sso_not_configured');
});

t.test('an existing member signs in: a session opened as a magic link opens one, back at the dashboard', async (t) => {
  const started = await anonymous('POST', '/v1/auth/sso/start', { email: 'Alice@Acme.test' }, fromDashboard);
  t.equal(started.status, 200);
  t.equal(started.body.organizationId, a.owner.accountId);
  const authorization = new URL(started.body.url);
  t.equal(`${authorization.origin}${authorization.pathname}`, `${idp.issuer}/auth`, "the provider's authorization endpoint");
  t.match(Object.fromEntries(authorization.searchParams), {
    client_id: idp.clientId,
    redirect_uri: REDIRECT_URI,
    response_type: 'code',
    code_challenge_method: 'S256',
    code_challenge: /^[\w-]{43}$/,
    state: /^[\w-]{40,}$/,
    nonce: /^[\w-]{40,}$/,
    login_hint: 'alice@acme.test',
  });
  const stored = await db('ssoAttempts').where({ accountId: a.owner.accountId }).orderBy('createdAt', 'desc').first();
  t.notOk(JSON.stringify(stored).includes(authorization.searchParams.get('state')!), 'the state is stored as its hash');
  t.notOk(JSON.stringify(stored).includes(authorization.searchParams.get('nonce')!), 'the nonce is sealed');

  idp.signInAs({ email: 'alice@acme.test', email_verified: true, name: 'Alice from the provider' });
  const res = await callback(await idp.authorize(started.body.url));
  t.equal(res.status, 302);
  const { page, sessionToken: token, error } = landing(res);
  t.equal(page, `${DASHBOARD}/auth/callback`);
  t.equal(error, null);
  t.match(token, /^ts_[0-9A-Za-z]{43}$/);
  const session = await client(app, token!)('GET', '/v1/auth/session');
  t.match(session.body, { valid: true, memberId: alice.id, email: 'alice@acme.test', organizationId: a.owner.accountId, orgRole: 'member' });
  t.equal((await client(app, token!)('GET', `/v1/brands/${a.brand.id}`)).status, 200, 'the session works in her brand');
  const created = (await entries(a.owner.accountId, 'session.created')).at(-1);
  t.match(created, { performerType: 'user', performerId: alice.id, metadata: { memberId: alice.id, via: 'sso' } });
  t.equal((await members.list(inA)).length, 4, 'no member was added');
});

t.test('a new address in an allowed domain joins just in time, with the default role and every brand', async (t) => {
  const first = landing(await signInWithSso({ email: 'newcomer@acme.test', email_verified: true, name: 'New Comer' }));
  t.match(first.sessionToken, /^ts_/);
  const session = await client(app, first.sessionToken!)('GET', '/v1/auth/session');
  t.match(session.body, { valid: true, email: 'newcomer@acme.test', orgRole: 'member', member: { name: 'New Comer' } });
  t.equal((await client(app, first.sessionToken!)('GET', `/v1/brands/${a.brand.id}`)).status, 200, 'the new member sees the brands, as an invitation without brands gives');
  t.equal((await client(app, first.sessionToken!)('GET', `/v1/brands/${b.brand.id}`)).status, 404, "and nothing of another organization's");
  const [joined] = (await entries(a.owner.accountId, 'member.created')).filter((e: { metadata: { email: string } }) => e.metadata.email === 'newcomer@acme.test');
  t.match(joined, { performerType: 'user', performerId: session.body.memberId, metadata: { role: 'member', via: 'sso', allBrands: true } });

  const again = landing(await signInWithSso({ email: 'newcomer@acme.test', email_verified: true }));
  t.match(again.sessionToken, /^ts_/);
  t.equal((await members.list(inA)).filter((m) => m.email === 'newcomer@acme.test').length, 1, 'signing in again adds no one');

  // Someone invited joins by single sign-on as invited (role and brands), the invitation accepted.
  const invited = await a.asOwner('POST', '/v1/auth/members/invite', { email: 'invitee@acme.test', role: 'admin' }, { origin: DASHBOARD });
  const invitee = landing(await signInWithSso({ email: 'invitee@acme.test', email_verified: true }));
  t.match((await client(app, invitee.sessionToken!)('GET', '/v1/auth/session')).body, { memberId: invited.body.memberId, orgRole: 'admin' });
  t.match(await entries(a.owner.accountId, 'member.invite_accepted'), [{ entityId: invited.body.memberId, performerId: invited.body.memberId, metadata: { via: 'sso' } }]);

  t.equal((await a.asOwner('PUT', '/v1/auth/organization/sso', config({ clientSecret: undefined, defaultRole: 'admin' }))).status, 200);
  const admin = landing(await signInWithSso({ email: 'boss@acme.test', email_verified: true }));
  t.match((await client(app, admin.sessionToken!)('GET', '/v1/auth/session')).body, { orgRole: 'admin' }, 'the default role is the configured one');
  t.equal((await a.asOwner('PUT', '/v1/auth/organization/sso', config({ clientSecret: undefined }))).status, 200);
});

t.test('refused: unverified address, address outside the domains, the provider saying no; each audited, nobody added', async (t) => {
  const before = (await members.list(inA)).length;
  for (const [person, code] of [
    [{ email: 'unverified@acme.test', email_verified: false }, 'sso_email_unverified'],
    [{ email: 'string@acme.test', email_verified: 'true' }, 'sso_email_unverified'],
    [{ email_verified: true }, 'sso_email_unverified'],
    [{ email: 'someone@elsewhere.test', email_verified: true }, 'sso_domain_not_allowed'],
    [{ email: 'someone@sub.acme.test', email_verified: true }, 'sso_domain_not_allowed'],
  ] as const) {
    const res = await signInWithSso(person, { organizationId: a.owner.accountId });
    t.equal(res.status, 302);
    t.same(landing(res), { page: `${DASHBOARD}/auth/callback`, sessionToken: null, error: code }, `${JSON.stringify(person)}: ${code}`);
  }
  idp.denyNext();
  const denied = await callback(await idp.authorize((await anonymous('POST', '/v1/auth/sso/start', { organizationId: a.owner.accountId }, fromDashboard)).body.url));
  t.equal(landing(denied).error, 'sso_provider_error');
  t.equal((await members.list(inA)).length, before, 'nobody was added');
  t.same((await refusals(a.owner.accountId)).slice(-6), [
    'sso_email_unverified',
    'sso_email_unverified',
    'sso_email_unverified',
    'sso_domain_not_allowed',
    'sso_domain_not_allowed',
    'sso_provider_error',
  ]);
  const [entry] = (await entries(a.owner.accountId, 'organization.sso_sign_in_refused')).slice(-2);
  t.match(entry, { brandId: null, entityType: 'organization', performerType: 'system', metadata: { email: 'someone@sub.acme.test' } });
});

t.test('the state: unknown 400, replayed refused, expired refused; a code replayed under a new state is refused by the provider', async (t) => {
  assertErrorShape(t, await anonymous('GET', '/v1/auth/sso/callback?code=abc&state=nobody-started-this'), 400, 'sso_state_invalid');
  assertErrorShape(t, await anonymous('GET', '/v1/auth/sso/callback?code=abc'), 400, 'sso_state_invalid');
  assertErrorShape(t, await anonymous('GET', '/v1/auth/sso/callback'), 400, 'sso_state_invalid');

  const back = await throughProvider({ email: 'alice@acme.test', email_verified: true });
  const sessionsBefore = (await db('sessions').where({ memberId: alice.id })).length;
  t.match(landing(await callback(back)).sessionToken, /^ts_/, 'the first callback signs in');
  const replay = landing(await callback(back));
  t.same([replay.sessionToken, replay.error], [null, 'sso_state_invalid'], 'the same code and state again: refused');
  t.equal((await db('sessions').where({ memberId: alice.id })).length, sessionsBefore + 1, 'one session');

  // The code of that sign-in with the state of a new one: the provider refuses the code (spent, and bound to the other PKCE verifier).
  const started = await anonymous('POST', '/v1/auth/sso/start', { email: 'alice@acme.test' }, fromDashboard);
  const stolen = new URL(back);
  stolen.searchParams.set('state', new URL(started.body.url).searchParams.get('state')!);
  t.equal(landing(await callback(stolen)).error, 'sso_code_rejected');

  const late = await throughProvider({ email: 'alice@acme.test', email_verified: true });
  // The clock stays ahead from here: moved back, the entries written later would sort before this
  // refusal's (an entry's time is the services' clock).
  skew += 11 * 60_000;
  t.equal(landing(await callback(late)).error, 'sso_state_invalid', 'after 10 minutes the attempt has expired');
  t.same((await refusals(a.owner.accountId)).slice(-3), ['sso_state_invalid', 'sso_code_rejected', 'sso_state_invalid']);
});

t.test('two callbacks with the same state at once: one session', async (t) => {
  const back = await throughProvider({ email: 'alice@acme.test', email_verified: true });
  const outcomes = (await Promise.all([callback(back), callback(back)])).map(landing);
  t.equal(outcomes.filter((o) => o.sessionToken).length, 1, 'one signs in');
  t.same(
    outcomes.filter((o) => !o.sessionToken).map((o) => o.error),
    ['sso_state_invalid'],
    'the other is refused',
  );
});

t.test("an ID token signed with a key the provider does not publish is refused; the provider's rotated key is believed at once", async (t) => {
  idp.signWithUnpublishedKey();
  try {
    t.equal(landing(await signInWithSso({ email: 'alice@acme.test', email_verified: true })).error, 'sso_token_invalid');
  } finally {
    idp.signWithPublishedKey();
  }
  t.equal((await refusals(a.owner.accountId)).at(-1), 'sso_token_invalid');

  t.match(landing(await signInWithSso({ email: 'alice@acme.test', email_verified: true })).sessionToken, /^ts_/, 'signed in with the first key');
  idp.rotateKey();
  const rotated = landing(await signInWithSso({ email: 'alice@acme.test', email_verified: true }));
  t.equal(rotated.error, null);
  t.match(rotated.sessionToken, /^ts_/, 'and with the new key, moments later: its keys are read again');
});

t.test('start: which organization, from which origin; nothing told of accounts that has no single sign-on', async (t) => {
  assertErrorShape(t, await anonymous('POST', '/v1/auth/sso/start', {}, fromDashboard), 400, 'validation_failed');
  assertErrorShape(t, await anonymous('POST', '/v1/auth/sso/start', { email: 'not an address' }, fromDashboard), 400, 'validation_failed');
  assertErrorShape(t, await anonymous('POST', '/v1/auth/sso/start', { email: 'alice@acme.test' }), 400, 'origin_not_allowed');
  assertErrorShape(t, await anonymous('POST', '/v1/auth/sso/start', { email: 'alice@acme.test' }, { origin: 'https://evil.example' }), 400, 'origin_not_allowed');
  assertErrorShape(t, await anonymous('POST', '/v1/auth/sso/start', { email: 'alice@acme.test', origin: 'https://evil.example' }, fromDashboard), 400, 'origin_not_allowed');
  const bodyOrigin = await anonymous('POST', '/v1/auth/sso/start', { email: 'alice@acme.test', origin: DASHBOARD });
  t.equal(bodyOrigin.status, 200, 'the origin may come in the body');

  for (const body of [{ email: 'someone@example.com' }, { organizationId: b.owner.accountId }, { organizationId: 'acct_doesnotexist0000000000000' }]) {
    assertErrorShape(t, await anonymous('POST', '/v1/auth/sso/start', body, fromDashboard), 400, 'sso_not_configured');
  }
  assertErrorShape(
    t,
    await anonymous('POST', '/v1/auth/sso/start', { email: 'bob@elsewhere.test', organizationId: a.owner.accountId }, fromDashboard),
    400,
    'sso_domain_not_allowed',
  );

  // A second organization claims the domain: an address that is a member of one of them goes there, any other must name one.
  const c = await teamOfThree(app, services);
  t.equal((await c.asOwner('PUT', '/v1/auth/organization/sso', config())).status, 200);
  t.equal((await anonymous('POST', '/v1/auth/sso/start', { email: 'alice@acme.test' }, fromDashboard)).body.organizationId, a.owner.accountId, "Alice's organization");
  assertErrorShape(t, await anonymous('POST', '/v1/auth/sso/start', { email: 'stranger@acme.test' }, fromDashboard), 400, 'sso_organization_required');
  const named = await anonymous('POST', '/v1/auth/sso/start', { email: 'stranger@acme.test', organizationId: c.owner.accountId }, fromDashboard);
  t.equal(named.body.organizationId, c.owner.accountId);
  t.equal((await c.asOwner('DELETE', '/v1/auth/organization/sso')).status, 200);
});

t.test("isolation: another organization's provider signs in to that organization only; its sessions stay there", async (t) => {
  // Bob belongs to B; A's provider vouches for bob@acme.test: he becomes a member of A, and sees nothing of B.
  await members.add(inB, { email: 'bob@acme.test', name: 'Bob', role: 'admin' });
  const viaA = landing(await signInWithSso({ email: 'bob@acme.test', email_verified: true }, { organizationId: a.owner.accountId }));
  const bob = client(app, viaA.sessionToken!);
  t.match((await bob('GET', '/v1/auth/session')).body, { organizationId: a.owner.accountId, orgRole: 'member' });
  t.equal((await bob('GET', `/v1/brands/${b.brand.id}`)).status, 404, "B's brand is out of reach");
  t.same(
    (await bob('GET', '/v1/auth/organizations')).body.map((o: { id: string }) => o.id),
    [a.owner.accountId],
    'a session opened by single sign-on lists its own organization only',
  );
  assertErrorShape(t, await bob('POST', '/v1/auth/switch-organization', { organizationId: b.owner.accountId }), 403, 'sso_session_bound');
  // An invitation to B addressed to him is not his to accept from that session.
  const invited = await b.asOwner('POST', '/v1/auth/members/invite', { email: 'erin@acme.test', role: 'member' }, { origin: DASHBOARD });
  const erin = client(app, landing(await signInWithSso({ email: 'erin@acme.test', email_verified: true }, { organizationId: a.owner.accountId })).sessionToken!);
  t.equal((await erin('POST', '/v1/auth/accept-invite', { inviteId: invited.body.memberId })).status, 404, "B's invitation cannot be accepted from A's single sign-on");
});

t.test('magic links: allowed beside single sign-on, refused with sso_required when it is required', async (t) => {
  // Carol belongs to A (first) and to B, which has no single sign-on.
  await members.add(inA, { email: 'carol@acme.test', role: 'member' });
  await members.add(inB, { email: 'carol@acme.test', role: 'member' });
  const magicLink = (body: Record<string, unknown>) => anonymous('POST', '/v1/auth/magic-link', body, fromDashboard);
  t.equal((await magicLink({ email: 'alice@acme.test' })).status, 200, 'allowed while allowMagicLinks is true');

  t.equal((await a.asOwner('PUT', '/v1/auth/organization/sso', config({ clientSecret: undefined, allowMagicLinks: false }))).status, 200);
  const required = await magicLink({ email: 'alice@acme.test' });
  assertErrorShape(t, required, 400, 'sso_required');
  t.same(required.body.sso, { organizationId: a.owner.accountId, startPath: '/v1/auth/sso/start' });
  assertErrorShape(t, await magicLink({ email: 'carol@acme.test' }), 400, 'sso_required');
  t.equal((await magicLink({ email: 'carol@acme.test', organizationId: b.owner.accountId })).status, 200, 'her other organization still mails links');
  const owner = await magicLink({ email: a.ownerEmail });
  assertErrorShape(t, owner, 400, 'sso_required');

  // From B, she cannot switch into A: A is entered through its provider.
  const inBSession = client(app, await sessionToken(app, services, b.owner.accountId, 'carol@acme.test'));
  const switched = await inBSession('POST', '/v1/auth/switch-organization', { organizationId: a.owner.accountId });
  assertErrorShape(t, switched, 403, 'sso_required');
  t.match(landing(await signInWithSso({ email: 'carol@acme.test', email_verified: true })).sessionToken, /^ts_/, 'she signs in to A with single sign-on');

  t.equal((await a.asOwner('PUT', '/v1/auth/organization/sso', config({ clientSecret: undefined, allowMagicLinks: true }))).status, 200);
  t.equal((await magicLink({ email: 'carol@acme.test' })).status, 200, 'allowed again');
});

t.test('DELETE: single sign-on ends, with the sign-ins under way; audited', async (t) => {
  const back = await throughProvider({ email: 'alice@acme.test', email_verified: true });
  const removed = await a.asOwner('DELETE', '/v1/auth/organization/sso');
  t.equal(removed.status, 200);
  t.same(removed.body, { success: true });
  assertErrorShape(t, await callback(back), 400, 'sso_state_invalid');
  assertErrorShape(t, await a.asOwner('GET', '/v1/auth/organization/sso'), 404, 'sso_not_configured');
  assertErrorShape(t, await a.asOwner('DELETE', '/v1/auth/organization/sso'), 404, 'sso_not_configured');
  assertErrorShape(t, await anonymous('POST', '/v1/auth/sso/start', { email: 'alice@acme.test' }, fromDashboard), 400, 'sso_not_configured');
  t.match(await entries(a.owner.accountId, 'organization.sso_removed'), [
    { entityType: 'organization', performerId: a.owner.ownerId, metadata: { issuer: idp.issuer, allowedDomains: ['acme.test'] } },
  ]);
  t.equal((await db('ssoAttempts').where({ accountId: a.owner.accountId })).length, 0, 'its attempts went with it');
});
