import net, { type AddressInfo } from 'node:net';
import t from 'tap';
import { attachmentDepsOf } from '../../server/domains/attachments/service.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { mustCreate, ownerWithBrand, servicesOf, testApp } from '../helpers/app.js';
import { until } from '../helpers/wait.js';
import { imapConnection, imapServer, PASSWORD, type StoredMessage } from '../helpers/imap.js';

/**
 * A brand's mailboxes taken in over IMAP, against a real IMAP server (hoodiecrow-imap, in memory,
 * one per test): new mail becomes tickets, replies comments, each exactly once, whatever runs at once.
 */

let clockOffset = 0;
const { app, db } = await testApp(
  t,
  { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_MAILBOX_TIMEOUT_MS: '1500', TICKETD_INBOUND_MAX_BYTES: '20000' },
  { clock: () => Date.now() + clockOffset },
);
const services = servicesOf(db);
const RUN = Math.random().toString(36).slice(2, 8);

function message(n: number, headers: string[] = []): string {
  return [
    `From: Customer ${n} <customer${n}@example.net>`,
    'To: desk@acme.example',
    `Subject: Question ${n}`,
    `Message-ID: <q${n}-${RUN}@example.net>`,
    'Date: Thu, 26 Nov 2026 10:00:00 +0000',
    ...headers,
    '',
    `Hello, this is question ${n}.`,
  ].join('\r\n');
}

/** A brand with a mailbox connected to the server at `port`. */
async function connected(port: number, fields: Record<string, unknown> = {}) {
  const { owner, brand, base } = await ownerWithBrand(app);
  const connection = await mustCreate(owner.live, `${base}/email-connections`, imapConnection(port, fields));
  const url = `${base}/email-connections/${connection.id}`;
  return { owner, brand, base, connection, url };
}

const ticketsOf = (brandId: string) => db('tickets').where({ brandId }).orderBy('ticketNumber').select('id', 'title', 'source', 'sourceId');
const rowOf = (id: string) => db('emailConnections').where({ id }).first();
const seen = (m: StoredMessage) => m.flags.includes('\\Seen');

t.test('new mail becomes tickets, flagged \\Seen; a second sync or a full one takes nothing twice', async (t) => {
  const noFrom = ['To: desk@acme.example', 'Subject: From nobody', '', 'No sender here.'].join('\r\n');
  const { port, inbox } = await imapServer(t, [message(1), noFrom, message(2)]);
  const { owner, brand, url } = await connected(port);

  const res = await owner.live('POST', `${url}/sync`);
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.same(res.body, { ticketsCreated: 2 });
  const tickets = await ticketsOf(brand.id);
  t.same(
    tickets.map((k) => [k.title, k.source, k.sourceId]),
    [
      ['Question 1', 'email', `<q1-${RUN}@example.net>`],
      ['Question 2', 'email', `<q2-${RUN}@example.net>`],
    ],
  );
  t.same(inbox().map(seen), [true, false, true], 'taken-in messages are flagged \\Seen; one ticketd cannot take (no From) is left unread');
  t.equal(inbox().length, 3, 'nothing is deleted');
  const connection = (await owner.live('GET', url)).body;
  t.match(connection, { status: 'ACTIVE', errorMessage: null, lastSyncAt: /^\d{4}-/ });
  t.equal((await rowOf(connection.id)).lastUid, '3', 'the place saved is after the last message, the one passed over included');

  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 0 }, 'a second sync finds nothing new');
  t.same((await owner.live('POST', `${url}/sync?full=true`)).body, { ticketsCreated: 0 }, 'reading it all again creates nothing twice');
  t.equal((await ticketsOf(brand.id)).length, 2);
});

t.test('a message over inboundMaxBytes is passed over, left unread, and the ones after it are taken in', async (t) => {
  const { port, inbox } = await imapServer(t, [message(1), message(2, ['X-Padding: ' + 'x'.repeat(30_000)]), message(3)]);
  const { owner, brand, url, connection } = await connected(port);
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 2 });
  t.same(
    (await ticketsOf(brand.id)).map((k) => k.title),
    ['Question 1', 'Question 3'],
  );
  t.same(inbox().map(seen), [true, false, true]);
  t.equal((await rowOf(connection.id)).lastUid, '3');
});

