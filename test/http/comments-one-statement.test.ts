import t from 'tap';
import { makeTicket, mustCreate, servicesOf, statementsDuring, testApp } from '../helpers/app.js';
import { onCitusCluster } from '../helpers/db.js';
import { teamOfThree } from '../helpers/sign-in.js';

/**
 * A public agent reply (POST .../tickets/{id}/comments) in few statements: the comment, the status
 * it sets, the service-level clock that moves, the mention, one mail each to the customer, a
 * watcher and the member mentioned, the audit entries and webhook deliveries. The statements are
 * counted as tickets-one-statement counts a create's, so a round trip added back fails here.
 */

// Loopback webhook URLs need webhookAllowPrivate (no delivery runs here: only outbox rows are read).
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' });
const services = servicesOf(db);

/** Statements of the reply: one read, one write, no BEGIN or COMMIT (server/flows/comment-create-statement.ts). */
const REPLY_STATEMENTS = 2;
/** On Citus a write that queues deliveries wakes the dispatchers from the coordinator after it, a statement of its own (the write runs on the account's worker). */
const WAKE = onCitusCluster ? 1 : 0;

const mailsOf = (ticketId: string) => db('mailMessages').where({ ticketId }).orderBy('id').select('kind', 'message');
const outboxOf = (brandId: string, kind: string) => db('outbox').where({ brandId, kind }).orderBy('id').select('event', 'payload');
const auditOf = (ticketId: string) => db('auditLog').where({ ticketId }).orderBy('id').select('event', 'entityType', 'entityId', 'changes', 'metadata');

t.test('a public agent reply to a customer, with a watcher and a mention: every effect, in few statements', async (t) => {
  const { owner, brand, base, admin, member } = await teamOfThree(app, services);
  t.equal((await owner.live('PATCH', base, { slaEnabled: true, slaByPriority: { urgent: 4 }, slaPauseOnPending: true })).status, 200);
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['comment.created', 'ticket.updated'] });
  const ticket = await makeTicket(owner.live, base, { title: 'Printer on fire', customerEmail: 'cust@example.com', customerName: 'Cy Customer', priority: 'urgent' });
  t.equal((await owner.live('POST', `${base}/tickets/${ticket.id}/watchers`, { memberId: admin.id })).status, 201);
  const paused = await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'pending' });
  t.equal(paused.body.dueAt, null, 'pending: the clock is paused');
  // A first reply warms what the process keeps (brand, members, the reply-token key); the second is counted.
  t.equal((await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'warm-up', setStatus: 'pending' })).status, 201);
  await db('outbox').where({ brandId: brand.id }).delete();
  await db('mailMessages').where({ ticketId: ticket.id }).delete();
  const auditBefore = (await auditOf(ticket.id)).length;

  let reply: { status: number; body: { id: string; ticketId: string; isInternal: boolean; authorType: string } } | null = null;
  const statements = await statementsDuring(db, async () => {
    reply = await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, {
      body: `@[Mo Member](${member.id}) the customer is back; over to you`,
      setStatus: 'open',
      cc: ['boss@example.com'],
    });
  });
  const made = reply!;
  t.equal(made.status, 201, JSON.stringify(made.body));
  t.comment(`a reply took ${statements.length} statements:\n${statements.join('\n')}`);
  t.ok(statements.length <= REPLY_STATEMENTS + WAKE, `${statements.length} statements, at most ${REPLY_STATEMENTS + WAKE}`);
  t.notOk(statements.includes('BEGIN;'), 'no transaction: the write is one statement');

  // The comment and the ticket.
  t.match(made.body, { ticketId: ticket.id, isInternal: false, authorType: 'AGENT' });
  const row = await db('comments').where({ id: made.body.id }).first();
  t.ok(row, 'the comment row');
  const after = (await owner.live('GET', `${base}/tickets/${ticket.id}`)).body;
  t.equal(after.status, 'open', 'the status it set');
  t.equal(after.commentCount, 2, 'counted');
  t.ok(after.dueAt, 'out of pending: the clock runs again');
  const clock = await db('tickets').where({ id: ticket.id }).first('slaPausedAt', 'lastAgentReplyAt');
  t.equal(clock.slaPausedAt, null, 'no longer paused');
  t.ok(clock.lastAgentReplyAt, "the agent's reply is a moment automations count from");

  // The mention.
  const mentions = await db('mentions').where({ commentId: made.body.id }).select('memberId', 'ticketId');
  t.same(mentions, [{ memberId: member.id, ticketId: ticket.id }], 'one mention, of the member named');

  // Mail: the customer (with the CC), the watcher, the member mentioned; each once.
  const mails = await mailsOf(ticket.id);
  const to = (m: { message: { to: { address: string }[] } }) => m.message.to.map((a) => a.address).sort();
  t.same(
    mails.map((m: { kind: string }) => m.kind),
    ['agent_reply', 'watcher_notification', 'mention'],
    'one mail each, in this order',
  );
  t.same(to(mails[0]), ['cust@example.com'], 'the reply goes to the customer');
  t.same(
    mails[0].message.cc?.map((a: { address: string }) => a.address),
    ['boss@example.com'],
    'with the CC',
  );
  t.same(to(mails[1]), [admin.email], 'the watcher is told');
  t.same(to(mails[2]), [member.email], 'the member mentioned is told');
  const mailRows = await outboxOf(brand.id, 'mail');
  t.same(
    mailRows.map((r: { payload: { message: { messageId: string } } }) => r.payload.message.messageId),
    mails.map((m: { message: { messageId: string } }) => m.message.messageId),
    'each mail queued once in the outbox',
  );

  // Audit and webhook deliveries.
  const entries = (await auditOf(ticket.id)).slice(auditBefore);
  t.same(
    entries.map((e: { event: string }) => e.event),
    ['comment.created', 'ticket.updated'],
    'the comment, then the status',
  );
  t.match(entries[0], { entityType: 'comment', entityId: made.body.id, metadata: { ticketNumber: ticket.ticketNumber, isInternal: false } });
  t.same(
    entries[1].changes.map((c: { field: string }) => c.field),
    ['status', 'dueAt'],
    'the status and the clock it moved',
  );
  t.match(entries[1].changes[0], { from: 'pending', to: 'open' });
  // Made by one statement, whose ids need not follow the events' order.
  const hooks = (await outboxOf(brand.id, 'webhook')).sort((a: { event: string }, b: { event: string }) => (a.event < b.event ? -1 : 1));
  t.same(
    hooks.map((h: { event: string }) => h.event),
    ['comment.created', 'ticket.updated'],
    'one delivery each',
  );
  t.match(hooks[0].payload.data, { ticketId: ticket.id, comment: { id: made.body.id, isInternal: false } });
  t.same(hooks[1].payload.data.changes, ['status', 'dueAt']);
});

