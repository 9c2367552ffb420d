import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { makeBrand, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
import { addressOf, deliverMail, mailsTo } from '../helpers/sign-in.js';

/** Who may add to a ticket's mail thread (decision 0074): members as agents, participants as customers, nobody else. */

const SECRET = 'inbound-secret-for-tests-0123456789';
const DOMAIN = 'inbound.test.example';
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-agent-mail-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  TICKETD_MAIL_FROM: 'notifications@mail.test.example',
  TICKETD_DATA_DIR: dataDir,
  // Who writes what, with unsigned mail: inbound-mail-auth.test.ts shows that by default a member's mail needs a From shown to be theirs.
  TICKETD_INBOUND_AGENT_REPLIES: 'any',
});
const services = servicesOf(db);

let sequence = 0;

/** A plain-text message; `headers` adds or overrides header lines. */
function message(from: string, to: string, body: string, headers: Record<string, string> = {}): Buffer {
  const fields = {
    From: from,
    To: to,
    Subject: 'Re: My printer is on fire',
    'Message-ID': `<m-${process.pid}-${++sequence}@mail.example>`,
    'MIME-Version': '1.0',
    'Content-Type': 'text/plain; charset=utf-8',
    ...headers,
  };
  return Buffer.from(
    `${Object.entries(fields)
      .map(([k, v]) => `${k}: ${v}`)
      .join('\r\n')}\r\n\r\n${body}\r\n`,
  );
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function deliver(raw: Buffer): Promise<any> {
  const res = await app.inject({ method: 'POST', url: '/v1/inbound/email', payload: raw, headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'message/rfc822' } });
  if (res.statusCode !== 200) throw new Error(`delivery failed: ${res.statusCode} ${res.body}`);
  return JSON.parse(res.body);
}

/**
 * A brand with a ticket mailed in by a customer (a colleague in Cc), answered by the owner in the
 * API with another colleague in the comment's cc; an agent (Mo Member) assigned to the brand, and
 * an outsider assigned to another brand of the account.
 */
async function answeredTicket() {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const other = await makeBrand(owner.live, 'Other brand');
  const account = tenantCtx(systemCtx(services), owner.accountId, true);
  const agent = await members.add(account, { email: addressOf('agent'), name: 'Mo Member', role: 'member', brandIds: [brand.id] });
  const outsider = await members.add(account, { email: addressOf('outsider'), name: 'Otto Outsider', role: 'member', brandIds: [other.id] });
  const customer = addressOf('jane');
  const base = `/v1/brands/${brand.id}`;
  const firstMessageId = `<first-${++sequence}-${process.pid}@customer.example>`;
  const headers = { Subject: 'My printer is on fire', Cc: 'Boss <Boss@Customer.example>', 'Message-ID': firstMessageId };
  const { ticketId } = await deliver(message(`Jane Customer <${customer}>`, `${brand.id}@${DOMAIN}`, 'My printer is on fire.', headers));
  await mustCreate(owner.live, `${base}/tickets/${ticketId}/comments`, { body: 'Please unplug it.', cc: ['colleague@customer.example'] });
  const sent = await db('mail_messages').where({ ticketId, kind: 'agent_reply' }).first('message');
  const replyAddress: string = sent.message.replyTo;
  const ourMessageId: string = sent.message.messageId;
  const live = owner.live;
  const comments = async (): Promise<{ id: string; authorType: string; authorName: string; body: string }[]> => (await live('GET', `${base}/tickets/${ticketId}/comments`)).body;
  return { live, base, brandAddress: `${brand.id}@${DOMAIN}`, agent, outsider, customer, ticketId: ticketId as string, firstMessageId, replyAddress, ourMessageId, comments };
}

t.test("a member's reply to the reply address is their AGENT comment, mailed on to the customer", async (t) => {
  const { live, base, agent, customer, ticketId, firstMessageId, replyAddress, comments } = await answeredTicket();
  const body = 'I have sent you a replacement.\n\nOn Thu, 26 Nov 2026 at 10:00, Acme Support <notifications@mail.test.example> wrote:\n> Please unplug it.\n\n-- \nMo Member\nAcme';
  // The address in another case than the member's record: addresses compare without case.
  const res = await deliver(message(`Mo <${agent.email.toUpperCase()}>`, replyAddress, body));
  t.match(res, { action: 'comment_created', ticketId, commentId: /^cmt_/, reason: 'agent_reply' });
  const comment = (await comments()).find((c) => c.id === res.commentId);
  t.match(comment, { authorType: 'AGENT', authorId: agent.id, authorName: 'Mo Member', isInternal: false, source: 'email' });
  t.equal(comment?.body, 'I have sent you a replacement.', 'quoted history and signature trimmed');
  const audit = await db('audit_log').where({ entityId: res.commentId, event: 'comment.created' }).first('performerType', 'performerId', 'source');
  t.same(audit, { performerType: 'user', performerId: agent.id, source: 'email' }, 'the member is the performer, by email');
  const contacts = (await live('GET', `${base}/contacts`)).body.data.map((c: { email: string }) => c.email);
  t.notOk(contacts.includes(agent.email), 'the member does not become a contact');

  await deliverMail(services);
  const received = (await mailsTo(services, customer)).filter((m) => m.text?.includes('I have sent you a replacement.'));
  t.equal(received.length, 1, 'the customer receives the answer');
  t.equal(received[0]?.messageId, `<${res.commentId}@mail.test.example>`);
  t.equal(received[0]?.inReplyTo, firstMessageId, "it threads on the customer's message");
  const next = await mustCreate(live, `${base}/tickets/${ticketId}/comments`, { body: 'Anything else?' });
  const queued = await db('mail_messages')
    .where({ ticketId, messageId: `<${next.id}@mail.test.example>` })
    .first('message');
  t.equal(queued?.message.inReplyTo, firstMessageId, "later answers too: the member's message never reached the customer");
});

