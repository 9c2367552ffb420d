import { promises as nodeDns } from 'node:dns';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { simpleParser, type AddressObject } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import t, { type Test } from 'tap';
import { packageRoot } from '../../server/core/paths.js';
import { smtpTransport } from '../../server/integrations/mail.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { mailHandler } from '../../server/worker/handlers/mail.js';
import { makeTicket, mustCreate, ownerWithBrand, servicesOf, testApp, type client, type Reply } from '../helpers/app.js';
import { dnsServer } from '../helpers/dns.js';
import { until } from '../helpers/wait.js';
import { testNow } from '../helpers/clock.js';

/**
 * Mail of a brand with its own verified domain, through the real dispatcher to a loopback SMTP
 * relay: From an address at the domain, DKIM-signed (checked by mailauth against the loopback DNS
 * server the domain was verified with), bounces to bounces.<domain>.
 */

interface DkimResult {
  signingDomain?: string;
  selector?: string;
  status: { result: string; comment?: string };
}
type Resolve = (name: string, rrtype: string) => Promise<unknown>;
const { dkimVerify } = createRequire(import.meta.url)('mailauth/lib/dkim/verify') as {
  dkimVerify: (message: Buffer, options: { resolver: Resolve }) => Promise<{ results: DkimResult[] }>;
};

const SECRET = 'inbound-secret-for-tests-0123456789';
const INBOUND = 'inbound.test.example';
const MAIL_FROM = 'notifications@mail.test.example';
const dns = await dnsServer(t);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-mail-dkim-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: INBOUND,
  TICKETD_MAIL_FROM: MAIL_FROM,
  TICKETD_DATA_DIR: dataDir,
  TICKETD_DNS_SERVERS: dns.address,
});

/** What a receiver would do: the DKIM public key looked up in the DNS the domain was verified with. */
const dnsOfTest = new nodeDns.Resolver();
dnsOfTest.setServers([dns.address]);
const resolver: Resolve = (name, rrtype) => dnsOfTest.resolve(name, rrtype);

interface Received {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
}

/** A loopback relay that accepts everything and keeps the envelope and bytes of each message. */
async function relay(t: Test) {
  const received: Received[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    onData: (stream, session, done) => {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const mailFrom = session.envelope.mailFrom;
        received.push({ mailFrom: mailFrom ? mailFrom.address : '', rcptTo: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks) });
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.server.address() as AddressInfo).port;
  return {
    received,
    transport: smtpTransport({ mailSmtpHost: '127.0.0.1', mailSmtpPort: port, mailSmtpSecure: false, mailSmtpRequireTls: false, mailSmtpUser: null, mailSmtpPass: null }),
  };
}

/** Sends what is due through the real dispatcher to a fresh relay; returns what the relay got, once it got `count` messages. */
async function sendDue(t: Test, count: number): Promise<Received[]> {
  const { received, transport } = await relay(t);
  const d = new Dispatcher(servicesOf(db), { info: () => undefined, error: () => undefined }, null, {
    now: () => testNow() + 1000,
    random: () => 0.5,
    concurrency: 2,
    handlers: { mail: mailHandler(transport) },
  });
  t.teardown(() => d.stop());
  t.match((await d.tick()).delivery, { claimed: count, success: count });
  await until(`the relay to get ${count} messages`, () => received.length >= count);
  return received;
}

// Tests share the database: mail one test leaves due must not reach the next test's dispatcher.
t.afterEach(async () => {
  await db('outbox').whereIn('status', ['pending', 'retrying']).delete();
});

let seq = 0;
const fresh = () => `brand-${process.pid}-${++seq}.example.com`;
const addresses = (a: AddressObject | AddressObject[] | undefined) => (Array.isArray(a) ? a : a ? [a] : []).flatMap((o) => o.value);

/** Set-up step: a call that must answer 200 with a body `ok` accepts. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function must(res: Reply, ok: (body: any) => boolean): void {
  if (res.status !== 200 || !ok(res.body)) throw new Error(`set-up failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** An OUTBOUND domain of the brand with `settings` (given its name); verified through the API once its records are published, unless `verify` is false. */
