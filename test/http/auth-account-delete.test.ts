import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, client, makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';

// DELETE /v1/auth/account: the account (the organization) and everything in it, both modes.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-account-delete-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db } = await testApp(t, { TICKETD_DATA_DIR: dataDir, TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const services = servicesOf(db);

let seq = 0;
const address = (who: string) => `${who}-${++seq}-${process.pid}@example.com`;
const fileOf = (id: string) => path.join(dataDir, 'attachments', id.slice(-2), id);
const GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

function multipart(filename: string, type: string, bytes: Buffer): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----ticketd${Math.random().toString(16).slice(2)}`;
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`),
    bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

/** An organization with something of every kind in both modes: brands, tickets, files, webhooks, members, sessions, an avatar, keys. */
async function organization() {
  const ownerEmail = address('owner');
  const owner = await signup(app, ownerEmail);
  const live = tenantCtx(systemCtx(services), owner.accountId, true);
  const admin = await members.add(live, { email: address('admin'), name: 'Ada Admin', role: 'admin' });
  const member = await members.add(live, { email: address('member'), name: 'Mo Member', role: 'member' });
  const as = async (email: string) => client(app, await sessionToken(app, services, owner.accountId, email));
  const [asOwner, asAdmin, asMember] = [await as(ownerEmail), await as(admin.email), await as(member.email)];

  const brands = [await makeBrand(owner.live, 'First'), await makeBrand(owner.live, 'Second'), await makeBrand(owner.test, 'Test desk')];
  const files: string[] = [];
  for (const [call, brand] of [
    [owner.live, brands[0]!],
    [owner.test, brands[2]!],
  ] as const) {
    const base = `/v1/brands/${brand.id}`;
    const ticket = await makeTicket(call, base, { title: 'Printer on fire', customerEmail: 'peter@initech.example' });
    await mustCreate(call, `${base}/tickets/${ticket.id}/comments`, { body: `@[Mo](${member.id}) look` });
    await mustCreate(call, `${base}/tickets/${ticket.id}/watchers`, { memberId: member.id });
    const form = multipart('log.txt', 'text/plain', Buffer.from('a log line\n'));
    files.push((await mustCreate(call, `${base}/tickets/${ticket.id}/attachments/upload`, form.payload, form.headers)).attachment.id);
    await mustCreate(call, `${base}/webhooks`, { url: 'https://93.184.215.14/hook', events: ['ticket.created'] });
    await makeTicket(call, base, { title: 'Announced' });
  }
  const avatar = multipart('me.gif', 'image/gif', GIF);
  const avatarUrl = (await asMember('POST', '/v1/auth/profile/avatar/upload', avatar.payload, avatar.headers)).body.avatarUrl as string;
  files.push(new URL(avatarUrl).pathname.split('/').pop()!);
  await mustCreate(asMember, '/v1/auth/feature-requests', { title: 'Idea', featureDetails: 'Details' });
  const extraKey = (await mustCreate(owner.live, '/v1/accounts/me/api-keys', { name: 'Extra' })).key as string;
  return { owner, ownerEmail, admin, member, asOwner, asAdmin, asMember, brands, files, avatarUrl, extraKey };
}

/** Every table with an account_id column, and how many of its rows belong to the account. */
async function rowsOf(accountId: string): Promise<Record<string, number>> {
  const tables = (await db.raw(`select table_name from information_schema.columns where table_schema = 'public' and column_name = 'account_id' order by 1`)).rows as {
    table_name: string;
  }[];
  const counts: Record<string, number> = {};
  for (const { table_name: table } of tables) {
    const n = Number((await db.raw(`select count(*) as n from ${table} where account_id = ?`, [accountId])).rows[0].n);
    if (n) counts[table] = n;
  }
  if ((await db.raw('select 1 from accounts where id = ?', [accountId])).rows.length) counts.accounts = 1;
  return counts;
}

t.test('a member or an admin gets 403, and nothing is deleted', async (t) => {
  const a = await organization();
  const before = await rowsOf(a.owner.accountId);
  assertErrorShape(t, await a.asMember('DELETE', '/v1/auth/account', { confirmation: 'DELETE' }), 403, 'insufficient_role');
  assertErrorShape(t, await a.asAdmin('DELETE', '/v1/auth/account', { confirmation: 'DELETE' }), 403, 'insufficient_role');
  t.same(await rowsOf(a.owner.accountId), before, 'every row is there');
  t.equal((await a.owner.live('GET', '/v1/brands')).body.length, 2);
  t.equal((await a.asMember('GET', '/v1/auth/session')).status, 200);
});

