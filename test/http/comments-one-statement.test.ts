import t from 'tap';
import { makeTicket, mustCreate, servicesOf, statementsDuring, testApp } from '../helpers/app.js';
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

/** Statements of the reply at most: what it takes today (see server/flows/comment-create.ts). */
const REPLY_STATEMENTS = 16;

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
  t.ok(statements.length <= REPLY_STATEMENTS, `${statements.length} statements, at most ${REPLY_STATEMENTS}`);

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
