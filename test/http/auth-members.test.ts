import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ID_PREFIX, newId } from '../../server/core/ids.js';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, servicesOf, signup, testApp, type Reply } from '../helpers/app.js';
import { DASHBOARD, deliverMail, linkIn, mailsTo, signIn, SIGN_IN_TEST_ENV, addressOf, teamOf } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Team management for signed-in members: GET /v1/auth/members, POST …/invite, POST
// …/{memberId}/resend-invite, PATCH and DELETE …/{memberId}, GET and PUT …/{memberId}/brands,
// POST /v1/auth/transfer-ownership and POST /v1/auth/accept-invite; an invitee signs in with
// nothing but the mail file ticketd writes.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-members-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
let now = testNow();
const DAY = 24 * 60 * 60_000;
const { app, db } = await testApp(
  t,
  {
    TICKETD_DATA_DIR: dataDir,
    ...SIGN_IN_TEST_ENV,
    // Sessions outlive the clock's jumps past invitation expiry.
    TICKETD_SESSION_IDLE_TTL_SECONDS: String(365 * 86_400),
    TICKETD_SESSION_MAX_TTL_SECONDS: String(365 * 86_400),
  },
  { clock: () => now },
);
const services = servicesOf(db);
const anonymous = client(app);
const origin = { origin: DASHBOARD };

type Call = ReturnType<typeof client>;

/** The invitation link in the newest mail to `email` (delivered through the outbox to the mail file first). */
async function invitationLink(email: string): Promise<{ url: URL; token: string; inviteId: string }> {
  await deliverMail(services);
  const mails = await mailsTo(services, email);
  if (!mails.length) throw new Error(`no mail to ${email}`);
  const url = linkIn(mails[mails.length - 1]!);
  return { url, token: url.searchParams.get('token')!, inviteId: url.searchParams.get('org_invite')! };
}

async function mailCount(email: string): Promise<number> {
  await deliverMail(services);
  return (await mailsTo(services, email)).length;
}