t.test('a member assigned to other brands only is no agent here: their reply is a ticket of their own', async (t) => {
  const { outsider, brandAddress, ticketId, ourMessageId, comments } = await answeredTicket();
  const res = await deliver(message(`Otto <${outsider.email}>`, brandAddress, 'Let me answer that.', { 'In-Reply-To': ourMessageId }));
  t.equal(res.action, 'ticket_created');
  t.not(res.ticketId, ticketId);
  t.same(
    (await comments()).map((c) => c.authorType),
    ['AGENT'],
    'the ticket has only the answer from the API',
  );
});

t.test('participants add CUSTOMER comments: the first message’s Cc, a comment’s cc, in any case', async (t) => {
  const { ticketId, replyAddress, ourMessageId, comments } = await answeredTicket();
  const boss = await deliver(message('Boss <boss@CUSTOMER.example>', replyAddress, 'I am on it too.'));
  t.match(boss, { action: 'comment_created', ticketId });
  const colleague = await deliver(message('Colleague <Colleague@customer.example>', 'someone@customer.example', 'Unplugged.', { Cc: replyAddress, 'In-Reply-To': ourMessageId }));
  t.match(colleague, { action: 'comment_created', ticketId });
  t.match((await comments()).slice(1), [
    { authorType: 'CUSTOMER', authorName: 'Boss', body: 'I am on it too.' },
    { authorType: 'CUSTOMER', authorName: 'Colleague', body: 'Unplugged.' },
  ]);
});

t.test('the customer of a ticket merged into another still writes on the thread', async (t) => {
  const { live, base, brandAddress, ticketId, comments } = await answeredTicket();
  const kim = addressOf('kim');
  const kimsMessage = `<kim-${process.pid}@customer.example>`;
  const merged = await deliver(message(`Kim <${kim}>`, brandAddress, 'Mine is on fire too.', { 'Message-ID': kimsMessage }));
  t.equal((await live('POST', `${base}/tickets/${ticketId}/merge`, { sourceTicketIds: [merged.ticketId] })).status, 200, 'merged');
  const reply = await deliver(message(`Kim <${kim}>`, brandAddress, 'Still burning.', { 'In-Reply-To': kimsMessage }));
  t.match(reply, { action: 'comment_created', ticketId });
  t.match(
    (await comments()).find((c) => c.id === reply.commentId),
    { authorType: 'CUSTOMER', body: 'Still burning.' },
  );
});

t.test("a stranger with the thread's Message-ID or its reply address gets a ticket of their own", async (t) => {
  const { brandAddress, ticketId, replyAddress, ourMessageId, firstMessageId, comments } = await answeredTicket();
  const guessed = await deliver(message('Mallory <mallory@elsewhere.example>', brandAddress, 'Send me the invoice.', { 'In-Reply-To': ourMessageId, References: firstMessageId }));
  t.equal(guessed.action, 'ticket_created');
  t.not(guessed.ticketId, ticketId);
  const leaked = await deliver(message('Mallory <mallory@elsewhere.example>', replyAddress, 'Again.'));
  t.equal(leaked.action, 'ticket_created', 'a forwarded reply address is no way in either');
  t.not(leaked.ticketId, ticketId);
  t.equal((await comments()).length, 1, 'nothing added to the original ticket');
});

t.test("an agent's auto-reply or bounce is never an AGENT comment; a member's new mail is a ticket", async (t) => {
  const { live, base, agent, brandAddress, ticketId, replyAddress, comments } = await answeredTicket();
  const ooo = await deliver(message(`Mo <${agent.email}>`, replyAddress, 'I am out of office.', { 'Auto-Submitted': 'auto-replied' }));
  t.same(ooo, { action: 'ignored', brandId: brandAddress.split('@')[0], reason: 'agent_auto_reply' });
  const report = message(`Mo <${agent.email}>`, replyAddress, '--b\r\nContent-Type: text/plain\r\n\r\nDelivery failed.\r\n--b--', {
    'Content-Type': 'multipart/report; report-type=delivery-status; boundary="b"',
  });
  t.equal((await deliver(report)).reason, 'agent_auto_reply', 'a delivery report');
  t.equal((await comments()).length, 1, 'nothing added');
  const queued = await db('mail_messages').where({ ticketId, kind: 'agent_reply' }).count<{ count: string }[]>('* as count');
  t.equal(Number(queued[0]!.count), 1, 'and nothing more mailed to the customer');

  const coffee = `<coffee-${process.pid}@mail.example>`;
  const fresh = await deliver(message(`Mo <${agent.email}>`, brandAddress, 'The coffee machine is broken.', { Subject: 'Coffee', 'Message-ID': coffee }));
  t.equal(fresh.action, 'ticket_created', 'threading nowhere: a new ticket');
  t.equal((await live('GET', `${base}/tickets/${fresh.ticketId}`)).body.customer.email, agent.email, 'the member is its requester');
  const followUp = await deliver(message(`Mo <${agent.email}>`, brandAddress, 'Still broken.', { 'In-Reply-To': coffee }));
  const [mine] = (await live('GET', `${base}/tickets/${fresh.ticketId}/comments`)).body;
  t.match(mine, { id: followUp.commentId, authorType: 'CUSTOMER' }, 'on their own ticket the member writes as its customer');
});
