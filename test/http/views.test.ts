import t from 'tap';
import { assertErrorShape, assertNotFound, makeTicket, mustCreate, outsiders, ownerWithBrand, servicesOf, testApp, type Reply } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOfThree } from '../helpers/sign-in.js';

/** Views: /v1/brands/{brandId}/views (and the /v1/workspaces twin), their tickets and their counts. */

const { app, db } = await testApp(t, SIGN_IN_TEST_ENV);
const services = servicesOf(db);

type Call = Awaited<ReturnType<typeof ownerWithBrand>>['owner']['live'];
const view = (call: Call, base: string, body: Record<string, unknown>) => mustCreate(call, `${base}/views`, { visibility: 'brand', filters: {}, ...body });
const idsOf = (res: Reply) => (res.body.data as { id: string }[]).map((v) => v.id);
const countsOf = async (call: Call, base: string) =>
  Object.fromEntries(((await call('GET', `${base}/views/counts`)).body.data as { id: string; count: number; fresh: boolean }[]).map((c) => [c.id, [c.count, c.fresh]]));

t.test('CRUD under both paths: create, list, get, patch, delete', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  for (const prefix of [base, `/v1/workspaces/ws_${brand.id.slice(3)}`]) {
    const created = await view(owner.live, prefix, { name: `Urgent ${prefix.slice(4, 14)}`, filters: { priority: 'urgent', status: 'active' }, sort: { field: 'dueAt' } });
    t.match(created, {
      object: 'view',
      brandId: brand.id,
      visibility: 'brand',
      ownerId: null,
      filters: { priority: 'urgent', status: 'active' },
      sort: { field: 'dueAt', order: 'desc' },
    });
    t.match(created.id, /^view_[0-9a-z]{26}$/);
    t.ok(idsOf(await owner.live('GET', `${prefix}/views`)).includes(created.id), 'listed');
    t.same((await owner.live('GET', `${prefix}/views/${created.id}`)).body, created);
    const patched = await owner.live('PATCH', `${prefix}/views/${created.id}`, { filters: { isSpam: true }, sort: { field: 'title', order: 'asc' } });
    t.match(patched.body, { filters: { isSpam: true }, sort: { field: 'title', order: 'asc' } });
    t.notOk('priority' in patched.body.filters, 'filters are replaced whole');
    t.equal((await owner.live('DELETE', `${prefix}/views/${created.id}`)).status, 200);
    assertNotFound(t, await owner.live('GET', `${prefix}/views/${created.id}`), 'deleted');
  }
  await view(owner.live, base, { name: 'Once' });
  assertErrorShape(t, await owner.live('POST', `${base}/views`, { name: 'Once', visibility: 'brand', filters: {} }), 409, 'view_name_taken');
});

t.test('filters are checked by the ticket list’s own schema: 400 naming filters.<field>', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const bad = async (filters: Record<string, unknown>, code: string, path: string) => {
    const res = await owner.live('POST', `${base}/views`, { name: 'Bad', visibility: 'brand', filters });
    assertErrorShape(t, res, 400, code);
    t.equal(res.body.errors?.[0]?.field, path, `${JSON.stringify(filters)}: ${path}`);
  };
  await bad({ priority: 'whenever' }, 'validation_failed', 'filters.priority');
  await bad({ nope: 'x' }, 'validation_failed', 'filters.nope');
  await bad({ hasAttachments: 'true' }, 'validation_failed', 'filters.hasAttachments');
  await bad({ createdAfter: 'yesterday' }, 'validation_failed', 'filters.createdAfter');
  await bad({ limit: 10 }, 'validation_failed', 'filters.limit');
  await bad({ tagIds: Array.from({ length: 21 }, (_, i) => `tag_${i}`).join(',') }, 'invalid_request', 'filters.tagIds');
  const saved = await view(owner.live, base, { name: 'Fine' });
  const res = await owner.live('PATCH', `${base}/views/${saved.id}`, { filters: { sort: 'title' } });
  assertErrorShape(t, res, 400, 'validation_failed');
  t.equal(res.body.errors[0].field, 'filters.sort', 'the order is the view’s sort, not a filter');
});

