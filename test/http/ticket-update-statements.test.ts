import t from 'tap';
import { client, makeTicket, mustCreate, servicesOf, statementsDuring, testApp, type Reply } from '../helpers/app.js';

type Call = ReturnType<typeof client>;
import { teamOfThree } from '../helpers/sign-in.js';

/**
 * The statements of a ticket update (PATCH /tickets/{id}) and a bulk action, counted as
 * comments-one-statement counts a reply's, with the effects each must keep: the status and its
 * clock, the tags, the triggers' changes, the audit entries, the webhook deliveries. A PATCH is a
 * read and a write (server/flows/ticket-update-statement.ts); the bulk bound is what it takes today
 * (decision 0104): a round trip added back fails here.
 */

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' });
const services = servicesOf(db);

/** One read, one write, no BEGIN or COMMIT. */
const UPDATE_STATEMENTS = 2;
const BULK_STATEMENTS = 8;

const auditOf = (ticketId: string) => db('auditLog').where({ ticketId }).orderBy('id').select('event', 'changes');
const hooksOf = (brandId: string) => db('outbox').where({ brandId, kind: 'webhook' }).orderBy('id').select('event', 'payload');

t.test('PATCH a ticket out of pending, watched: every effect, in a counted number of statements', async (t) => {
  const { owner, brand, base, admin } = await teamOfThree(app, services);
  t.equal((await owner.live('PATCH', base, { slaEnabled: true, slaByPriority: { urgent: 4 }, slaPauseOnPending: true })).status, 200);
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.updated'] });
  const ticket = await makeTicket(owner.live, base, { title: 'Patched', customerEmail: 'p@example.com', priority: 'urgent' });
  t.equal((await owner.live('POST', `${base}/tickets/${ticket.id}/watchers`, { memberId: admin.id, notifyOnStatusChange: true })).status, 201);
  t.equal((await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'pending' })).status, 200, 'warm-up');
  await db('outbox').where({ brandId: brand.id }).delete();
  await db('mailMessages').where({ ticketId: ticket.id }).delete();
  const auditBefore = (await auditOf(ticket.id)).length;

  let res: { status: number; body: { status: string; title: string; dueAt: string | null } } | null = null;
  const statements = await statementsDuring(db, async () => {
    res = await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'open', title: 'Patched again' });
  });
  t.equal(res!.status, 200);
  t.comment(`a PATCH took ${statements.length} statements:\n${statements.join('\n')}`);
  t.ok(statements.length <= UPDATE_STATEMENTS, `${statements.length} statements, at most ${UPDATE_STATEMENTS}`);
  t.equal(res!.body.status, 'open');
  t.equal(res!.body.title, 'Patched again', 'the response is the ticket as written');
  t.same(res!.body, (await owner.live('GET', `${base}/tickets/${ticket.id}`)).body, 'and reads back the same');
  t.ok(res!.body.dueAt, 'out of pending: the clock runs');
  const entries = (await auditOf(ticket.id)).slice(auditBefore);
  t.same(
    entries.map((e: { event: string }) => e.event),
    ['ticket.updated'],
  );
  t.same(entries[0].changes.map((c: { field: string }) => c.field).sort(), ['dueAt', 'status', 'title']);
  const hooks = await hooksOf(brand.id);
  t.same(
    hooks.map((h: { event: string }) => h.event),
    ['ticket.updated'],
    'one delivery',
  );
  const mails = await db('mailMessages').where({ ticketId: ticket.id }).select('kind');
  t.equal(mails.length, 0, 'no mail: watchers are mailed about comments, not status changes');
});

t.test('a bulk resolve of three tickets: every effect, in a counted number of statements', async (t) => {
  const { owner, brand, base } = await teamOfThree(app, services);
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.updated'] });
  const made = [];
  for (const title of ['a', 'b', 'c']) made.push(await makeTicket(owner.live, base, { title, customerEmail: `${title}@example.com` }));
  t.equal((await owner.live('POST', `${base}/tickets/bulk`, { action: 'assign', ticketIds: [made[0].id], assigneeId: null })).status, 200, 'warm-up');
  await db('outbox').where({ brandId: brand.id }).delete();
  const ids = made.map((m) => m.id);
  let res: { status: number; body: { count: number } } | null = null;
  const statements = await statementsDuring(db, async () => {
    res = await owner.live('POST', `${base}/tickets/bulk`, { action: 'resolve', ticketIds: ids });
  });
  t.equal(res!.status, 200, JSON.stringify(res!.body));
  t.comment(`a bulk resolve took ${statements.length} statements:\n${statements.join('\n')}`);
  t.ok(statements.length <= BULK_STATEMENTS, `${statements.length} statements, at most ${BULK_STATEMENTS}`);
  t.equal(res!.body.count, 3);
  const rows = await db('tickets').whereIn('id', ids).select('status', 'resolvedAt');
  t.ok(
    rows.every((r: { status: string; resolvedAt: Date | null }) => r.status === 'resolved' && r.resolvedAt),
    'all resolved',
  );
  for (const id of ids) t.equal((await auditOf(id)).filter((e: { event: string }) => e.event === 'ticket.updated').length, 1, 'one entry each');
  t.equal((await hooksOf(brand.id)).length, 3, 'one delivery each');
});

