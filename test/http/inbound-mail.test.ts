import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { packageRoot } from '../../server/core/paths.js';
import { attachmentDeps } from '../../server/domains/attachments/service.js';
import type { Storage } from '../../server/core/ports.js';
import { storageFromConfig } from '../../server/integrations/storage-from-config.js';
import { assertErrorShape, client, makeBrand, makeTicket, ownerWithBrand, signup, statementOf, testApp, testConfig } from '../helpers/app.js';
import { testNow } from '../helpers/clock.js';

/** Inbound mail through POST /v1/inbound/email with the MIME fixtures of test/fixtures/mail. */

const SECRET = 'inbound-secret-for-tests-0123456789';
const DOMAIN = 'inbound.test.example';
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-inbound-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  TICKETD_INBOUND_MAX_BYTES: '65536',
  TICKETD_MAIL_FROM: 'notifications@mail.test.example',
  // order.txt in the multipart fixture fits, screen.png does not.
  TICKETD_ATTACHMENT_MAX_BYTES: '50',
  TICKETD_DATA_DIR: dataDir,
};
const { app, db, url, config } = await testApp(t, env);

/** A fixture with its placeholders filled; read and written as latin1 so 8-bit bytes pass unchanged. */
function fixture(name: string, vars: Record<string, string>, edit: (text: string) => string = (s) => s): Buffer {
  let text = readFileSync(path.join(packageRoot, 'test', 'fixtures', 'mail', name)).toString('latin1');
  for (const [key, value] of Object.entries({ DOMAIN, ...vars })) text = text.replaceAll(`{{${key}}}`, value);
  return Buffer.from(edit(text), 'latin1');
}

async function deliver(raw: Buffer | string, headers: Record<string, string> = {}, target = app) {
  const res = await target.inject({
    method: 'POST',
    url: '/v1/inbound/email',
    payload: raw,
    headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'message/rfc822', ...headers },
  });
  return { status: res.statusCode, body: JSON.parse(res.body), headers: res.headers };
}

