import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { credentialCacheOf } from '../../server/core/credential-cache.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, servicesOf, signup, testApp } from '../helpers/app.js';
import { DASHBOARD, from, newestLinkToken, signIn } from '../helpers/sign-in.js';

// A member's session as a caller of brand and account routes: their brand assignments bound what
// they see (404 outside), their role what they may do (403), their organization where (404 elsewhere);
// and GET /v1/auth/organizations, GET /v1/auth/organization.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-session-callers-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db } = await testApp(t, {
  TICKETD_DATA_DIR: dataDir,
  TICKETD_DASHBOARD_ORIGINS: DASHBOARD,
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: '10000',
  TICKETD_AUTH_RATE_LIMIT_PER_EMAIL_PER_HOUR: '10000',
});
const services = servicesOf(db);

let seq = 0;
const address = (who: string) => `${who}-${++seq}-${process.pid}@example.com`;

/** An organization made through the API key route, with two live brands, an admin and a member assigned to the first brand only. */
async function organization() {
  const ownerEmail = address('owner');
  const owner = await signup(app, ownerEmail);
  const [first, second] = [await makeBrand(owner.live, 'First'), await makeBrand(owner.live, 'Second')];
  const live = tenantCtx(systemCtx(services), owner.accountId, true);
  const adminEmail = address('admin');
  const memberEmail = address('member');
  const admin = await members.add(live, { email: adminEmail, name: 'Ada Admin', role: 'admin' });
  const member = await members.add(live, { email: memberEmail, name: 'Mo Member', role: 'member', brandIds: [first.id] });
  return {
    owner,
    first,
    second,
    admin,
    member,
    asOwner: client(app, await signIn(app, services, ownerEmail)),
    asAdmin: client(app, await signIn(app, services, adminEmail)),
    asMember: client(app, await signIn(app, services, memberEmail)),
  };
}

const a = await organization();
const b = await organization();

t.test('a member sees the brands assigned to them; any other brand reads as 404', async (t) => {
  const ticketInSecond = await makeTicket(a.owner.live, `/v1/brands/${a.second.id}`, { title: 'Not for Mo' });
  const brands = await a.asMember('GET', '/v1/brands');
  t.equal(brands.status, 200);
  t.same(
    brands.body.map((x: { id: string }) => x.id),
    [a.first.id],
    'only the assigned brand is listed',
  );
  t.equal((await a.asMember('GET', `/v1/brands/${a.first.id}`)).status, 200);
  const created = await a.asMember('POST', `/v1/brands/${a.first.id}/tickets`, { title: 'Printer on fire' });
  t.equal(created.status, 201, 'works in the assigned brand');
  t.equal((await a.asMember('GET', `/v1/brands/${a.first.id}/tickets`)).body.data.length, 1);
  const logs = await a.asMember('GET', `/v1/brands/${a.first.id}/tickets/${created.body.id}/logs`);
  t.match(logs.body[0], { performerType: 'user', performedBy: { type: 'user', id: a.member.id, name: 'Mo Member' } }, 'the audit actor is the member');

  assertNotFound(t, await a.asMember('GET', `/v1/brands/${a.second.id}`), 'the other brand');
  assertNotFound(t, await a.asMember('GET', `/v1/workspaces/${a.second.id.replace(/^br_/, 'ws_')}`), 'the other brand as a workspace');
  assertNotFound(t, await a.asMember('GET', `/v1/brands/${a.second.id}/tickets`), "the other brand's tickets");
  assertNotFound(t, await a.asMember('GET', `/v1/brands/${a.second.id}/tickets/${ticketInSecond.id}`), 'a ticket of the other brand');
  assertNotFound(t, await a.asMember('POST', `/v1/brands/${a.second.id}/tickets`, { title: 'Sneaky' }), 'a ticket into the other brand');
  assertNotFound(t, await a.asMember('GET', `/v1/brands/${a.first.id}/tickets/${ticketInSecond.id}`), 'the ticket through the assigned brand');
  t.equal((await db('tickets').where({ title: 'Sneaky' }).count({ n: '*' }))[0]!.n, '0', 'nothing was created');

  t.same((await a.asAdmin('GET', '/v1/brands')).body.map((x: { id: string }) => x.id).sort(), [a.first.id, a.second.id].sort(), 'admins see every brand');
  t.equal((await a.asOwner('GET', `/v1/brands/${a.second.id}/tickets/${ticketInSecond.id}`)).status, 200, 'so do owners');
});

