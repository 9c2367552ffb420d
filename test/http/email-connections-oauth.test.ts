import t from 'tap';
import { buildApp } from '../../server/app.js';
import { systemCtx } from '../../server/core/context.js';
import { secretOf } from '../../server/domains/email-connections/service.js';
import { assertErrorShape, mustCreate, ownerWithBrand, servicesOf, testApp, testConfig } from '../helpers/app.js';
import { imapServer } from '../helpers/imap.js';
import { receiver, type Received } from '../helpers/receiver.js';
import { testNow } from '../helpers/clock.js';

/**
 * Google and Microsoft mailboxes (GMAIL, OUTLOOK): signed in to IMAP with AUTHENTICATE XOAUTH2,
 * the access token exchanged for the connection's refresh token at the provider's token endpoint
 * (a loopback HTTP server here) with the OAuth client the operator configured.
 */

let tokenAnswer: (req: Received) => { status?: number; body?: string } = () => ({ body: JSON.stringify({ access_token: 'access-1', expires_in: 3599 }) });
const tokens = await receiver(t, (req) => ({ headers: { 'content-type': 'application/json' }, ...tokenAnswer(req) }));
const oauthEnv = {
  TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true',
  TICKETD_GOOGLE_CLIENT_ID: 'google-client',
  TICKETD_GOOGLE_CLIENT_SECRET: 'google-secret',
  TICKETD_GOOGLE_TOKEN_URL: `${tokens.url}/google/token`,
  TICKETD_MICROSOFT_CLIENT_ID: 'microsoft-client',
  TICKETD_MICROSOFT_CLIENT_SECRET: 'microsoft-secret',
  TICKETD_MICROSOFT_TOKEN_URL: `${tokens.url}/microsoft/token`,
};
const { app, db } = await testApp(t, oauthEnv);
const RUN = Math.random().toString(36).slice(2, 8);
const message = (n: number) =>
  [`From: Customer ${n} <customer${n}@example.net>`, 'To: desk@acme.example', `Subject: OAuth question ${n}`, `Message-ID: <oauth${n}-${RUN}@example.net>`, '', 'Hello.'].join(
    '\r\n',
  );
const form = (r: Received) => Object.fromEntries(new URLSearchParams(r.body));

async function connect(provider: 'GMAIL' | 'OUTLOOK', port: number, refreshToken: string) {
  const { owner, brand, base } = await ownerWithBrand(app);
  const connection = await mustCreate(owner.live, `${base}/email-connections`, {
    provider,
    email: 'desk@acme.example',
    host: '127.0.0.1',
    port,
    tls: false,
    username: 'desk',
    refreshToken,
  });
  return { owner, brand, url: `${base}/email-connections/${connection.id}`, connection };
}

t.test('GMAIL: the refresh token buys an access token, the mailbox signs in with XOAUTH2 and is taken in', async (t) => {
  const { port } = await imapServer(t, [message(1)], { accessToken: 'access-1' });
  const { owner, brand, url, connection } = await connect('GMAIL', port, 'refresh-google-1');
  t.match(connection, { provider: 'GMAIL', host: '127.0.0.1', passwordSet: true, status: 'ACTIVE' });
  t.notOk('refreshToken' in connection, 'the token is never shown');
  const before = tokens.received.length;

  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 });
  const asked = tokens.received.slice(before);
  t.equal(asked.length, 1);
  t.equal(asked[0]!.path, '/google/token');
  t.same(form(asked[0]!), { grant_type: 'refresh_token', refresh_token: 'refresh-google-1', client_id: 'google-client', client_secret: 'google-secret' });
  t.equal((await db('tickets').where({ brandId: brand.id }).select('title'))[0]?.title, 'OAuth question 1');
  t.match((await owner.live('GET', url)).body, { status: 'ACTIVE', errorMessage: null });
});

t.test('OUTLOOK: the IMAP scope is asked for, and a refresh token Microsoft rotates is kept for the next sync', async (t) => {
  const { port } = await imapServer(t, [message(2)], { accessToken: 'access-1' });
  const { owner, url, connection } = await connect('OUTLOOK', port, 'refresh-ms-1');
  tokenAnswer = () => ({ body: JSON.stringify({ access_token: 'access-1', refresh_token: 'refresh-ms-2' }) });
  t.teardown(() => {
    tokenAnswer = () => ({ body: JSON.stringify({ access_token: 'access-1' }) });
  });
  const before = tokens.received.length;
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 });
  const first = form(tokens.received[before]!);
  t.equal(first.refresh_token, 'refresh-ms-1');
  t.match(first.scope, /IMAP\.AccessAsUser\.All/);
  const row = await db('emailConnections').where({ id: connection.id }).first();
  t.equal(await secretOf(systemCtx(servicesOf(db), 'test'), row), 'refresh-ms-2', 'the new refresh token, sealed');
  await owner.live('POST', `${url}/sync`);
  t.equal(form(tokens.received.at(-1)!).refresh_token, 'refresh-ms-2', 'and used next time');
});

