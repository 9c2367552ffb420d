import t, { type Test } from 'tap';
import { attachmentDepsOf } from '../../server/domains/attachments/service.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { mustCreate, ownerWithBrand, servicesOf, testApp } from '../helpers/app.js';
import { customerMessage, imapConnection, PASSWORD } from '../helpers/imap.js';
import { mailServers, type MailServerFactory, type TestMailServer } from '../helpers/mail-servers.js';
import { until } from '../helpers/wait.js';

/**
 * A brand's mailbox taken in over IMAP, the same scenarios against every IMAP server this machine
 * can run: hoodiecrow-imap always, and Dovecot when `dovecot` is installed (a real server's
 * UIDVALIDITY, IDLE and authentication). New mail becomes tickets, replies comments, each exactly
 * once, whatever runs at once.
 */

const { app, db } = await testApp(t, { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_MAILBOX_TIMEOUT_MS: '3000' });
const services = servicesOf(db);
const RUN = Math.random().toString(36).slice(2, 8);

const message = (n: number, headers: string[] = []) => customerMessage(RUN, n, headers);

/** A brand with a mailbox connected to `server`'s folder. */
async function connected(server: TestMailServer, fields: Record<string, unknown> = {}) {
  const { owner, brand, base } = await ownerWithBrand(app);
  const connection = await mustCreate(owner.live, `${base}/email-connections`, imapConnection(server.port, { mailbox: server.folder, ...fields }));
  return { owner, brand, base, connection, url: `${base}/email-connections/${connection.id}` };
}

const ticketsOf = (brandId: string) => db('tickets').where({ brandId }).orderBy('ticketNumber').select('id', 'title', 'sourceId');
const rowOf = (id: string) => db('emailConnections').where({ id }).first();

