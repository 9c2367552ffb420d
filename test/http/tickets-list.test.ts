import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, ownerWithBrand, signup, statementOf, type Signup, testApp, servicesOf } from '../helpers/app.js';
import { updateTicket } from '../../server/flows/ticket-update.js';
import { onCitusCluster } from '../helpers/db.js';

// Every test signs up its own accounts: lift the per-hour signup limit for this file.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const anonymous = client(app);

type Call = Signup['live'];

const setup = () => ownerWithBrand(app);

async function addMember(accountId: string, name: string, email: string): Promise<string> {
  const id = `mem_${Math.random().toString(36).slice(2).padEnd(12, '0')}`;
  await db('members').insert({ id, accountId, email, name, role: 'member' });
  return id;
}

/** Every page of a list, following nextCursor. */
async function walk(call: Call, url: string): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  const sep = url.includes('?') ? '&' : '?';
  do {
    const res = await call('GET', cursor ? `${url}${sep}cursor=${encodeURIComponent(cursor)}` : url);
    if (res.status !== 200) throw new Error(`list failed: ${res.status} ${JSON.stringify(res.body)}`);
    ids.push(...res.body.data.map((x: { id: string }) => x.id));
    t.equal(res.body.pagination.cursor, res.body.pagination.nextCursor);
    t.equal(res.body.pagination.hasMore, res.body.pagination.nextCursor !== null);
    cursor = res.body.pagination.nextCursor;
    pages++;
  } while (cursor);
  return { ids, pages };
}

