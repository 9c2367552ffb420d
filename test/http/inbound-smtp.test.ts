import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import t from 'tap';
import { startServer } from '../../server/main.js';
import { testConfig } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';
import { dnsServer } from '../helpers/dns.js';

/**
 * The SMTP listener of `ticketd start --smtp-port`: the real server (startServer) on an empty
 * database, whose first start creates a brand; mail goes in through nodemailer's SMTP client.
 */

const DOMAIN = 'mx.test.example';
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-smtp-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { url } = await freshDatabase(t);
// SPF and DMARC records are published here (the SPF test); other senders' lookups find nothing.
const dns = await dnsServer(t);
const config = testConfig({
  DATABASE_URL: url,
  PORT: '0',
  TICKETD_SMTP_PORT: '0',
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  TICKETD_INBOUND_MAX_BYTES: '20000',
  TICKETD_DATA_DIR: dataDir,
  TICKETD_DNS_SERVERS: dns.address,
});
const running = await startServer(config, 'api');
let stopped = false;
t.teardown(async () => {
  if (!stopped) await running.stop();
});
const brandId = running.bootstrap!.brand!.id;
const key = running.bootstrap!.apiKeys.live.key;
const smtp = nodemailer.createTransport({ host: '127.0.0.1', port: running.smtpPort!, secure: false, ignoreTLS: true });
t.teardown(() => smtp.close());

/** The SMTP reply code a send was refused with, or null when it was accepted. */
const refusal = (sending: Promise<unknown>) =>
  sending.then(
    () => null,
    (err: { responseCode?: number; code?: string }) => err.responseCode ?? err.code ?? 'error',
  );

async function tickets(): Promise<{ id: string; title: string; source: string; customer: { email: string } }[]> {
  const res = await fetch(`${running.baseUrl}/v1/brands/${brandId}/tickets`, { headers: { authorization: `Bearer ${key}` } });
  return ((await res.json()) as { data: [] }).data;
}

t.test('a message delivered by SMTP becomes a ticket', async (t) => {
  t.ok(running.smtpPort, 'the listener runs on a port of its own');
  const info = await smtp.sendMail({
    from: 'Sam Sender <sam@customer.example>',
    to: `${brandId}@${DOMAIN}`,
    subject: 'Sent by SMTP',
    text: 'Hello over SMTP',
    messageId: '<smtp-1@customer.example>',
  });
  t.same(info.rejected, []);
  t.match(info.response, /^250/);
  const [ticket] = await tickets();
  t.match(ticket, { title: 'Sent by SMTP', source: 'email', customer: { email: 'sam@customer.example' } });
});

t.test('the envelope names the brand even when the headers do not (Bcc, forwarding)', async (t) => {
  await smtp.sendMail({
    envelope: { from: 'sam@customer.example', to: [`${brandId}@${DOMAIN}`] },
    from: 'sam@customer.example',
    to: 'someone@customer.example',
    subject: 'Blind copy',
    text: 'Bcc to support',
  });
  t.ok((await tickets()).some((x) => x.title === 'Blind copy'));
});

t.test('refused: other domains (no relaying), unknown brands, oversized and non-MIME messages', async (t) => {
  t.equal(await refusal(smtp.sendMail({ from: 'sam@customer.example', to: 'victim@elsewhere.example', subject: 'relay?', text: 'x' })), 550, 'no relaying');
  t.equal(
    await refusal(smtp.sendMail({ from: 'sam@customer.example', to: `br_0000000000abcdefghjkmnpqrs@${DOMAIN}`, subject: 'who?', text: 'x' })),
    550,
    'unknown brand: permanent',
  );
  t.equal(await refusal(smtp.sendMail({ from: 'sam@customer.example', to: `${brandId}@${DOMAIN}`, subject: 'big', text: 'x'.repeat(30_000) })), 552, 'too large');
  t.equal(await refusal(smtp.sendMail({ envelope: { from: 'sam@customer.example', to: [`${brandId}@${DOMAIN}`] }, raw: 'not a message at all\r\n' })), 550, 'not MIME: permanent');
  t.equal((await tickets()).length, 2, 'nothing was created');
});

