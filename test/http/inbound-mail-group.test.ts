import t from 'tap';
import { mustCreate, ownerWithBrand, statementsDuring, testApp } from '../helpers/app.js';
import { customerMessage, imapConnection, imapServer } from '../helpers/imap.js';

/**
 * A mailbox sync takes its messages in groups, one transaction each (flows/mailbox-sync.ts). The
 * new tickets of a group are made by ONE create statement, and their claims, settling and raw
 * copies by one statement each; each ticket still gets what a message taken in alone gets (its
 * audit entries, events, raw copy, autoresponse), and the group keeps what one message after
 * another would do (a reply to an earlier message of the group, a Message-ID seen twice, a
 * blocked sender).
 */

// A group's transaction keeps the IMAP session quiet: on a slow machine for longer than the suite's usual 2 s socket timeout.
const { app, db } = await testApp(t, { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_MAILBOX_TIMEOUT_MS: '5000' });
const RUN = Math.random().toString(36).slice(2, 8);

/** A brand with a mailbox on the test server at `port`, answering new tickets and subscribed to ticket.created. */
async function connected(port: number) {
  const { owner, brand, base } = await ownerWithBrand(app);
  t.equal((await owner.live('PATCH', base, { autoresponseEnabled: true })).status, 200);
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] });
  const connection = await mustCreate(owner.live, `${base}/email-connections`, imapConnection(port));
  return { owner, brand, base, url: `${base}/email-connections/${connection.id}` };
}

const ticketsOf = (brandId: string) =>
  db('tickets').where({ brandId }).orderBy('ticketNumber').select('id', 'ticketNumber', 'title', 'isSpam', 'customerId', 'sourceId', 'lastCustomerMessageAt');
const matching = (statements: string[], pattern: RegExp) => statements.filter((s) => pattern.test(s)).length;

