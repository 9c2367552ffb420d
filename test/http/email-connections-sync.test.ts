import net, { type AddressInfo } from 'node:net';
import t from 'tap';
import { attachmentDepsOf } from '../../server/domains/attachments/service.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { mustCreate, ownerWithBrand, servicesOf, testApp } from '../helpers/app.js';
import { until } from '../helpers/wait.js';
import { customerMessage, imapConnection, imapServer, type StoredMessage } from '../helpers/imap.js';
import { testNow } from '../helpers/clock.js';

/**
 * A brand's mailboxes taken in over IMAP, against a real IMAP server (hoodiecrow-imap, in memory,
 * one per test), where the test needs to shape the server: sizes, failures, folders, rounds, IDLE
 * sessions, the dispatcher. The scenarios every server must pass (new mail, replies, 200 messages,
 * syncs at once, UIDVALIDITY, a wrong password, IDLE) are in email-connections-servers.test.ts,
 * run against Dovecot too when it is installed.
 */

let clockOffset = 0;
const { app, db } = await testApp(
  t,
  { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_MAILBOX_TIMEOUT_MS: '1500', TICKETD_INBOUND_MAX_BYTES: '20000' },
  { clock: () => testNow() + clockOffset },
);
const services = servicesOf(db);
const RUN = Math.random().toString(36).slice(2, 8);

const message = (n: number, headers: string[] = []) => customerMessage(RUN, n, headers);

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