async function outboundDomain(call: ReturnType<typeof client>, base: string, settings: (name: string) => Record<string, unknown> = () => ({}), verify = true) {
  const name = fresh();
  const domain = await mustCreate(call, `${base}/domains`, { domain: name, type: 'OUTBOUND' });
  const patch = settings(name);
  if (Object.keys(patch).length) must(await call('PATCH', `${base}/domains/${domain.id}`, patch), (body) => body.id === domain.id);
  if (verify) {
    for (const r of domain.records as { type: 'TXT' | 'CNAME'; name: string; value: string }[]) dns.publish(r.name, { type: r.type, value: r.value });
    must(await call('POST', `${base}/domains/${domain.id}/verify`), (body) => body.verified === true);
  }
  return { id: domain.id as string, name, selector: (domain.records[0].name as string).split('.')[0]! };
}

const signaturesOf = async (raw: Buffer) => (await dkimVerify(raw, { resolver })).results;
const outboxRows = (brandId: string) => db('outbox').where({ brandId, kind: 'mail' }).orderBy('id');

async function ticketOf(call: ReturnType<typeof client>, base: string) {
  return makeTicket(call, base, { title: 'Printer on fire', customerEmail: 'jane@customer.example', customerName: 'Jane Customer' });
}

t.test('a reply of a brand with a verified domain: From the domain, DKIM-signed by it, bounces to bounces.<domain>', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const domain = await outboundDomain(owner.live, base, (name) => ({ fromName: 'Acme Help Desk', fromEmail: `help@${name}` }));
  const ticket = await ticketOf(owner.live, base);
  const comment = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Unplug it, please.', cc: ['boss@customer.example'] });

  const [sent] = await sendDue(t, 1);
  const [row] = await outboxRows(brand.id);
  t.equal(sent!.mailFrom, `bounces+${row.id}@bounces.${domain.name}`, 'the envelope sender is at the return path and names the delivery');
  t.same(sent!.rcptTo.sort(), ['boss@customer.example', 'jane@customer.example'], 'the envelope still names every recipient');

  const parsed = await simpleParser(sent!.raw);
  t.same(addresses(parsed.from), [{ name: 'Acme Help Desk', address: `help@${domain.name}` }]);
  t.equal(parsed.messageId, `<${comment.id}@mail.test.example>`, 'the Message-ID is as before');
  t.match(addresses(parsed.replyTo)[0]?.address, new RegExp(`^${brand.id}\\+[a-z0-9]+@${INBOUND.replace(/\./g, '\\.')}$`), 'replies still route to the ticket');
  t.equal(parsed.inReplyTo, `<${ticket.id}@mail.test.example>`, 'threading as before');

  const results = await signaturesOf(sent!.raw);
  t.match(results, [{ signingDomain: domain.name, selector: domain.selector, status: { result: 'pass' } }], 'one signature, by the domain, that verifies');
  t.same(
    results.map((r) => r.status.result),
    ['pass'],
  );

  // The same bytes with the body changed no longer verify: the signature covers the message.
  const tampered = Buffer.from(sent!.raw.toString('latin1').replace('Unplug it, please.', 'Plug it in, please.'), 'latin1');
  t.not((await signaturesOf(tampered))[0]?.status.result, 'pass', 'a changed body fails the check');
});

t.test('without fromName and fromEmail: the brand name, at support@<domain>', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const domain = await outboundDomain(owner.live, base);
  const ticket = await ticketOf(owner.live, base);
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'On it.' });
  const [sent] = await sendDue(t, 1);
  t.same(addresses((await simpleParser(sent!.raw)).from), [{ name: 'Acme Support', address: `support@${domain.name}` }]);
  t.match(await signaturesOf(sent!.raw), [{ signingDomain: domain.name, status: { result: 'pass' } }]);
});

t.test('a domain not verified is not used: the default sender, no signature of the domain', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const domain = await outboundDomain(owner.live, base, (name) => ({ fromEmail: `help@${name}` }), false);
  const ticket = await ticketOf(owner.live, base);
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'On it.' });
  t.notOk((await outboxRows(brand.id))[0].payload.message.brandDomain, 'queued to go from the default sender');

  const [sent] = await sendDue(t, 1);
  t.same(addresses((await simpleParser(sent!.raw)).from), [{ name: 'Acme Support', address: MAIL_FROM }]);
  t.equal(sent!.mailFrom, MAIL_FROM);
  t.notOk(
    (await signaturesOf(sent!.raw)).some((r) => r.signingDomain === domain.name),
    'no signature by the domain',
  );
});

