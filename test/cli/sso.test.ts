import t from 'tap';
import { buildApp } from '../../server/app.js';
import { assertErrorShape, client, signup, testConfig } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { startProvider } from '../helpers/oidc-provider.js';
import { testNow } from '../helpers/clock.js';

// `ticketd sso show|set|remove ACCOUNT`, through the real binary, against a real OpenID provider.
const PUBLIC_URL = 'https://ticketd.example.com';
const DASHBOARD = 'https://dash.example.com';
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url, TICKETD_PUBLIC_URL: PUBLIC_URL, TICKETD_DASHBOARD_ORIGINS: DASHBOARD, TICKETD_SSO_ALLOW_PRIVATE: 'true', TICKETD_SSO_TIMEOUT_MS: '2000' };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());
const idp = await startProvider(t, { redirectUri: `${PUBLIC_URL}/v1/auth/sso/callback` });

// Each run of the binary costs seconds: the accounts are made through the API.
const { accountId } = await signup(app, 'owner@acme.test');

t.test('set, show, set again keeping what is not given; the secret is never printed; a sign-in works with it', async (t) => {
  const set = await runCli(
    [
      'sso',
      'set',
      accountId,
      '--issuer',
      idp.issuer,
      '--client-id',
      idp.clientId,
      '--allowed-domain',
      'Acme.test',
      '--allowed-domain',
      'corp.acme.test',
      '--default-role',
      'admin',
      '--no-allow-magic-links',
      '--json',
    ],
    { ...env, TICKETD_SSO_CLIENT_SECRET: idp.clientSecret },
  );
  t.equal(set.code, 0, 'exit 0', { stderr: set.stderr });
  t.match(set.json(), {
    object: 'sso_connection',
    organizationId: accountId,
    issuer: idp.issuer,
    clientId: idp.clientId,
    clientSecretSet: true,
    allowedDomains: ['acme.test', 'corp.acme.test'],
    defaultRole: 'admin',
    allowMagicLinks: false,
    redirectUri: `${PUBLIC_URL}/v1/auth/sso/callback`,
  });
  t.notOk(set.stdout.includes(idp.clientSecret), 'the secret is not printed');
  t.match((await db('ssoConnections').first()).clientSecret, /^v1:/, 'stored sealed');
  t.match(await db('auditLog').where({ event: 'organization.sso_configured' }), [{ performerType: 'system', performerName: 'cli' }]);

  const show = await runCli(['sso', 'show', accountId], env);
  t.equal(show.code, 0);
  t.match(show.stdout, idp.issuer);
  t.match(show.stdout, /acme\.test, corp\.acme\.test/);
  t.match(show.stdout, /refused: single sign-on is required/);
  t.match(show.stdout, `${PUBLIC_URL}/v1/auth/sso/callback`);

  const narrowed = await runCli(['sso', 'set', accountId, '--allowed-domain', 'acme.test', '--allow-magic-links', '--json'], env);
  t.equal(narrowed.code, 0, 'no secret given: the stored one is kept', { stderr: narrowed.stderr });
  t.match(narrowed.json(), { issuer: idp.issuer, allowedDomains: ['acme.test'], defaultRole: 'admin', allowMagicLinks: true });

  // The secret the CLI stored is the one the code exchange authenticates with.
  const started = await client(app)('POST', '/v1/auth/sso/start', { email: 'owner@acme.test' }, { origin: DASHBOARD });
  t.equal(started.status, 200);
  idp.signInAs({ email: 'owner@acme.test', email_verified: true });
  const back = await idp.authorize(started.body.url);
  const landed = await client(app)('GET', `/v1/auth/sso/callback${back.search}`);
  const token = new URL(String(landed.headers.location)).searchParams.get('sessionToken');
  t.match(token, /^ts_/, 'signed in');
  t.match((await client(app, token!)('GET', '/v1/auth/session')).body, { organizationId: accountId, orgRole: 'owner' });
});

t.test('an issuer that does not answer: exit 1, nothing stored', async (t) => {
  const other = (await signup(app)).accountId;
  const unreachable = await runCli(
    ['sso', 'set', other, '--issuer', 'http://127.0.0.1:9', '--client-id', 'x', '--client-secret', 'y', '--allowed-domain', 'other.test', '--json'],
    env,
  );
  t.equal(unreachable.code, 1);
  t.match(unreachable.json(), { error: { code: 'sso_issuer_unreachable' } });
  t.equal((await db('ssoConnections').where({ accountId: other })).length, 0, 'nothing stored');
});

t.test('remove', async (t) => {
  const removed = await runCli(['sso', 'remove', accountId, '--yes', '--json'], env);
  t.equal(removed.code, 0, { stderr: removed.stderr });
  t.same(removed.json(), { success: true });
  t.equal((await db('ssoConnections').where({ accountId })).length, 0, 'gone');
  assertErrorShape(t, await client(app)('POST', '/v1/auth/sso/start', { email: 'owner@acme.test' }, { origin: DASHBOARD }), 400, 'sso_not_configured');
  t.match(await db('auditLog').where({ event: 'organization.sso_removed' }), [{ performerName: 'cli', metadata: { issuer: idp.issuer } }]);
});