t.test('roles: account routes take an admin or the owner; deleting a brand takes the owner', async (t) => {
  for (const [method, url] of [
    ['GET', '/v1/accounts/me'],
    ['GET', '/v1/accounts/me/api-keys'],
    ['POST', '/v1/accounts/me/api-keys'],
    ['GET', '/v1/accounts/me/usage'],
    ['GET', '/v1/accounts/me/members'],
    ['POST', '/v1/brands'],
  ] as const) {
    assertErrorShape(t, await a.asMember(method, url, method === 'POST' ? { name: 'Nope' } : undefined), 403, 'insufficient_role');
  }
  const keys = await a.asAdmin('GET', '/v1/accounts/me/api-keys');
  t.equal(keys.status, 200, 'an admin lists the API keys');
  t.ok(Array.isArray(keys.body));
  const key = await a.asAdmin('POST', '/v1/accounts/me/api-keys', { name: 'From the dashboard' });
  t.equal(key.status, 201, 'and creates one');
  t.match(key.body.key, /^sk_live_/, 'in live mode, the mode of sessions');
  t.equal((await client(app, key.body.key)('GET', `/v1/brands/${a.second.id}`)).status, 200, 'a working key');
  t.equal((await a.asAdmin('DELETE', `/v1/accounts/me/api-keys/${key.body.id}`)).status, 200, 'and revokes it');
  t.equal((await a.asAdmin('GET', '/v1/accounts/me/usage')).status, 200);
  t.equal((await a.asAdmin('GET', '/v1/accounts/me/members')).body.data.length, 3, 'owner, admin and member');

  assertErrorShape(t, await a.asAdmin('DELETE', `/v1/brands/${a.second.id}?confirm=true`), 403, 'insufficient_role');
  assertErrorShape(t, await a.asMember('DELETE', `/v1/brands/${a.first.id}`), 403, 'insufficient_role');
  assertNotFound(t, await a.asMember('DELETE', `/v1/brands/${a.second.id}`), 'deleting a brand outside the assignments: 404 before the role');
  assertNotFound(t, await b.asMember('DELETE', `/v1/brands/${a.first.id}`), "deleting another organization's brand: 404 before the role");
  for (const garbage of ['%00', 'br_%00x', 'a'.repeat(600), 'ws_nope']) {
    const res = await a.asMember('DELETE', `/v1/brands/${garbage}`);
    t.ok(res.status >= 400 && res.status < 500, `a member deleting brand ${garbage.slice(0, 12)}: ${res.status}, refused without a 5xx`);
  }
  const preview = await a.asOwner('DELETE', `/v1/brands/${a.second.id}`);
  t.equal(preview.status, 200, 'the owner may');
  t.equal(preview.body.deleted, false, '(a preview)');
  t.equal((await a.owner.live('DELETE', `/v1/brands/${a.second.id}`)).status, 200, 'API keys are not bound by roles');
});

t.test('which credential each kind of route takes: 401 otherwise', async (t) => {
  t.match((await a.asOwner('GET', '/v1/accounts/me')).body, { id: a.owner.accountId }, 'account routes take an API key or a session');
  t.match((await a.owner.live('GET', '/v1/accounts/me')).body, { id: a.owner.accountId });
  assertErrorShape(t, await client(app, 'sk_live_nope')('GET', '/v1/accounts/me'), 401, 'invalid_api_key');
  assertErrorShape(t, await a.owner.live('GET', '/v1/auth/organizations'), 401, 'session_required');
  const none = await client(app)('GET', `/v1/brands/${a.first.id}`);
  assertErrorShape(t, none, 401, 'missing_credentials');
  t.match(none.body.message, /API key or a session token/, 'names both kinds');
});