async function mustDeliver(raw: Buffer) {
  const res = await deliver(raw);
  if (res.status !== 200) throw new Error(`delivery failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function queued(ticketId: string, kind?: string): Promise<{ kind: string; message: any; messageId: string }[]> {
  const q = db('mail_messages').where({ ticketId }).orderBy('id').select('kind', 'message', 'messageId');
  if (kind) q.where({ kind });
  return q;
}

t.test('a plain message creates an email ticket; its sender becomes a contact', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const res = await deliver(fixture('plain.eml', { BRAND: brand.id }));
  t.equal(res.status, 200);
  t.match(res.body, { action: 'ticket_created', brandId: brand.id, ticketId: /^tkt_/ });
  const ticket = (await owner.live('GET', `${base}/tickets/${res.body.ticketId}`)).body;
  t.match(ticket, {
    source: 'email',
    title: 'My printer is on fire',
    sourceId: '<plain-1@customer.example>',
    status: 'open',
    isSpam: false,
    customer: { email: 'jane@customer.example', name: 'Jane Customer' },
    sourceData: { from: 'jane@customer.example', to: [`${brand.id}@${DOMAIN}`], subject: '  My printer is on fire'.trim() },
  });
  t.match(ticket.body, /^Hello,\n\nmy printer started smoking this morning\. What should I do\?\n\nThanks,\nJane$/);
  const contacts = (await owner.live('GET', `${base}/contacts`)).body.data;
  t.same(
    contacts.map((c: { email: string }) => c.email),
    ['jane@customer.example'],
  );
  t.same(await queued(ticket.id), [], 'no autoresponse: the brand has not enabled it');
  const logs = await db('audit_log').where({ entityId: ticket.id, event: 'ticket.created' }).select('performerType', 'performerName', 'source');
  t.same(logs, [{ performerType: 'customer', performerName: 'Jane Customer <jane@customer.example>', source: 'email' }], 'the sender is the performer, by email');
});

t.test('an HTML-only message: the body is the text of the HTML', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  // As a delivery pipe may hand it over: after an mbox "From " line.
  const { ticketId } = await mustDeliver(fixture('html-only.eml', { BRAND: brand.id }, (s) => `From hans@customer.example Mon Mar  3 09:05:00 2025\n${s}`));
  const ticket = (await owner.live('GET', `${base}/tickets/${ticketId}`)).body;
  t.match(ticket.body, 'Hello team');
  t.match(ticket.body, 'the invoice & the receipt do not match.');
  t.notMatch(ticket.body, /<\/?[bp]>|color: red|alert/, 'no markup, style or script');
});

t.test("a new email ticket's files are written before its statement takes the brand row lock", async (t) => {
  const { brand } = await ownerWithBrand(app);
  const order: string[] = [];
  const disk = storageFromConfig(config);
  const storage: Storage = Object.assign(Object.create(disk) as Storage, {
    stage: (...args: Parameters<Storage['stage']>) => {
      order.push('file written');
      return disk.stage(...args);
    },
  });
  const traced = await buildApp({ clock: testNow, config, db, attachments: attachmentDeps(config, db, testNow, storage) });
  t.teardown(() => traced.close());
  const counter = (q: { sql: string; bindings?: unknown[] }) => {
    if (statementOf(q).includes('set next_ticket_number = b.next_ticket_number +')) order.push('brand row locked');
  };
  db.on('query', counter);
  try {
    const res = await deliver(fixture('multipart-attachments.eml', { BRAND: brand.id }), {}, traced);
    t.equal(res.body.action, 'ticket_created');
  } finally {
    db.removeListener('query', counter);
  }
  t.same(order, ['file written', 'file written', 'brand row locked'], 'the raw message and the one file that fits are staged first');
});

t.test('multipart with attachments: files stored on the ticket; oversized ones skipped and noted', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const { ticketId } = await mustDeliver(fixture('multipart-attachments.eml', { BRAND: brand.id }));
  const ticket = (await owner.live('GET', `${base}/tickets/${ticketId}`)).body;
  t.equal(ticket.body, 'See the attached order and screenshot.', 'the text part, not the HTML');
  t.equal(ticket.attachmentCount, 1);
  t.match(ticket.metadata, { email: { skippedAttachments: [{ filename: 'screen.png', size: 69 }] } });
  const list = (await owner.live('GET', `${base}/tickets/${ticketId}/attachments`)).body;
  t.match(list, [{ filename: 'order.txt', contentType: 'text/plain', size: 17, status: 'UPLOADED', commentId: null }]);
  const one = (await owner.live('GET', `${base}/tickets/${ticketId}/attachments/${list[0].id}`)).body;
  const file = await app.inject({ method: 'GET', url: new URL(one.downloadUrl).pathname });
  t.equal(file.body, 'order 1234\nqty 2\n', 'the bytes of the part');
});

t.test('ISO-8859-1 and windows-1252: encoded-word subject and name, 8-bit body', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const { ticketId } = await mustDeliver(fixture('latin1.eml', { BRAND: brand.id }));
  const ticket = (await owner.live('GET', `${base}/tickets/${ticketId}`)).body;
  t.equal(ticket.title, "Café crème à l'hôtel");
  t.equal(ticket.customer.name, 'Renée Müller');
  t.equal(ticket.body, "Bonjour, le café de l'hôtel était froid. Grüße, Renée");
});

t.test('a reply by In-Reply-To is a trimmed CUSTOMER comment and reopens a resolved ticket', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const first = await mustDeliver(fixture('plain.eml', { BRAND: brand.id }));
  await owner.live('PATCH', `${base}/tickets/${first.ticketId}`, { status: 'resolved' });
  const res = await mustDeliver(fixture('reply-in-reply-to.eml', { BRAND: brand.id }));
  t.match(res, { action: 'comment_created', ticketId: first.ticketId, commentId: /^cmt_/ });
  const comments = (await owner.live('GET', `${base}/tickets/${first.ticketId}/comments`)).body;
  t.equal(comments.length, 1);
  t.match(comments[0], { id: res.commentId, authorType: 'CUSTOMER', authorName: 'Jane Customer', source: 'email', sourceId: '<reply-1@customer.example>', isInternal: false });
  t.equal(comments[0].body, 'The fire is out now, but it smells.', 'attribution, quote and signature trimmed');
  t.match(comments[0].metadata.email.originalText, 'Please unplug it', 'the full text is kept');
  const ticket = (await owner.live('GET', `${base}/tickets/${first.ticketId}`)).body;
  t.equal(ticket.status, 'open', 'reopened');
  t.equal(ticket.commentCount, 1);
});

t.test('agent replies are queued with a Reply-To token; replies to it thread without threading headers', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const { ticketId } = await mustDeliver(fixture('plain.eml', { BRAND: brand.id }));
  const reply = (await owner.live('POST', `${base}/tickets/${ticketId}/comments`, { body: 'Please unplug it.', cc: ['Boss@Customer.example'] })).body;
  await owner.live('POST', `${base}/tickets/${ticketId}/comments`, { body: 'internal only', metadata: { isInternal: true } });
  await owner.live('POST', `${base}/tickets/${ticketId}/comments`, { body: 'from the customer', authorType: 'CUSTOMER' });
  const sent = await queued(ticketId);
  t.equal(sent.length, 1, 'one message: the public agent comment (no watchers)');
  const mail = sent[0]!.message;
  t.match(mail, {
    kind: 'agent_reply',
    messageId: `<${reply.id}@mail.test.example>`,
    inReplyTo: '<plain-1@customer.example>',
    to: [{ address: 'jane@customer.example', name: 'Jane Customer' }],
    cc: [{ address: 'boss@customer.example' }],
    from: { address: 'notifications@mail.test.example' },
    headers: { 'X-Ticketd-Brand': brand.id },
  });
  t.equal(sent[0]!.messageId, mail.messageId);
  const token = new RegExp(`^${brand.id}\\+([0-9a-z]{34})@${DOMAIN.replaceAll('.', '\\.')}$`).exec(mail.replyTo)?.[1];
  t.ok(token, 'Reply-To is <brandId>+<token>@<inbound domain>');

  const byToken = await mustDeliver(fixture('reply-token.eml', { BRAND: brand.id, TOKEN: token! }));
  t.match(byToken, { action: 'comment_created', ticketId });
  const comment = (await owner.live('GET', `${base}/comments/${byToken.commentId}`)).body;
  t.equal(comment.body, 'Thanks, that worked.', 'Outlook header block trimmed');

  const byOurMessageId = await mustDeliver(fixture('reply-in-reply-to.eml', { BRAND: brand.id }, (s) => s.replaceAll('<plain-1@customer.example>', mail.messageId)));
  t.match(byOurMessageId, { action: 'comment_created', ticketId }, 'In-Reply-To naming the agent reply we sent');

  const tampered = token!.slice(0, 33) + (token!.endsWith('0') ? '1' : '0');
  const forged = await mustDeliver(fixture('reply-token.eml', { BRAND: brand.id, TOKEN: tampered }, (s) => s.replace('<reply-2@', '<reply-3@')));
  t.equal(forged.action, 'ticket_created', 'a tampered token does not reach the ticket');
  t.not(forged.ticketId, ticketId);
});

t.test('watchers get a notification of a customer reply', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const { ticketId } = await mustDeliver(fixture('plain.eml', { BRAND: brand.id }));
  const member = (await owner.live('GET', '/v1/accounts/me/members')).body.data[0];
  await owner.live('POST', `${base}/tickets/${ticketId}/watchers`, { memberId: member.id });
  const { commentId } = await mustDeliver(fixture('reply-in-reply-to.eml', { BRAND: brand.id }));
  const notes = await queued(ticketId, 'watcher_notification');
  t.equal(notes.length, 1);
  t.match(notes[0]!.message, { messageId: `<${commentId}.watchers@mail.test.example>`, to: [{ address: member.email }], headers: { 'Auto-Submitted': 'auto-generated' } });
  t.same(await queued(ticketId, 'agent_reply'), [], 'a customer comment is not mailed to the customer');
});

t.test('autoresponse when the brand enables it; never to auto-replies, lists or spam', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  await owner.live('PATCH', `${base}`, { autoresponseEnabled: true, autoresponseSubject: 'Ticket #{{ticketNumber}} at {{brandName}}' });
  const plain = await mustDeliver(fixture('plain.eml', { BRAND: brand.id }));
  const [auto] = await queued(plain.ticketId, 'autoresponse');
  const ticket = (await owner.live('GET', `${base}/tickets/${plain.ticketId}`)).body;
  t.match(auto?.message, {
    subject: `Ticket #${ticket.ticketNumber} at Acme Support`,
    to: [{ address: 'jane@customer.example' }],
    headers: { 'Auto-Submitted': 'auto-replied', 'X-Ticketd-Brand': brand.id },
    inReplyTo: '<plain-1@customer.example>',
  });
  t.match(auto?.message.replyTo, new RegExp(`^${brand.id}\\+`));

  const ooo = await mustDeliver(fixture('auto-reply.eml', { BRAND: brand.id }));
  t.equal(ooo.action, 'ticket_created', 'an auto-reply from a customer is kept as a ticket');
  t.same(await queued(ooo.ticketId), [], 'but not answered');
  t.match((await owner.live('GET', `${base}/tickets/${ooo.ticketId}`)).body.metadata, { email: { autoReply: true } });

  const list = await mustDeliver(fixture('bulk-list.eml', { BRAND: brand.id }));
  t.equal(list.action, 'ticket_created');
  t.same(await queued(list.ticketId), [], 'list mail is not answered');

  await owner.live('POST', `${base}/blocked-sources`, { value: 'blocked.example' });
  const spam = await mustDeliver(fixture('plain.eml', { BRAND: brand.id }, (s) => s.replace(/customer\.example/gi, 'blocked.example')));
  t.equal(spam.action, 'spam');
  t.same(await queued(spam.ticketId), [], 'spam is not answered');
});

