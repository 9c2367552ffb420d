import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { simpleParser } from 'mailparser';
import t from 'tap';
import { escapeHtml } from '../../server/core/text.js';
import { agentReply, autoresponse, mailSettings, portalLink, renderTemplate, watcherNotification, type BrandInfo, type TicketInfo } from '../../server/domains/mail/messages.js';
import { stripQuotedReply } from '../../server/domains/mail/quotes.js';
import { signReplyToken, verifyReplyToken } from '../../server/domains/mail/tokens.js';
import { fileTransport, sendMail } from '../../server/integrations/mail.js';

const key = randomBytes(32);
const settings = mailSettings({ mailFrom: 'notifications@mail.example', inboundDomain: 'inbound.example' });
const brand = {
  id: 'br_01jabcdefghjkmnpqrstvwxyz0',
  name: 'Acme <b>&</b> Co',
  ticketPrefix: 'ACME',
  fromName: null,
  fromEmail: null,
  autoresponseSubject: null,
  autoresponseBody: null,
  sendingDomain: null,
};
const ticket = { id: 'tkt_01jabcdefghjkmnpqrstvwxyz1', ticketNumber: 1042, title: 'Printer on fire' };
const thread = { inboundMessageIds: ['<first@customer.example>', '<latest@customer.example>'] };
const customer = { name: 'Jane', address: 'jane@customer.example' };
const comment = {
  id: 'cmt_01jabcdefghjkmnpqrstvwxyz2',
  body: 'Please unplug it.\n<script>x</script>',
  cc: ['boss@customer.example'],
  authorName: 'Sam',
  authorType: 'AGENT',
  isInternal: false,
};

t.test('reply tokens verify for their brand and ticket only', async (t) => {
  const token = signReplyToken(key, brand.id, ticket.id);
  t.match(token, /^[0-9a-z]{34}$/, 'lower-case, 34 characters');
  t.ok(`${brand.id}+${token}`.length <= 64, 'the local part fits in 64 characters');
  t.equal(verifyReplyToken(key, brand.id, token), ticket.id);
  t.equal(verifyReplyToken(key, brand.id, token.toUpperCase()), ticket.id, 'an MTA that upper-cases the local part does not break it');
  const last = token.at(-1) === '0' ? '1' : '0';
  t.equal(verifyReplyToken(key, brand.id, token.slice(0, -1) + last), null, 'a tampered MAC fails');
  const otherTicket = signReplyToken(key, brand.id, 'tkt_01jabcdefghjkmnpqrstvwxyz9').slice(0, 26) + token.slice(26);
  t.equal(verifyReplyToken(key, brand.id, otherTicket), null, 'another ticket with this MAC fails');
  t.equal(verifyReplyToken(key, 'br_01jabcdefghjkmnpqrstvwxyz9', token), null, 'another brand fails');
  t.equal(verifyReplyToken(randomBytes(32), brand.id, token), null, 'another key fails');
  t.equal(verifyReplyToken(key, brand.id, 'short'), null);
});

t.test('agent reply: stable Message-ID, threading, reply address, escaping', async (t) => {
  const a = agentReply({ settings, key, brand, ticket, thread, comment, customer });
  const b = agentReply({ settings, key, brand, ticket, thread, comment, customer });
  t.same(a, b, 'building twice gives the same message');
  t.equal(a.messageId, `<${comment.id}@mail.example>`);
  t.equal(a.inReplyTo, '<latest@customer.example>');
  t.same(a.references, ['<first@customer.example>', `<${ticket.id}@mail.example>`, '<latest@customer.example>']);
  t.same(a.to, [customer]);
  t.same(a.cc, [{ address: 'boss@customer.example' }]);
  t.same(a.from, { name: brand.name, address: 'notifications@mail.example' });
  t.equal(a.headers['X-Ticketd-Brand'], brand.id);
  t.notOk(a.headers['Auto-Submitted'], 'a person wrote it');
  const [local, domain] = a.replyTo!.split('@');
  t.equal(domain, 'inbound.example');
  t.equal(verifyReplyToken(key, brand.id, local!.split('+')[1]!), ticket.id, 'the Reply-To routes back to the ticket');
  t.equal(a.subject, 'Re: Printer on fire [ACME-1042]');
  t.equal(a.text, comment.body);
  t.match(a.html, '&lt;script&gt;x&lt;/script&gt;');
  t.notMatch(a.html, '<script>');
  t.same(JSON.parse(JSON.stringify(a)), a, 'a plain serialisable object');
});

t.test('a ticket without inbound mail threads on its own root id', async (t) => {
  const a = agentReply({ settings, key, brand, ticket, thread: { inboundMessageIds: [] }, comment, customer });
  t.equal(a.inReplyTo, `<${ticket.id}@mail.example>`);
  t.same(a.references, [`<${ticket.id}@mail.example>`]);
});

