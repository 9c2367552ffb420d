import t from 'tap';
import { client, makeTicket, mustCreate, servicesOf, statementsDuring, testApp, type Reply } from '../helpers/app.js';
import { onCitusCluster } from '../helpers/db.js';

type Call = ReturnType<typeof client>;
import { teamOfThree } from '../helpers/sign-in.js';

/**
 * The statements of a ticket update (PATCH /tickets/{id}) and a bulk action, counted as
 * comments-one-statement counts a reply's, with the effects each must keep: the status and its
 * clock, the tags, the triggers' changes, the audit entries, the webhook deliveries. A PATCH is a
 * read and a write (server/flows/ticket-update-statement.ts), and so is a bulk action
 * (server/flows/ticket-bulk-statement.ts): a round trip added back fails here.
 */

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' });
const services = servicesOf(db);

/** One read, one write, no BEGIN or COMMIT. */
const UPDATE_STATEMENTS = 2;
/** On Citus a write that queues deliveries wakes the dispatchers from the coordinator after it, a statement of its own (the write runs on the account's worker). */
const WAKE = onCitusCluster ? 1 : 0;
const BULK_STATEMENTS = 2;

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
  t.ok(statements.length <= UPDATE_STATEMENTS + WAKE, `${statements.length} statements, at most ${UPDATE_STATEMENTS + WAKE}`);
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

/** A bulk action's statements and its answer. */
async function bulked(call: Call, base: string, body: Record<string, unknown>) {
  let res: Reply | null = null;
  const statements = await statementsDuring(db, async () => {
    res = await call('POST', `${base}/tickets/bulk`, body);
  });
  return { ...res!, statements, stepByStep: statements.includes('BEGIN;') };
}

t.test('a bulk resolve of three tickets, two of them pending: every effect, each clock its own, in two statements', async (t) => {
  const { owner, brand, base } = await teamOfThree(app, services);
  t.equal((await owner.live('PATCH', base, { slaEnabled: true, slaByPriority: { urgent: 4, low: 48 }, slaPauseOnPending: true, csatEnabled: true })).status, 200);
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.updated'] });
  const made = [];
  for (const [title, priority] of [
    ['a', 'urgent'],
    ['b', 'low'],
    ['c', 'urgent'],
  ])
    made.push(await makeTicket(owner.live, base, { title, priority, customerEmail: `${title}@example.com` }));
  const ids = made.map((m) => m.id);
  t.equal((await owner.live('POST', `${base}/tickets/bulk`, { action: 'assign', ticketIds: [ids[0]], assigneeId: null })).status, 200, 'warm-up');
  for (const id of ids.slice(0, 2)) t.equal((await owner.live('PATCH', `${base}/tickets/${id}`, { status: 'pending' })).status, 200);
  await db('outbox').where({ brandId: brand.id }).delete();
  const res = await bulked(owner.live, base, { action: 'resolve', ticketIds: ids });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.comment(`a bulk resolve took ${res.statements.length} statements:\n${res.statements.join('\n')}`);
  t.notOk(res.stepByStep, 'no transaction');
  t.equal(res.statements.length, BULK_STATEMENTS + WAKE);
  t.equal(res.body.count, 3);
  const rows = await db('tickets').whereIn('id', ids).orderBy('title').select('status', 'resolvedAt', 'slaPausedAt', 'dueAt');
  t.ok(
    rows.every((r: { status: string; resolvedAt: Date | null }) => r.status === 'resolved' && r.resolvedAt),
    'all resolved',
  );
  t.ok(
    rows.every((r: { slaPausedAt: Date | null }) => r.slaPausedAt === null),
    'out of pending: no clock paused',
  );
  t.ok(rows[1].dueAt.getTime() - rows[0].dueAt.getTime() > 40 * 3600_000, 'each pending ticket resumed its own deadline (urgent 4 h, low 48 h)');
  const changed = [];
  for (const id of ids)
    changed.push(
      (await auditOf(id))
        .filter((e: { event: string }) => e.event === 'ticket.updated')
        .pop()
        .changes.map((c: { field: string }) => c.field),
    );
  t.same(changed, [['status', 'dueAt'], ['status', 'dueAt'], ['status']], 'one entry each, with the deadline a resumed clock moved');
  t.equal((await hooksOf(brand.id)).length, 3, 'one delivery each');
  t.equal((await db('ticketFeedback').whereIn('ticketId', ids).where({ status: 'scheduled' })).length, 3, 'a rating request each');
  const again = await bulked(owner.live, base, { action: 'resolve', ticketIds: ids });
  t.equal(again.body.count, 3, 'resolved again: counted');
  t.equal(again.statements.length, 1, 'nothing to change: the read alone');
});