function scenarios(t: Test, serve: MailServerFactory) {
  t.test('new mail becomes tickets, flagged \\Seen; a second sync or a full one takes nothing twice', async (t) => {
    const noFrom = ['To: desk@acme.example', 'Subject: From nobody', '', 'No sender here.'].join('\r\n');
    const server = await serve(t, [message(1), noFrom, message(2)]);
    const { owner, brand, url, connection } = await connected(server);
    t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 2 });
    t.same(
      (await ticketsOf(brand.id)).map((k) => [k.title, k.sourceId]),
      [
        ['Question 1', `<q1-${RUN}@example.net>`],
        ['Question 2', `<q2-${RUN}@example.net>`],
      ],
    );
    t.same(await server.seen(), [true, false, true], 'taken in: \\Seen; one ticketd cannot take (no From) is left unread; nothing deleted');
    t.match((await owner.live('GET', url)).body, { status: 'ACTIVE', errorMessage: null, lastSyncAt: /^\d{4}-/ });
    t.equal((await rowOf(connection.id)).lastUid, '3', 'the place saved is after the last message, the one passed over included');
    t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 0 }, 'a second sync finds nothing new');
    t.same((await owner.live('POST', `${url}/sync?full=true`)).body, { ticketsCreated: 0 }, 'reading it all again creates nothing twice');
  });

  t.test("a reply to the ticket's mail becomes a comment on it", async (t) => {
    const server = await serve(t, [message(1)]);
    const { owner, base, brand, url } = await connected(server);
    t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 });
    const [ticket] = await ticketsOf(brand.id);
    await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Have you tried turning it off and on?' });
    const sent = await db('mailMessages').where({ ticketId: ticket.id, kind: 'agent_reply' }).first('messageId');
    await server.append(
      [
        'From: Customer 1 <customer1@example.net>',
        'To: desk@acme.example',
        'Subject: Re: Question 1',
        `Message-ID: <reply-${RUN}@example.net>`,
        `In-Reply-To: ${sent.messageId}`,
        '',
        'It works now, thanks!',
      ].join('\r\n'),
    );
    t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 0 }, 'no new ticket');
    t.same(await db('comments').where({ ticketId: ticket.id, authorType: 'CUSTOMER' }).pluck('body'), ['It works now, thanks!']);
  });

  t.test('200 messages in one sync, each a ticket', async (t) => {
    const server = await serve(
      t,
      Array.from({ length: 200 }, (_, i) => message(i + 1)),
    );
    const { owner, brand, url } = await connected(server);
    t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 200 });
    const tickets = await ticketsOf(brand.id);
    t.equal(new Set(tickets.map((k) => k.sourceId)).size, 200, 'each message once');
    t.ok((await server.seen()).every(Boolean), 'all flagged \\Seen');
    t.equal(
      await db('inboundEmails')
        .where({ brandId: brand.id })
        .whereNotNull('authentication')
        .count({ n: '*' })
        .then((r) => Number(r[0]!.n)),
      200,
      'each authenticated',
    );
  });

  t.test('two syncs of one connection at once create each ticket once', async (t) => {
    const server = await serve(
      t,
      Array.from({ length: 30 }, (_, i) => message(i + 1)),
    );
    const { owner, brand, url } = await connected(server);
    const [a, b] = await Promise.all([owner.live('POST', `${url}/sync`), owner.live('POST', `${url}/sync`)]);
    t.equal(a.body.ticketsCreated + b.body.ticketsCreated, 30, `between them, 30 tickets (${a.body.ticketsCreated} + ${b.body.ticketsCreated})`);
    const tickets = await ticketsOf(brand.id);
    t.equal(tickets.length, 30);
    t.equal(new Set(tickets.map((k) => k.sourceId)).size, 30);
  });

  t.test('a new UIDVALIDITY reads the folder again from the start, without duplicates', async (t) => {
    const server = await serve(t, [message(1), message(2), message(3)]);
    const { owner, brand, url, connection } = await connected(server);
    t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 3 });
    const before = await rowOf(connection.id);
    t.equal(before.lastUid, '3');
    // The folder was rebuilt on the server: new UIDVALIDITY, the same messages under new UIDs, and one more.
    await server.rebuild();
    await server.append(message(4));
    t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 }, 'only the new message is new');
    t.equal((await ticketsOf(brand.id)).length, 4);
    const after = await rowOf(connection.id);
    t.not(after.uidValidity, before.uidValidity, 'the new UIDVALIDITY is saved');
    t.equal(after.lastUid, '4');
  });

  t.test("a wrong password: DISCONNECTED with the server's words, until it is retried", async (t) => {
    const server = await serve(t, [message(1)]);
    const { owner, brand, url, connection } = await connected(server, { password: 'not-the-password' });
    const res = await owner.live('POST', `${url}/retry`);
    t.match(res.body, { success: false, ticketsCreated: 0, error: /fail/i });
    t.match((await owner.live('GET', url)).body, { status: 'DISCONNECTED', errorMessage: res.body.error });
    t.equal((await rowOf(connection.id)).retryAt, null, 'no retry scheduled');
    const sync = await owner.live('POST', `${url}/sync`);
    t.match(sync, { status: 409, body: { code: 'email_connection_disconnected' } }, 'no sync until it is retried');
    // The password was changed on the server to the one the connection has: retrying works.
    await server.setPassword('not-the-password');
    t.match((await owner.live('POST', `${url}/retry`)).body, { success: true, ticketsCreated: 1 });
    // Refused again, then given the right password: ACTIVE at once, and taken in.
    await server.setPassword(PASSWORD);
    await server.append(message(2));
    t.match((await owner.live('POST', `${url}/retry`)).body, { success: false });
    t.match((await owner.live('PATCH', url, { password: PASSWORD })).body, { status: 'ACTIVE', errorMessage: null, passwordSet: true });
    t.match(await rowOf(connection.id), { failures: 0, retryAt: null });
    t.same((await owner.live('POST', `${url}/sync`)).body, { ticketsCreated: 1 });
    t.equal((await ticketsOf(brand.id)).length, 2);
    const audit = await db('audit_log').where({ entityId: connection.id, event: 'email_connection.updated' }).select('changes', 'metadata');
    t.match(audit, [{ metadata: { passwordChanged: true } }]);
    t.notMatch(JSON.stringify(audit), PASSWORD, 'the password is not in the audit log');
  });

  t.test('IDLE: new mail is taken in as it arrives, with no poll', async (t) => {
    const server = await serve(t, [message(1)], { idle: true });
    const { brand } = await connected(server);
    const dispatcher = new Dispatcher(services, { info: () => undefined, error: () => undefined }, attachmentDepsOf(services));
    t.teardown(() => dispatcher.stop());
    await until('the first message is a ticket', async () => {
      await dispatcher.tick();
      return (await ticketsOf(brand.id)).length === 1;
    });
    // No tick from here on, and mailboxPollSeconds (60) is far off.
    await server.append(message(2));
    await until('the new message is a ticket', async () => (await ticketsOf(brand.id)).length === 2);
  });
}

for (const [name, serve] of mailServers()) t.test(name, async (t) => scenarios(t, serve));