t.test("a reply to the ticket's mail becomes a comment on it", async (t) => {
  const { server, port } = await imapServer(t, [message(1)]);
  const { owner, base, brand, url } = await connected(port);
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 });
  const [ticket] = await ticketsOf(brand.id);
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Have you tried turning it off and on?' });
  const sent = await db('mailMessages').where({ ticketId: ticket.id, kind: 'agent_reply' }).first('messageId');
  t.ok(sent, 'the agent reply was queued to the customer');

  const reply = [
    'From: Customer 1 <customer1@example.net>',
    'To: desk@acme.example',
    'Subject: Re: Question 1',
    `Message-ID: <reply-${RUN}@example.net>`,
    `In-Reply-To: ${sent.messageId}`,
    '',
    'It works now, thanks!',
  ].join('\r\n');
  server.appendMessage('INBOX', [], undefined, reply);
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 0 }, 'no new ticket');
  const comments = await db('comments').where({ ticketId: ticket.id, authorType: 'CUSTOMER' }).select('body');
  t.same(
    comments.map((c) => c.body),
    ['It works now, thanks!'],
  );
});

t.test('200 messages in one sync, each a ticket', async (t) => {
  const { port, inbox } = await imapServer(
    t,
    Array.from({ length: 200 }, (_, i) => message(i + 1)),
  );
  const { owner, brand, url } = await connected(port);
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 200 });
  const tickets = await ticketsOf(brand.id);
  t.equal(tickets.length, 200);
  t.equal(new Set(tickets.map((k) => k.sourceId)).size, 200, 'each message once');
  t.ok(inbox().every(seen), 'all flagged \\Seen');
  const checked = (await db('inboundEmails').where({ brandId: brand.id }).pluck('authentication')) as { spf: { comment?: string }; dkim: { result: string } }[];
  t.equal(checked.length, 200);
  t.ok(
    checked.every((a) => a.dkim.result === 'none' && /no SMTP client/.test(a.spf.comment ?? '')),
    'each message authenticated, its results kept',
  );
});

t.test('two syncs of one connection at once create each ticket once', async (t) => {
  const { port } = await imapServer(
    t,
    Array.from({ length: 30 }, (_, i) => message(i + 1)),
  );
  const { owner, brand, url } = await connected(port);
  const [a, b] = await Promise.all([owner.live('POST', `${url}/sync`), owner.live('POST', `${url}/sync`)]);
  t.equal(a.status, 200);
  t.equal(b.status, 200);
  t.equal(a.body.ticketsCreated + b.body.ticketsCreated, 30, `between them, 30 tickets (${a.body.ticketsCreated} + ${b.body.ticketsCreated})`);
  const tickets = await ticketsOf(brand.id);
  t.equal(tickets.length, 30);
  t.equal(new Set(tickets.map((k) => k.sourceId)).size, 30);
});

t.test('a new UIDVALIDITY reads the folder again from the start, without duplicates', async (t) => {
  const { server, port } = await imapServer(t, [message(1), message(2), message(3)]);
  const { owner, brand, url, connection } = await connected(port);
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 3 });
  t.match(await rowOf(connection.id), { uidValidity: '1', lastUid: '3' });

  // The folder was rebuilt on the server: new UIDVALIDITY, the same messages under new UIDs, and one more.
  const inbox = server.getMailbox('INBOX');
  inbox.uidvalidity = 7;
  inbox.messages.forEach((m, i) => (m.uid = i + 1));
  inbox.uidnext = inbox.messages.length + 1;
  server.appendMessage('INBOX', [], undefined, message(4));
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 }, 'only the new message is new');
  t.equal((await ticketsOf(brand.id)).length, 4);
  t.match(await rowOf(connection.id), { uidValidity: '7', lastUid: '4' });
});

