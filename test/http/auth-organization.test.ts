import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { loginLink } from '../../server/flows/sign-in.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, client, servicesOf, testApp } from '../helpers/app.js';
import { teamOfThree } from '../helpers/sign-in.js';

// PATCH /v1/auth/organization, POST /v1/auth/switch-organization, POST /v1/auth/connect.

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const services = servicesOf(db);

const team = () => teamOfThree(app, services);

const a = await team();
const b = await team();
const entries = (accountId: string, event: string) => db('auditLog').where({ accountId, event }).orderBy('id');

t.test('PATCH /v1/auth/organization: owners rename it, and it is audited', async (t) => {
  const res = await a.asOwner('PATCH', '/v1/auth/organization', { name: '  Acme Support  ' });
  t.equal(res.status, 200);
  t.same(res.body, { success: true, name: 'Acme Support' }, 'stored trimmed');
  t.same((await a.asMember('GET', '/v1/auth/organization')).body, { id: a.owner.accountId, name: 'Acme Support' }, 'every member sees the new name');
  t.equal((await a.owner.live('GET', '/v1/accounts/me')).body.name, 'Acme Support', 'it is the account’s name');
  t.match(await entries(a.owner.accountId, 'organization.updated'), [
    {
      entityType: 'organization',
      entityId: a.owner.accountId,
      performerType: 'user',
      performerId: a.owner.ownerId,
      changes: [{ field: 'name', from: 'Test Owner', to: 'Acme Support' }],
    },
  ]);
  t.equal((await a.asOwner('PATCH', '/v1/auth/organization', { name: 'Acme Support' })).status, 200, 'the same name again');
  t.equal((await entries(a.owner.accountId, 'organization.updated')).length, 1, 'is no change: not audited');
  t.equal((await b.asOwner('GET', '/v1/auth/organization')).body.name, 'Test Owner', 'another organization is untouched');
});

t.test('PATCH /v1/auth/organization: admins and members get 403 and change nothing; bad names are 400', async (t) => {
  const before = (await a.asOwner('GET', '/v1/auth/organization')).body.name;
  assertErrorShape(t, await a.asAdmin('PATCH', '/v1/auth/organization', { name: 'Admin was here' }), 403, 'insufficient_role');
  assertErrorShape(t, await a.asMember('PATCH', '/v1/auth/organization', { name: 'Member was here' }), 403, 'insufficient_role');
  for (const body of [{ name: '' }, { name: '   ' }, { name: 'x'.repeat(201) }, {}, { name: 'Ok', id: b.owner.accountId }]) {
    assertErrorShape(t, await a.asOwner('PATCH', '/v1/auth/organization', body), 400, 'validation_failed');
  }
  assertErrorShape(t, await a.owner.live('PATCH', '/v1/auth/organization', { name: 'By key' }), 401, 'session_required');
  t.equal((await a.asOwner('GET', '/v1/auth/organization')).body.name, before, 'the name is unchanged');
});

t.test('switch-organization: a new session for the same person in another organization of theirs', async (t) => {
  // The owner of A is also a member of B (same email address).
  await members.add(tenantCtx(systemCtx(services), b.owner.accountId, true), { email: a.ownerEmail, name: 'Visiting Owner', role: 'member' });
  const switched = await a.asOwner('POST', '/v1/auth/switch-organization', { organizationId: b.owner.accountId });
  t.equal(switched.status, 200);
  t.match(switched.body, { sessionToken: /^ts_[0-9A-Za-z]{43}$/, organizationId: b.owner.accountId, orgRole: 'member', expiresAt: /^\d{4}-/ });
  const inB = client(app, switched.body.sessionToken);
  const session = await inB('GET', '/v1/auth/session');
  t.match(session.body, { valid: true, organizationId: b.owner.accountId, orgRole: 'member', email: a.ownerEmail, member: { name: 'Visiting Owner' } });
  t.equal((await inB('GET', `/v1/brands/${b.brand.id}`)).status, 200, "the new session works in B's brands");
  t.equal((await inB('GET', `/v1/brands/${a.brand.id}`)).status, 404, "and not in A's");
  t.equal((await a.asOwner('GET', '/v1/auth/session')).body.organizationId, a.owner.accountId, 'the session in A goes on');
  const created = (await entries(b.owner.accountId, 'session.created')).filter((e: { performerId: string }) => e.performerId === session.body.memberId);
  t.match(created, [{ performerType: 'user', metadata: { memberId: session.body.memberId } }], 'audited in B, once, as the member there');

  const back = await inB('POST', '/v1/auth/switch-organization', { organizationId: a.owner.accountId });
  t.match(back.body, { organizationId: a.owner.accountId, orgRole: 'owner' }, 'and back, as the owner there');
});

