import t from 'tap';
import { assertErrorShape, assertNotFound, client, servicesOf, testApp } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';

// GET and POST /v1/auth/feature-requests, GET /v1/auth/feature-requests/activity,
// POST and DELETE /v1/auth/feature-requests/{id}/vote, PATCH /v1/auth/feature-requests/{id}.

const { app, db } = await testApp(t, SIGN_IN_TEST_ENV);
const services = servicesOf(db);
const a = await teamOf(app, services);
const b = await teamOf(app, services);

t.test('propose, vote once, list by votes, activity, and take the vote back', async (t) => {
  const made = await a.asMember('POST', '/v1/auth/feature-requests', {
    title: 'Dark mode',
    featureDetails: 'A dark theme',
    category: 'dashboard',
    images: [{ url: 'https://example.com/a.png' }],
  });
  t.equal(made.status, 201);
  t.match(made.body, {
    title: 'Dark mode',
    featureDetails: 'A dark theme',
    description: 'A dark theme',
    status: 'new',
    voteCount: 0,
    authorId: a.member.id,
    category: 'dashboard',
  });
  const other = await a.asOwner('POST', '/v1/auth/feature-requests', { title: 'Exports', featureDetails: 'CSV' });
  const id = made.body.id;

  t.same((await a.asOwner('POST', `/v1/auth/feature-requests/${id}/vote`)).body, { success: true });
  t.same((await a.asOwner('POST', `/v1/auth/feature-requests/${id}/vote`)).body, { success: true }, 'a second vote is the same vote');
  const list = await a.asMember('GET', '/v1/auth/feature-requests?sortBy=votes');
  t.same(
    list.body.requests.map((r: { id: string; voteCount: number }) => [r.id, r.voteCount]),
    [
      [id, 1],
      [other.body.id, 0],
    ],
  );
  const activity = (await a.asOwner('GET', '/v1/auth/feature-requests/activity')).body;
  t.same(
    activity.voted.map((r: { id: string }) => r.id),
    [id],
  );
  t.same(
    activity.authored.map((r: { id: string }) => r.id),
    [other.body.id],
  );
  t.same((await a.asOwner('DELETE', `/v1/auth/feature-requests/${id}/vote`)).body, { success: true });
  t.same((await a.asOwner('DELETE', `/v1/auth/feature-requests/${id}/vote`)).body, { success: true }, 'no vote left: a no-op');
  t.equal((await a.asMember('GET', '/v1/auth/feature-requests')).body.requests.find((r: { id: string }) => r.id === id).voteCount, 0);
});

t.test("another organization's request is 404; its board is its own", async (t) => {
  const { body } = await a.asMember('POST', '/v1/auth/feature-requests', { title: 'Private', featureDetails: 'Ours' });
  assertNotFound(t, await b.asOwner('POST', `/v1/auth/feature-requests/${body.id}/vote`), 'vote');
  assertNotFound(t, await b.asOwner('DELETE', `/v1/auth/feature-requests/${body.id}/vote`), 'unvote');
  assertNotFound(t, await b.asOwner('PATCH', `/v1/auth/feature-requests/${body.id}`, { status: 'planned' }), 'status');
  t.notOk(
    (await b.asOwner('GET', '/v1/auth/feature-requests')).body.requests.some((r: { id: string }) => r.id === body.id),
    'not on the other board',
  );
});

t.test('only owners and admins set a status; bad input is a 400 that changes nothing', async (t) => {
  const { body } = await a.asMember('POST', '/v1/auth/feature-requests', { title: 'Status', featureDetails: 'Moves' });
  assertErrorShape(t, await a.asMember('PATCH', `/v1/auth/feature-requests/${body.id}`, { status: 'planned' }), 403, 'insufficient_role');
  const planned = await a.asOwner('PATCH', `/v1/auth/feature-requests/${body.id}`, { status: 'planned' });
  t.equal(planned.body.status, 'planned');
  t.same(
    (await a.asMember('GET', '/v1/auth/feature-requests?status=planned')).body.requests.map((r: { id: string }) => r.id),
    [body.id],
  );
  assertErrorShape(t, await a.asOwner('PATCH', `/v1/auth/feature-requests/${body.id}`, { status: 'shipped' }), 400, 'validation_failed');
  assertErrorShape(t, await a.asMember('GET', '/v1/auth/feature-requests?sortBy=random'), 400, 'validation_failed');
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/feature-requests', { title: ' ', featureDetails: 'x' }), 400, 'validation_failed');
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/feature-requests', { title: 'x', featureDetails: 'y', category: 'nope' }), 400, 'validation_failed');
  assertErrorShape(t, await client(app, a.owner.liveKey)('GET', '/v1/auth/feature-requests'), 401, 'session_required');
});