t.test('our own messages are ignored: no ticket, no answer', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const res = await mustDeliver(fixture('own-message.eml', { BRAND: brand.id }));
  t.same(res, { action: 'ignored', brandId: brand.id, reason: 'own_message' });
  const fromOnly = await mustDeliver(
    fixture('own-message.eml', { BRAND: brand.id }, (s) =>
      s
        .replace(/X-Ticketd-Brand: .*\r\n/, '')
        .replace('<cmt_', '<other_')
        .replace('@ticketd.localhost>', '@mail.test.example>'),
    ),
  );
  t.equal(fromOnly.reason, 'own_message', 'From our sending address alone is enough');
  t.same((await owner.live('GET', `${base}/tickets`)).body.data, []);
});

t.test('a blocked sender makes a spam ticket; a reply from one adds nothing', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const first = await mustDeliver(fixture('plain.eml', { BRAND: brand.id }));
  await owner.live('POST', `${base}/blocked-sources`, { value: 'customer.example' });
  const reply = await mustDeliver(fixture('reply-in-reply-to.eml', { BRAND: brand.id }));
  t.same(reply, { action: 'spam', brandId: brand.id, ticketId: first.ticketId, reason: 'blocked_sender' });
  t.equal((await owner.live('GET', `${base}/tickets/${first.ticketId}`)).body.commentCount, 0);
  const fresh = await mustDeliver(fixture('html-only.eml', { BRAND: brand.id }));
  t.match(fresh, { action: 'spam', reason: 'blocked_sender' });
  t.equal((await owner.live('GET', `${base}/tickets/${fresh.ticketId}`)).body.isSpam, true);
  t.same(
    (await owner.live('GET', `${base}/tickets`)).body.data.map((x: { id: string }) => x.id),
    [first.ticketId],
    'the default list leaves spam out',
  );
});