t.test("a wrong password: DISCONNECTED with the server's words, until it is retried", async (t) => {
  const { server, port } = await imapServer(t, [message(1)]);
  const { owner, brand, url, connection } = await connected(port, { password: 'not-the-password' });
  const res = await owner.live('POST', `${url}/retry`);
  t.equal(res.status, 200);
  t.match(res.body, { success: false, ticketsCreated: 0, error: 'Login failed: authentication failure' });
  t.match((await owner.live('GET', url)).body, { status: 'DISCONNECTED', errorMessage: 'Login failed: authentication failure' });
  t.equal((await rowOf(connection.id)).retryAt, null, 'no retry scheduled');
  const sync = await owner.live('POST', `${url}/sync`);
  t.equal(sync.status, 409);
  t.equal(sync.body.code, 'email_connection_disconnected');

  // The server now takes that password (its owner changed it there): retrying works.
  server.users.desk = { password: 'not-the-password' };
  t.match((await owner.live('POST', `${url}/retry`)).body, { success: true, ticketsCreated: 1 });
  t.match((await owner.live('GET', url)).body, { status: 'ACTIVE', errorMessage: null });

  // Refused again, then given the right password: ACTIVE at once, and taken in.
  server.users.desk = { password: PASSWORD };
  server.appendMessage('INBOX', [], undefined, message(2));
  t.match((await owner.live('POST', `${url}/retry`)).body, { success: false });
  const patched = await owner.live('PATCH', url, { password: PASSWORD });
  t.match(patched.body, { status: 'ACTIVE', errorMessage: null, passwordSet: true });
  t.match(await rowOf(connection.id), { failures: 0, retryAt: null });
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 });
  t.equal((await ticketsOf(brand.id)).length, 2);
  const audit = await db('audit_log').where({ entityId: connection.id, event: 'email_connection.updated' }).select('changes', 'metadata');
  t.match(audit, [{ metadata: { passwordChanged: true } }]);
  t.notMatch(JSON.stringify(audit), PASSWORD, 'the password is not in the audit log');
});

t.test('a server that cannot be reached: ERROR, retried later with a growing pause; the brand’s other mailboxes go on', async (t) => {
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const deadPort = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));

  const { port } = await imapServer(t, [message(1)]);
  const { owner, brand, base, url } = await connected(port);
  const dead = await mustCreate(owner.live, `${base}/email-connections`, {
    provider: 'IMAP',
    email: 'old@acme.example',
    host: '127.0.0.1',
    port: deadPort,
    tls: false,
    password: 'pw',
  });

  const res = await owner.live('POST', `${base}/email-connections/sync`);
  t.same(res.body, { ticketsCreated: 1 }, "the reachable mailbox is taken in, whatever the other's fate");
  t.match((await owner.live('GET', url)).body, { status: 'ACTIVE' });
  const failed = (await owner.live('GET', `${base}/email-connections/${dead.id}`)).body;
  t.match(failed, { status: 'ERROR', errorMessage: /ECONNREFUSED/ });
  const row = await rowOf(dead.id);
  t.equal(row.failures, 1);
  const pause = new Date(row.retryAt).getTime() - new Date(row.updatedAt).getTime();
  t.equal(pause, 60_000, 'tried again in a minute');

  const retried = await owner.live('POST', `${base}/email-connections/${dead.id}/retry`);
  t.match(retried.body, { success: false, ticketsCreated: 0, error: /ECONNREFUSED/ });
  const again = await rowOf(dead.id);
  t.equal(again.failures, 2);
  t.equal(new Date(again.retryAt).getTime() - new Date(again.updatedAt).getTime(), 120_000, 'then in two');
  t.equal((await ticketsOf(brand.id)).length, 1);
});

t.test('a server that accepts the connection and never answers: ERROR once mailboxTimeoutMs has passed, not a hanging request', async (t) => {
  const silent = net.createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    silent.close();
  });
  const { owner, url } = await connected((silent.address() as AddressInfo).port);
  const started = Date.now();
  const res = await owner.live('POST', `${url}/retry`);
  t.match(res.body, { success: false, ticketsCreated: 0, error: /greeting/ });
  t.ok(Date.now() - started < 10_000, 'given up on within the timeout');
  t.match((await owner.live('GET', url)).body, { status: 'ERROR', errorMessage: /greeting/ });
});

t.test('with moveTo, taken-in messages are moved there, not flagged', async (t) => {
  const { server, port, inbox } = await imapServer(t, [message(1), message(2)]);
  const { owner, url } = await connected(port, { moveTo: 'Taken' });
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 2 });
  t.equal(inbox().length, 0, 'the inbox is empty');
  t.same(
    server.getMailbox('Taken').messages.map((m) => m.raw.match(/Subject: (.*)/)![1]),
    ['Question 1', 'Question 2'],
  );
  t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 0 }, 'an empty folder: nothing to take');
  t.match((await owner.live('GET', url)).body, { status: 'ACTIVE', errorMessage: null });
});