t.test('a domain deleted or unverified after the message was queued: sent from the default sender, unsigned', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const deleted = await outboundDomain(owner.live, base);
  const ticket = await ticketOf(owner.live, base);
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'First.' });
  t.match((await outboxRows(brand.id))[0].payload.message.brandDomain, { id: deleted.id, domain: deleted.name }, 'queued to go from the domain');
  t.equal((await owner.live('DELETE', `${base}/domains/${deleted.id}`)).status, 200);

  const [first] = await sendDue(t, 1);
  t.same(addresses((await simpleParser(first!.raw)).from), [{ name: 'Acme Support', address: MAIL_FROM }]);
  t.equal(first!.mailFrom, MAIL_FROM);
  t.match(await signaturesOf(first!.raw), [{ status: { result: 'none' } }], 'not signed');

  const unverified = await outboundDomain(owner.live, base);
  await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'Second.' });
  // What the daily check does when the records went away.
  await db('brandDomains').where({ id: unverified.id }).update({ verified: false });
  const [second] = await sendDue(t, 1);
  t.same(addresses((await simpleParser(second!.raw)).from), [{ name: 'Acme Support', address: MAIL_FROM }]);
  t.match(await signaturesOf(second!.raw), [{ status: { result: 'none' } }]);
});

/** The plain fixture written to `to`, delivered to the brand's own address (as a forwarding mailbox does): a new email ticket. */
async function emailTicket(brandId: string, to: string, messageId: string): Promise<string> {
  const raw = readFileSync(path.join(packageRoot, 'test', 'fixtures', 'mail', 'plain.eml'), 'latin1')
    .replaceAll('{{BRAND}}', brandId)
    .replaceAll('{{DOMAIN}}', INBOUND)
    .replace(/^To: .*$/m, `To: ${to}`)
    .replace(/^Message-ID: .*$/m, `Message-ID: ${messageId}`);
  const res = await app.inject({ method: 'POST', url: '/v1/inbound/email', payload: raw, headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'message/rfc822' } });
  const body = JSON.parse(res.body);
  if (res.statusCode !== 200 || body.action !== 'ticket_created') throw new Error(`inbound mail: ${res.statusCode} ${res.body}`);
  return body.ticketId;
}

t.test('replyMode MATCH: the autoresponse and replies come from the address the customer wrote to, else from fromEmail', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  await owner.live('PATCH', base, { autoresponseEnabled: true });
  const domain = await outboundDomain(owner.live, base, (name) => ({ fromEmail: `help@${name}`, replyMode: 'MATCH' }));

  const ticketId = await emailTicket(brand.id, `Acme Sales <Sales@${domain.name.toUpperCase()}>`, `<match-${domain.name}@customer.example>`);
  await mustCreate(owner.live, `${base}/tickets/${ticketId}/comments`, { body: 'Here is a quote.' });
  const [autoresponse, reply] = await sendDue(t, 2);
  for (const [what, sent] of [['the autoresponse', autoresponse!] as const, ['the reply', reply!] as const]) {
    const parsed = await simpleParser(sent.raw);
    t.equal(addresses(parsed.from)[0]?.address, `sales@${domain.name}`, `${what} comes from the address written to`);
    t.match(await signaturesOf(sent.raw), [{ signingDomain: domain.name, selector: domain.selector, status: { result: 'pass' } }], `${what} is signed by the domain`);
    t.match(sent.mailFrom, new RegExp(`^bounces\\+dlv_[0-9a-z]+@bounces\\.${domain.name.replace(/\./g, '\\.')}$`));
  }

  // Written to the brand's own address only, or a ticket from the API: as SINGLE.
  const direct = await emailTicket(brand.id, `${brand.id}@${INBOUND}`, `<direct-${domain.name}@customer.example>`);
  const byApi = await ticketOf(owner.live, base);
  await mustCreate(owner.live, `${base}/tickets/${direct}/comments`, { body: 'Direct.' });
  await mustCreate(owner.live, `${base}/tickets/${byApi.id}/comments`, { body: 'By API.' });
  const fallback = await sendDue(t, 3);
  const froms = await Promise.all(fallback.map(async (sent) => addresses((await simpleParser(sent.raw)).from)[0]?.address));
  t.same(froms, [`help@${domain.name}`, `help@${domain.name}`, `help@${domain.name}`], 'from fromEmail');
});