t.test('a view’s tickets are the ticket list’s page for its filters and order, cursor included', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const tag = await mustCreate(owner.live, `${base}/tags`, { name: 'vip' });
  const made = [];
  for (const [title, priority, tags] of [
    ['b urgent vip', 'urgent', [tag.id]],
    ['a urgent vip', 'urgent', [tag.id]],
    ['c urgent', 'urgent', []],
    ['d low vip', 'low', [tag.id]],
    ['e urgent vip', 'urgent', [tag.id]],
  ] as const)
    made.push(await makeTicket(owner.live, base, { title, priority, tags }));
  await owner.live('PATCH', `${base}/tickets/${made[4].id}`, { status: 'resolved' });
  const filters = { priority: 'urgent', tagIds: tag.id, status: 'active' };
  const v = await view(owner.live, base, { name: 'Urgent VIPs', filters, sort: { field: 'title', order: 'asc' } });

  const page = await owner.live('GET', `${base}/views/${v.id}/tickets`);
  const list = await owner.live('GET', `${base}/tickets?priority=urgent&tagIds=${tag.id}&status=active&sort=title&order=asc`);
  t.equal(page.status, 200);
  t.same(page.body, list.body, 'the same page as the list');
  t.same(
    page.body.data.map((x: { title: string }) => x.title),
    ['a urgent vip', 'b urgent vip'],
  );

  const first = await owner.live('GET', `${base}/views/${v.id}/tickets?limit=1`);
  t.same(first.body, (await owner.live('GET', `${base}/tickets?priority=urgent&tagIds=${tag.id}&status=active&sort=title&order=asc&limit=1`)).body);
  t.equal(first.body.pagination.hasMore, true);
  const second = await owner.live('GET', `${base}/views/${v.id}/tickets?limit=1&cursor=${encodeURIComponent(first.body.pagination.nextCursor)}`);
  t.same(
    second.body.data.map((x: { title: string }) => x.title),
    ['b urgent vip'],
    'the cursor goes on',
  );
  assertErrorShape(t, await owner.live('GET', `${base}/views/${v.id}/tickets?priority=low`), 400, 'validation_failed');

  const newestFirst = await view(owner.live, base, { name: 'All, default order' });
  t.same((await owner.live('GET', `${base}/views/${newestFirst.id}/tickets`)).body, (await owner.live('GET', `${base}/tickets`)).body, 'no filters, no sort: the plain list');
});

t.test('counts: every view the caller sees, counted now or kept for up to a minute (fresh says which)', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const urgent = await view(owner.live, base, { name: 'Urgent', filters: { priority: 'urgent' } });
  const active = await view(owner.live, base, { name: 'Active', filters: { status: 'active', isSpam: false } });
  const searched = await view(owner.live, base, { name: 'About printers', filters: { search: 'printer' } });
  await makeTicket(owner.live, base, { title: 'Printer jam', priority: 'urgent' });
  const login = await makeTicket(owner.live, base, { title: 'Login', priority: 'low' });
  await owner.live('PATCH', `${base}/tickets/${login.id}`, { status: 'pending' });
  // Neither spam nor deleted tickets are listed, so neither is counted.
  const spam = await makeTicket(owner.live, base, { title: 'Cheap pills', priority: 'urgent' });
  await owner.live('PATCH', `${base}/tickets/${spam.id}`, { isSpam: true });
  const gone = await makeTicket(owner.live, base, { title: 'Deleted printer', priority: 'urgent' });
  await owner.live('DELETE', `${base}/tickets/${gone.id}`);

  t.same(await countsOf(owner.live, base), { [urgent.id]: [1, true], [active.id]: [2, true], [searched.id]: [1, true] }, 'counted now');
  const counts = (await owner.live('GET', `${base}/views/counts`)).body.data;
  t.match(counts[0], { id: String, count: Number, fresh: Boolean, countedAt: String });

  await makeTicket(owner.live, base, { title: 'Another printer', priority: 'urgent' });
  t.same(
    await countsOf(owner.live, base),
    { [urgent.id]: [1, false], [active.id]: [3, true], [searched.id]: [1, false] },
    'kept, the new ticket not in them yet; a view on status alone is counted now from the brand’s kept counts',
  );
  const listed = (await owner.live('GET', `${base}/views/${active.id}/tickets?limit=100`)).body.data.length;
  t.equal(listed, 3, 'as many as the view lists');

  // A minute on, the kept count is too old: counted again. (The time is computed here: Citus
  // refuses an UPDATE that computes it from the row.)
  const kept = await db('viewCounts').where({ viewId: urgent.id }).first();
  await db('viewCounts')
    .where({ viewId: urgent.id })
    .update({ countedAt: new Date(new Date(kept.countedAt).getTime() - 61_000) });
  t.same(await countsOf(owner.live, base), { [urgent.id]: [2, true], [active.id]: [3, true], [searched.id]: [1, false] });

  await owner.live('PATCH', `${base}/views/${searched.id}`, { filters: { search: 'printer', priority: 'urgent' } });
  t.same((await countsOf(owner.live, base))[searched.id], [2, true], 'a view that changed is counted again at once');
  await owner.live('DELETE', `${base}/views/${searched.id}`);
  t.notOk(searched.id in (await countsOf(owner.live, base)), 'a deleted view has no count');
  t.equal((await db('viewCounts').where({ viewId: searched.id })).length, 0, 'nor a kept one');
});

