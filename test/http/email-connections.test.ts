import t from 'tap';
import { systemCtx } from '../../server/core/context.js';
import * as emailConnections from '../../server/domains/email-connections/service.js';
import { assertErrorShape, assertNotFound, makeBrand, mustCreate, ownerWithBrand, servicesOf, signup, statementsDuring, testApp } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';

/** A brand's mailboxes as the dashboard reads them: /v1/brands/{brandId}/email-connections (and the /v1/workspaces twin). */

const { app, db } = await testApp(t, SIGN_IN_TEST_ENV);
const services = servicesOf(db);
const CONNECTION_ID = /^ec_[0-9a-z]{26}$/;
/** A public address literal: accepted without DNS (no test here connects). */
const HOST = '93.184.215.14';

for (const prefix of ['/v1/brands', '/v1/workspaces']) {
  t.test(`${prefix}: create, list, get, rename, make primary, delete`, async (t) => {
    const { owner, brand } = await ownerWithBrand(app);
    const base = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}/email-connections`;
    t.same((await owner.live('GET', base)).body, [], 'a brand without mailboxes: a bare empty array');

    const created = await owner.live('POST', base, { provider: 'IMAP', email: ' Support@Acme.example ', host: HOST, password: 'app-password-1' });
    t.equal(created.status, 201, JSON.stringify(created.body));
    const first = created.body;
    t.match(first.id, CONNECTION_ID);
    t.same(
      { ...first, id: undefined, createdAt: undefined, updatedAt: undefined },
      {
        id: undefined,
        object: 'email_connection',
        brandId: brand.id,
        name: 'support@acme.example',
        isPrimary: true,
        provider: 'IMAP',
        email: 'support@acme.example',
        host: HOST,
        port: 993,
        tls: true,
        username: 'support@acme.example',
        passwordSet: true,
        mailbox: 'INBOX',
        moveTo: null,
        status: 'ACTIVE',
        lastSyncAt: null,
        errorMessage: null,
        createdAt: undefined,
        updatedAt: undefined,
      },
      "the dashboard's EmailConnection, with the defaults: port 993 over TLS, the address as user name",
    );
    t.notMatch(JSON.stringify(first), /app-password-1/, 'the password is never shown');

    const second = await mustCreate(owner.live, base, {
      provider: 'IMAP',
      name: 'Billing',
      email: 'billing@acme.example',
      host: HOST,
      port: 143,
      tls: false,
      username: 'billing',
      password: 'pw',
      moveTo: 'Archive/Taken',
    });
    t.match(second, { isPrimary: false, port: 143, tls: false, username: 'billing', moveTo: 'Archive/Taken' });
    t.same(
      (await owner.live('GET', base)).body.map((c: { id: string }) => c.id),
      [first.id, second.id],
      'the primary first',
    );
    t.same((await owner.live('GET', `${base}/${first.id}`)).body, first);
    t.match((await owner.live('PATCH', `${base}/${second.id}`, { name: ' Invoices ' })).body, { name: 'Invoices' });
    t.match((await owner.live('POST', `${base}/${second.id}/primary`)).body, { isPrimary: true });
    t.same(
      (await owner.live('GET', base)).body.map((c: { id: string; isPrimary: boolean }) => [c.id, c.isPrimary]),
      [
        [second.id, true],
        [first.id, false],
      ],
    );
    t.equal((await owner.live('DELETE', `${base}/${second.id}`)).status, 200);
    t.match((await owner.live('GET', `${base}/${first.id}`)).body, { isPrimary: true }, 'deleting the primary makes the next one primary');
    assertNotFound(t, await owner.live('GET', `${base}/${second.id}`), 'a deleted connection');
    assertErrorShape(t, await owner.live('POST', base, { provider: 'IMAP', email: 'SUPPORT@acme.example', host: HOST, password: 'x' }), 409, 'email_connection_exists');
  });
}

t.test('OAuth consent is out of reach: authorize and reconnect answer 400 oauth_unavailable', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const res = await owner.live('POST', `${base}/email-connections/authorize`, { provider: 'GMAIL', connectionName: 'Support' });
  assertErrorShape(t, res, 400, 'oauth_unavailable');
  t.match(res.body.message, /IMAP with an app password/);
  const connection = await mustCreate(owner.live, `${base}/email-connections`, { provider: 'IMAP', email: 'a@acme.example', host: HOST, password: 'pw' });
  assertErrorShape(t, await owner.live('POST', `${base}/email-connections/${connection.id}/reconnect`), 400, 'oauth_unavailable');
  assertNotFound(t, await owner.live('POST', `${base}/email-connections/ec_${'0'.repeat(26)}/reconnect`), 'reconnecting a connection that is not there');
});

t.test('bad input gets a clear 400 and connects nothing', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const url = `${base}/email-connections`;
  const valid = { provider: 'IMAP', email: 'desk@acme.example', host: HOST, password: 'pw' };
  for (const host of ['127.0.0.1', '10.1.2.3', '[::1]', '169.254.169.254', 'localhost']) {
    assertErrorShape(t, await owner.live('POST', url, { ...valid, host }), 400, 'imap_host_not_public');
  }
  assertErrorShape(t, await owner.live('POST', url, { ...valid, host: 'imap.example.com:993' }), 400, 'invalid_imap_host');
  for (const body of [
    {},
    { ...valid, port: 0 },
    { ...valid, port: 65536 },
    { ...valid, provider: 'YAHOO' },
    { ...valid, email: 'not an address' },
    { ...valid, password: '' },
    { ...valid, host: 'imap example.com' },
    { ...valid, extra: true },
  ]) {
    assertErrorShape(t, await owner.live('POST', url, body), 400, 'validation_failed');
  }
  // A Google mailbox over XOAUTH2 needs the operator's OAuth client, which this server has not.
  assertErrorShape(t, await owner.live('POST', url, { ...valid, provider: 'GMAIL' }), 400, 'invalid_email_connection');
  t.same((await owner.live('GET', url)).body, [], 'nothing half-created');
});

t.test('the password is stored sealed, for its account only', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const connection = await mustCreate(owner.live, `${base}/email-connections`, {
    provider: 'IMAP',
    email: 'sealed@acme.example',
    host: HOST,
    password: 'correct horse battery staple',
  });
  const row = await db('emailConnections').where({ id: connection.id }).first();
  t.match(row.secret, /^v1:[0-9a-f]{16}:/);
  t.notMatch(row.secret, /horse/);
  t.equal(await emailConnections.secretOf(systemCtx(services), row), 'correct horse battery staple');
  await t.rejects(emailConnections.secretOf(systemCtx(services), { ...row, accountId: 'acct_someone_else' }), /does not open/);
});

t.test("the dashboard's list, polled every minute for every brand: one indexed read, also for a brand without mailboxes", async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await owner.live('GET', `${base}/email-connections`);
  const statements = await statementsDuring(db, () => owner.live('GET', `${base}/email-connections`));
  t.equal(statements.length, 1, statements.join('\n'));
  t.match(statements[0], /from "email_connections" where .*"account_id" = .*"livemode" = .*"brand_id" = /);
});

t.test("who may: any member within their brands, like the brand's other settings; other accounts and brands get 404", async (t) => {
  const team = await teamOf(app, services);
  const base = `/v1/brands/${team.first.id}/email-connections`;
  const connection = await mustCreate(team.owner.live, base, { provider: 'IMAP', email: 'team@acme.example', host: HOST, password: 'pw' });
  t.equal((await team.asMember('GET', base)).status, 200, 'a member reads the list (the banner and the From picker)');
  t.equal((await team.asMember('POST', base, { provider: 'IMAP', email: 'm@acme.example', host: HOST, password: 'pw' })).status, 201, 'a member of the brand connects one');
  t.equal((await team.asAdmin('PATCH', `${base}/${connection.id}`, { name: 'Team' })).status, 200);

  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  assertNotFound(t, await stranger.live('GET', `${base}/${connection.id}`), "another account's brand");
  assertNotFound(t, await stranger.live('GET', `/v1/brands/${strangerBrand.id}/email-connections/${connection.id}`), "another account's connection id in one's own brand");
  assertNotFound(t, await team.owner.live('GET', `/v1/brands/${team.second.id}/email-connections/${connection.id}`), 'under another brand of the account');
  assertNotFound(t, await team.owner.test('GET', `${base}/${connection.id}`), 'the other mode');
  assertNotFound(t, await team.asMember('GET', `/v1/brands/${team.second.id}/email-connections`), "a brand outside the member's assignments");
});

t.test('syncing a mailbox no test reaches: answered within mailboxTimeoutMs, the failure recorded on it, never a 5xx', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const connection = await mustCreate(owner.live, `${base}/email-connections`, { provider: 'IMAP', email: 'far@acme.example', host: HOST, password: 'pw' });
  const url = `${base}/email-connections/${connection.id}`;
  const retried = await owner.live('POST', `${url}/retry`);
  t.equal(retried.status, 200);
  t.match(retried.body, { success: false, ticketsCreated: 0, error: String });
  t.match((await owner.live('GET', url)).body, { status: 'ERROR', errorMessage: retried.body.error });
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 0 });
  t.same((await owner.live('POST', `${base}/email-connections/sync`)).body, { ticketsCreated: 0 });
  assertNotFound(t, await owner.live('POST', `${base}/email-connections/ec_${'0'.repeat(26)}/retry`), 'retrying a connection that is not there');
});