t.test('bulk setTags, assign, setCategory, close and delete: two statements each, with their effects', async (t) => {
  const { owner, brand, base, admin } = await teamOfThree(app, services);
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.updated', 'ticket.deleted'] });
  const category = await mustCreate(owner.live, `${base}/categories`, { name: 'Billing' });
  const gamma = await mustCreate(owner.live, `${base}/tags`, { name: 'Gamma' });
  const made = [];
  for (const title of ['a', 'b']) made.push(await makeTicket(owner.live, base, { title, tags: ['alpha', 'beta'] }));
  const ids = made.map((m) => m.id);
  await db('outbox').where({ brandId: brand.id }).delete();
  const steps: [Record<string, unknown>, (id: string) => Promise<void>][] = [
    [
      { action: 'setTags', tags: ['ALPHA', gamma.id] },
      async (id) => {
        const links = await db('ticketTags').where({ ticketId: id }).orderBy('tagId').select('tagId', 'status');
        t.equal(links.length, 2, 'beta gone, Gamma added');
        t.ok(links.some((l: { tagId: string }) => l.tagId === gamma.id));
      },
    ],
    [{ action: 'assign', assigneeId: admin.id }, async (id) => void t.equal((await db('tickets').where({ id }).first('assigneeId')).assigneeId, admin.id)],
    [{ action: 'setCategory', categoryId: category.id }, async (id) => void t.equal((await db('tickets').where({ id }).first('categoryId')).categoryId, category.id)],
    [
      { action: 'close', closeReason: 'no_response' },
      async (id) => {
        t.same(await db('tickets').where({ id }).first('status', 'closeReason'), { status: 'closed', closeReason: 'no_response' });
        t.same(
          (await db('ticketTags').where({ ticketId: id }).select('status')).map((l: { status: string }) => l.status),
          ['closed', 'closed'],
          'the links’ status copies',
        );
      },
    ],
    [{ action: 'delete' }, async (id) => void t.equal((await owner.live('GET', `${base}/tickets/${id}`)).status, 404)],
  ];
  for (const [body, check] of steps) {
    const res = await bulked(owner.live, base, { ...body, ticketIds: [...ids, 'tkt_missing'] });
    t.equal(res.status, 200, JSON.stringify(res.body));
    t.notOk(res.stepByStep, `${body.action}: no transaction`);
    t.equal(res.statements.length, BULK_STATEMENTS + WAKE, `${body.action}: ${BULK_STATEMENTS + WAKE} statements`);
    t.same(res.body, { success: false, count: 2, failed: 1, failedIds: ['tkt_missing'] }, `${body.action}: the missing ticket failed`);
    for (const id of ids) await check(id);
  }
  const entries = (await auditOf(ids[0])).slice(-5);
  t.same(
    entries.map((e: { event: string; changes: { field: string }[] }) => [e.event, e.changes.map((c) => c.field).join()]),
    [
      ['ticket.updated', 'tags'],
      ['ticket.updated', 'assigneeId'],
      ['ticket.updated', 'categoryId'],
      ['ticket.updated', 'status,closeReason'],
      ['ticket.deleted', ''],
    ],
    'one entry per action, as step by step writes them',
  );
  const hooks = await hooksOf(brand.id);
  t.same(
    hooks.map((h: { event: string }) => h.event),
    [...Array(8).fill('ticket.updated'), 'ticket.deleted', 'ticket.deleted'],
    'a delivery per ticket and action',
  );
  const fresh = await bulked(owner.live, base, { action: 'setTags', tags: ['brand-new'], ticketIds: [ids[0]] });
  t.equal(fresh.status, 200);
  t.ok(fresh.stepByStep, 'a tag named that does not exist yet: step by step, which makes it');
  const spam = await bulked(owner.live, base, { action: 'spam', ticketIds: [ids[0]] });
  t.ok(spam.stepByStep, 'spam: step by step (the senders’ blocks, the allowance)');
});

t.test('bulk resolves racing with PATCHes to pending on the same tickets: every one lands, statuses and clocks agree', async (t) => {
  const { owner, base } = await teamOfThree(app, services);
  t.equal((await owner.live('PATCH', base, { slaEnabled: true, slaByPriority: { urgent: 4 }, slaPauseOnPending: true })).status, 200);
  const made = [];
  for (let i = 0; i < 4; i++) made.push(await makeTicket(owner.live, base, { title: `r${i}`, priority: 'urgent' }));
  const ids = made.map((m) => m.id);
  const calls = [];
  for (let round = 0; round < 4; round++) {
    calls.push(owner.live('POST', `${base}/tickets/bulk`, { action: 'resolve', ticketIds: round % 2 ? [...ids].reverse() : ids }));
    for (const id of ids) calls.push(owner.live('PATCH', `${base}/tickets/${id}`, { status: 'pending' }));
  }
  const results = await Promise.all(calls);
  t.same(
    results.map((r) => r.status),
    Array(calls.length).fill(200),
    'every call answers',
  );
  for (const id of ids) {
    const row = await db('tickets').where({ id }).first('status', 'slaPausedAt');
    t.equal(row.slaPausedAt !== null, row.status === 'pending', 'the clock is paused exactly when the ticket is pending');
    const changes = (await auditOf(id))
      .filter((e: { event: string }) => e.event === 'ticket.updated')
      .flatMap((e: { changes: { field: string; from: string; to: string }[] }) => e.changes.filter((c) => c.field === 'status'));
    t.ok(
      changes.every((c) => c.from !== c.to),
      'no change from a status to itself',
    );
    // The changes chain from open to the status the ticket has: each status is left as often as it is reached.
    for (const status of ['open', 'pending', 'resolved']) {
      const net = changes.filter((c) => c.to === status).length - changes.filter((c) => c.from === status).length;
      t.equal(net, (row.status === status ? 1 : 0) - (status === 'open' ? 1 : 0), `${status}: reached and left in turn`);
    }
  }
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
  t.equal(res.statements.length, UPDATE_STATEMENTS + WAKE);
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
