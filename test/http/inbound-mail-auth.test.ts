import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { authenticate } from 'mailauth';
import nodemailer from 'nodemailer';
import t from 'tap';
import { mailAuthResolver } from '../../server/integrations/dns.js';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { ownerWithBrand, servicesOf, testApp } from '../helpers/app.js';
import { dnsServer } from '../helpers/dns.js';
import { postInbound } from '../helpers/inbound.js';

/**
 * SPF, DKIM, DMARC and ARC of inbound mail through POST /v1/inbound/email, checked by the real
 * verifier (mailauth) against records this test publishes on a loopback DNS server. Over HTTP
 * there is no SMTP client, so SPF is never checked here (inbound-smtp.test.ts checks it).
 */

const SECRET = 'inbound-secret-for-tests-0123456789';
const DOMAIN = 'inbound.test.example';
const SELECTOR = 'sel1';
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-mailauth-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const dns = await dnsServer(t);
const { app, db } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  TICKETD_DATA_DIR: dataDir,
  TICKETD_DNS_SERVERS: dns.address,
});

const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
const privateKey = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const publicKey = keys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');

/** The sender domain's DKIM key published; `dmarc`: its DMARC policy published too. */
function publishDomain(domain: string, dmarc?: 'reject' | 'quarantine' | 'none') {
  dns.publish(`${SELECTOR}._domainkey.${domain}`, { type: 'TXT', value: `v=DKIM1; k=rsa; p=${publicKey}` });
  if (dmarc) dns.publish(`_dmarc.${domain}`, { type: 'TXT', value: `v=DMARC1; p=${dmarc}` });
}

/** A message from someone@domain to the brand, DKIM-signed by domain's key. */
async function signed(domain: string, brandId: string, extra: { subject?: string; inReplyTo?: string; messageId?: string; sender?: string } = {}): Promise<string> {
  const composer = nodemailer.createTransport({ streamTransport: true, buffer: true, dkim: { domainName: domain, keySelector: SELECTOR, privateKey } });
  const info = await composer.sendMail({
    from: extra.sender ? `${extra.sender} <${extra.sender.toLowerCase()}@${domain}>` : `Sam <sam@${domain}>`,
    to: `${brandId}@${DOMAIN}`,
    subject: extra.subject ?? 'Signed help request',
    text: 'Please help, this message is signed.',
    ...(extra.messageId ? { messageId: extra.messageId } : {}),
    ...(extra.inReplyTo ? { inReplyTo: extra.inReplyTo } : {}),
  });
  return (info.message as Buffer).toString('latin1');
}

/** The same message with a signed header changed after signing: the signature no longer verifies. */
const altered = (message: string) => message.replace(/^Subject: /m, 'Subject: Urgent: ');
/** The same message with its body changed after signing: the body hash no longer matches. */
const alteredBody = (message: string) => message.replace('Please help', 'Please pay');

const deliver = (raw: string) => postInbound(app, SECRET, raw);

t.test('a DKIM-signed message whose key is published passes DKIM and DMARC; the results are kept', async (t) => {
  const { owner, base, brand } = await ownerWithBrand(app);
  publishDomain('signed.example', 'reject');
  const res = await deliver(await signed('signed.example', brand.id));
  t.match(res, { action: 'ticket_created' });
  const ticket = (await owner.live('GET', `${base}/tickets/${res.ticketId}`)).body;
  t.equal(ticket.isSpam, false);
  t.match(ticket.sourceData.authentication, {
    dkim: { result: 'pass', domain: 'signed.example', selector: SELECTOR },
    dmarc: { result: 'pass', domain: 'signed.example', policy: 'reject' },
    spf: { result: 'none', domain: null, comment: /no SMTP client/ },
    arc: { result: 'none' },
  });
  const [row] = await db('inboundEmails').where({ ticketId: res.ticketId }).select('authentication');
  t.same(row.authentication, ticket.sourceData.authentication, 'the inbound record keeps the same results');
});

t.test('the same message altered after signing fails DKIM; with p=reject it is a spam ticket, and a reply adds nothing', async (t) => {
  const { owner, base, brand } = await ownerWithBrand(app);
  publishDomain('strict.example', 'reject');
  const first = await deliver(await signed('strict.example', brand.id, { messageId: '<first@strict.example>' }));
  t.match(first, { action: 'ticket_created' });

  const forged = await deliver(altered(await signed('strict.example', brand.id, { subject: 'Forged' })));
  t.match(forged, { action: 'spam', reason: 'dmarc_reject', ticketId: /^tkt_/ });
  const ticket = (await owner.live('GET', `${base}/tickets/${forged.ticketId}`)).body;
  t.equal(ticket.isSpam, true, 'spam, as from a blocked sender');
  t.match(ticket.sourceData.authentication, { dkim: { result: 'fail', domain: 'strict.example' }, dmarc: { result: 'fail', policy: 'reject' } });
  const changedBody = await deliver(alteredBody(await signed('strict.example', brand.id, { subject: 'Changed body' })));
  t.match(changedBody, { action: 'spam', reason: 'dmarc_reject' }, 'a changed body fails too');

  const reply = await deliver(altered(await signed('strict.example', brand.id, { inReplyTo: '<first@strict.example>' })));
  t.same(reply, { action: 'spam', brandId: brand.id, ticketId: first.ticketId, reason: 'dmarc_reject' });
  t.equal((await owner.live('GET', `${base}/tickets/${first.ticketId}`)).body.commentCount, 0, 'the reply added nothing');

  const genuine = await deliver(await signed('strict.example', brand.id, { inReplyTo: '<first@strict.example>' }));
  t.match(genuine, { action: 'comment_created' });
  const [comment] = (await owner.live('GET', `${base}/tickets/${first.ticketId}/comments`)).body;
  t.match(comment.metadata.email.authentication, { dkim: { result: 'pass' }, dmarc: { result: 'pass' } }, "the comment keeps its message's results");
});