const ticketUpdates = (ticketId: string) =>
  db('auditLog').where({ ticketId, event: 'ticket.updated' }).orderBy('id').select('changes') as Promise<{ changes: { field: string; from: unknown; to: unknown }[] }[]>;

t.test('replies racing on one ticket, each setting a status: every one lands, the status and its clock agree', async (t) => {
  const { owner, brand, base } = await teamOfThree(app, services);
  t.equal((await owner.live('PATCH', base, { slaEnabled: true, slaByPriority: { urgent: 4 }, slaPauseOnPending: true })).status, 200);
  const ticket = await makeTicket(owner.live, base, { title: 'Busy', customerEmail: 'busy@example.com', priority: 'urgent' });
  const n = 12;
  const replies = await Promise.all(
    Array.from({ length: n }, (_, i) => owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: `reply ${i}`, setStatus: i % 2 ? 'pending' : 'open' })),
  );
  t.same(
    replies.map((r) => r.status),
    Array(n).fill(201),
    'every reply is created',
  );
  const after = (await owner.live('GET', `${base}/tickets/${ticket.id}`)).body;
  t.equal(after.commentCount, n, 'counted once each');
  const clock = await db('tickets').where({ id: ticket.id }).first('status', 'slaPausedAt');
  t.equal(clock.slaPausedAt !== null, clock.status === 'pending', 'the clock is paused exactly when the ticket is pending');
  t.equal(after.dueAt === null, clock.status === 'pending', 'and dueAt with it');
  // Each status change starts where the one before it ended: none was computed from a status overwritten since.
  const changes = (await ticketUpdates(ticket.id)).map((e) => e.changes.find((c) => c.field === 'status')!);
  const to = changes.filter((c) => c.to === 'pending').length;
  const back = changes.filter((c) => c.to === 'open').length;
  t.ok(
    changes.every((c) => c.from !== c.to),
    'no change from a status to itself',
  );
  t.equal(to - back, clock.status === 'pending' ? 1 : 0, 'the changes chain from open to the status the ticket has');
  const mails = await db('mailMessages').where({ ticketId: ticket.id, kind: 'agent_reply' }).count({ n: '*' }).first();
  t.equal(Number(mails!.n), n, 'one mail to the customer per reply');
  const hooks = await db('outbox').where({ brandId: brand.id, kind: 'mail' }).count({ n: '*' }).first();
  t.equal(Number(hooks!.n), n, 'each queued once');
});