const listIds = async (call: Call, url: string): Promise<string[]> => {
  const res = await call('GET', url);
  if (res.status !== 200) throw new Error(`list failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.map((x: { id: string }) => x.id);
};
const sorted = (ids: string[]) => [...ids].sort();

t.test('PATCH changes each field, null clears, tags are a full replacement; GET agrees', async (t) => {
  const { owner, base, brand } = await setup();
  const cat = (await owner.live('POST', `${base}/categories`, { name: 'Billing' })).body;
  const vip = (await owner.live('POST', `${base}/tags`, { name: 'vip' })).body;
  const old = (await owner.live('POST', `${base}/tags`, { name: 'old' })).body;
  const st = await owner.live('POST', `${base}/statuses`, { key: 'waiting', name: 'Waiting', color: '#123456' });
  t.equal(st.status, 201);
  const tk = await makeTicket(owner.live, base, {
    title: 'One',
    body: 'b',
    priority: 'high',
    assigneeId: owner.ownerId,
    categoryId: cat.id,
    tags: [vip.id, old.id],
    customFields: { a: 1 },
  });

  const res = await owner.live('PATCH', `${base}/tickets/${tk.id}`, {
    title: '  Two  ',
    body: null,
    status: 'waiting',
    priority: null,
    assigneeId: null,
    categoryId: null,
    tags: [vip.id, 'Fresh'],
    links: [{ url: 'https://x.test/1' }],
    customFields: { b: [1, 2] },
    metadata: { k: 'v' },
    isSpam: true,
  });
  t.equal(res.status, 200);
  const u = res.body;
  t.equal(u.id, tk.id);
  t.equal(u.title, 'Two', 'trimmed');
  t.equal(u.body, null);
  t.equal(u.status, 'waiting');
  t.match(u.statusRef, { key: 'waiting', name: 'Waiting' });
  t.equal(u.priority, null, 'priority cleared');
  t.equal(u.assigneeId, null, 'assignee cleared');
  t.equal(u.categoryId, null, 'category cleared');
  t.equal(u.category, null);
  t.same(u.tags.map((g: { name: string }) => g.name).sort(), ['Fresh', 'vip'], 'tags replaced, unknown name created');
  t.same(u.links, [{ url: 'https://x.test/1' }]);
  t.same(u.customFields, { b: [1, 2] });
  t.same(u.metadata, { k: 'v' });
  t.equal(u.isSpam, true);
  t.ok(u.updatedAt > tk.updatedAt, 'updatedAt moved');
  t.same((await owner.live('GET', `${base}/tickets/${tk.id}`)).body, u, 'GET reads the same');
  const links = await db('ticketTags').where({ ticketId: tk.id }).select('tagId');
  t.equal(links.length, 2, 'old tag link removed');

  const back = await owner.live('PATCH', `${base}/tickets/${tk.id}`, { assigneeId: owner.ownerId, categoryId: cat.id, priority: 'low', tags: [] });
  t.equal(back.body.assigneeId, owner.ownerId);
  t.equal(back.body.category.id, cat.id);
  t.equal(back.body.priority, 'low');
  t.same(back.body.tags, [], 'empty tags clear all');
  t.equal(back.body.brandId, brand.id);
});

t.test('PATCH records exactly the real changes; no change keeps updatedAt', async (t) => {
  const { owner, base } = await setup();
  const tag = (await owner.live('POST', `${base}/tags`, { name: 'a' })).body;
  const tk = await makeTicket(owner.live, base, { title: 'Same', priority: 'high', tags: [tag.id], metadata: { x: 1 } });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), owner.accountId, true);
  const r1 = await updateTicket(ctx, tk.brandId, tk.id, { title: 'Same', priority: 'urgent', metadata: { x: 1 }, tags: ['a'] });
  t.same(r1.changes, [{ field: 'priority', from: 'high', to: 'urgent' }], 'only priority changed (title, metadata and tags by name are the same)');
  const r2 = await updateTicket(ctx, tk.brandId, tk.id, { title: 'Same', priority: 'urgent' });
  t.same(r2.changes, [], 'nothing changed');
  t.equal(r2.ticket.updatedAt, r1.ticket.updatedAt, 'updatedAt stays when nothing changed');
  const r3 = await updateTicket(ctx, tk.brandId, tk.id, { tags: ['b'], assigneeId: owner.ownerId, customFields: { q: 1 } });
  const byField = Object.fromEntries(r3.changes.map((c) => [c.field, c])) as Record<string, { field: string; from: unknown; to: string[] }>;
  t.same(Object.keys(byField).sort(), ['assigneeId', 'customFields', 'tags']);
  t.same(byField.assigneeId, { field: 'assigneeId', from: null, to: owner.ownerId });
  t.same(byField.customFields, { field: 'customFields', from: null, to: { q: 1 } });
  t.same(byField.tags.from, [tag.id]);
  t.equal(byField.tags.to.length, 1);
  t.not(byField.tags.to[0], tag.id);
  const wire = await owner.live('PATCH', `${base}/tickets/${tk.id}`, { priority: 'urgent' });
  t.equal(wire.status, 200);
  t.equal(wire.body.changes, undefined, 'the route returns only the ticket');
  t.equal(wire.body.updatedAt, r3.ticket.updatedAt, 'no-op PATCH keeps updatedAt');
});

t.test('PATCH rejects bad input with 400', async (t) => {
  const { owner, base } = await setup();
  const other = await makeBrand(owner.live, 'Other');
  const foreignCat = (await owner.live('POST', `/v1/brands/${other.id}/categories`, { name: 'Elsewhere' })).body;
  const tk = await makeTicket(owner.live, base, { title: 'x' });
  const url = `${base}/tickets/${tk.id}`;
  assertErrorShape(t, await owner.live('PATCH', url, {}), 400, 'validation_failed');
  t.equal((await owner.live('PATCH', url, { status: 'nope' })).status, 400, 'unknown status');
  const badAssignee = await owner.live('PATCH', url, { assigneeId: 'mem_nobody' });
  assertErrorShape(t, badAssignee, 400, 'invalid_assignee');
  assertErrorShape(t, await owner.live('PATCH', url, { categoryId: foreignCat.id }), 400, 'invalid_category');
  t.equal((await owner.live('PATCH', url, { priority: 'huge' })).status, 400);
  t.equal((await owner.live('PATCH', url, { title: '   ' })).status, 400);
  t.equal((await owner.live('PATCH', url, { bogus: 1 })).status, 400);
  t.equal((await owner.live('PATCH', url, { tags: ['tag_00000000000000000000000000'] })).status, 400, 'unknown tag id');
  let deep: unknown = 1;
  for (let i = 0; i < 12; i++) deep = { d: deep };
  assertErrorShape(t, await owner.live('PATCH', url, { customFields: deep }), 400, 'custom_fields_too_deep');
  t.equal((await owner.live('GET', url)).body.title, 'x', 'nothing applied');
});

t.test('PATCH validates customFields against the brand schema', async (t) => {
  const { owner, base } = await setup();
  const put = await owner.live('PUT', `${base}/schema`, { schema: { type: 'object', properties: { n: { type: 'number' } } } });
  t.ok(put.status < 300, `schema stored (${put.status})`);
  const tk = await makeTicket(owner.live, base, { title: 'x', customFields: { n: 1 } });
  assertErrorShape(t, await owner.live('PATCH', `${base}/tickets/${tk.id}`, { customFields: { n: 'one' } }), 400, 'invalid_custom_fields');
  t.equal((await owner.live('PATCH', `${base}/tickets/${tk.id}`, { customFields: { n: 2 } })).status, 200);
});

t.test('DELETE is soft; the ticket then 404s and leaves lists', async (t) => {
  const { owner, base } = await setup();
  const a = await makeTicket(owner.live, base, { title: 'a' });
  const b = await makeTicket(owner.live, base, { title: 'b' });
  const del = await owner.live('DELETE', `${base}/tickets/${a.id}`);
  t.equal(del.status, 200);
  t.equal(del.body.id, a.id);
  t.match(del.body.deletedAt, /^\d{4}-/);
  t.ok(await db('tickets').where({ id: a.id }).first(), 'row kept');
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${a.id}`), 'get after delete');
  assertNotFound(t, await owner.live('DELETE', `${base}/tickets/${a.id}`), 'delete again');
  assertNotFound(t, await owner.live('PATCH', `${base}/tickets/${a.id}`, { title: 'z' }), 'patch after delete');
  t.same(await listIds(owner.live, `${base}/tickets`), [b.id]);
});

