import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeTicket, servicesOf, testApp } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';

// GET /v1/auth/mentions/unread, POST /v1/auth/mentions/{mentionId}/ack,
// POST /v1/auth/mentions/ack-ticket/{ticketId}: a member's mentions, made by comments.

const { app, db } = await testApp(t, SIGN_IN_TEST_ENV);
const services = servicesOf(db);
const a = await teamOf(app, services);
const b = await teamOf(app, services);

t.test('a comment that mentions a member puts it in their unread list; acknowledging takes it out', async (t) => {
  const ticket = await makeTicket(a.owner.live, `/v1/brands/${a.first.id}`, { title: 'Printer on fire' });
  const made = await a.asOwner('POST', `/v1/brands/${a.first.id}/tickets/${ticket.id}/comments`, {
    body: `@[Mo Member](${a.member.id}) can you look?`,
    metadata: { isInternal: true, mentions: [{ memberId: a.member.id, displayName: 'Mo Member' }] },
  });
  t.equal(made.status, 201);
  const unread = await a.asMember('GET', '/v1/auth/mentions/unread');
  t.equal(unread.status, 200);
  t.equal(unread.body.length, 1, 'one mention, though named twice');
  t.match(unread.body[0], { ticketId: ticket.id, brandId: a.first.id, ticketTitle: 'Printer on fire', brandName: 'First', ticketNumber: ticket.ticketNumber });
  t.same((await a.asOwner('GET', '/v1/auth/mentions/unread')).body, [], "the owner's own list is empty: the mention is Mo's");

  assertNotFound(t, await a.asOwner('POST', `/v1/auth/mentions/${unread.body[0].id}/ack`), "the owner cannot acknowledge Mo's mention");
  assertNotFound(t, await b.asMember('POST', `/v1/auth/mentions/${unread.body[0].id}/ack`), 'nor a member of another organization');
  t.same((await a.asMember('POST', `/v1/auth/mentions/${unread.body[0].id}/ack`)).body, { success: true, acknowledged: 1 });
  t.same((await a.asMember('POST', `/v1/auth/mentions/${unread.body[0].id}/ack`)).body, { success: true, acknowledged: 0 }, 'again: a no-op');
  t.same((await a.asMember('GET', '/v1/auth/mentions/unread')).body, []);
});

t.test("ack-ticket takes every mention of the caller on the ticket; another brand's or organization's ticket is 404", async (t) => {
  const base = `/v1/brands/${a.first.id}`;
  const ticket = await makeTicket(a.owner.live, base, { title: 'Two mentions' });
  for (const n of [1, 2]) await a.owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: `@[Mo](${a.member.id}) note ${n}` });
  t.equal((await a.asMember('GET', '/v1/auth/mentions/unread')).body.length, 2);
  t.same((await a.asMember('POST', `/v1/auth/mentions/ack-ticket/${ticket.id}`)).body, { success: true, acknowledged: 2 });
  t.same((await a.asMember('GET', '/v1/auth/mentions/unread')).body, []);

  const elsewhere = await makeTicket(a.owner.live, `/v1/brands/${a.second.id}`, { title: 'Second brand' });
  await a.owner.live('POST', `/v1/brands/${a.second.id}/tickets/${elsewhere.id}/comments`, { body: `@[Mo](${a.member.id}) here too` });
  t.same((await a.asMember('GET', '/v1/auth/mentions/unread')).body, [], 'a brand outside the member’s assignments shows nothing');
  assertNotFound(t, await a.asMember('POST', `/v1/auth/mentions/ack-ticket/${elsewhere.id}`), 'and its ticket is 404');
  assertNotFound(t, await b.asMember('POST', `/v1/auth/mentions/ack-ticket/${ticket.id}`), "another organization's ticket is 404");
});

t.test('these routes take a session, never an API key or nothing', async (t) => {
  assertErrorShape(t, await client(app, a.owner.liveKey)('GET', '/v1/auth/mentions/unread'), 401, 'session_required');
  assertErrorShape(t, await client(app)('GET', '/v1/auth/mentions/unread'), 401, 'missing_credentials');
  assertErrorShape(t, await client(app, 'ts_forged')('POST', '/v1/auth/mentions/mnt_x/ack'), 401, 'invalid_session');
});