t.test('p=quarantine makes spam too; p=none and no DMARC record only record the failure', async (t) => {
  const { owner, base, brand } = await ownerWithBrand(app);
  publishDomain('quarantine.example', 'quarantine');
  publishDomain('lenient.example', 'none');
  publishDomain('nopolicy.example');
  const quarantined = await deliver(altered(await signed('quarantine.example', brand.id)));
  t.match(quarantined, { action: 'spam', reason: 'dmarc_quarantine' });
  const lenient = await deliver(altered(await signed('lenient.example', brand.id)));
  t.match(lenient, { action: 'ticket_created' });
  t.match((await owner.live('GET', `${base}/tickets/${lenient.ticketId}`)).body.sourceData.authentication, { dkim: { result: 'fail' }, dmarc: { result: 'fail', policy: 'none' } });
  const unpublished = await deliver(altered(await signed('nopolicy.example', brand.id)));
  t.match(unpublished, { action: 'ticket_created' });
  const ticket = (await owner.live('GET', `${base}/tickets/${unpublished.ticketId}`)).body;
  t.equal(ticket.isSpam, false);
  t.match(ticket.sourceData.authentication, { dkim: { result: 'fail' }, dmarc: { result: 'none' } });
});

t.test('a message ARC-sealed by a forwarder: the chain verifies and its sealer is recorded', async (t) => {
  const { owner, base, brand } = await ownerWithBrand(app);
  publishDomain('arc-sender.example', 'reject');
  publishDomain('forwarder.example');
  const original = await signed('arc-sender.example', brand.id);
  // What a forwarding server does: check the message, seal its results, and pass it on.
  const resolver = mailAuthResolver([dns.address], { timeoutMs: 1_000, budgetMs: 3_000 });
  const seal = { signingDomain: 'forwarder.example', selector: SELECTOR, privateKey };
  const { headers } = await authenticate(Buffer.from(original, 'latin1'), { mta: 'mx.forwarder.example', resolver, seal, disableBimi: true });
  const res = await deliver(headers + original);
  t.match(res, { action: 'ticket_created' });
  const ticket = (await owner.live('GET', `${base}/tickets/${res.ticketId}`)).body;
  t.match(ticket.sourceData.authentication, { arc: { result: 'pass', domain: 'forwarder.example' }, dkim: { result: 'pass' }, dmarc: { result: 'pass' } });
});

t.test('DNS not answering: temperror, in bounded time, and the message is still taken in (not spam)', async (t) => {
  const { owner, base, brand } = await ownerWithBrand(app);
  publishDomain('outage.example', 'reject');
  const message = altered(await signed('outage.example', brand.id));
  dns.setSilent(true);
  t.teardown(() => dns.setSilent(false));
  const started = Date.now();
  const res = await deliver(message);
  t.ok(Date.now() - started < 8_000, `bounded: ${Date.now() - started} ms`);
  t.match(res, { action: 'ticket_created' });
  const ticket = (await owner.live('GET', `${base}/tickets/${res.ticketId}`)).body;
  t.equal(ticket.isSpam, false, 'a policy that could not be read rejects nothing');
  t.match(ticket.sourceData.authentication, { dkim: { result: 'temperror', domain: 'outage.example' }, dmarc: { result: 'temperror' } });
});

t.test("a member's reply speaks as the member only with a From shown to be theirs; a forged one is a stranger's mail", async (t) => {
  const { owner, base, brand } = await ownerWithBrand(app);
  publishDomain('client.example');
  publishDomain('team.example'); // a DKIM key and no DMARC record: the signature is what shows the From
  await members.add(tenantCtx(systemCtx(servicesOf(db)), owner.accountId, true), { email: 'ada@team.example', name: 'Ada', role: 'admin' });
  const asked = await deliver(await signed('client.example', brand.id, { messageId: '<ask@client.example>' }));
  t.match(asked, { action: 'ticket_created' });

  const genuine = await deliver(await signed('team.example', brand.id, { sender: 'Ada', inReplyTo: '<ask@client.example>', subject: 'Re: help' }));
  t.match(genuine, { action: 'comment_created', ticketId: asked.ticketId, reason: 'agent_reply' });
  const [comment] = (await owner.live('GET', `${base}/tickets/${asked.ticketId}/comments`)).body;
  t.match(comment, { authorType: 'AGENT', authorName: 'Ada' });

  const forged = [
    'From: Ada <ada@team.example>',
    `To: ${brand.id}@${DOMAIN}`,
    'Subject: Re: help',
    'Message-ID: <forged@team.example>',
    'In-Reply-To: <ask@client.example>',
    '',
    'Refund granted, send your card number.',
  ].join('\r\n');
  const res = await deliver(forged);
  t.match(res, { action: 'ticket_created' }, 'unsigned: not the member, not a participant: a ticket of its own');
  t.not(res.ticketId, asked.ticketId);
  t.equal((await owner.live('GET', `${base}/tickets/${asked.ticketId}`)).body.commentCount, 1, 'nothing added to the customer’s ticket');
});