t.test('a reply with an idempotency key in two statements, its replay step by step; a brand with comment triggers step by step: the same effects', async (t) => {
  const { owner, base, admin } = await teamOfThree(app, services);
  const ticket = await makeTicket(owner.live, base, { title: 'Two ways', customerEmail: 'two@example.com' });
  t.equal((await owner.live('POST', `${base}/tickets/${ticket.id}/watchers`, { memberId: admin.id })).status, 201);
  const reply = async (headers?: Record<string, string>) => {
    const auditBefore = (await auditOf(ticket.id)).length;
    let made: { status: number; body: { id: string } } | null = null;
    const statements = await statementsDuring(db, async () => {
      made = await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'same words', setStatus: 'pending' }, headers);
    });
    t.ok([200, 201].includes(made!.status));
    const mails = (await db('mailMessages').where({ ticketId: ticket.id }).orderBy('id').select('kind', 'message')).map(
      (m: { kind: string; message: { subject: string; to: { address: string }[] } }) => [m.kind, m.message.subject, m.message.to.map((a) => a.address)],
    );
    const entries = (await auditOf(ticket.id)).slice(auditBefore).map((e: { event: string; changes: unknown }) => [e.event, e.changes]);
    await db('mailMessages').where({ ticketId: ticket.id }).delete();
    t.equal((await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'open' })).status, 200);
    return { statements, mails, entries, status: made!.status, id: made!.body.id };
  };
  const usual = await reply();
  t.notOk(usual.statements.includes('BEGIN;'), 'the usual reply: no transaction');
  const keyed = await reply({ 'x-idempotency-key': 'k-1' });
  t.equal(keyed.statements.length, REPLY_STATEMENTS + WAKE, 'with a key: the usual two statements');
  t.same(keyed.mails, usual.mails, 'the same mail');
  t.same(keyed.entries, usual.entries, 'the same audit entries');
  const replayed = await reply({ 'x-idempotency-key': 'k-1' });
  t.equal(replayed.status, 200, 'the replay answers with the first reply');
  t.equal(replayed.id, keyed.id);
  t.ok(replayed.statements.includes('BEGIN;'), 'step by step');
  t.same(replayed.mails, [], 'and sends nothing again');
  t.same(replayed.entries, [], 'and records nothing again');
  const reused = await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'other words' }, { 'x-idempotency-key': 'k-1' });
  t.equal(reused.status, 409, 'the key with another request: 409');
  t.equal(reused.body.code, 'idempotency_key_reused');
  t.equal((await db('comments').where({ ticketId: ticket.id }).count({ n: '*' }).first())!.n, '2', 'one comment per key');

  await mustCreate(owner.live, `${base}/triggers`, {
    name: 'Tag replies',
    on: ['comment.created'],
    conditions: { all: [] },
    actions: [{ type: 'add_tags', value: ['replied'] }],
  });
  const triggered = await reply();
  t.ok(triggered.statements.includes('BEGIN;'), 'a brand with comment triggers: step by step');
  t.same(triggered.mails, usual.mails, 'the same mail');
  const tags = (await owner.live('GET', `${base}/tickets/${ticket.id}`)).body.tags.map((g: { name: string }) => g.name);
  t.same(tags, ['replied'], 'and the trigger ran');
});

t.test('a reply the usual way refuses what step by step refuses', async (t) => {
  const { owner, base } = await teamOfThree(app, services);
  const ticket = await makeTicket(owner.live, base, { title: 'Refusals' });
  const post = (body: Record<string, unknown>, ticketId = ticket.id) => owner.live('POST', `${base}/tickets/${ticketId}/comments`, body);
  t.equal((await post({ body: 'x', setStatus: 'no-such-status' })).status, 400, 'an unknown status');
  t.equal((await post({ body: 'x', parentId: 'cmt_nope' })).status, 400, 'a parent that is not a comment of the ticket');
  t.equal((await post({ body: 'x' }, 'tkt_nope')).status, 404, 'a ticket that is not there');
  t.equal((await owner.live('POST', `/v1/brands/br_nope/tickets/${ticket.id}/comments`, { body: 'x' })).status, 404, 'a brand that is not there');
  t.equal((await db('comments').where({ ticketId: ticket.id }).count({ n: '*' }).first())!.n, '0', 'nothing written');
  const parent = await post({ body: 'first' });
  const child = await post({ body: 'second', parentId: parent.body.id });
  t.equal(child.status, 201, 'a live parent is taken');
  t.equal(child.body.parentId, parent.body.id);
});

t.test('keyed replies racing on one ticket, each key sent twice at once: one comment per key, no error, every answer names it', async (t) => {
  const { owner, base } = await teamOfThree(app, services);
  const ticket = await makeTicket(owner.live, base, { title: 'Retried', customerEmail: 'retry@example.com' });
  const n = 6;
  const send = (i: number) =>
    owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: `reply ${i}`, setStatus: i % 2 ? 'pending' : 'open' }, { 'x-idempotency-key': `race-${i}` });
  const answers = await Promise.all(Array.from({ length: n * 2 }, (_, j) => send(j % n)));
  t.ok(
    answers.every((a) => a.status === 200 || a.status === 201),
    `every answer 200 or 201: ${answers.map((a) => a.status).join(', ')}`,
  );
  for (let i = 0; i < n; i++) t.equal(answers[i]!.body.id, answers[i + n]!.body.id, `both sends of key ${i} name one comment`);
  t.equal(answers.filter((a) => a.status === 201).length, n, 'each key created once');
  const rows = await db('comments').where({ ticketId: ticket.id }).select('body');
  t.equal(rows.length, n, 'one comment per key');
  const mails = await db('mailMessages').where({ ticketId: ticket.id, kind: 'agent_reply' }).count({ n: '*' }).first();
  t.equal(Number(mails!.n), n, 'one mail to the customer per comment');
});