t.test('isolation: other accounts and the other mode get 404; lists stay in their brand, account and mode', async (t) => {
  const { owner, base, brand } = await setup();
  const stranger = await signup(app);
  const tk = await makeTicket(owner.live, base, { title: 'mine' });
  const url = `${base}/tickets/${tk.id}`;
  for (const [label, call] of [
    ['other account', stranger.live],
    ['test mode', owner.test],
  ] as const) {
    const r1 = await call('PATCH', url, { title: 'stolen' });
    t.equal(r1.status, 404, `${label}: PATCH 404`);
    const r2 = await call('DELETE', url);
    t.equal(r2.status, 404, `${label}: DELETE 404`);
    t.equal((await call('GET', `${base}/tickets`)).status, 404, `${label}: list of a brand it cannot see`);
  }
  // Same ids in own brands of other scopes: lists contain only their own.
  const testBrand = await makeBrand(owner.test);
  const testTk = await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'test-mode' });
  const otherBrand = await makeBrand(owner.live, 'Second');
  const otherTk = await makeTicket(owner.live, `/v1/brands/${otherBrand.id}`, { title: 'other brand' });
  const strangerBrand = await makeBrand(stranger.live);
  const strangerTk = await makeTicket(stranger.live, `/v1/brands/${strangerBrand.id}`, { title: 'stranger' });
  t.same(await listIds(owner.live, `${base}/tickets`), [tk.id]);
  t.same(await listIds(owner.test, `/v1/brands/${testBrand.id}/tickets`), [testTk.id]);
  t.same(await listIds(owner.live, `/v1/brands/${otherBrand.id}/tickets`), [otherTk.id]);
  t.same(await listIds(stranger.live, `/v1/brands/${strangerBrand.id}/tickets`), [strangerTk.id]);
  t.equal((await owner.live('GET', url)).body.title, 'mine', 'untouched');
  t.equal((await owner.live('GET', `/v1/workspaces/ws_${brand.id.slice(3)}/tickets`)).body.data.length, 1, 'workspace alias lists too');
  for (const [m, u] of [
    ['GET', `${base}/tickets`],
    ['PATCH', url],
    ['DELETE', url],
  ] as const) {
    assertErrorShape(t, await anonymous(m, u, m === 'PATCH' ? { title: 'x' } : undefined), 401, 'missing_credentials');
  }
});

