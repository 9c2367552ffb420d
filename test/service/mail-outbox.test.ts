import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { simpleParser, type AddressObject } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import t, { type Test } from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import * as mail from '../../server/domains/mail/service.js';
import type { MailMessage, MailTransport } from '../../server/core/ports.js';
import { mailTransport, smtpTransport } from '../../server/integrations/mail.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { mailHandler } from '../../server/worker/handlers/mail.js';
import * as outbox from '../../server/core/outbox/service.js';
import { makeTicket, mustCreate, ownerWithBrand, testApp, servicesOf } from '../helpers/app.js';
import { createComment } from '../../server/flows/comment-create.js';
import { testNow } from '../helpers/clock.js';

/** Outbound mail through the outbox: queued with the change, delivered by the dispatcher's mail handler. */

const SECRET = 'inbound-secret-for-tests-0123456789';
const DOMAIN = 'inbound.test.example';
const MAIL_DOMAIN = 'mail.test.example';
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-mail-outbox-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db, config } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  TICKETD_MAIL_FROM: `notifications@${MAIL_DOMAIN}`,
  TICKETD_DATA_DIR: dataDir,
});
const quietLog = { info: () => undefined, error: () => undefined };

// Tests share the database: mail a test leaves due must not reach the next test's dispatcher.
t.afterEach(async () => {
  await db('outbox').whereIn('status', ['pending', 'retrying']).delete();
});

