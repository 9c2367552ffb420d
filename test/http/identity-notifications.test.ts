import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, client, emptyDir, servicesOf, signup, testApp } from '../helpers/app.js';
import { addressOf, sessionToken, SIGN_IN_TEST_ENV } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// POST /v1/webhooks/{provider}: an identity provider's notifications, signed the Standard Webhooks
// way, as the provider's own library signs them.

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const configFile = path.join(emptyDir, `identity-${process.pid}.json`);
writeFileSync(configFile, JSON.stringify({ identityProviders: { clerk: { secret: SECRET } } }));
const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_CONFIG: configFile });
const services = servicesOf(db);

let messages = 0;
/** Posts a notification as the provider does; `secret`, `at` and `id` may be changed to forge one. */
async function notify(body: unknown, options: { provider?: string; secret?: string; at?: Date; id?: string; tamper?: (text: string) => string } = {}) {
  const text = JSON.stringify(body);
  const id = options.id ?? `msg_${++messages}_${process.pid}`;
  const at = options.at ?? new Date(testNow());
  const signature = new Webhook(options.secret ?? SECRET).sign(id, at, text);
  const res = await app.inject({
    method: 'POST',
    url: `/v1/webhooks/${options.provider ?? 'clerk'}`,
    headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature },
    payload: options.tamper ? options.tamper(text) : text,
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers, id };
}

const user = (id: string, email: string, first: string | null, last: string | null) => ({
  type: 'user.updated',
  data: {
    id,
    first_name: first,
    last_name: last,
    primary_email_address_id: 'idn_2',
    email_addresses: [
      { id: 'idn_1', email_address: 'old@example.com' },
      { id: 'idn_2', email_address: email },
    ],
  },
});

/** One person, a member of two organizations, signed in to both. */
async function personInTwoOrganizations() {
  const email = addressOf('person');
  const first = await signup(app, email);
  const second = await signup(app);
  await members.add(tenantCtx(systemCtx(services), second.accountId, true), { email, role: 'member' });
  return {
    email,
    first,
    second,
    sessions: [client(app, await sessionToken(app, services, first.accountId, email)), client(app, await sessionToken(app, services, second.accountId, email))],
  };
}

const memberRows = (email: string) => db('members').where({ email }).orderBy('id') as Promise<{ name: string | null; email: string; identityUserId: string | null }[]>;

t.test('user.updated: links the memberships of its address, names them; a later address change follows the link', async (t) => {
  const person = await personInTwoOrganizations();
  const res = await notify(user('user_1', person.email, 'Ada', 'Lovelace'));
  t.equal(res.status, 200);
  t.same(res.body, { received: true, action: 'updated', members: 2 });
  t.match(await memberRows(person.email), [
    { name: 'Ada Lovelace', identityUserId: 'user_1' },
    { name: 'Ada Lovelace', identityUserId: 'user_1' },
  ]);
  const entries = await db('audit_log').where({ event: 'member.updated', account_id: person.first.accountId });
  t.match(entries, [{ performerType: 'system', performerName: 'identity provider clerk', changes: [{ field: 'name', to: 'Ada Lovelace' }] }]);

  const moved = addressOf('moved');
  t.same((await notify(user('user_1', moved, 'Ada', 'Lovelace'))).body, { received: true, action: 'updated', members: 2 });
  t.equal((await memberRows(moved)).length, 2, 'the new address in both organizations');
  for (const session of person.sessions) t.match((await session('GET', '/v1/auth/session')).body, { valid: true, email: moved }, 'the session shows it at once');
});

t.test('a redelivered message changes nothing; an unknown event is taken and ignored', async (t) => {
  const person = await personInTwoOrganizations();
  const first = await notify(user('user_2', person.email, 'Grace', null));
  await db('members').where({ email: person.email }).update({ name: 'Renamed by hand' });
  const again = await notify(user('user_2', person.email, 'Grace', null), { id: first.id });
  t.same(again.body, { received: true, action: 'duplicate', members: 0 });
  t.same(
    (await memberRows(person.email)).map((m) => m.name),
    ['Renamed by hand', 'Renamed by hand'],
  );
  t.same((await notify({ type: 'organization.created', data: { id: 'org_1' } })).body, { received: true, action: 'ignored', members: 0 });
});

t.test('an address another member of the organization has is not taken there; it is elsewhere', async (t) => {
  const person = await personInTwoOrganizations();
  await notify(user('user_3', person.email, null, null));
  const taken = addressOf('taken');
  await members.add(tenantCtx(systemCtx(services), person.second.accountId, true), { email: taken, role: 'member' });
  t.same((await notify(user('user_3', taken, null, null))).body, { received: true, action: 'updated', members: 1 });
  t.same(
    (await db('members').where({ identityUserId: 'user_3' }).orderBy('id')).map((m: { email: string }) => m.email),
    [taken, person.email],
  );
});

t.test('user.deleted ends every session of the person; they are members still', async (t) => {
  const person = await personInTwoOrganizations();
  await notify(user('user_4', person.email, 'Linus', null));
  const res = await notify({ type: 'user.deleted', data: { id: 'user_4', deleted: true } });
  t.same(res.body, { received: true, action: 'sessions_revoked', members: 2 });
  for (const session of person.sessions) t.equal((await session('GET', '/v1/auth/session')).status, 401, 'signed out');
  t.equal((await memberRows(person.email)).length, 2);
  t.same((await notify({ type: 'user.deleted', data: { id: 'user_nobody' } })).body, { received: true, action: 'sessions_revoked', members: 0 });
});

t.test('forged, stale, tampered and unsigned notifications are 400 and change nothing; an unknown provider is 404', async (t) => {
  const person = await personInTwoOrganizations();
  const before = await memberRows(person.email);
  const body = user('user_5', person.email, 'Mallory', null);
  const forged = await notify(body, { secret: `whsec_${randomBytes(32).toString('base64')}` });
  assertErrorShape(t, { ...forged, headers: forged.headers }, 400, 'invalid_signature');
  const stale = await notify(body, { at: new Date(testNow() - 10 * 60_000) });
  assertErrorShape(t, stale, 400, 'invalid_signature');
  t.match(stale.body.message, /too old/);
  const early = await notify(body, { at: new Date(testNow() + 10 * 60_000) });
  assertErrorShape(t, early, 400, 'invalid_signature');
  t.match(early.body.message, /too new/, 'judged by the server’s clock, either way');
  t.match(await notify(user('user_6', addressOf('near'), 'Near', null), { at: new Date(testNow() - 4 * 60_000) }), { status: 200 }, 'four minutes late is in time');
  assertErrorShape(t, await notify(body, { tamper: (text) => text.replace('Mallory', 'Eve') }), 400, 'invalid_signature');
  const unsigned = await app.inject({ method: 'POST', url: '/v1/webhooks/clerk', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  t.equal(unsigned.statusCode, 400);
  t.equal(unsigned.json().code, 'invalid_signature');
  assertErrorShape(t, await notify(body, { provider: 'auth0' }), 404, 'not_found');
  assertErrorShape(t, await notify({ type: 'user.updated', data: { first_name: 'No id' } }), 400, 'invalid_notification');
  assertErrorShape(t, await notify({ data: {} }), 400, 'validation_failed');
  t.same(await memberRows(person.email), before, 'nothing changed');
  t.equal(before[1]!.identityUserId, null, 'not linked either');
  t.equal((await db('identity_notifications').whereIn('message_id', [forged.id])).length, 0, 'a refused message is not remembered');
});