t.test('list filters with their sentinels', async (t) => {
  const { owner, base, brand } = await setup();
  const mate = await addMember(owner.accountId, 'Mate', 'mate@example.com');
  const company = (await owner.live('POST', `${base}/companies`, { name: 'Acme', domain: 'acme.com' })).body;
  const cat = (await owner.live('POST', `${base}/categories`, { name: 'Billing' })).body;
  const red = (await owner.live('POST', `${base}/tags`, { name: 'red' })).body;
  const blue = (await owner.live('POST', `${base}/tags`, { name: 'blue' })).body;

  const open = await makeTicket(owner.live, base, {
    title: 'open',
    priority: 'high',
    assigneeId: owner.ownerId,
    customerEmail: 'ann@acme.com',
    categoryId: cat.id,
    tags: [red.id, blue.id],
    createdBy: 'agent-1',
  });
  const pending = await makeTicket(owner.live, base, { title: 'pending', status: 'pending', priority: 'low', assigneeId: mate, customerEmail: 'bob@other.com', tags: [red.id] });
  const resolved = await makeTicket(owner.live, base, { title: 'resolved', status: 'resolved', customerEmail: 'cat@acme.com' });
  const closed = await makeTicket(owner.live, base, { title: 'closed', status: 'closed', categoryId: cat.id, tags: [blue.id] });
  const spam = await makeTicket(owner.live, base, { title: 'spam', customerEmail: 'x@spam.test' });
  await owner.live('PATCH', `${base}/tickets/${spam.id}`, { isSpam: true });
  await db('tickets').where({ id: resolved.id }).update({ attachmentCount: 2 });
  const nonSpam = [open, pending, resolved, closed].map((x) => x.id);

  const L = (qs: string) => listIds(owner.live, `${base}/tickets${qs}`).then(sorted);
  t.same(await L(''), sorted(nonSpam), 'spam excluded by default');
  t.same(await L('?isSpam=true'), [spam.id], 'only spam');
  t.same(await L('?isSpam=false'), sorted(nonSpam), 'only non-spam');
  t.same(await L('?status=active'), sorted([open.id, pending.id]), 'active = open,pending');
  t.same(await L('?status=resolved,closed'), sorted([resolved.id, closed.id]), 'comma list');
  t.same(await L('?status=all'), sorted(nonSpam), 'status all');
  t.same(await L('?status=nothing'), [], 'unknown key matches nothing');
  t.same(await L('?priority=high'), [open.id]);
  t.same(await L('?priority=all'), sorted(nonSpam));
  t.equal((await owner.live('GET', `${base}/tickets?priority=huge`)).status, 400, 'unknown priority');
  t.same(await L(`?assigneeId=${mate}`), [pending.id]);
  t.same(await L('?assigneeId=unassigned'), sorted([resolved.id, closed.id]));
  t.same(await L('?assigneeId=null'), sorted([resolved.id, closed.id]));
  t.same(await L('?assigneeId=all'), sorted(nonSpam));
  t.same(await L(`?customerId=${open.customerId}`), [open.id]);
  t.same(await L(`?customerEmail=${encodeURIComponent('  ANN@acme.com ')}`), [open.id], 'email normalized and resolved');
  t.same(await L('?customerEmail=nobody@acme.com'), [], 'no contact: empty list');
  t.same(await L(`?companyId=${company.id}`), sorted([open.id, resolved.id]), 'contacts of the company');
  t.same(await L('?createdBy=agent-1'), [open.id]);
  t.same(await L('?hasAttachments=true'), [resolved.id]);
  t.same(await L('?hasAttachments=false'), sorted([open.id, pending.id, closed.id]));
  t.same(await L(`?categoryId=${cat.id}`), sorted([open.id, closed.id]));
  t.same(await L('?categoryId=null'), sorted([pending.id, resolved.id]), 'uncategorized');
  t.same(await L('?categoryId=all'), sorted(nonSpam));
  t.same(await L(`?tagIds=${red.id}`), sorted([open.id, pending.id]));
  t.same(await L(`?tagIds=${red.id},${blue.id}`), [open.id], 'must have ALL');
  t.same(await L(`?tagIds=${blue.id}&status=closed`), [closed.id], 'filters combine');

  // Creation bounds around a moved timestamp.
  await db('tickets').where({ id: closed.id }).update({ createdAt: '2020-01-01T00:00:00Z' });
  t.same(await L('?createdBefore=2021-01-01T00:00:00Z'), [closed.id]);
  t.same(await L('?createdAfter=2021-01-01T00:00:00Z'), sorted([open.id, pending.id, resolved.id]));
  t.same(await L('?createdAfter=2019-01-01T00:00:00Z&createdBefore=2020-06-01T00:00:00Z'), [closed.id]);
  for (const bad of ['createdAfter=yesterday', 'createdBefore=2020-13-45', 'hasAttachments=maybe', 'isSpam=perhaps', 'bogus=1']) {
    t.equal((await owner.live('GET', `${base}/tickets?${bad}`)).status, 400, `${bad}: 400`);
  }
  t.equal(brand.id.length > 0, true);

  // Items have the GET shape.
  const item = (await owner.live('GET', `${base}/tickets?customerEmail=ann@acme.com`)).body.data[0];
  t.same(item, (await owner.live('GET', `${base}/tickets/${open.id}`)).body, 'list item equals GET');
  t.equal(item.tags.length, 2);
  t.equal(item.customer.company.name, 'Acme');
});