t.test('without the exact confirmation: 400 invalid_confirmation, and nothing is deleted', async (t) => {
  const a = await organization();
  const before = await rowsOf(a.owner.accountId);
  for (const body of [{ confirmation: 'delete' }, { confirmation: 'DELETE ' }, { confirmation: 'yes' }, {}, undefined]) {
    assertErrorShape(t, await a.asOwner('DELETE', '/v1/auth/account', body), 400, 'invalid_confirmation');
  }
  assertErrorShape(t, await a.asOwner('DELETE', '/v1/auth/account', { confirmation: 1 }), 400, 'validation_failed');
  assertErrorShape(t, await a.asOwner('DELETE', '/v1/auth/account', { confirmation: 'DELETE', organizationId: 'acct_x' }), 400, 'validation_failed');
  assertErrorShape(t, await a.owner.live('DELETE', '/v1/auth/account', { confirmation: 'DELETE' }), 401, 'session_required');
  t.same(await rowsOf(a.owner.accountId), before);
});

t.test('the owner deletes the account: everything in it goes, in both modes, and nothing of it works any more', async (t) => {
  const a = await organization();
  const b = await organization();
  // The keys are cached by this process first: deletion must reach the cache, not only the table.
  for (const key of [a.owner.liveKey, a.owner.testKey, a.extraKey]) t.equal((await client(app, key)('GET', '/v1/accounts/me')).status, 200);
  for (const id of a.files) t.ok(existsSync(fileOf(id)), `file ${id} is stored`);
  const kinds = Object.keys(await rowsOf(a.owner.accountId));
  t.same(
    [
      'accounts',
      'api_keys',
      'attachments',
      'audit_log',
      'avatars',
      'brands',
      'comments',
      'contacts',
      'feature_requests',
      'magic_links',
      'mail_messages',
      'member_profiles',
      'members',
      'mentions',
      'outbox',
      'sessions',
      'statuses',
      'ticket_watchers',
      'tickets',
      'webhooks',
    ].filter((k) => !kinds.includes(k)),
    [],
    'the account has rows of every kind to begin with',
  );

  const res = await a.asOwner('DELETE', '/v1/auth/account', { confirmation: 'DELETE' });
  t.equal(res.status, 200);
  t.same(res.body, {
    success: true,
    message: 'The account "Test Owner" and everything in it (3 brands) were deleted.',
    deletedBrands: a.brands.map((x) => x.id),
    deletedBrandsCount: 3,
  });

  t.same(await rowsOf(a.owner.accountId), {}, 'no row of the account is left anywhere, its file queue included');
  for (const id of a.files) t.notOk(existsSync(fileOf(id)), `file ${id} was removed after the commit`);
  for (const call of [a.asOwner, a.asAdmin, a.asMember]) assertErrorShape(t, await call('GET', '/v1/auth/session'), 401, 'invalid_session');
  assertErrorShape(t, await a.asOwner('DELETE', '/v1/auth/account', { confirmation: 'DELETE' }), 401, 'invalid_session');
  for (const key of [a.owner.liveKey, a.owner.testKey, a.extraKey]) assertErrorShape(t, await client(app, key)('GET', '/v1/brands'), 401, 'invalid_api_key');
  t.equal((await app.inject({ method: 'GET', url: new URL(a.avatarUrl).pathname })).statusCode, 404, 'the avatar URL is gone');
  t.same((await client(app)('POST', '/v1/auth/check-email', { email: a.ownerEmail })).body, { exists: false }, 'the owner is nobody’s member now');

  t.equal((await b.owner.live('GET', '/v1/brands')).body.length, 2, 'another account keeps everything');
  t.equal((await b.asMember('GET', '/v1/auth/session')).status, 200);
  for (const id of b.files) t.ok(existsSync(fileOf(id)), "another account's files stay");
});

t.test('a person in two organizations who deletes one keeps the other', async (t) => {
  const a = await organization();
  const b = await organization();
  await members.add(tenantCtx(systemCtx(services), b.owner.accountId, true), { email: a.ownerEmail, role: 'admin' });
  const inB = client(app, (await a.asOwner('POST', '/v1/auth/switch-organization', { organizationId: b.owner.accountId })).body.sessionToken);
  t.equal((await a.asOwner('DELETE', '/v1/auth/account', { confirmation: 'DELETE' })).status, 200);
  t.match((await inB('GET', '/v1/auth/session')).body, { valid: true, organizationId: b.owner.accountId, orgRole: 'admin' }, 'the session in B goes on');
  t.same((await inB('GET', '/v1/auth/organizations')).body, [{ id: b.owner.accountId, name: 'Test Owner', role: 'admin' }]);
});