t.test('a group of ten new messages: ten tickets by one create statement, each with its entries, events, raw copy and autoresponse', async (t) => {
  const messages = Array.from({ length: 10 }, (_, i) => customerMessage(RUN, i + 1));
  const { port } = await imapServer(t, messages);
  const { owner, brand, url } = await connected(port);

  let synced: unknown;
  const statements = await statementsDuring(db, async () => {
    synced = (await owner.live('POST', `${url}/sync`)).body;
  });
  t.same(synced, { ticketsCreated: 10 });
  t.equal(matching(statements, /insert into tickets \(/i), 1, 'one statement creates the ten tickets');
  t.equal(matching(statements, /insert into "inbound_emails"/i), 1, 'one claims the ten Message-IDs');
  t.equal(matching(statements, /update inbound_emails/i), 1, 'one settles them');
  t.equal(matching(statements, /insert into "raw_mails"/i), 1, 'one keeps their raw copies');
  t.equal(matching(statements, /insert into mail_messages/i), 1, 'one queues their autoresponses');
  const transaction = statements.slice(statements.indexOf('BEGIN;'), statements.indexOf('COMMIT;') + 1);
  t.ok(transaction.length <= 13, `a dozen statements in the group's transaction, not some per message (${transaction.length})`);
  t.equal(matching(statements, /from "brands" where "brands"."id" = /), 1, 'the brand read once for the batch');

  const tickets = await ticketsOf(brand.id);
  t.same(
    tickets.map((k) => [k.ticketNumber, k.title, k.isSpam]),
    messages.map((_, i) => [tickets[0]!.ticketNumber + i, `Question ${i + 1}`, false]),
    'numbered in the mailbox’s order',
  );
  t.ok(
    tickets.every((k) => k.lastCustomerMessageAt),
    'each opened by its customer',
  );
  const ids = tickets.map((k) => k.id);
  const created = await db('auditLog').where({ brandId: brand.id, event: 'ticket.created' }).select('entityId', 'performerType', 'performerName');
  t.same(created.map((e) => e.entityId).sort(), [...ids].sort(), 'a ticket.created entry per ticket');
  const actorOf = new Map(created.map((e) => [e.entityId, e]));
  tickets.forEach((k, i) =>
    t.match(actorOf.get(k.id), { performerType: 'customer', performerName: `Customer ${i + 1} <customer${i + 1}@example.net>` }, `ticket ${i + 1}: by its own sender`),
  );
  const contacts = await db('contacts').where({ brandId: brand.id }).select('id', 'email');
  t.same(
    tickets.map((k) => contacts.find((c) => c.id === k.customerId)?.email),
    messages.map((_, i) => `customer${i + 1}@example.net`),
    'each ticket’s customer is its sender',
  );
  t.equal((await db('auditLog').where({ brandId: brand.id, event: 'contact.created' }).select('id')).length, 10, 'a contact.created entry per new customer');
  const events = await db('outbox').where({ brandId: brand.id, kind: 'webhook' }).select('payload');
  t.same(events.map((e) => e.payload.data.id).sort(), [...ids].sort(), 'a ticket.created delivery per ticket');
  const inbound = await db('inboundEmails').where({ brandId: brand.id }).select('messageId', 'action', 'ticketId');
  t.same(
    tickets.map((k) => inbound.find((r) => r.ticketId === k.id)),
    tickets.map((k) => ({ messageId: k.sourceId, action: 'ticket_created', ticketId: k.id })),
    'each Message-ID recorded with its ticket',
  );
  const raws = await db('rawMails').where({ brandId: brand.id }).select('ticketId', 'messageId');
  t.same(raws.map((r) => r.ticketId).sort(), [...ids].sort(), 'a raw copy per ticket');
  const answers = await db('mailMessages').where({ brandId: brand.id, kind: 'autoresponse' }).select('ticketId', 'message');
  t.same(
    tickets.map((k) => answers.find((a) => a.ticketId === k.id)?.message.to),
    messages.map((_, i) => [expectedAddress(i + 1)]),
    'an autoresponse per ticket, to its sender',
  );
  t.same(
    tickets.map((k) => answers.find((a) => a.ticketId === k.id)?.message.inReplyTo),
    tickets.map((k) => k.sourceId),
    'each threaded on its own message',
  );
  t.equal((await owner.live('POST', `${url}/sync?full=true`)).body.ticketsCreated, 0, 'read again in full: nothing twice');
  t.equal((await ticketsOf(brand.id)).length, 10);
});

function expectedAddress(n: number) {
  return { name: `Customer ${n}`, address: `customer${n}@example.net` };
}

t.test('a group keeps the order of its messages: a reply to an earlier one, a Message-ID seen twice, a blocked sender', async (t) => {
  const firstId = `<q1-${RUN}@example.net>`;
  const messages = [
    customerMessage(RUN, 1),
    // The same customer again, on their first message: a comment on its ticket, not a ticket.
    customerMessage(RUN, 1, [`In-Reply-To: ${firstId}`]).replace(`Message-ID: ${firstId}`, `Message-ID: <r1-${RUN}@example.net>`),
    customerMessage(RUN, 1),
    customerMessage(RUN, 2).replace(/customer2@example\.net/g, 'someone@blocked.example'),
    customerMessage(RUN, 3),
  ];
  const { port } = await imapServer(t, messages);
  const { owner, brand, base, url } = await connected(port);
  await mustCreate(owner.live, `${base}/blocked-sources`, { value: 'blocked.example' });

  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 2 }, 'the first and the last open tickets (the spam one is not counted)');
  const tickets = await ticketsOf(brand.id);
  t.same(
    tickets.map((k) => [k.title, k.isSpam]),
    [
      ['Question 1', false],
      ['Question 2', true],
      ['Question 3', false],
    ],
  );
  const comments = await db('comments').where({ ticketId: tickets[0]!.id, authorType: 'CUSTOMER' }).select('sourceId');
  t.same(
    comments.map((c) => c.sourceId),
    [`<r1-${RUN}@example.net>`],
    'the reply is a comment on the first ticket',
  );
  const inbound = await db('inboundEmails').where({ brandId: brand.id }).orderBy('id').select('messageId', 'action', 'reason', 'ticketId');
  t.same(
    inbound.map((r) => [r.messageId, r.action, r.reason, r.ticketId]),
    [
      [firstId, 'ticket_created', null, tickets[0]!.id],
      [`<r1-${RUN}@example.net>`, 'comment_created', null, tickets[0]!.id],
      [`<q2-${RUN}@example.net>`, 'spam', 'blocked_sender', tickets[1]!.id],
      [`<q3-${RUN}@example.net>`, 'ticket_created', null, tickets[2]!.id],
    ],
    'the Message-ID seen twice is recorded once',
  );
  const answered = await db('mailMessages').where({ brandId: brand.id, kind: 'autoresponse' }).select('ticketId');
  t.same(answered.map((a) => a.ticketId).sort(), [tickets[0]!.id, tickets[2]!.id].sort(), 'no autoresponse to the blocked sender');
});