/** A PATCH's statements and its answer. */
async function patched(call: Call, path: string, body: Record<string, unknown>) {
  let res: Reply | null = null;
  const statements = await statementsDuring(db, async () => {
    res = await call('PATCH', path, body);
  });
  return { ...res!, statements, stepByStep: statements.includes('BEGIN;') };
}

t.test('PATCH tags by name and id, with a status: the links replaced, their status copies written, in two statements', async (t) => {
  const { owner, base } = await teamOfThree(app, services);
  const ticket = await makeTicket(owner.live, base, { title: 'Tagged', tags: ['alpha', 'beta'] });
  const gamma = await mustCreate(owner.live, `${base}/tags`, { name: 'Gamma' });
  const res = await patched(owner.live, `${base}/tickets/${ticket.id}`, { tags: ['ALPHA', gamma.id], status: 'pending', priority: 'high' });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.notOk(res.stepByStep, 'no transaction');
  t.equal(res.statements.length, UPDATE_STATEMENTS);
  t.same(
    res.body.tags.map((g: { name: string }) => g.name),
    ['alpha', 'Gamma'],
    'beta gone, Gamma added',
  );
  const links = await db('ticketTags').where({ ticketId: ticket.id }).orderBy('tagId').select('status', 'priority');
  t.same(links, [
    { status: 'pending', priority: 'high' },
    { status: 'pending', priority: 'high' },
  ]);
  t.same(
    (await owner.live('GET', `${base}/tickets?tagIds=${gamma.id}&status=pending`)).body.data.map((x: { id: string }) => x.id),
    [ticket.id],
    'the tag filter finds it',
  );
  const [entry] = (await auditOf(ticket.id)).filter((e: { event: string }) => e.event === 'ticket.updated');
  t.same(entry.changes.map((c: { field: string }) => c.field).sort(), ['priority', 'status', 'tags']);

  const fresh = await patched(owner.live, `${base}/tickets/${ticket.id}`, { tags: ['alpha', 'brand-new'] });
  t.equal(fresh.status, 200);
  t.ok(fresh.stepByStep, 'a tag named that does not exist yet: step by step, which makes it');
  t.same(fresh.body.tags.map((g: { name: string }) => g.name).sort(), ['alpha', 'brand-new']);
});

t.test('PATCH with a trigger that sets a field: its change in the same write, with its entry, tally and delivery', async (t) => {
  const { owner, brand, base } = await teamOfThree(app, services);
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.updated'] });
  const rule = await mustCreate(owner.live, `${base}/triggers`, {
    name: 'Pending is urgent',
    on: ['ticket.updated'],
    conditions: { all: [{ field: 'status', operator: 'is', value: 'pending' }] },
    actions: [{ type: 'set_priority', value: 'urgent' }],
  });
  const ticket = await makeTicket(owner.live, base, { title: 'Ruled', priority: 'low' });
  t.equal((await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { title: 'warm-up' })).status, 200, 'warm-up: the rules compiled');
  await db('outbox').where({ brandId: brand.id }).delete();
  const res = await patched(owner.live, `${base}/tickets/${ticket.id}`, { status: 'pending' });
  t.equal(res.status, 200);
  t.notOk(res.stepByStep);
  t.equal(res.statements.length, UPDATE_STATEMENTS);
  t.equal(res.body.priority, 'urgent', 'the trigger’s change is in the answer');
  const entries = (await auditOf(ticket.id)).filter((e: { event: string }) => e.event === 'ticket.updated').slice(-2);
  t.same(
    entries.map((e: { changes: { field: string }[] }) => e.changes.map((c) => c.field)),
    [['status'], ['priority']],
    'the caller’s entry, then the rule’s',
  );
  const hooks = await hooksOf(brand.id);
  t.same(
    hooks.map((h: { payload: { source: string; data: { changes: string[]; priority: string } } }) => [h.payload.source, h.payload.data.changes, h.payload.data.priority]).sort(),
    [
      ['api', ['status'], 'urgent'],
      ['automation', ['priority'], 'urgent'],
    ],
    'a delivery each, with the ticket as written',
  );
  const tallies = await db('ruleFiringTallies').where({ brandId: brand.id }).select('ruleIds');
  t.same(
    tallies.flatMap((r: { ruleIds: string[] }) => r.ruleIds),
    [rule.id],
    'counted once',
  );
});

