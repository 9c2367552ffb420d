import t from 'tap';
import { assertNotFound, makeBrand, makeTicket, mustCreate, ownerWithBrand, statementsDuring, testApp } from '../helpers/app.js';

/**
 * The reads the dashboard polls (GET a ticket, its comments, a list page) are one statement each:
 * the brand is checked from the per-process cache of where brands live (core/brand.ts
 * visibleBrandId), not read, and a ticket's comments come with the ticket's own check in one read.
 * A round trip added back fails here.
 */

const { app, db } = await testApp(t);

const statementsOf = async (request: () => Promise<{ status: number; body: unknown }>) => {
  let res: { status: number; body: unknown } = { status: 0, body: null };
  const statements = await statementsDuring(db, async () => {
    res = await request();
  });
  return { res, statements };
};

t.test('a ticket, its comments and a list page: one statement each', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const quiet = await makeTicket(owner.live, base, { title: 'no comments yet' });
  const busy = await makeTicket(owner.live, base, { title: 'two comments' });
  await mustCreate(owner.live, `${base}/tickets/${busy.id}/comments`, { body: 'first' });
  await mustCreate(owner.live, `${base}/tickets/${busy.id}/comments`, { body: 'second' });
  // The first request of a brand fills the process's cache.
  await owner.live('GET', `${base}/tickets/${quiet.id}`);

  for (const [what, url] of [
    ['a ticket', `${base}/tickets/${busy.id}`],
    ['its comments', `${base}/tickets/${busy.id}/comments`],
    ['comments of a ticket that has none', `${base}/tickets/${quiet.id}/comments`],
    ['a list page', `${base}/tickets?limit=20`],
  ] as const) {
    const { res, statements } = await statementsOf(() => owner.live('GET', url));
    t.equal(res.status, 200, `${what}: 200`);
    t.equal(statements.length, 1, `${what}: one statement\n${statements.join('\n')}`);
  }
  const comments = (await owner.live('GET', `${base}/tickets/${busy.id}/comments`)).body;
  t.same(
    comments.map((c: { body: string }) => c.body),
    ['first', 'second'],
    'the comments, oldest first',
  );
  t.same((await owner.live('GET', `${base}/tickets/${quiet.id}/comments`)).body, [], 'none: an empty list, not a 404');
});

t.test('the 404s stay: a deleted ticket, a ticket of another brand, a deleted brand', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const other = await makeBrand(owner.live, 'Other Brand');
  const ticket = await makeTicket(owner.live, base);
  const elsewhere = await makeTicket(owner.live, `/v1/brands/${other.id}`);
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${elsewhere.id}/comments`), "another brand's ticket: comments");
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${elsewhere.id}`), "another brand's ticket");

  t.equal((await owner.live('DELETE', `${base}/tickets/${ticket.id}`)).status, 200);
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${ticket.id}/comments`), 'a deleted ticket: comments');
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${ticket.id}`), 'a deleted ticket');

  await owner.live('GET', `/v1/brands/${other.id}/tickets`);
  t.equal((await owner.live('DELETE', `/v1/brands/${other.id}?confirm=true`)).status, 200);
  assertNotFound(t, await owner.live('GET', `/v1/brands/${other.id}/tickets`), 'a deleted brand: its list');
  assertNotFound(t, await owner.live('GET', `/v1/brands/${other.id}/tickets/${elsewhere.id}`), 'a deleted brand: its ticket');
  assertNotFound(t, await owner.live('GET', `/v1/brands/${other.id}/tickets/${elsewhere.id}/comments`), 'a deleted brand: its comments');
});