/** A clock tests move by hand, starting a second ahead so rows just committed are due. */
function clock() {
  let now = testNow() + 1000;
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

/** A dispatcher delivering mail through `transport` (default: the configured one, file). */
function dispatcher(t: Test, transport: MailTransport = mailTransport(config), now = clock().now): Dispatcher {
  const d = new Dispatcher(servicesOf(db), quietLog, null, { now, random: () => 0.5, concurrency: 2, handlers: { mail: mailHandler(transport) } });
  t.teardown(() => d.stop());
  return d;
}

const mailRows = (brandId: string) => db('outbox').where({ brandId, kind: 'mail' }).orderBy('id');
const queuedRows = (brandId: string) => db('mail_messages').where({ brandId }).orderBy('id');
const emlOf = (messageId: string) => path.join(dataDir, 'mail', 'outbox', `${messageId.replace(/^<|>$/g, '')}.eml`);
const addresses = (a: AddressObject | AddressObject[] | undefined) => (Array.isArray(a) ? a : a ? [a] : []).flatMap((o) => o.value.map((v) => v.address));

async function ticketWithCustomer() {
  const { owner, brand, base } = await ownerWithBrand(app);
  const ticket = await makeTicket(owner.live, base, { title: 'Printer on fire', customerEmail: 'jane@customer.example', customerName: 'Jane Customer' });
  const ctx: TenantCtx = { ...tenantCtx(systemCtx(servicesOf(db)), owner.accountId, true), actor: { type: 'api', id: 'key_test', name: 'CI key' } };
  return { owner, brand, base, ticket, ctx };
}

t.test('a public agent comment is mailed once the dispatcher runs: an .eml under the data dir', async (t) => {
  const { owner, brand, base, ticket } = await ticketWithCustomer();
  const comment = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Unplug it, please.', cc: ['boss@customer.example'] });
  const messageId = `<${comment.id}@${MAIL_DOMAIN}>`;
  const [row] = await mailRows(brand.id);
  t.match(row, { event: 'mail.agent_reply', status: 'pending', payload: { mailMessageId: /^/, message: { messageId } } }, 'enqueued with the comment');
  t.equal(row.payload.mailMessageId, (await queuedRows(brand.id))[0].id, 'the outbox row names its mail_messages row');
  t.notOk(existsSync(emlOf(messageId)), 'nothing is sent before the dispatcher runs');

  const { delivery } = await dispatcher(t).tick();
  t.match(delivery, { claimed: 1, success: 1, retrying: 0, failed: 0 });
  const parsed = await simpleParser(readFileSync(emlOf(messageId)));
  t.equal(parsed.messageId, messageId);
  t.same(addresses(parsed.to), ['jane@customer.example']);
  t.same(addresses(parsed.cc), ['boss@customer.example']);
  t.match(parsed.subject, /^Re: Printer on fire \[[A-Z0-9]+-\d+\]$/);
  t.match(addresses(parsed.replyTo)[0], new RegExp(`^${brand.id}\\+[a-z0-9]+@${DOMAIN.replace(/\./g, '\\.')}$`));
  t.equal(parsed.text?.trim(), 'Unplug it, please.');
  t.match(await db('outbox').where({ id: row.id }).first(), { status: 'success', attempts: 1, lastError: null, responseBody: `written to ${emlOf(messageId)}` });

  // Operators see mail rows by kind.
  const stats = await outbox.stats(systemCtx(servicesOf(db)));
  t.ok(
    stats.counts.some((c) => c.kind === 'mail' && c.status === 'success' && c.count >= 1),
    'outbox stats count mail',
  );
  t.match(
    (await outbox.listAll(systemCtx(servicesOf(db)), { status: 'success', limit: 100 })).find((r) => r.id === row.id),
    { kind: 'mail', event: 'mail.agent_reply' },
  );
  t.match((await dispatcher(t).tick()).delivery, { claimed: 0 }, 'delivered once: nothing left for a second pass');
});

t.test('internal notes and customer comments send nothing to the customer', async (t) => {
  const { owner, brand, base, ticket } = await ticketWithCustomer();
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Note to self', metadata: { isInternal: true } });
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Any news?', authorType: 'CUSTOMER' });
  t.same(await queuedRows(brand.id), []);
  t.same(await mailRows(brand.id), []);
});

t.test('a rolled-back comment leaves no mail_messages row and no outbox row', async (t) => {
  const { brand, ticket, ctx } = await ticketWithCustomer();
  await t.rejects(
    withTx(ctx, async (tx) => {
      await createComment(tx, brand.id, ticket.id, { body: 'Never sent' });
      t.equal((await tx.db('outbox').where({ brandId: brand.id, kind: 'mail' })).length, 1, 'inside the transaction the row exists');
      throw new Error('boom');
    }),
    /boom/,
  );
  t.same(await queuedRows(brand.id), []);
  t.same(await mailRows(brand.id), []);
});

t.test('queuing the same message twice enqueues it once', async (t) => {
  const { owner, brand, base, ticket, ctx } = await ticketWithCustomer();
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Once' });
  const [stored] = await queuedRows(brand.id);
  await withTx(ctx, (tx) => mail.queueMail(tx, brand.id, ticket.id, stored.message));
  const again: MailMessage = { ...stored.message, messageId: `<again.${stored.id}@${MAIL_DOMAIN}>` };
  await withTx(ctx, async (tx) => {
    await mail.queueMail(tx, brand.id, ticket.id, again);
    await mail.queueMail(tx, brand.id, ticket.id, again);
  });
  t.same(
    (await mailRows(brand.id)).map((r) => r.payload.message.messageId),
    [stored.messageId, again.messageId],
  );
  t.equal((await queuedRows(brand.id)).length, 2);
});

t.test('a stored message that cannot be read fails at once', async (t) => {
  const { brand, ctx } = await ticketWithCustomer();
  await withTx(ctx, (tx) => outbox.enqueue(tx, { kind: 'mail', brandId: brand.id, event: 'mail.agent_reply', payload: { message: { messageId: '<x@y>' } } }));
  t.match((await dispatcher(t).tick()).delivery, { claimed: 1, failed: 1 });
  t.match((await mailRows(brand.id))[0], { status: 'failed', lastError: /incomplete/ });
});

/** A loopback SMTP server answering as `answer` says, recording the Message-ID of each DATA it sees. */
async function relay(t: Test) {
  const state = { rcpt: null as number | null, data: null as number | null, seen: [] as string[] };
  const reject = (code: number | null, text: string) => (code ? Object.assign(new Error(text), { responseCode: code }) : null);
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    onRcptTo: (_address, _session, done) => done(reject(state.rcpt, 'mailbox unavailable')),
    onData: (stream, _session, done) => {
      simpleParser(stream).then((parsed) => {
        state.seen.push(parsed.messageId ?? '');
        done(reject(state.data, 'try again later'));
      }, done);
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.server.address() as AddressInfo).port;
  const transport = smtpTransport({ mailSmtpHost: '127.0.0.1', mailSmtpPort: port, mailSmtpSecure: false, mailSmtpRequireTls: false, mailSmtpUser: null, mailSmtpPass: null });
  return { state, transport };
}

t.test('SMTP 451 is retried later with the same Message-ID, then delivered', async (t) => {
  const { owner, brand, base, ticket } = await ticketWithCustomer();
  const { state, transport } = await relay(t);
  state.data = 451;
  const time = clock();
  const d = dispatcher(t, transport, time.now);
  const comment = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Greylisted?' });
  const messageId = `<${comment.id}@${MAIL_DOMAIN}>`;

  t.match((await d.tick()).delivery, { claimed: 1, retrying: 1 });
  const [row] = await mailRows(brand.id);
  t.match(row, { status: 'retrying', attempts: 1, responseCode: 451, lastError: /try again later/ });
  t.equal(new Date(row.availableAt).getTime(), time.now() + 60_000, 'next attempt after the first backoff step');
  t.match((await d.tick()).delivery, { claimed: 0 }, 'not due before then');

  state.data = null;
  time.advance(60_001);
  t.match((await d.tick()).delivery, { claimed: 1, success: 1 });
  t.match((await mailRows(brand.id))[0], { status: 'success', attempts: 2, responseCode: 250, lastError: null });
  t.same(state.seen, [messageId, messageId], 'the relay saw the same Message-ID on both attempts');
});

t.test('SMTP 550 fails at once, without a retry', async (t) => {
  const { owner, brand, base, ticket } = await ticketWithCustomer();
  const { state, transport } = await relay(t);
  state.rcpt = 550;
  const time = clock();
  const d = dispatcher(t, transport, time.now);
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Nobody home' });
  t.match((await d.tick()).delivery, { claimed: 1, failed: 1, retrying: 0 });
  t.match((await mailRows(brand.id))[0], { status: 'failed', attempts: 1, responseCode: 550, lastError: /mailbox unavailable/ });
  time.advance(24 * 3600_000);
  t.match((await d.tick()).delivery, { claimed: 0 }, 'never tried again');
});

t.test('a connection refused is retried', async (t) => {
  const { owner, brand, base, ticket } = await ticketWithCustomer();
  // Port 9 (discard) on loopback: nothing listens there.
  const closed = smtpTransport({ mailSmtpHost: '127.0.0.1', mailSmtpPort: 9, mailSmtpSecure: false, mailSmtpRequireTls: false, mailSmtpUser: null, mailSmtpPass: null });
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Anyone?' });
  t.match((await dispatcher(t, closed).tick()).delivery, { claimed: 1, retrying: 1 });
  t.match((await mailRows(brand.id))[0], { status: 'retrying', responseCode: null, lastError: /ECONNECTION|ECONNREFUSED/ });
});

t.test('the autoresponse to a new email ticket is delivered', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  await owner.live('PATCH', base, { autoresponseEnabled: true, autoresponseSubject: 'Ticket #{{ticketNumber}} at {{brandName}}' });
  const raw = [
    'From: Jane Customer <jane@customer.example>',
    `To: ${brand.id}@${DOMAIN}`,
    'Subject: Help',
    'Message-ID: <auto-1@customer.example>',
    'Date: Mon, 23 Nov 2026 10:00:00 +0000',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'It broke.',
    '',
  ].join('\r\n');
  const res = await app.inject({ method: 'POST', url: '/v1/inbound/email', payload: raw, headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'message/rfc822' } });
  t.equal(res.statusCode, 200);
  const { ticketId } = JSON.parse(res.body);
  const ticket = (await owner.live('GET', `${base}/tickets/${ticketId}`)).body;
  t.match(
    (await mailRows(brand.id)).map((r) => r.event),
    ['mail.autoresponse'],
  );

  t.match((await dispatcher(t).tick()).delivery, { claimed: 1, success: 1 });
  const messageId = `<${ticketId}.autoresponse@${MAIL_DOMAIN}>`;
  const parsed = await simpleParser(readFileSync(emlOf(messageId)));
  t.equal(parsed.messageId, messageId);
  t.same(addresses(parsed.to), ['jane@customer.example']);
  t.equal(parsed.subject, `Ticket #${ticket.ticketNumber} at Acme Support`);
  t.equal(parsed.inReplyTo, '<auto-1@customer.example>');
  t.equal(parsed.headers.get('auto-submitted'), 'auto-replied');
});