t.test('PATCHes racing on one ticket, each setting a status: every one lands, the status and its clock agree', async (t) => {
  const { owner, base } = await teamOfThree(app, services);
  t.equal((await owner.live('PATCH', base, { slaEnabled: true, slaByPriority: { urgent: 4 }, slaPauseOnPending: true })).status, 200);
  const ticket = await makeTicket(owner.live, base, { title: 'Busy', priority: 'urgent' });
  const n = 12;
  const racing = await Promise.all(
    Array.from({ length: n }, (_, i) => owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: i % 2 ? 'pending' : 'open', title: `t${i}` })),
  );
  t.same(
    racing.map((r) => r.status),
    Array(n).fill(200),
    'every update answers',
  );
  const clock = await db('tickets').where({ id: ticket.id }).first('status', 'slaPausedAt', 'dueAt');
  t.equal(clock.slaPausedAt !== null, clock.status === 'pending', 'the clock is paused exactly when the ticket is pending');
  t.equal(clock.dueAt === null, clock.status === 'pending', 'and dueAt with it');
  const changes = (await auditOf(ticket.id))
    .filter((e: { event: string }) => e.event === 'ticket.updated')
    .flatMap((e: { changes: { field: string; from: unknown; to: unknown }[] }) => e.changes.filter((c) => c.field === 'status'));
  t.ok(
    changes.every((c: { from: unknown; to: unknown }) => c.from !== c.to),
    'no change from a status to itself',
  );
  const to = changes.filter((c: { to: unknown }) => c.to === 'pending').length;
  const back = changes.filter((c: { to: unknown }) => c.to === 'open').length;
  t.equal(to - back, clock.status === 'pending' ? 1 : 0, 'the changes chain from open to the status the ticket has');
});

t.test('a PATCH refuses what step by step refuses, and writes nothing', async (t) => {
  const { owner, base } = await teamOfThree(app, services);
  const ticket = await makeTicket(owner.live, base, { title: 'Refusals' });
  const stranger = await teamOfThree(app, services);
  const patch = (body: Record<string, unknown>, path = `${base}/tickets/${ticket.id}`) => owner.live('PATCH', path, body);
  t.equal((await patch({ status: 'no-such-status' })).body.code, 'invalid_status');
  t.equal((await patch({ assigneeId: 'mem_nope' })).body.code, 'invalid_assignee');
  t.equal((await patch({ categoryId: 'cat_nope' })).body.code, 'invalid_category');
  t.equal((await patch({ tags: ['tag_00000000000000000000000000'] })).status, 400, 'a tag id that is not the brand’s');
  t.equal((await patch({ title: 'x' }, `${base}/tickets/tkt_nope`)).status, 404, 'a ticket that is not there');
  t.equal((await stranger.owner.live('PATCH', `${base}/tickets/${ticket.id}`, { title: 'x' })).status, 404, 'another account');
  t.equal((await stranger.owner.live('PATCH', `${stranger.base}/tickets/${ticket.id}`, { title: 'x' })).status, 404, 'another account, its own brand');
  const row = await db('tickets').where({ id: ticket.id }).first('title', 'updatedAt');
  t.equal(row.title, 'Refusals', 'nothing written');
  t.equal((await auditOf(ticket.id)).filter((e: { event: string }) => e.event === 'ticket.updated').length, 0, 'no entry');
  const same = await patched(owner.live, `${base}/tickets/${ticket.id}`, { title: 'Refusals' });
  t.equal(same.status, 200);
  t.equal(same.statements.length, 1, 'a change to what it is: one read, no write');
  t.equal(new Date(same.body.updatedAt).getTime(), new Date(row.updatedAt).getTime(), 'updatedAt stays');
});

t.test('a spam flag, and a trigger with a side effect, go step by step with the same effects', async (t) => {
  const { owner, base, admin } = await teamOfThree(app, services);
  const ticket = await makeTicket(owner.live, base, { title: 'Two ways' });
  const spam = await patched(owner.live, `${base}/tickets/${ticket.id}`, { isSpam: true });
  t.equal(spam.status, 200);
  t.ok(spam.stepByStep, 'a spam flag: step by step');
  t.equal(spam.body.isSpam, true);
  await mustCreate(owner.live, `${base}/triggers`, {
    name: 'Watch urgent',
    on: ['ticket.updated'],
    conditions: { all: [{ field: 'priority', operator: 'is', value: 'urgent' }] },
    actions: [{ type: 'add_watchers', value: [admin.id] }],
  });
  const watched = await patched(owner.live, `${base}/tickets/${ticket.id}`, { priority: 'urgent', isSpam: false });
  t.equal(watched.status, 200);
  t.ok(watched.stepByStep, 'a trigger with a side effect: step by step');
  const watchers = await db('ticketWatchers').where({ ticketId: ticket.id }).select('memberId');
  t.same(
    watchers.map((w: { memberId: string }) => w.memberId),
    [admin.id],
    'and the trigger ran',
  );
});