/** Invites and returns the invitation's id, failing the set-up otherwise. */
async function invite(call: Call, body: Record<string, unknown>): Promise<string> {
  const res = await call('POST', '/v1/auth/members/invite', body, origin);
  if (res.status !== 200) throw new Error(`invite failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.memberId as string;
}

/** Follows an invitation link as the dashboard's callback does: verify the token, then accept the invite id with the new session. */
async function follow(link: { token: string; inviteId: string }): Promise<Call> {
  const verified = await anonymous('POST', '/v1/auth/verify', { token: link.token });
  if (verified.status !== 200) throw new Error(`verify failed: ${verified.status} ${JSON.stringify(verified.body)}`);
  const me = client(app, verified.body.sessionToken);
  const accepted = await me('POST', '/v1/auth/accept-invite', { inviteId: link.inviteId });
  if (accepted.status !== 200) throw new Error(`accept failed: ${accepted.status} ${JSON.stringify(accepted.body)}`);
  return me;
}

async function row(memberId: string) {
  return db('members').where({ id: memberId }).first();
}

async function auditOf(memberId: string): Promise<{ event: string; performerType: string; performerId: string; changes: unknown; metadata: Record<string, unknown> }[]> {
  return db('audit_log').where({ entity_type: 'member', entity_id: memberId }).orderBy('id');
}

const ids = (list: { id: string }[]) => list.map((m) => m.id);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Listed = { id: string } & Record<string, any>;
const team = async (call: Call, query = '') => (await call('GET', `/v1/auth/members${query}`)).body as { members: Listed[]; invites: Listed[] };

const a = await teamOf(app, services);
const b = await teamOf(app, services);

t.test('end to end: the owner invites a member to one brand; with only the mailed link they sign in, accept, and work in that brand alone', async (t) => {
  const org = await teamOf(app, services);
  const mine = await makeTicket(org.owner.live, `/v1/brands/${org.first.id}`, { title: 'For the newcomer' });
  await makeTicket(org.owner.live, `/v1/brands/${org.second.id}`, { title: 'Not for the newcomer' });
  const email = addressOf('newcomer');
  const sent = await org.asOwner('POST', '/v1/auth/members/invite', { email, role: 'member', allBrands: false, brandIds: [org.first.id] }, origin);
  t.equal(sent.status, 200, 'invite: 200');
  t.match(sent.body, { success: true, message: /invitation/i, memberId: /^mem_/ });
  t.match(await team(org.asOwner), {
    invites: [{ id: sent.body.memberId, email, role: 'member', status: 'pending', brandAssignment: { allBrands: false, brandIds: [org.first.id] } }],
  });

  await deliverMail(services);
  const mails = await mailsTo(services, email);
  t.equal(mails.length, 1, 'one mail, to the invitee');
  t.match(mails[0]!.subject, /invited/i);
  t.match(mails[0]!.text, /Test Owner invited you/);
  const link = linkIn(mails[0]!);
  t.equal(link.origin, DASHBOARD, "the link points at the inviter's dashboard");
  t.equal(link.pathname, '/auth/callback');
  const token = link.searchParams.get('token')!;
  const inviteId = link.searchParams.get('org_invite')!;
  t.match(token, /^ml_[0-9A-Za-z]{43}$/);
  t.equal(inviteId, sent.body.memberId, 'org_invite is the invitation id');

  // The callback: no session yet, so the token goes to verify; then the invite id to accept-invite.
  const verified = await anonymous('POST', '/v1/auth/verify', { token });
  t.equal(verified.status, 200, 'verify: 200, a session for the new organization');
  t.match(verified.body, { success: true, sessionToken: /^ts_/, organizationId: org.owner.accountId, memberId: inviteId, email, orgRole: 'member', connected: true });
  const me = client(app, verified.body.sessionToken);
  const accepted = await me('POST', '/v1/auth/accept-invite', { inviteId });
  t.equal(accepted.status, 200, 'accept-invite: 200');
  t.match(accepted.body, { organizationId: org.owner.accountId, memberId: inviteId });
  t.match((await me('GET', '/v1/auth/session')).body, { valid: true, memberId: inviteId, organizationId: org.owner.accountId, orgRole: 'member' });

  const tickets = await me('GET', '/v1/tickets');
  t.equal(tickets.status, 200);
  t.same(ids(tickets.body.data), [mine.id], 'the cross-brand list holds the assigned brand only');
  const own = await me('GET', `/v1/brands/${org.first.id}/tickets`);
  t.equal(own.status, 200);
  t.same(ids(own.body.data), [mine.id], "the brand's own list");
  assertNotFound(t, await me('GET', `/v1/brands/${org.second.id}/tickets`), 'the other brand');
  assertNotFound(t, await me('GET', `/v1/tickets?brandIds=${org.second.id}`), 'the other brand named in the cross-brand list');

  assertErrorShape(t, await anonymous('POST', '/v1/auth/verify', { token }), 400, 'invalid_token');
  const listed = await team(org.asOwner);
  t.ok(
    listed.members.some((m) => m.id === inviteId && m.status === 'active'),
    'a member now',
  );
  t.notOk(
    listed.invites.some((m) => m.id === inviteId),
    'no longer an invitation',
  );
  t.match(
    (await auditOf(inviteId)).map((e) => [e.event, e.performerType, e.performerId]),
    [
      ['member.invited', 'user', org.owner.ownerId],
      ['member.invite_accepted', 'user', inviteId],
    ],
    'the invitation as the owner, the acceptance as the invitee',
  );
});

t.test('GET /v1/auth/members: active members and pending invitations, optionally for one brand', async (t) => {
  const pendingAll = await invite(a.asOwner, { email: addressOf('pending-all'), role: 'member', allBrands: true, brandIds: [] });
  const pendingSecond = await invite(a.asOwner, { email: addressOf('pending-second'), role: 'member', allBrands: false, brandIds: [a.second.id] });

  const whole = await a.asOwner('GET', '/v1/auth/members');
  t.equal(whole.status, 200);
  t.same(ids(whole.body.members), [a.owner.ownerId, a.admin.id, a.member.id], 'active members, in the order they joined');
  t.same(ids(whole.body.invites), [pendingAll, pendingSecond], 'pending invitations');
  t.ok(
    whole.body.members.every((m: { status: string }) => m.status === 'active'),
    'every member is active',
  );
  const admin = whole.body.members[1];
  t.same(admin, { id: a.admin.id, email: a.admin.email, firstName: 'Ada', lastName: 'Admin', role: 'admin', status: 'active', brandAssignment: { allBrands: true, brandIds: [] } });
  t.match(whole.body.members[2], { id: a.member.id, role: 'member', brandAssignment: { allBrands: false, brandIds: [a.first.id] } });
  const inv = whole.body.invites[1];
  t.match(inv, { id: pendingSecond, status: 'pending', role: 'member', brandAssignment: { allBrands: false, brandIds: [a.second.id] } });
  t.equal(Date.parse(inv.expiresAt) - Date.parse(inv.sentAt), 7 * DAY, 'an invitation works 7 days');

  const inSecond = await team(a.asOwner, `?brandId=${a.second.id}`);
  t.same(ids(inSecond.members), [a.owner.ownerId, a.admin.id], 'the second brand: owner and admin, not the member of the first');
  t.same(ids(inSecond.invites), [pendingAll, pendingSecond]);
  const inFirst = await team(a.asOwner, `?brandId=${a.first.id.replace(/^br_/, 'ws_')}`);
  t.same(ids(inFirst.members), [a.owner.ownerId, a.admin.id, a.member.id], 'the first brand (by its ws_ alias): the member too');
  t.same(ids(inFirst.invites), [pendingAll]);

  const asMember = await a.asMember('GET', '/v1/auth/members');
  t.equal(asMember.status, 200, 'any member reads the team (assignee pickers)');
  t.same(ids(asMember.body.members), [a.owner.ownerId, a.admin.id, a.member.id]);
  t.same(
    asMember.body.invites.find((m: { id: string }) => m.id === pendingSecond).brandAssignment,
    { allBrands: false, brandIds: [] },
    "brands outside the caller's own are not named",
  );
  t.equal((await a.asMember('GET', `/v1/auth/members?brandId=${a.first.id}`)).status, 200);
  assertNotFound(t, await a.asMember('GET', `/v1/auth/members?brandId=${a.second.id}`), "a brand outside the member's assignments");
  assertNotFound(t, await a.asOwner('GET', `/v1/auth/members?brandId=${b.first.id}`), "another organization's brand");
  const testBrand = await makeBrand(a.owner.test, 'Test mode');
  assertNotFound(t, await a.asOwner('GET', `/v1/auth/members?brandId=${testBrand.id}`), 'a test-mode brand');
  assertNotFound(t, await a.asOwner('GET', '/v1/auth/members?brandId=br_nope'), 'an unknown brand');
  assertErrorShape(t, await a.owner.live('GET', '/v1/auth/members'), 401, 'session_required');
  assertErrorShape(t, await anonymous('GET', '/v1/auth/members'), 401, 'missing_credentials');
});

t.test('POST /v1/auth/members/invite: owners and admins; an active member is refused; an address invited already is invited again', async (t) => {
  const email = addressOf('invitee');
  const before = await db('members').where({ account_id: a.owner.accountId }).count({ n: '*' });
  const refused = await a.asMember('POST', '/v1/auth/members/invite', { email, role: 'member', allBrands: true, brandIds: [] }, origin);
  assertErrorShape(t, refused, 403, 'insufficient_role');
  t.same(await db('members').where({ account_id: a.owner.accountId }).count({ n: '*' }), before, 'a member inviting: no row');
  t.equal(await mailCount(email), 0, 'and no mail');

  assertErrorShape(t, await a.asOwner('POST', '/v1/auth/members/invite', { email: a.member.email, role: 'member' }, origin), 400, 'already_member');
  assertErrorShape(t, await a.asAdmin('POST', '/v1/auth/members/invite', { email: a.ownerEmail.toUpperCase(), role: 'admin' }, origin), 400, 'already_member');

  const first = await invite(a.asAdmin, { email, role: 'member', allBrands: false, brandIds: [a.first.id] });
  const oldLink = await invitationLink(email);
  now += 60_000;
  const again = await a.asOwner('POST', '/v1/auth/members/invite', { email: ` ${email.toUpperCase()} `, role: 'admin', allBrands: true, brandIds: [] }, origin);
  t.equal(again.status, 200, 'inviting a pending address again: 200');
  t.match(again.body, { success: true, memberId: first, message: /again/ });
  t.equal(
    await db('members')
      .where({ account_id: a.owner.accountId, email })
      .count({ n: '*' })
      .first()
      .then((r) => Number(r!.n)),
    1,
    'still one row',
  );
  t.match(
    (await team(a.asOwner)).invites.find((m) => m.id === first),
    { role: 'admin', brandAssignment: { allBrands: true, brandIds: [] } },
    'with the new role and brands',
  );
  const newLink = await invitationLink(email);
  t.not(newLink.token, oldLink.token, 'a new link');
  assertErrorShape(t, await anonymous('POST', '/v1/auth/verify', { token: oldLink.token }), 400, 'invalid_token');
  const me = await follow(newLink);
  t.match((await me('GET', '/v1/auth/session')).body, { orgRole: 'admin', memberId: first });
  t.match(
    (await auditOf(first)).map((e) => [e.event, e.performerId]),
    [
      ['member.invited', a.admin.id],
      ['member.invited', a.owner.ownerId],
      ['member.invite_accepted', first],
    ],
  );
  t.match((await auditOf(first))[1]!, { metadata: { renewed: true }, changes: [{ field: 'role', from: 'member', to: 'admin' }, { field: 'allBrands' }, { field: 'brandIds' }] });
});

t.test('POST /v1/auth/members/invite: bad input and brands outside the organization are 400', async (t) => {
  const body = (over: Record<string, unknown>) => ({ email: addressOf('bad'), role: 'member', ...over });
  const testBrand = await makeBrand(a.owner.test, 'Test mode');
  for (const [label, over] of [
    ['an unknown brand', { allBrands: false, brandIds: ['br_unknown'] }],
    ["another organization's brand", { allBrands: false, brandIds: [b.first.id] }],
    ['a test-mode brand', { allBrands: false, brandIds: [testBrand.id] }],
    ['all brands and a list', { allBrands: true, brandIds: [a.first.id] }],
    ['the owner role', { role: 'owner' }],
    ['a malformed address', { email: 'not-an-address' }],
    ['an unknown field', { nickname: 'x' }],
  ] as const) {
    const res = await a.asOwner('POST', '/v1/auth/members/invite', body(over), origin);
    t.equal(res.status, 400, `${label}: 400`);
    t.equal(res.body.statusCode, 400);
  }
  t.equal(
    await db('members')
      .where({ account_id: a.owner.accountId })
      .where('email', 'like', 'bad-%')
      .count({ n: '*' })
      .first()
      .then((r) => Number(r!.n)),
    0,
    'nothing was created',
  );
});

t.test('the link points at the inviter’s dashboard page when it is a dashboard origin, else at the first configured one', async (t) => {
  for (const [label, headers, expected] of [
    ['a loopback dashboard page', { origin: 'http://localhost:5173' }, 'http://localhost:5173'],
    ['no Origin header', {}, DASHBOARD],
    ['a foreign origin', { origin: 'https://evil.example' }, DASHBOARD],
    ['an origin with a path', { origin: `${DASHBOARD}/x` }, DASHBOARD],
  ] as const) {
    const email = addressOf('origin');
    const res = await a.asOwner('POST', '/v1/auth/members/invite', { email, role: 'member' }, headers);
    t.equal(res.status, 200, `${label}: 200`);
    t.equal((await invitationLink(email)).url.origin, expected, `${label}: the link points at ${expected}`);
  }
});

t.test('POST /v1/auth/members/{memberId}/resend-invite: a fresh link; earlier ones stop working', async (t) => {
  const email = addressOf('resend');
  const id = await invite(a.asOwner, { email, role: 'member', allBrands: true, brandIds: [] });
  const oldLink = await invitationLink(email);
  const sentAt = (await team(a.asOwner)).invites.find((m) => m.id === id)!.sentAt;
  now += 60_000;
  // The dashboard sends no body; some clients send an empty one with a JSON content type.
  const resent = await a.asAdmin('POST', `/v1/auth/members/${id}/resend-invite`, undefined, { 'content-type': 'application/json', ...origin });
  t.equal(resent.status, 200, 'resend: 200');
  t.match(resent.body, { success: true, message: /again/ });
  t.equal(await mailCount(email), 2, 'a second mail');
  const newLink = await invitationLink(email);
  t.not(newLink.token, oldLink.token);
  t.equal(newLink.inviteId, id, 'the same invitation');
  t.ok((await team(a.asOwner)).invites.find((m) => m.id === id)!.sentAt > sentAt, 'sentAt moved');
  assertErrorShape(t, await anonymous('POST', '/v1/auth/verify', { token: oldLink.token }), 400, 'invalid_token');

  assertErrorShape(t, await a.asMember('POST', `/v1/auth/members/${id}/resend-invite`, undefined, origin), 403, 'insufficient_role');
  t.equal(await mailCount(email), 2, 'a member asking sends nothing');
  assertErrorShape(t, await a.asOwner('POST', `/v1/auth/members/${a.member.id}/resend-invite`, undefined, origin), 400, 'member_not_pending');
  assertNotFound(t, await a.asOwner('POST', '/v1/auth/members/mem_unknown/resend-invite', undefined, origin), 'an unknown id');
  const theirs = await invite(b.asOwner, { email: addressOf('theirs'), role: 'member' });
  assertNotFound(t, await a.asOwner('POST', `/v1/auth/members/${theirs}/resend-invite`, undefined, origin), "another organization's invitation");

  await follow(newLink);
  assertErrorShape(t, await a.asOwner('POST', `/v1/auth/members/${id}/resend-invite`, undefined, origin), 400, 'member_not_pending');
  t.match(
    (await auditOf(id)).map((e) => e.event),
    ['member.invited', 'member.invite_resent', 'member.invite_accepted'],
  );
});

t.test('POST /v1/auth/accept-invite: idempotent for its invitee; 404 for the missing, expired, withdrawn and other people’s', async (t) => {
  const email = addressOf('accept');
  const id = await invite(a.asOwner, { email, role: 'member', allBrands: true, brandIds: [] });
  assertNotFound(t, await a.asAdmin('POST', '/v1/auth/accept-invite', { inviteId: id }), 'an invitation addressed to someone else');
  t.equal((await row(id)).status, 'pending', 'still pending');
  assertNotFound(t, await a.asOwner('POST', '/v1/auth/accept-invite', { inviteId: a.owner.ownerId }), 'a member who was never invited');
  assertNotFound(t, await a.asOwner('POST', '/v1/auth/accept-invite', { inviteId: 'mem_unknown' }), 'an unknown id');

  const me = await follow(await invitationLink(email));
  const again = await me('POST', '/v1/auth/accept-invite', { inviteId: id });
  t.equal(again.status, 200, 'accepting again: 200');
  t.same(again.body, { success: true, organizationId: a.owner.accountId, memberId: id });
  t.equal((await auditOf(id)).filter((e) => e.event === 'member.invite_accepted').length, 1, 'accepted once');
  assertErrorShape(t, await me('POST', '/v1/auth/accept-invite', {}), 400, 'validation_failed');
});

t.test('a person already in one organization accepts an invitation to another with the session they have', async (t) => {
  // The member of b is invited to a: their b session accepts it, and the link (unspent) then signs them in to a.
  const id = await invite(a.asOwner, { email: b.member.email, role: 'member', allBrands: false, brandIds: [a.second.id] });
  const link = await invitationLink(b.member.email);
  const accepted = await b.asMember('POST', '/v1/auth/accept-invite', { inviteId: id });
  t.equal(accepted.status, 200);
  t.same(accepted.body, { success: true, organizationId: a.owner.accountId, memberId: id });
  t.match((await b.asMember('GET', '/v1/auth/session')).body, { organizationId: b.owner.accountId }, 'the session stays in its organization');
  t.same(
    ((await b.asMember('GET', '/v1/auth/organizations')).body as { id: string }[]).map((o) => o.id),
    [b.owner.accountId, a.owner.accountId],
    'both organizations are theirs now',
  );
  t.match((await auditOf(id)).at(-1), { event: 'member.invite_accepted', performerType: 'user', performerId: id, metadata: { via: 'accept_invite' } });
  const verified = await anonymous('POST', '/v1/auth/verify', { token: link.token });
  t.equal(verified.status, 200, 'the link signs them in to the inviting organization');
  t.match(verified.body, { organizationId: a.owner.accountId, memberId: id });
});

t.test('expired invitations: the link and accept-invite refuse them; a resend revives them', async (t) => {
  const email = addressOf('late');
  const id = await invite(a.asOwner, { email, role: 'member' });
  const link = await invitationLink(email);
  // The invitee also has a session elsewhere, with the same address.
  const elsewhere = await signup(app, email);
  const theirSession = client(app, await signIn(app, services, email, { organizationId: elsewhere.accountId }));
  now += 7 * DAY + 60_000;
  assertErrorShape(t, await anonymous('POST', '/v1/auth/verify', { token: link.token }), 400, 'invalid_token');
  assertNotFound(t, await theirSession('POST', '/v1/auth/accept-invite', { inviteId: id }), 'an expired invitation');
  t.equal((await row(id)).status, 'pending', 'still pending');
  const listed = (await team(a.asOwner)).invites.find((m) => m.id === id)!;
  t.ok(Date.parse(listed.expiresAt) < now, 'listed as an invitation whose time is up');

  t.equal((await a.asOwner('POST', `/v1/auth/members/${id}/resend-invite`, undefined, origin)).status, 200);
  const accepted = await theirSession('POST', '/v1/auth/accept-invite', { inviteId: id });
  t.equal(accepted.status, 200, 'resent: accepted');
  t.equal((await row(id)).status, 'active');
});

t.test('PATCH /v1/auth/members/{memberId}: roles by owners and admins; the owner’s only by transfer', async (t) => {
  const org = await teamOf(app, services);
  const path = (id: string) => `/v1/auth/members/${id}`;
  assertErrorShape(t, await org.asMember('PATCH', path(org.member.id), { role: 'admin' }), 403, 'insufficient_role');
  assertErrorShape(t, await org.asMember('PATCH', path(org.admin.id), { role: 'member' }), 403, 'insufficient_role');
  t.equal((await row(org.member.id)).role, 'member', 'a member promoting themselves: nothing changed');
  t.equal((await row(org.admin.id)).role, 'admin');
  assertErrorShape(t, await org.asMember('GET', '/v1/accounts/me'), 403, 'insufficient_role');

  const promoted = await org.asAdmin('PATCH', path(org.member.id), { role: 'admin' });
  t.equal(promoted.status, 200, 'an admin promotes a member');
  t.match(promoted.body, { success: true, message: /admin/ });
  t.equal((await org.asMember('GET', '/v1/accounts/me')).status, 200, "the member's own session is an admin's at once");
  t.equal((await org.asMember('GET', `/v1/brands/${org.second.id}`)).status, 200, 'and sees every brand');
  t.match((await org.asMember('GET', '/v1/auth/session')).body, { orgRole: 'admin' });
  t.equal((await org.asAdmin('PATCH', path(org.member.id), { role: 'admin' })).status, 200, 'the same role again: 200');
  t.equal((await auditOf(org.member.id)).filter((e) => e.event === 'member.updated').length, 1, 'one change, one entry');
  t.match((await auditOf(org.member.id)).at(-1), {
    event: 'member.updated',
    performerType: 'user',
    performerId: org.admin.id,
    changes: [{ field: 'role', from: 'member', to: 'admin' }],
  });
  t.equal((await org.asAdmin('PATCH', path(org.member.id), { role: 'member' })).status, 200, 'and demotes them again');

  assertErrorShape(t, await org.asAdmin('PATCH', path(org.member.id), { role: 'owner' }), 403, 'insufficient_role');
  assertErrorShape(t, await org.asAdmin('PATCH', path(org.owner.ownerId), { role: 'admin' }), 403, 'owner_role_fixed');
  assertErrorShape(t, await org.asOwner('PATCH', path(org.owner.ownerId), { role: 'member' }), 403, 'owner_role_fixed');
  t.equal((await row(org.owner.ownerId)).role, 'owner', 'the owner is still the owner');
  assertErrorShape(t, await org.asOwner('PATCH', path(org.member.id), { role: 'superuser' }), 400, 'validation_failed');
  assertNotFound(t, await org.asOwner('PATCH', path(b.member.id), { role: 'admin' }), "another organization's member");
  t.equal((await row(b.member.id)).role, 'member');
  assertNotFound(t, await org.asOwner('PATCH', path('mem_unknown'), { role: 'admin' }), 'an unknown id');

  const pending = await invite(org.asOwner, { email: addressOf('pending-role'), role: 'member' });
  t.equal((await org.asAdmin('PATCH', path(pending), { role: 'admin' })).status, 200, "an invitation's role");
  t.equal((await row(pending)).role, 'admin');
  assertNotFound(t, await org.asOwner('PATCH', path(pending), { role: 'owner' }), 'a pending member cannot be made the owner');

  const handed = await org.asOwner('PATCH', path(org.admin.id), { role: 'owner' });
  t.equal(handed.status, 200, 'the owner makes an admin the owner: a transfer');
  t.match(handed.body, { message: /transferred/ });
  t.match((await org.asAdmin('GET', '/v1/auth/session')).body, { orgRole: 'owner' });
  t.match((await org.asOwner('GET', '/v1/auth/session')).body, { orgRole: 'admin' });
});

t.test('DELETE /v1/auth/members/{memberId}: removal ends the sessions at once; invitations are withdrawn; never the owner', async (t) => {
  const org = await teamOf(app, services);
  const ticket = await makeTicket(org.owner.live, `/v1/brands/${org.first.id}`, { title: 'Assigned', assigneeId: org.member.id });
  t.equal((await org.asMember('GET', '/v1/auth/session')).status, 200);

  assertErrorShape(t, await org.asMember('DELETE', `/v1/auth/members/${org.admin.id}`), 403, 'insufficient_role');
  t.ok(await row(org.admin.id), 'a member removing an admin: nothing changed');
  assertErrorShape(t, await org.asAdmin('DELETE', `/v1/auth/members/${org.owner.ownerId}`), 403, 'owner_cannot_be_removed');
  assertErrorShape(t, await org.asOwner('DELETE', `/v1/auth/members/${org.owner.ownerId}`), 403, 'owner_cannot_be_removed');
  assertNotFound(t, await org.asOwner('DELETE', `/v1/auth/members/${b.member.id}`), "another organization's member");
  t.ok(await row(b.member.id), 'untouched');
  assertNotFound(t, await org.asOwner('DELETE', '/v1/auth/members/mem_unknown'), 'an unknown id');

  const removed = await org.asAdmin('DELETE', `/v1/auth/members/${org.member.id}`);
  t.equal(removed.status, 200);
  t.match(removed.body, { success: true, message: /removed/ });
  assertErrorShape(t, await org.asMember('GET', '/v1/auth/session'), 401, 'invalid_session');
  assertErrorShape(t, await org.asMember('GET', `/v1/brands/${org.first.id}/tickets`), 401, 'invalid_session');
  t.notOk(ids((await team(org.asOwner)).members).includes(org.member.id), 'gone from the team');
  t.equal((await org.owner.live('GET', `/v1/brands/${org.first.id}/tickets/${ticket.id}`)).body.assigneeId, null, 'their ticket is unassigned');
  t.match((await auditOf(org.member.id)).at(-1), { event: 'member.removed', performerType: 'user', performerId: org.admin.id, metadata: { status: 'active' } });
  assertNotFound(t, await org.asAdmin('DELETE', `/v1/auth/members/${org.member.id}`), 'removing again');

  const email = addressOf('withdrawn');
  const pending = await invite(org.asOwner, { email, role: 'member' });
  const link = await invitationLink(email);
  const withdrawn = await org.asOwner('DELETE', `/v1/auth/members/${pending}`);
  t.equal(withdrawn.status, 200, 'an invitation is withdrawn');
  t.match(withdrawn.body, { message: /withdrawn/ });
  assertErrorShape(t, await anonymous('POST', '/v1/auth/verify', { token: link.token }), 400, 'invalid_token');
  t.notOk(ids((await team(org.asOwner)).invites).includes(pending));
});

t.test('POST /v1/auth/transfer-ownership: the owner only, to an active member; the owner becomes an admin', async (t) => {
  const org = await teamOf(app, services);
  const transfer = (call: Call, newOwnerId: string) => call('POST', '/v1/auth/transfer-ownership', { newOwnerId });
  assertErrorShape(t, await transfer(org.asAdmin, org.admin.id), 403, 'insufficient_role');
  assertErrorShape(t, await transfer(org.asMember, org.member.id), 403, 'insufficient_role');
  t.equal((await row(org.owner.ownerId)).role, 'owner', 'nothing changed');
  const pending = await invite(org.asOwner, { email: addressOf('future-owner'), role: 'admin' });
  assertNotFound(t, await transfer(org.asOwner, pending), 'a pending member');
  assertNotFound(t, await transfer(org.asOwner, b.member.id), "another organization's member");
  assertNotFound(t, await transfer(org.asOwner, 'mem_unknown'), 'an unknown id');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/transfer-ownership', {}), 400, 'validation_failed');
  const self = await transfer(org.asOwner, org.owner.ownerId);
  t.equal(self.status, 200, 'to the owner themselves: 200, nothing changes');
  t.equal((await row(org.owner.ownerId)).role, 'owner');

  const moved = await transfer(org.asOwner, org.member.id);
  t.equal(moved.status, 200);
  t.match(moved.body, { success: true, message: /transferred/ });
  t.equal((await row(org.member.id)).role, 'owner');
  t.equal((await row(org.owner.ownerId)).role, 'admin');
  t.match((await org.asOwner('GET', '/v1/auth/session')).body, { orgRole: 'admin' }, "the old owner's session is an admin's at once");
  t.match((await org.asMember('GET', '/v1/auth/session')).body, { orgRole: 'owner' });
  assertErrorShape(t, await transfer(org.asOwner, org.owner.ownerId), 403, 'insufficient_role');
  t.equal((await org.asMember('GET', `/v1/brands/${org.second.id}`)).status, 200, 'the new owner sees every brand');
  t.match(
    [(await auditOf(org.owner.ownerId)).at(-1), (await auditOf(org.member.id)).at(-1)],
    [
      { event: 'member.updated', performerId: org.owner.ownerId, changes: [{ field: 'role', from: 'owner', to: 'admin' }], metadata: { reason: 'ownership_transferred' } },
      { event: 'member.updated', performerId: org.owner.ownerId, changes: [{ field: 'role', from: 'member', to: 'owner' }] },
    ],
  );
});

t.test('GET and PUT /v1/auth/members/{memberId}/brands: assignments hold on the member’s sessions at once', async (t) => {
  const org = await teamOf(app, services);
  const brandsOf = (call: Call, id: string) => call('GET', `/v1/auth/members/${id}/brands`);
  const put = (call: Call, id: string, body: unknown) => call('PUT', `/v1/auth/members/${id}/brands`, body);
  const got = await brandsOf(org.asOwner, org.member.id);
  t.equal(got.status, 200);
  t.same(got.body, {
    memberId: org.member.id,
    allBrands: false,
    brandIds: [org.first.id],
    availableBrands: [
      { id: org.first.id, name: 'First' },
      { id: org.second.id, name: 'Second' },
    ],
  });
  t.same((await brandsOf(org.asMember, org.member.id)).body.availableBrands, [{ id: org.first.id, name: 'First' }], 'a member sees only the brands they have');
  assertNotFound(t, await brandsOf(org.asOwner, b.member.id), "another organization's member");

  assertErrorShape(t, await put(org.asMember, org.member.id, { allBrands: true, brandIds: [] }), 403, 'insufficient_role');
  assertNotFound(t, await org.asMember('GET', `/v1/brands/${org.second.id}`), 'a member widening their own brands: nothing changed');

  const moved = await put(org.asAdmin, org.member.id, { allBrands: false, brandIds: [org.second.id.replace(/^br_/, 'ws_')] });
  t.equal(moved.status, 200);
  t.match(moved.body, { memberId: org.member.id, allBrands: false, brandIds: [org.second.id] });
  t.equal((await org.asMember('GET', `/v1/brands/${org.second.id}`)).status, 200, 'the existing session sees the new brand');
  assertNotFound(t, await org.asMember('GET', `/v1/brands/${org.first.id}`), 'and no longer the old one');
  t.match((await auditOf(org.member.id)).at(-1), {
    event: 'member.updated',
    performerType: 'user',
    performerId: org.admin.id,
    changes: [{ field: 'brandIds', from: [org.first.id], to: [org.second.id] }],
  });

  for (const [label, body] of [
    ['an unknown brand', { allBrands: false, brandIds: ['br_unknown'] }],
    ["another organization's brand", { allBrands: false, brandIds: [b.first.id] }],
    ['all brands and a list', { allBrands: true, brandIds: [org.first.id] }],
    ['no allBrands', { brandIds: [org.first.id] }],
  ] as const) {
    const res: Reply = await put(org.asOwner, org.member.id, body);
    t.equal(res.status, 400, `${label}: 400`);
  }
  t.same((await row(org.member.id)).brandIds, [org.second.id], 'unchanged by the refused ones');
  assertNotFound(t, await put(org.asOwner, b.member.id, { allBrands: true, brandIds: [] }), "another organization's member");
  t.equal((await put(org.asOwner, org.member.id, { allBrands: true })).status, 200, 'all brands');
  t.equal((await org.asMember('GET', `/v1/brands/${org.first.id}`)).status, 200, 'every brand at once');
  t.same(ids((await org.asMember('GET', '/v1/brands')).body).sort(), [org.first.id, org.second.id].sort());
});

t.test('a pending member without an invitation (older data, made by hand) has nothing to accept until it is resent', async (t) => {
  const email = addressOf('uninvited');
  const id = newId(ID_PREFIX.member);
  await db('members').insert({ account_id: a.owner.accountId, id, email, role: 'member', status: 'pending' });
  const elsewhere = await signup(app, email);
  const theirSession = client(app, await signIn(app, services, email, { organizationId: elsewhere.accountId }));
  assertNotFound(t, await theirSession('POST', '/v1/auth/accept-invite', { inviteId: id }), 'no invitation');
  const listed = (await team(a.asOwner)).invites.find((m) => m.id === id)!;
  t.notOk('sentAt' in listed || 'expiresAt' in listed, 'listed without sentAt or expiresAt');
  t.equal((await a.asOwner('POST', `/v1/auth/members/${id}/resend-invite`, undefined, origin)).status, 200, 'resent');
  t.equal((await theirSession('POST', '/v1/auth/accept-invite', { inviteId: id })).status, 200, 'then accepted');
});

t.test('an invitee is not an assignee until they accept', async (t) => {
  const email = addressOf('assignee');
  const inviteId = await invite(a.asOwner, { email, role: 'member', allBrands: true, brandIds: [] });
  const base = `/v1/brands/${a.first.id}`;
  assertErrorShape(t, await a.owner.live('POST', `${base}/tickets`, { title: 'For the invitee', assigneeId: inviteId }), 400, 'invalid_assignee');
  const ticket = await makeTicket(a.owner.live, base, { title: 'Unassigned for now' });
  assertErrorShape(t, await a.owner.live('PATCH', `${base}/tickets/${ticket.id}`, { assigneeId: inviteId }), 400, 'invalid_assignee');
  t.equal((await a.owner.live('GET', `${base}/tickets/${ticket.id}`)).body.assigneeId, null, 'nothing changed');

  await follow(await invitationLink(email));
  const assigned = await a.owner.live('POST', `${base}/tickets`, { title: 'For the new member', assigneeId: inviteId });
  t.equal(assigned.status, 201, 'once accepted, they are');
  t.equal(assigned.body.assigneeId, inviteId);
});