t.test("the tag filter with status and priority follows every writer of a ticket's status, priority and tags", async (t) => {
  const { owner, base } = await setup();
  const red = (await owner.live('POST', `${base}/tags`, { name: 'red' })).body;
  const L = (qs: string) => listIds(owner.live, `${base}/tickets?${qs}`).then(sorted);
  // The links mirror the ticket (migration 2000); any drift would show as a wrong filter result.
  const drift = async () =>
    Number(
      (
        await db.raw(
          `select count(*) as n from ticket_tags tt join tickets t on t.account_id = tt.account_id
    and t.livemode = tt.livemode and t.brand_id = tt.brand_id and t.id = tt.ticket_id
    where tt.account_id = ? and (tt.status <> t.status or tt.priority is distinct from t.priority)`,
          [owner.accountId],
        )
      ).rows[0].n,
    );

  const a = await makeTicket(owner.live, base, { title: 'a', priority: 'low', tags: [red.id] }); // one statement
  const b = await makeTicket(owner.live, base, { title: 'b', status: 'pending', tags: ['red', 'green'] }); // a new tag: step by step
  t.same(await L(`tagIds=${red.id}&status=open&priority=low`), [a.id], 'create, one statement');
  t.same(await L(`tagIds=${red.id}&status=pending`), [b.id], 'create, step by step');

  await owner.live('PATCH', `${base}/tickets/${a.id}`, { status: 'closed', priority: 'urgent' });
  t.same(await L(`tagIds=${red.id}&status=open`), [], 'PATCH: the old status no longer matches');
  t.same(await L(`tagIds=${red.id}&status=closed&priority=urgent`), [a.id], 'PATCH: the new one does');
  const blue = (await owner.live('POST', `${base}/tags`, { name: 'blue' })).body;
  await owner.live('PATCH', `${base}/tickets/${a.id}`, { tags: [red.id, blue.id], priority: 'high' });
  t.same(await L(`tagIds=${blue.id}&status=closed&priority=high`), [a.id], 'a tag added with a priority change in one PATCH');
  t.same(await L(`tagIds=${red.id},${blue.id}&priority=high`), [a.id], 'two tags');

  t.equal((await owner.live('POST', `${base}/tickets/bulk`, { action: 'resolve', ticketIds: [b.id] })).status, 200);
  t.same(await L(`tagIds=${red.id}&status=resolved`), [b.id], 'bulk resolve');
  t.equal((await owner.live('POST', `${base}/tickets/bulk`, { action: 'setTags', ticketIds: [b.id], tags: [blue.id] })).status, 200);
  t.same(await L(`tagIds=${blue.id}&status=resolved`), [b.id], 'bulk setTags');

  const c = await makeTicket(owner.live, base, { title: 'c', tags: [red.id] });
  t.equal((await owner.live('POST', `${base}/tickets/${a.id}/merge`, { sourceTicketIds: [c.id] })).status, 200);
  t.same(await L(`tagIds=${red.id}&status=closed&priority=high`), [a.id], 'a merged source is closed, and no longer matches open');
  t.same(await L(`tagIds=${red.id}&status=open`), [], 'merge');

  const gold = (await owner.live('POST', `${base}/tags`, { name: 'gold' })).body;
  t.equal((await owner.live('POST', `${base}/tags/${gold.id}/merge`, { sourceTagIds: [red.id] })).status, 200);
  t.same(await L(`tagIds=${gold.id}&status=closed&priority=high`), [a.id], "tag merge relinks with the ticket's status");
  t.equal(await drift(), 0, 'no link differs from its ticket');
});