t.test('switch-organization: 403 where the person is no active member, an unknown id alike', async (t) => {
  const c = await team();
  for (const organizationId of [c.owner.accountId, 'acct_doesnotexist000000000000', 'x']) {
    assertErrorShape(t, await a.asMember('POST', '/v1/auth/switch-organization', { organizationId }), 403, 'not_a_member');
  }
  const res = await a.asMember('POST', '/v1/auth/switch-organization', { organizationId: c.owner.accountId });
  t.notOk(JSON.stringify(res.body).includes('Test Owner'), 'nothing of the other organization in the answer');
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/switch-organization', {}), 400, 'validation_failed');
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/switch-organization'), 400, 'validation_failed');
});

t.test('switch-organization with the session cookie: the cookie is replaced, the token stays out of the body', async (t) => {
  const c = await team();
  await members.add(tenantCtx(systemCtx(services), c.owner.accountId, true), { email: a.member.email, role: 'member' });
  const link = await loginLink(systemCtx(services), a.member.email, 'http://localhost:5173', a.owner.accountId);
  const verified = await app.inject({ method: 'POST', url: '/v1/auth/verify?setCookies=true', payload: { token: new URL(link.url).searchParams.get('token') } });
  const cookie = String(verified.headers['set-cookie']).split(';')[0]!;
  const res = await app.inject({ method: 'POST', url: '/v1/auth/switch-organization', payload: { organizationId: c.owner.accountId }, headers: { cookie } });
  t.equal(res.statusCode, 200);
  const body = JSON.parse(res.body);
  t.equal(body.sessionToken, undefined, 'no token in the body');
  t.equal(body.organizationId, c.owner.accountId);
  const newCookie = String(res.headers['set-cookie']);
  t.match(newCookie, /^ticketd_session=ts_[0-9A-Za-z]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax/);
  const session = await app.inject({ method: 'GET', url: '/v1/auth/session', headers: { cookie: newCookie.split(';')[0]! } });
  t.equal(JSON.parse(session.body).organizationId, c.owner.accountId);
});

t.test('connect: a key of this organization’s account connects it; connected is true', async (t) => {
  const res = await a.asAdmin('POST', '/v1/auth/connect', { apiKey: a.owner.liveKey });
  t.equal(res.status, 200);
  t.same(res.body, { success: true });
  t.equal((await a.asAdmin('GET', '/v1/auth/session')).body.connected, true);
  t.equal((await a.asOwner('POST', '/v1/auth/connect', { apiKey: a.owner.testKey })).status, 200, 'its test key too');
  t.match(await entries(a.owner.accountId, 'organization.connected'), [
    { performerType: 'user', performerId: a.admin.id, metadata: { livemode: true } },
    { performerType: 'user', performerId: a.owner.ownerId, metadata: { livemode: false } },
  ]);
  t.notOk(JSON.stringify(await entries(a.owner.accountId, 'organization.connected')).includes(a.owner.liveKey), 'the secret is never recorded');
});

t.test('connect: an unknown, revoked or other account’s key is 400; a member is 403', async (t) => {
  const revoked = (await a.owner.live('POST', '/v1/accounts/me/api-keys', { name: 'Soon gone' })).body;
  t.equal((await a.owner.live('DELETE', `/v1/accounts/me/api-keys/${revoked.id}`)).status, 200);
  const before = (await entries(a.owner.accountId, 'organization.connected')).length;
  for (const apiKey of [b.owner.liveKey, b.owner.testKey, revoked.key, `sk_live_${'A'.repeat(43)}`, 'garbage', `${a.owner.liveKey}x`]) {
    const res = await a.asOwner('POST', '/v1/auth/connect', { apiKey });
    assertErrorShape(t, res, 400, 'invalid_api_key');
  }
  assertErrorShape(t, await a.asOwner('POST', '/v1/auth/connect', {}), 400, 'validation_failed');
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/connect', { apiKey: a.owner.liveKey }), 403, 'insufficient_role');
  t.equal((await entries(a.owner.accountId, 'organization.connected')).length, before, 'nothing recorded');
  t.equal((await b.owner.live('GET', '/v1/accounts/me')).status, 200, "the other account's key still works");
});