t.test("any address at a brand's verified INBOUND domain reaches that brand; before it is verified, the domain is refused like any other", async (t) => {
  const call = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(`${running.baseUrl}${url}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body ?? {}),
    });
    return { status: res.status, body: (await res.json()) as { id: string; verified: boolean } };
  };
  const name = 'help.customer-owned.example';
  const domain = await call('POST', `/v1/brands/${brandId}/domains`, { domain: name, type: 'INBOUND' });
  t.equal(domain.status, 201);
  const early = { from: 'sam@customer.example', to: `support@${name}`, subject: 'Too soon', text: 'x' };
  t.equal(await refusal(smtp.sendMail(early)), 550, 'not verified yet: refused at RCPT, no relaying');

  dns.publish(name, { type: 'MX', value: `${DOMAIN}.`, priority: 10 });
  dns.publish(`_ticketd.${name}`, { type: 'TXT', value: `ticketd-domain=${domain.body.id}` });
  t.same((await call('POST', `/v1/brands/${brandId}/domains/${domain.body.id}/verify`)).body, { verified: true });
  const info = await smtp.sendMail({ from: 'Sam <sam@customer.example>', to: `Support <support@${name}>`, subject: 'Through our own domain', text: 'hello' });
  t.match(info.response, /^250/);
  t.match(
    (await tickets()).find((x) => x.title === 'Through our own domain'),
    { source: 'email', customer: { email: 'sam@customer.example' } },
  );
  t.notOk(
    (await tickets()).some((x) => x.title === 'Too soon'),
    'the refused message made nothing',
  );
});

t.test("SPF checks the SMTP client's address against the envelope sender's record; failing DMARC with p=reject is spam", async (t) => {
  dns.publish('allowed.example', { type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 -all' });
  dns.publish('_dmarc.allowed.example', { type: 'TXT', value: 'v=DMARC1; p=reject' });
  dns.publish('denied.example', { type: 'TXT', value: 'v=spf1 ip4:192.0.2.1 -all' });
  dns.publish('_dmarc.denied.example', { type: 'TXT', value: 'v=DMARC1; p=reject' });
  const ticketOf = async (subject: string, spam: boolean) => {
    const res = await fetch(`${running.baseUrl}/v1/brands/${brandId}/tickets?isSpam=${spam}`, { headers: { authorization: `Bearer ${key}` } });
    const found = ((await res.json()) as { data: { id: string; title: string }[] }).data.find((x) => x.title === subject);
    if (!found) return null;
    return (await (await fetch(`${running.baseUrl}/v1/brands/${brandId}/tickets/${found.id}`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
      isSpam: boolean;
      sourceData: { authentication: object };
    };
  };

  await smtp.sendMail({ from: 'sam@allowed.example', to: `${brandId}@${DOMAIN}`, subject: 'From an allowed address', text: 'x' });
  const allowed = await ticketOf('From an allowed address', false);
  t.match(allowed, {
    isSpam: false,
    sourceData: { authentication: { spf: { result: 'pass', domain: 'allowed.example' }, dmarc: { result: 'pass', domain: 'allowed.example' }, dkim: { result: 'none' } } },
  });

  await smtp.sendMail({ from: 'sam@denied.example', to: `${brandId}@${DOMAIN}`, subject: 'From a denied address', text: 'x' });
  t.equal(await ticketOf('From a denied address', false), null, 'not among the tickets');
  t.match(await ticketOf('From a denied address', true), {
    isSpam: true,
    sourceData: { authentication: { spf: { result: 'fail', domain: 'denied.example' }, dmarc: { result: 'fail', policy: 'reject' } } },
  });
});

t.test('stop closes the listener', async (t) => {
  stopped = true;
  await running.stop();
  t.match(await refusal(smtp.sendMail({ from: 'sam@customer.example', to: `${brandId}@${DOMAIN}`, subject: 'late', text: 'x' })), /ECONNREFUSED|ESOCKET|ECONNECTION/);
});