t.test('sort keys, priority by rank, relation sorts by related name', async (t) => {
  const { owner, base } = await setup();
  const zed = await addMember(owner.accountId, 'Zed', 'zed@example.com');
  const amy = await addMember(owner.accountId, 'amy', 'amy@example.com');
  await owner.live('POST', `${base}/companies`, { name: 'Zeta', domain: 'zeta.com' });
  await owner.live('POST', `${base}/companies`, { name: 'alpha', domain: 'alpha.com' });
  const catB = (await owner.live('POST', `${base}/categories`, { name: 'Bravo' })).body;
  const catA = (await owner.live('POST', `${base}/categories`, { name: 'alpha' })).body;
  const p = {
    urgent: await makeTicket(owner.live, base, {
      title: 'c-title',
      priority: 'urgent',
      status: 'pending',
      customerEmail: 'yan@zeta.com',
      customerName: 'Yan',
      assigneeId: zed,
      categoryId: catB.id,
    }),
    low: await makeTicket(owner.live, base, {
      title: 'A-title',
      priority: 'low',
      status: 'closed',
      customerEmail: 'bea@alpha.com',
      customerName: 'bea',
      assigneeId: amy,
      categoryId: catA.id,
    }),
    medium: await makeTicket(owner.live, base, { title: 'b-title', priority: 'medium', status: 'open' }),
    high: await makeTicket(owner.live, base, { title: 'd-title', priority: 'high', status: 'resolved', customerEmail: 'x@none.org' }),
    normal: await makeTicket(owner.live, base, { title: 'e-title', priority: 'normal', status: 'open' }),
    none: await makeTicket(owner.live, base, { title: 'f-title', status: 'open' }),
  };
  const L = (qs: string) => listIds(owner.live, `${base}/tickets?${qs}`);
  t.same(
    await L('sort=priority&order=asc'),
    [p.none, p.low, p.normal, p.medium, p.high, p.urgent].map((x) => x.id),
    'rank, not alphabet; none lowest',
  );
  t.same(
    await L('sort=priority'),
    [p.urgent, p.high, p.medium, p.normal, p.low, p.none].map((x) => x.id),
    'desc by default',
  );
  const created = [p.urgent, p.low, p.medium, p.high, p.normal, p.none].map((x) => x.id);
  t.same(await L('sort=createdAt&order=asc'), created);
  t.same(await L(''), [...created].reverse(), 'default createdAt desc');
  t.same(await L('sort=ticketNumber&order=asc'), created, 'numbers follow creation');
  t.same(
    await L('sort=title&order=asc'),
    [p.low, p.medium, p.urgent, p.high, p.normal, p.none].map((x) => x.id),
    'title, case-insensitive',
  );
  await owner.live('PATCH', `${base}/tickets/${p.medium.id}`, { title: 'B-title' });
  await owner.live('PATCH', `${base}/tickets/${p.low.id}`, { metadata: { touched: true } });
  const upd = await L('sort=updatedAt&order=desc');
  t.same(upd.slice(0, 2), [p.low.id, p.medium.id], 'updatedAt: last touched first');
  const st = await L('sort=status&order=asc');
  t.same(st[0], p.low.id, 'closed first');
  t.same(st.slice(1, 4).sort(), sorted([p.medium.id, p.normal.id, p.none.id]));
  t.same(st.slice(4), [p.urgent.id, p.high.id], 'pending, resolved');
  t.same((await L('sort=customer&order=asc')).slice(3), [p.low.id, p.high.id, p.urgent.id], 'customer by name, else email: bea, x@none.org, yan');
  t.same((await L('sort=company&order=asc')).slice(4), [p.low.id, p.urgent.id], 'company by name: alpha, Zeta');
  t.same((await L('sort=assignee&order=desc')).slice(0, 2), [p.urgent.id, p.low.id], 'assignee by name: Zed, amy');
  t.same((await L('sort=category&order=desc')).slice(0, 2), [p.urgent.id, p.low.id], 'category by name: Bravo, alpha');

  // Every sort key pages through everything exactly once at limit 2.
  for (const sort of ['createdAt', 'updatedAt', 'priority', 'ticketNumber', 'title', 'status', 'customer', 'company', 'assignee', 'category']) {
    for (const order of ['asc', 'desc']) {
      const { ids, pages } = await walk(owner.live, `${base}/tickets?sort=${sort}&order=${order}&limit=2`);
      t.same(sorted(ids), sorted(created), `${sort} ${order}: all once`);
      t.equal(pages, 3);
    }
  }
  const bogus = await owner.live('GET', `${base}/tickets?sort=bogus`);
  t.equal(bogus.status, 400, 'unknown sort: 400');
  t.same(
    bogus.body.errors,
    [{ field: 'sort', message: 'must be one of: createdAt, updatedAt, priority, ticketNumber, title, status, customer, company, assignee, category, dueAt' }],
    'naming the sorts',
  );
  t.equal((await owner.live('GET', `${base}/tickets?sort=${encodeURIComponent('id; drop table tickets')}`)).status, 400);
  t.equal((await owner.live('GET', `${base}/tickets?order=sideways`)).status, 400);
});