t.test("another organization's brands and tickets, and test mode, read as 404 to a session", async (t) => {
  const ticket = await makeTicket(a.owner.live, `/v1/brands/${a.first.id}`, { title: 'Only for A' });
  assertNotFound(t, await b.asOwner('GET', `/v1/brands/${a.first.id}`), "another organization's brand");
  assertNotFound(t, await b.asOwner('GET', `/v1/brands/${a.first.id}/tickets/${ticket.id}`), "another organization's ticket");
  assertNotFound(t, await b.asOwner('PATCH', `/v1/brands/${a.first.id}`, { name: 'Taken over' }), "renaming another organization's brand");
  assertNotFound(t, await b.asOwner('GET', `/v1/brands/${b.first.id}/tickets/${ticket.id}`), 'the ticket through an own brand');
  t.notOk(
    (await b.asOwner('GET', '/v1/brands')).body.some((x: { id: string }) => x.id === a.first.id),
    'not listed',
  );
  const testBrand = await makeBrand(a.owner.test, 'Test mode');
  assertNotFound(t, await a.asOwner('GET', `/v1/brands/${testBrand.id}`), 'a test-mode brand (sessions work in live mode)');
});

t.test('organizations: the signed-in person’s, and the one of the session', async (t) => {
  // The admin of A also joins B: one person, two organizations.
  const adminEmail = (await db('members').where({ id: a.admin.id }).first()).email as string;
  const inB = await members.add(tenantCtx(systemCtx(services), b.owner.accountId, true), { email: adminEmail, role: 'member' });
  const list = await a.asAdmin('GET', '/v1/auth/organizations');
  t.equal(list.status, 200);
  t.same(
    list.body,
    [
      { id: a.owner.accountId, name: (await a.asAdmin('GET', '/v1/auth/organization')).body.name, role: 'admin' },
      { id: b.owner.accountId, name: (await b.asOwner('GET', '/v1/auth/organization')).body.name, role: 'member' },
    ],
    'both, with the role in each, in the order joined',
  );
  t.same((await a.asAdmin('GET', '/v1/auth/organization')).body.id, a.owner.accountId, 'the session is in A');
  t.equal((await a.asMember('GET', '/v1/auth/organizations')).body.length, 1, 'a person in one organization sees one');

  const inBSession = client(app, await signIn(app, services, adminEmail, { organizationId: b.owner.accountId }));
  t.match((await inBSession('GET', '/v1/auth/session')).body, { organizationId: b.owner.accountId, memberId: inB.id, orgRole: 'member' }, 'a link for the organization asked for');
  t.equal((await inBSession('GET', '/v1/auth/organization')).body.id, b.owner.accountId);

  for (const url of ['/v1/auth/organizations', '/v1/auth/organization']) {
    assertErrorShape(t, await client(app)('GET', url), 401, 'missing_credentials');
    assertErrorShape(t, await client(app, 'ts_not-a-session')('GET', url), 401, 'invalid_session');
  }
});

t.test("a removed member's sessions end; a deleted brand leaves the assignments", async (t) => {
  const c = await organization();
  t.equal((await c.asMember('GET', '/v1/brands')).body.length, 1);
  t.equal((await c.owner.live('DELETE', `/v1/brands/${c.first.id}?confirm=true`)).status, 200);
  t.same((await db('members').where({ id: c.member.id }).first()).brandIds, [], 'the brand is gone from the assignments');
  t.same((await c.asMember('GET', '/v1/brands')).body, [], 'the member sees no brand now');
  t.equal((await c.owner.live('GET', `/v1/brands/${c.second.id}`)).status, 200, 'the other brand is still there');

  // Removed by SQL, as an operator might, with the NOTIFY that tells every process (docs/operations.md).
  await db.transaction(async (trx) => {
    await trx('members').where({ id: c.member.id }).delete();
    await trx.raw(`select pg_notify('ticketd_sessions', ?)`, [c.member.id]);
  });
  await credentialCacheOf(services, 'sessions')?.sync();
  assertErrorShape(t, await c.asMember('GET', '/v1/auth/session'), 401, 'invalid_session');
  t.equal((await db('sessions').where({ member_id: c.member.id }).count({ n: '*' }))[0]!.n, '0', 'their sessions went with them');
  // A link sent before the removal signs nobody in.
  const email = address('leaver');
  const leaver = await members.add(tenantCtx(systemCtx(services), c.owner.accountId, true), { email, role: 'member' });
  await from(app, '192.0.2.9')('POST', '/v1/auth/magic-link', { email }, { origin: DASHBOARD });
  const token = await newestLinkToken(services, email);
  await db('members').where({ id: leaver.id }).delete();
  assertErrorShape(t, await client(app)('POST', '/v1/auth/verify', { token }), 400, 'invalid_token');
});