t.test('autoresponse: templates, escaping in HTML only, Auto-Submitted', async (t) => {
  const custom = {
    ...brand,
    fromEmail: 'help@acme.example',
    fromName: 'Acme Help',
    autoresponseSubject: 'We got it: #{{ticketNumber}} ({{ brandName }}) {{unknown}}',
    autoresponseBody: 'Thanks for writing to {{brandName}}.\nYour number: {{ticketNumber}}',
  };
  const m = autoresponse({ settings, key, brand: custom, ticket, thread, customer });
  t.equal(m.subject, 'We got it: #1042 (Acme <b>&</b> Co) {{unknown}}', 'values substituted; unknown placeholders kept');
  t.equal(m.text, 'Thanks for writing to Acme <b>&</b> Co.\nYour number: 1042', 'text carries the values as they are');
  t.match(m.html, 'Thanks for writing to Acme &lt;b&gt;&amp;&lt;/b&gt; Co.');
  t.notMatch(m.html, '<b>&</b>');
  t.equal(m.headers['Auto-Submitted'], 'auto-replied');
  t.equal(m.messageId, `<${ticket.id}.autoresponse@mail.example>`);
  t.same(m.from, { name: 'Acme Help', address: 'help@acme.example' });
  const defaults = autoresponse({ settings, key, brand, ticket, thread, customer });
  t.equal(defaults.subject, 'Re: Printer on fire [#1042]');
  t.match(defaults.text, 'Thank you for contacting Acme <b>&</b> Co.');
  t.equal(renderTemplate('{{a}}{{b}}', { a: '{{b}}', b: 'x' }), '{{b}}x', 'a value is not expanded again');
  t.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  const injected = autoresponse({ settings, key, brand: { ...brand, autoresponseSubject: 'Hi\r\nBcc: evil@example.com' }, ticket, thread, customer });
  t.equal(injected.subject, 'Hi Bcc: evil@example.com', 'a subject stays one header line');
});

t.test('watcher notification names the author and marks internal notes', async (t) => {
  const m = watcherNotification({ settings, key, brand, ticket, thread, comment: { ...comment, isInternal: true }, watchers: [{ name: 'Ann', address: 'ann@acme.example' }] });
  t.equal(m.messageId, `<${comment.id}.watchers@mail.example>`);
  t.not(m.messageId, agentReply({ settings, key, brand, ticket, thread, comment, customer }).messageId, 'distinct from the customer copy');
  t.match(m.text, /^Sam added an internal note on ACME-1042/);
  t.equal(m.headers['Auto-Submitted'], 'auto-generated');
  t.same(m.to, [{ name: 'Ann', address: 'ann@acme.example' }]);
});

t.test('a brand with a verified domain: brandDomain names the sender there; the default `from` stays for when the domain is gone', async (t) => {
  const sendingDomain = { id: 'dom_01jabcdefghjkmnpqrstvwxyz3', domain: 'acme.example', fromName: null, fromEmail: null, replyMode: 'SINGLE' as const };
  const own = { ...brand, sendingDomain };
  const written = { ...ticket, writtenTo: ['sales@acme.example', 'br_x@inbound.example'] };
  const fromOf = (b: BrandInfo, tk: TicketInfo = written) => agentReply({ settings, key, brand: b, ticket: tk, thread, comment, customer }).brandDomain;

  const reply = agentReply({ settings, key, brand: own, ticket: written, thread, comment, customer });
  t.same(reply.from, { name: brand.name, address: 'notifications@mail.example' }, 'the default sender, for a domain gone by send time');
  t.same(reply.brandDomain, { id: sendingDomain.id, domain: 'acme.example', from: { name: brand.name, address: 'support@acme.example' } }, 'support@<domain> by default');
  t.equal(reply.replyTo, agentReply({ settings, key, brand, ticket, thread, comment, customer }).replyTo, 'replies route as before');
  t.notOk(agentReply({ settings, key, brand, ticket, thread, comment, customer }).brandDomain, 'no domain: nothing to sign');

  t.same(
    fromOf({ ...own, fromName: 'Acme Help', fromEmail: 'help@acme.example' })?.from,
    { name: 'Acme Help', address: 'help@acme.example' },
    "the brand's fromEmail when at the domain",
  );
  t.equal(fromOf({ ...own, fromEmail: 'help@elsewhere.example' })?.from.address, 'support@acme.example', "the brand's fromEmail elsewhere is not used");
  const configured = { ...own, fromName: 'Acme Help', fromEmail: 'help@acme.example', sendingDomain: { ...sendingDomain, fromName: 'Desk', fromEmail: 'desk@acme.example' } };
  t.same(fromOf(configured)?.from, { name: 'Desk', address: 'desk@acme.example' }, "the domain's own settings first");
  t.equal(fromOf(configured)?.from.address, 'desk@acme.example', 'SINGLE ignores the address written to');

  const match = { ...configured, sendingDomain: { ...configured.sendingDomain, replyMode: 'MATCH' as const } };
  t.equal(fromOf(match)?.from.address, 'sales@acme.example', 'MATCH: the address at the domain the customer wrote to');
  t.equal(fromOf(match, { ...ticket, writtenTo: ['br_x@inbound.example', 'sales@other.example'] })?.from.address, 'desk@acme.example', 'none at the domain: as SINGLE');
  t.equal(fromOf(match, ticket)?.from.address, 'desk@acme.example', 'not an email ticket: as SINGLE');

  const link = portalLink(settings, { linkId: 'plk_01jabcdefghjkmnpqrstvwxyz4', brand: own, to: customer, url: 'https://portal.example/x', validMinutes: 15 });
  t.equal(link.brandDomain?.from.address, 'support@acme.example', "the brand's portal link goes from its domain too");
});