t.test('a refused refresh token: DISCONNECTED with the provider’s words, until a new token is given', async (t) => {
  const { port } = await imapServer(t, [message(3)], { accessToken: 'access-1' });
  const { owner, url } = await connect('GMAIL', port, 'revoked');
  tokenAnswer = (req) =>
    form(req).refresh_token === 'revoked'
      ? { status: 400, body: JSON.stringify({ error: 'invalid_grant', error_description: 'Token has been expired or revoked.' }) }
      : { body: JSON.stringify({ access_token: 'access-1' }) };
  t.teardown(() => {
    tokenAnswer = () => ({ body: JSON.stringify({ access_token: 'access-1' }) });
  });
  const retried = (await owner.live('POST', `${url}/retry`)).body;
  t.same(retried, { success: false, ticketsCreated: 0, error: 'Google refused the refresh token (invalid_grant: Token has been expired or revoked.)' });
  t.match((await owner.live('GET', url)).body, { status: 'DISCONNECTED', errorMessage: /invalid_grant/ });
  t.equal((await owner.live('POST', `${url}/sync`)).status, 409, 'not synced until given a new token');

  t.match((await owner.live('PATCH', url, { refreshToken: 'fresh' })).body, { status: 'ACTIVE', errorMessage: null });
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 });
});

t.test('a token endpoint that cannot be reached: ERROR, retried later', async (t) => {
  const { port } = await imapServer(t, [], { accessToken: 'access-1' });
  const { owner, url } = await connect('GMAIL', port, 'refresh-google-1');
  tokenAnswer = () => ({ status: 503, body: 'unavailable' });
  t.teardown(() => {
    tokenAnswer = () => ({ body: JSON.stringify({ access_token: 'access-1' }) });
  });
  t.match((await owner.live('POST', `${url}/retry`)).body, { success: false, error: "Google's token endpoint answered 503 without an access token" });
  t.match((await owner.live('GET', url)).body, { status: 'ERROR' });
});

t.test('bad input: the secret that does not fit the provider, a missing one, an IMAP connection without a host', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const create = (body: Record<string, unknown>) => owner.live('POST', `${base}/email-connections`, { email: 'desk@acme.example', ...body });
  t.match((await create({ provider: 'GMAIL', password: 'pw', refreshToken: 'rt' })).body, { code: 'invalid_email_connection' });
  t.match((await create({ provider: 'GMAIL' })).body, { code: 'invalid_email_connection', errors: [{ field: 'refreshToken' }] });
  t.match((await create({ provider: 'IMAP', refreshToken: 'rt', password: 'pw', host: 'imap.example.com' })).body, { code: 'invalid_email_connection' });
  t.match((await create({ provider: 'IMAP', password: 'pw' })).body, { code: 'invalid_email_connection', errors: [{ field: 'host' }] });
  t.equal((await create({ provider: 'YAHOO', password: 'pw', host: 'imap.example.com' })).status, 400);
  t.same(
    await db('emailConnections')
      .where({ brandId: (await owner.live('GET', base)).body.id })
      .select('id'),
    [],
    'nothing was created',
  );

  const gmail = await mustCreate(owner.live, `${base}/email-connections`, { provider: 'GMAIL', email: 'desk@acme.example', refreshToken: 'rt' });
  t.match(gmail, { host: 'imap.gmail.com', port: 993, tls: true, username: 'desk@acme.example' }, "Google's server by default");
  const url = `${base}/email-connections/${gmail.id}`;
  t.match((await owner.live('PATCH', url, { password: 'pw' })).body, { code: 'invalid_email_connection', errors: [{ field: 'password' }] });
});

t.test('a server without an OAuth client for the provider refuses GMAIL and OUTLOOK connections', async (t) => {
  const plain = await buildApp({ clock: testNow, config: testConfig({ TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' }), db });
  t.teardown(() => plain.close());
  const { owner, base } = await ownerWithBrand(plain);
  for (const provider of ['GMAIL', 'OUTLOOK']) {
    assertErrorShape(t, await owner.live('POST', `${base}/email-connections`, { provider, email: 'desk@acme.example', refreshToken: 'rt' }), 400, 'oauth_client_not_configured');
  }
});