t.test('a mailbox with more mail than a round takes is read round after round, without waiting for the next tick', async (t) => {
  const { port, inbox } = await imapServer(
    t,
    [1, 2, 3, 4, 5].map((n) => message(100 + n)),
  );
  const { brand, connection } = await connected(port);
  // Each sync of a round may start new messages for 1 ms: one message a round.
  const dispatcher = new Dispatcher(services, { info: () => undefined, error: () => undefined }, attachmentDepsOf(services), { mailboxRoundMs: 1 });
  try {
    t.match(await dispatcher.tick(), { mailboxes: { ticketsCreated: 5, failed: 0 } }, 'one tick, as many rounds as it takes');
  } finally {
    await dispatcher.stop();
  }
  t.equal((await ticketsOf(brand.id)).length, 5);
  t.ok(inbox().every(seen));
  t.match(await rowOf(connection.id), { status: 'ACTIVE', lastUid: '5', lastSyncAt: Date });
});

t.test('a server that offers IDLE: new mail is taken in as it arrives, not at the next poll; the session ends when the dispatcher stops', async (t) => {
  const quiet = { info: () => undefined, error: () => undefined };
  const idling = await imapServer(t, [message(301)], { idle: true });
  const polled = await imapServer(t, [message(311)]);
  const { brand } = await connected(idling.port);
  const other = await connected(polled.port);
  const dispatcher = new Dispatcher(services, quiet, attachmentDepsOf(services));
  let stopped = false;
  t.teardown(() => (stopped ? undefined : dispatcher.stop()));

  await until('both mailboxes synced once', async () => {
    await dispatcher.tick();
    return (await ticketsOf(brand.id)).length === 1 && (await ticketsOf(other.brand.id)).length === 1;
  });
  t.equal(await idling.sessions(), 1, 'the IDLE server keeps one session open');
  await until('the other session logged out', async () => (await polled.sessions()) === 0);

  // No tick from here on, and the clock stays within mailboxPollSeconds: only IDLE can bring these in.
  idling.server.appendMessage('INBOX', [], undefined, message(302));
  polled.server.appendMessage('INBOX', [], undefined, message(312));
  await until('the new mail of the IDLE server is a ticket', async () => (await ticketsOf(brand.id)).length === 2);
  t.same(
    (await ticketsOf(brand.id)).map((k) => k.title),
    ['Question 301', 'Question 302'],
  );
  t.equal((await ticketsOf(other.brand.id)).length, 1, 'the server without IDLE waits for its next poll');
  await until('watching again after that sync', async () => (await idling.sessions()) === 1);

  await dispatcher.stop();
  stopped = true;
  await until('stopping logs the IDLE session out', async () => (await idling.sessions()) === 0);
});

t.test('the dispatcher takes in mailboxes as they come due', async (t) => {
  const { server, port } = await imapServer(t, [message(1)]);
  const { brand, connection } = await connected(port);
  const quiet = { info: () => undefined, error: () => undefined };
  const tick = async () => {
    const dispatcher = new Dispatcher(services, quiet, attachmentDepsOf(services));
    try {
      return (await dispatcher.tick()).mailboxes;
    } finally {
      await dispatcher.stop();
    }
  };
  // A new connection is due at once, before the ones synced earlier.
  t.match(await tick(), { synced: 1, failed: 0, ticketsCreated: 1 });
  t.equal((await ticketsOf(brand.id)).length, 1);
  server.appendMessage('INBOX', [], undefined, message(2));
  await tick();
  t.equal((await ticketsOf(brand.id)).length, 1, 'not again before mailboxPollSeconds');
  // A poll interval later the earlier tests' mailboxes are due too (their servers gone: ERROR), a few a tick, oldest first.
  clockOffset += 61_000;
  await until('the mailbox is taken in again', async () => {
    await tick();
    return (await ticketsOf(brand.id)).length === 2;
  });
  t.match(await rowOf(connection.id), { status: 'ACTIVE', failures: 0 });
});