t.test('the file transport writes a parsable .eml named by the Message-ID', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-mail-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const lines: string[] = [];
  const transport = fileTransport(dir, (l) => lines.push(l));
  const message = agentReply({ settings, key, brand, ticket, thread, comment, customer });
  const sent = await sendMail(transport, message);
  await sendMail(transport, message);
  transport.close();
  t.equal(sent.transport, 'file');
  t.same(readdirSync(dir), [path.basename(sent.path!)], 'a retried send rewrites the same file');
  t.equal(lines.length, 2, 'one log line per message');
  const parsed = await simpleParser(readFileSync(sent.path!));
  t.equal(parsed.messageId, message.messageId);
  t.equal(parsed.inReplyTo, message.inReplyTo);
  t.same(parsed.references, message.references);
  t.equal(parsed.subject, message.subject);
  t.equal(parsed.from?.value[0]?.address, 'notifications@mail.example');
  t.equal(parsed.from?.value[0]?.name, brand.name);
  t.equal(parsed.replyTo?.value[0]?.address, message.replyTo);
  t.equal(parsed.headers.get('x-ticketd-brand'), brand.id);
  t.equal(parsed.text?.trim(), comment.body);
  t.match(String(parsed.html), '&lt;script&gt;');
});

t.test('quoted history and signatures are trimmed', async (t) => {
  const cases: [string, string, string][] = [
    ['Gmail attribution', 'New text.\n\nOn Mon, 3 Mar 2025 at 10:00, Support <s@x.example> wrote:\n> old\n> older', 'New text.'],
    ['attribution wrapped over two lines', 'New text.\n\nOn Mon, 3 Mar 2025 at 10:00, Acme Support <support@acme.example>\nwrote:\n> old', 'New text.'],
    ['Apple Mail attribution', 'Yes.\n\nOn 3 Mar 2025, at 10:00, Sam <s@x.example> wrote:\n\n> old', 'Yes.'],
    ['French attribution', 'Merci.\n\nLe lun. 3 mars 2025 à 10:00, Support <s@x.example> a écrit :\n> vieux', 'Merci.'],
    ['German attribution', 'Danke.\n\nAm 03.03.2025 um 10:00 schrieb Support <s@x.example>:\n> alt', 'Danke.'],
    ['Outlook original message', 'Fine.\n\n-----Original Message-----\nFrom: Support\nSent: Monday\nSubject: x\n\nold', 'Fine.'],
    [
      'Outlook header block after a rule',
      'Thanks!\n\n________________________________\nFrom: Acme <a@x.example>\nSent: Monday, March 3, 2025 11:30 AM\nTo: Jane\nSubject: Re: x\n\nold',
      'Thanks!',
    ],
    ['Outlook header block, bold', 'Ok.\n\n*From:* Acme <a@x.example>\n*Sent:* Monday\n*To:* Jane\n\nold', 'Ok.'],
    ['signature delimiter', 'See above.\n\n-- \nJane Doe\nCEO', 'See above.'],
    ['Sent from my iPhone', 'Will do\n\nSent from my iPhone\n\n> On Mon wrote', 'Will do'],
    ['trailing > block', 'Top answer.\n\n> quoted line 1\n> quoted line 2\n', 'Top answer.'],
    ['interleaved quotes keep the answers', '> question 1\nanswer 1\n> question 2\nanswer 2', '> question 1\nanswer 1\n> question 2\nanswer 2'],
    [
      'a forwarded message is content',
      'FYI\n\n---------- Forwarded message ---------\nFrom: Bob <b@x.example>\nDate: Mon\nSubject: x\n\nbody',
      'FYI\n\n---------- Forwarded message ---------\nFrom: Bob <b@x.example>\nDate: Mon\nSubject: x\n\nbody',
    ],
    ['nothing but a quote is kept whole', '> only quoted', '> only quoted'],
    ['CRLF line ends', 'Hi.\r\n\r\nOn Mon, Sam wrote:\r\n> x', 'Hi.'],
  ];
  for (const [name, input, expected] of cases) t.equal(stripQuotedReply(input), expected, name);
});