t.test('rights: members keep personal views and use the brand’s; personal ones are their owner’s alone', async (t) => {
  const team = await teamOfThree(app, services);
  const { base, asMember, asAdmin, owner } = team;
  const shared = await view(owner.live, base, { name: 'Shared' });
  assertErrorShape(t, await asMember('POST', `${base}/views`, { name: 'Mine', visibility: 'brand', filters: {} }), 403, 'insufficient_role');
  const mine = await mustCreate(asMember, `${base}/views`, { name: 'Mine', visibility: 'personal', filters: { assigneeId: team.member.id } });
  t.match(mine, { visibility: 'personal', ownerId: team.member.id });
  t.same(idsOf(await asMember('GET', `${base}/views`)).sort(), [shared.id, mine.id].sort());
  t.same(Object.keys(await countsOf(asMember, base)).sort(), [shared.id, mine.id].sort(), 'counts of the views the member sees');
  t.equal((await asMember('GET', `${base}/views/${shared.id}/tickets`)).status, 200, 'a member uses the brand’s views');
  assertErrorShape(t, await asMember('PATCH', `${base}/views/${shared.id}`, { name: 'Taken over' }), 403, 'insufficient_role');
  for (const [who, call] of [
    ['an admin', asAdmin],
    ['an API key', owner.live],
  ] as const) {
    assertNotFound(t, await call('GET', `${base}/views/${mine.id}`), `${who}: get`);
    assertNotFound(t, await call('GET', `${base}/views/${mine.id}/tickets`), `${who}: tickets`);
    assertNotFound(t, await call('DELETE', `${base}/views/${mine.id}`), `${who}: delete`);
    t.notOk(mine.id in (await countsOf(call, base)), `${who}: not counted`);
  }
  assertErrorShape(t, await owner.live('POST', `${base}/views`, { name: 'Keyed', visibility: 'personal', filters: {} }), 400, 'personal_needs_member');
  t.equal((await asMember('DELETE', `${base}/views/${mine.id}`)).status, 200);
});

t.test('out of scope: another account, another brand, the other mode read a view as 404', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const v = await view(owner.live, base, { name: 'Private' });
  const attempts = await outsiders(app, owner, base);
  for (const [label, call, prefix] of attempts) {
    assertNotFound(t, await call('GET', `${prefix}/views/${v.id}`), `${label}: get`);
    assertNotFound(t, await call('GET', `${prefix}/views/${v.id}/tickets`), `${label}: tickets`);
    assertNotFound(t, await call('PATCH', `${prefix}/views/${v.id}`, { name: 'Mine' }), `${label}: patch`);
    assertNotFound(t, await call('DELETE', `${prefix}/views/${v.id}`), `${label}: delete`);
  }
  const [, , [, , sideBrand]] = attempts;
  t.same((await owner.live('GET', `${sideBrand}/views/counts`)).body, { data: [] }, 'another brand counts its own views only');
});