t.test('the same Message-ID delivered twice (even at once) creates one ticket', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const raw = fixture('multipart-attachments.eml', { BRAND: brand.id });
  const results = await Promise.all([deliver(raw), deliver(raw), deliver(raw)]);
  t.same(
    results.map((r) => r.status),
    [200, 200, 200],
  );
  const ids = new Set(results.map((r) => r.body.ticketId));
  t.equal(ids.size, 1, 'every answer names the one ticket');
  t.equal(results.filter((r) => r.body.duplicate).length, 2, 'two are answered as duplicates');
  t.equal((await owner.live('GET', `${base}/tickets`)).body.data.length, 1);
  t.equal((await owner.live('GET', `${base}/tickets/${[...ids][0]}/attachments`)).body.length, 1, 'and one set of attachments');
  // From the ticket's customer: only participants add to a ticket (decision 0074).
  const reply = fixture('reply-in-reply-to.eml', { BRAND: brand.id }, (s) =>
    s.replaceAll('<plain-1@customer.example>', '<multi-1@customer.example>').replace('<jane@customer.example>', '<mia@customer.example>'),
  );
  await mustDeliver(reply);
  t.match(await mustDeliver(reply), { action: 'comment_created', duplicate: true });
  t.equal((await owner.live('GET', `${base}/tickets/${[...ids][0]}`)).body.commentCount, 1, 'one comment');

  const other = await makeBrand(owner.live, 'Other brand');
  t.equal((await mustDeliver(fixture('multipart-attachments.eml', { BRAND: other.id }))).action, 'ticket_created', 'another brand is another mailbox');
});