t.test('cursor walk while tickets are inserted and updated between pages', async (t) => {
  const { owner, base } = await setup();
  const original: string[] = [];
  for (let i = 0; i < 12; i++) original.push((await makeTicket(owner.live, base, { title: `t${i}`, priority: (['low', 'high', 'urgent'] as const)[i % 3] })).id);
  for (const qs of ['limit=5', 'limit=4&sort=updatedAt', 'limit=3&sort=priority&order=asc', 'limit=5&sort=title']) {
    const seen: string[] = [];
    let cursor: string | null = null;
    let round = 0;
    do {
      const res = await owner.live('GET', `${base}/tickets?${qs}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      t.equal(res.status, 200);
      seen.push(...res.body.data.map((x: { id: string }) => x.id));
      cursor = res.body.pagination.nextCursor;
      // Between pages: a new ticket, and an update of an already-seen ticket.
      await makeTicket(owner.live, base, { title: `new-${qs}-${round++}`, priority: 'urgent' });
      if (seen.length) await owner.live('PATCH', `${base}/tickets/${seen[0]}`, { metadata: { round } });
    } while (cursor);
    const originalsSeen = seen.filter((id) => original.includes(id));
    t.same(sorted(originalsSeen), sorted(original), `${qs}: every original ticket seen`);
    t.equal(new Set(seen).size, seen.length, `${qs}: none twice`);
  }
});

t.test('cursor and limit errors', async (t) => {
  const { owner, base } = await setup();
  for (let i = 0; i < 3; i++) await makeTicket(owner.live, base, { title: `t${i}` });
  const first = await owner.live('GET', `${base}/tickets?limit=1&status=open`);
  const cursor: string = first.body.pagination.nextCursor;
  t.ok(cursor);
  t.equal((await owner.live('GET', `${base}/tickets?limit=1&status=open&cursor=${encodeURIComponent(cursor)}`)).status, 200, 'same filters continue');
  const tampered = cursor.slice(0, 5) + (cursor[5] === 'A' ? 'B' : 'A') + cursor.slice(6);
  assertErrorShape(t, await owner.live('GET', `${base}/tickets?limit=1&status=open&cursor=${encodeURIComponent(tampered)}`), 400, 'invalid_cursor');
  assertErrorShape(t, await owner.live('GET', `${base}/tickets?limit=1&status=open&cursor=garbage`), 400, 'invalid_cursor');
  assertErrorShape(t, await owner.live('GET', `${base}/tickets?limit=1&status=pending&cursor=${encodeURIComponent(cursor)}`), 400, 'cursor_mismatch');
  assertErrorShape(t, await owner.live('GET', `${base}/tickets?limit=1&status=open&sort=title&cursor=${encodeURIComponent(cursor)}`), 400, 'cursor_mismatch');
  assertErrorShape(t, await owner.live('GET', `${base}/tickets?limit=1&status=open&isSpam=true&cursor=${encodeURIComponent(cursor)}`), 400, 'cursor_mismatch');
  t.equal((await owner.live('GET', `${base}/tickets?limit=2&status=open&cursor=${encodeURIComponent(cursor)}`)).status, 200, 'limit is not part of the list identity');
  for (const limit of ['0', '101', '-1', 'abc']) t.equal((await owner.live('GET', `${base}/tickets?limit=${limit}`)).status, 400, `limit=${limit}: 400`);
  const all = await owner.live('GET', `${base}/tickets?limit=100`);
  t.equal(all.body.data.length, 3);
  t.same(all.body.pagination, { cursor: null, nextCursor: null, hasMore: false }, 'last page');
});

t.test("the server's connections plan without parallel workers (their start-up costs a list more than they save on 2 cores)", async (t) => {
  // Every pooled connection, not just the first: the setting comes with the connection.
  const settings = await Promise.all(
    Array.from({ length: 3 }, () => db.transaction(async (trx) => (await trx.raw('show max_parallel_workers_per_gather')).rows[0].max_parallel_workers_per_gather)),
  );
  t.same(settings, ['0', '0', '0']);
});

t.test('the plain list and a ticket are named statements (planned once per connection); a filtered or searched list is not', async (t) => {
  const { owner, base } = await setup();
  const made = await makeTicket(owner.live, base, { title: 'Named statements' });
  /**
   * The name each statement over tickets was sent under ('' for none) while `url` was read. On
   * Citus a named one is sent to the account's worker, which prepares it under a hash of its text
   * (runInAccount): there its name is `worker:` and the text.
   */
  const namesDuring = async (url: string): Promise<string[]> => {
    const names: string[] = [];
    const listener = (q: { sql: string; bindings?: unknown[]; options?: { name?: string } }) => {
      const sql = statementOf(q);
      if (/from "tickets"/.test(sql)) names.push(q.sql.includes('ticketd_in_account(') ? `worker:${sql}` : (q.options?.name ?? ''));
    };
    db.on('query', listener);
    try {
      const res = await owner.live('GET', url);
      t.equal(res.status, 200, url);
    } finally {
      db.removeListener('query', listener);
    }
    return names;
  };
  const named = onCitusCluster ? /^worker:/ : /^ticketd_/;
  const [page] = await namesDuring(`${base}/tickets?limit=20`);
  t.match(page, onCitusCluster ? /^worker:select / : /^ticketd_[0-9a-f]{32}$/, 'the plain page');
  t.same(await namesDuring(`${base}/tickets?limit=20`), [page], 'the same name the next time: the same statement');
  t.not((await namesDuring(`${base}/tickets?limit=21`))[0], page, 'another limit is another text (the limit is in it)');
  t.match((await namesDuring(`${base}/tickets?sort=title`))[0], named, 'another sort, unfiltered');
  t.match((await namesDuring(`${base}/tickets/${made.id}`))[0], named, 'one ticket');
  for (const filtered of ['status=open', 'priority=high', 'search=named', 'search=named&sort=createdAt', `assigneeId=${owner.ownerId}`, 'isSpam=true']) {
    t.same(await namesDuring(`${base}/tickets?${filtered}`), [''], `${filtered}: unnamed`);
  }
});