t.test('the brand comes from the recipient; its mode and account from the brand', async (t) => {
  const owner = await signup(app);
  const testBrand = await makeBrand(owner.test, 'Sandbox');
  const res = await mustDeliver(fixture('plain.eml', { BRAND: `ws_${testBrand.id.slice(3)}` }));
  t.equal(res.brandId, testBrand.id, 'the ws_ spelling of the id works');
  t.equal((await owner.test('GET', `/v1/brands/${testBrand.id}/tickets/${res.ticketId}`)).status, 200, 'a test-mode ticket');
  t.equal((await owner.live('GET', `/v1/brands/${testBrand.id}/tickets/${res.ticketId}`)).status, 404, 'invisible to live keys');

  const unknown = await deliver(fixture('plain.eml', { BRAND: 'br_0000000000abcdefghjkmnpqrs' }));
  assertErrorShape(t, unknown, 404, 'unknown_recipient');
  const otherDomain = await deliver(fixture('plain.eml', { BRAND: testBrand.id, DOMAIN: 'elsewhere.example' }));
  assertErrorShape(t, otherDomain, 404, 'unknown_recipient');
});

t.test('bad input: not MIME, no From, too large, wrong content type', async (t) => {
  const { brand } = await ownerWithBrand(app);
  assertErrorShape(t, await deliver(fixture('garbage.eml', {})), 400, 'invalid_message');
  assertErrorShape(t, await deliver(''), 400, 'invalid_message');
  const noFrom = await deliver(fixture('no-from.eml', { BRAND: brand.id }));
  assertErrorShape(t, noFrom, 400, 'missing_from');
  const badFrom = await deliver(fixture('plain.eml', { BRAND: brand.id }, (s) => s.replace('<Jane@Customer.example>', '<not-an-address>')));
  t.equal(badFrom.status, 400, 'a From that is no address');
  const huge = fixture('plain.eml', { BRAND: brand.id }, (s) => `${s}${'x'.repeat(70_000)}\r\n`);
  assertErrorShape(t, await deliver(huge), 413, 'payload_too_large');
  assertErrorShape(t, await deliver('{"a":1}', { 'content-type': 'application/json' }), 415, 'unsupported_media_type');
});

t.test('the inbound secret: missing or wrong is 401; none configured turns the route off (404)', async (t) => {
  const { brand } = await ownerWithBrand(app);
  const raw = fixture('plain.eml', { BRAND: brand.id });
  assertErrorShape(t, await deliver(raw, { authorization: '' }), 401, 'missing_credentials');
  assertErrorShape(t, await deliver(raw, { authorization: `Bearer ${SECRET}x` }), 401, 'invalid_inbound_secret');
  assertErrorShape(t, await deliver(raw, { authorization: 'Bearer sk_live_not_the_secret' }), 401, 'invalid_inbound_secret');
  const huge = Buffer.concat([raw, Buffer.alloc(70_000, 'x')]);
  t.equal((await deliver(huge, { authorization: 'Bearer wrong' })).status, 401, 'the secret is checked before the body is read');

  const { TICKETD_INBOUND_SECRET: _omitted, ...withoutSecret } = env;
  const off = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url, ...withoutSecret }), db });
  t.teardown(() => off.close());
  assertErrorShape(t, await deliver(raw, {}, off), 404, 'inbound_disabled');
  t.equal((await client(off)('GET', '/v1/health')).status, 200);
});

t.test('a deleted ticket is not replied to: the reply starts a new ticket', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const first = await mustDeliver(fixture('plain.eml', { BRAND: brand.id }));
  await owner.live('DELETE', `${base}/tickets/${first.ticketId}`);
  const reply = await mustDeliver(fixture('reply-in-reply-to.eml', { BRAND: brand.id }));
  t.equal(reply.action, 'ticket_created');
  t.not(reply.ticketId, first.ticketId);
  const made = await makeTicket(owner.live, base, { title: 'by API', customerEmail: 'api@customer.example' });
  t.equal(made.source, 'api', 'API tickets are untouched');
});
