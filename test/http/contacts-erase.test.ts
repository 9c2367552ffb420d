import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { personPattern } from '../../server/flows/personal-data.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { assertErrorShape, client, makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
import { bulkTickets } from '../helpers/bulk-tickets.js';
import { postInbound } from '../helpers/inbound.js';
import { receiver } from '../helpers/receiver.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';

// A data subject's requests: GET …/contacts/{id}/export and /v1/contacts/export?email=, POST
// …/contacts/{id}/erase and /v1/contacts/erase. One person, known to two brands of an account by
// the same email, is exported, then erased; afterwards no column of any table holds their email or
// name (the erasure's own audit entry holds neither), and their tickets are all still there.

const SECRET = 'inbound-secret-for-tests-0123456789';
const DOMAIN = 'inbound.test.example';
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-erase-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db } = await testApp(t, {
  ...SIGN_IN_TEST_ENV,
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: '10000',
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  TICKETD_DATA_DIR: dataDir,
  TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true',
});
const services = servicesOf(db);
const quietLog = { info: () => undefined, error: () => undefined };
const dispatcher = new Dispatcher(services, quietLog, null, { webhooks: { allowPrivate: true, timeoutMs: 5000 } });
t.teardown(() => dispatcher.stop());

const NAME = 'Zebediah Quillfeather';
let people = 0;
/** A person no other test names: their email, and the strings no table may hold after the erasure. */
function person() {
  const email = `zeb.quill-${++people}-${process.pid}@erasure.example`;
  return { email, name: NAME, traces: [email, NAME] };
}

/** A mail from the person to the brand, with a file attached; `inReplyTo` makes it a reply. */
function mailFrom(email: string, brandId: string, id: string, inReplyTo?: string) {
  return [
    `From: "${NAME}" <${email}>`,
    `To: ${brandId}@${DOMAIN}`,
    `Subject: A parcel for ${NAME}`,
    `Message-ID: <${id}@erasure.example>`,
    ...(inReplyTo ? [`In-Reply-To: <${inReplyTo}@erasure.example>`] : []),
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b1"',
    '',
    '--b1',
    'Content-Type: text/plain; charset=utf-8',
    '',
    `Hello, this is ${NAME}, write to ${email} or call me at home.`,
    '--b1',
    'Content-Type: text/plain; name="quillfeather-receipt.txt"',
    'Content-Disposition: attachment; filename="quillfeather-receipt.txt"',
    '',
    `Receipt for ${NAME}`,
    '--b1--',
    '',
  ].join('\r\n');
}

/** Every text, JSON, array, bytea and tsvector column of every table, as (table, column). */
async function scannableColumns(): Promise<{ table: string; column: string; type: string; hasAccount: boolean }[]> {
  const r = await db.raw(`
    select c.table_name as table, c.column_name as column, c.data_type as type,
      exists (select 1 from information_schema.columns a where a.table_schema = c.table_schema and a.table_name = c.table_name and a.column_name = 'account_id') as "hasAccount"
    from information_schema.columns c join information_schema.tables tb on tb.table_schema = c.table_schema and tb.table_name = c.table_name
    where c.table_schema = 'public' and tb.table_type = 'BASE TABLE'
      and (c.data_type in ('text', 'character varying', 'json', 'jsonb', 'ARRAY', 'bytea', 'tsvector'))
    order by 1, 2`);
  return r.rows;
}

/**
 * Where any of `traces` is still found, case-insensitively, outside the accounts in `besides`:
 * "table.column: a value found" for each. The erasure's audit entries are left out (they are checked on their own).
 */
async function tracesLeft(traces: string[], besides: string[]): Promise<string[]> {
  const found: string[] = [];
  for (const { table, column, type, hasAccount } of await scannableColumns()) {
    const text = type === 'bytea' ? `encode("${column}", 'escape')` : `"${column}"::text`;
    // A search vector holds words: the name's (and its email's, which the name's words stand for).
    if (table === 'tickets' && column === 'search_vector') {
      const hits = await db.raw(`select count(*)::int as n from tickets where search_vector @@ to_tsquery('simple', 'zebediah | quillfeather') and account_id <> all(?::text[])`, [
        besides,
      ]);
      if (hits.rows[0].n > 0) found.push(`${table}.${column}`);
      continue;
    }
    const own = hasAccount ? `and account_id <> all(?::text[])` : '';
    const skipErasure = table === 'audit_log' ? `and event <> 'contact.erased'` : '';
    // The first value found, to say where and what.
    const hit = await db.raw(`select ${text} as value from "${table}" where (${traces.map(() => `${text} ilike ?`).join(' or ')}) ${own} ${skipErasure} limit 1`, [
      ...traces.map((s) => `%${s}%`),
      ...(hasAccount ? [besides] : []),
    ]);
    if (hit.rows.length) found.push(`${table}.${column}: ${String(hit.rows[0].value).slice(0, 300)}`);
  }
  return found;
}

/** The person in two brands of one account, and a third brand in another account with the same email. */
async function world() {
  const team = await teamOf(app, services);
  const { owner, first, second } = team;
  const [base1, base2] = [`/v1/brands/${first.id}`, `/v1/brands/${second.id}`];
  const who = person();
  const hook = await receiver(t);
  await owner.live('PATCH', base1, { csatEnabled: true, csatType: 'scale5' });
  const wh = await mustCreate(owner.live, `${base1}/webhooks`, { url: `${hook.url}/in`, events: ['ticket.created', 'comment.created', 'contact.erased'] });

  // Brand 1: a ticket by the API with a reply from the team, a ticket by mail with a file and a reply by mail.
  const byApi = await makeTicket(owner.live, base1, { title: `Refund for ${NAME}`, body: `Customer ${who.email} asked`, customerEmail: who.email, customerName: NAME });
  await mustCreate(owner.live, `${base1}/tickets/${byApi.id}/comments`, { body: `Hello ${NAME}, we wrote to ${who.email.toUpperCase()}.` });
  const mailed = await postInbound(app, SECRET, mailFrom(who.email, first.id, `m1-${people}`));
  const replied = await postInbound(app, SECRET, mailFrom(who.email, first.id, `m2-${people}`, `m1-${people}`));
  if (mailed.action !== 'ticket_created' || replied.action !== 'comment_created') throw new Error(`mail: ${mailed.action}, ${replied.action}`);
  // The portal: a token, a reply, and a rating with a comment of a resolved ticket.
  const minted = await mustCreate(owner.live, `${base1}/portal/token`, { email: who.email, name: NAME });
  const portal = client(app, minted.token as string);
  t.equal((await portal('POST', `/v1/portal/tickets/${byApi.id}/comments`, { body: `It is me, ${NAME}` })).status, 201, 'a reply through the portal');
  t.equal((await owner.live('PATCH', `${base1}/tickets/${byApi.id}`, { status: 'resolved', assigneeId: team.owner.ownerId })).status, 200);
  t.equal((await portal('POST', `/v1/portal/tickets/${byApi.id}/feedback`, { rating: 5, comment: `Thanks from ${NAME}` })).status, 200, 'a rating');

  // Brand 2: a web form submission and a ticket by the API.
  const form = await mustCreate(owner.live, `${base2}/forms`, { name: 'Contact us' });
  const submitted = await app.inject({ method: 'POST', url: `/v1/forms/${form.token}`, payload: { email: who.email, name: NAME, subject: 'Form', message: `From ${NAME}` } });
  t.equal(submitted.statusCode, 200, 'a form submission');
  await makeTicket(owner.live, base2, { title: 'Another', customerEmail: who.email });

  // Another account knows the same person.
  const other = await signup(app);
  const otherBrand = await makeBrand(other.live, 'Elsewhere');
  const elsewhere = await makeTicket(other.live, `/v1/brands/${otherBrand.id}`, { title: `About ${NAME}`, customerEmail: who.email, customerName: NAME });

  t.match(await dispatcher.deliverDue(), { success: Number }, 'the webhooks so far are delivered (their bodies name the person)');
  return { ...team, base1, base2, who, hook, wh, byApi, mailed, minted, other, otherBrand, elsewhere };
}

const contactsOf = async (call: ReturnType<typeof client>, base: string, email: string) =>
  (await call('GET', `${base}/contacts?search=${encodeURIComponent(email)}&hideBlocked=false`)).body.data as { id: string; email: string; name: string | null }[];
const ticketTotal = async (call: ReturnType<typeof client>, base: string) => (await call('GET', `${base}/tickets?status=all&limit=100`)).body.data.length as number;

t.test('export, then erase across two brands: no trace of the email or name left, the tickets kept', async (t) => {
  const w = await world();
  const [c1] = await contactsOf(w.owner.live, w.base1, w.who.email);
  const [c2] = await contactsOf(w.owner.live, w.base2, w.who.email);
  t.ok(c1 && c2 && c1.id !== c2.id, 'one contact in each brand');
  const before = [await ticketTotal(w.owner.live, w.base1), await ticketTotal(w.owner.live, w.base2)];

  // The export: one document with both contacts and everything hanging on them.
  const exported = await app.inject({
    method: 'GET',
    url: `/v1/contacts/export?email=${encodeURIComponent(w.who.email.toUpperCase())}`,
    headers: { authorization: `Bearer ${w.owner.liveKey}` },
  });
  t.equal(exported.statusCode, 200);
  t.match(exported.headers['content-type'], /^application\/json/);
  const doc = JSON.parse(exported.body);
  t.same(new Set(doc.contacts.map((c: { contact: { id: string } }) => c.contact.id)), new Set([c1!.id, c2!.id]), 'both contacts');
  const part1 = doc.contacts.find((c: { contact: { id: string } }) => c.contact.id === c1!.id);
  const part2 = doc.contacts.find((c: { contact: { id: string } }) => c.contact.id === c2!.id);
  t.equal(part1.tickets.length, 2, 'brand 1: the API ticket and the mailed one');
  const mailedTicket = part1.tickets.find((tk: { id: string }) => tk.id === w.mailed.ticketId);
  t.match(mailedTicket.attachments, [{ filename: 'quillfeather-receipt.txt', downloadUrl: /\/v1\/files\// }], 'the attachment with a download link');
  t.equal(mailedTicket.rawMails.length, 2, 'raw mail metadata: the message and the reply');
  t.ok(
    mailedTicket.comments.some((c: { authorType: string }) => c.authorType === 'CUSTOMER'),
    'the reply by mail',
  );
  const apiTicket = part1.tickets.find((tk: { id: string }) => tk.id === w.byApi.id);
  t.ok(apiTicket.comments.length >= 2 && apiTicket.auditEntries.length > 0, 'comments both ways and the audit entries');
  t.match(part1.ratings, [{ rating: 5, comment: `Thanks from ${NAME}` }]);
  t.equal(part1.portalTokens.length, 1, 'the portal token');
  t.notOk(JSON.stringify(part1.portalTokens).includes('Hash') || JSON.stringify(part1.portalTokens).includes(w.minted.token), 'portal tokens without secrets or hashes');
  t.ok(part1.inboundEmails.length >= 2, 'the mail received from the address');
  t.ok(
    part2.tickets.some((tk: { source: string }) => tk.source === 'web'),
    'brand 2: the form submission',
  );
  const download = await app.inject({ method: 'GET', url: new URL(mailedTicket.attachments[0].downloadUrl).pathname });
  t.equal(download.statusCode, 200, 'the link downloads');

  // The brand's export of one contact, and what a member may not do.
  const one = await app.inject({ method: 'GET', url: `${w.base1}/contacts/${c1!.id}/export`, headers: { authorization: `Bearer ${w.owner.liveKey}` } });
  t.equal(JSON.parse(one.body).contacts.length, 1);
  assertErrorShape(t, await w.asMember('GET', `${w.base1}/contacts/${c1!.id}/export`), 403, 'insufficient_role');
  assertErrorShape(t, await w.asMember('POST', `${w.base1}/contacts/${c1!.id}/erase`, { confirm: true }), 403, 'insufficient_role');
  assertErrorShape(t, await w.asMember('POST', '/v1/contacts/erase', { email: w.who.email, confirm: true }), 403, 'insufficient_role');
  assertErrorShape(t, await w.asMember('GET', `/v1/contacts/export?email=${encodeURIComponent(w.who.email)}`), 403, 'insufficient_role');
  // Without confirm: nothing.
  assertErrorShape(t, await w.owner.live('POST', '/v1/contacts/erase', { email: w.who.email }), 400, 'validation_failed');
  assertErrorShape(t, await w.owner.live('POST', '/v1/contacts/erase', { email: w.who.email, confirm: false }), 400, 'validation_failed');
  assertErrorShape(t, await w.asAdmin('POST', `${w.base1}/contacts/${c1!.id}/erase`, {}), 400, 'validation_failed');
  t.equal((await contactsOf(w.owner.live, w.base1, w.who.email)).length, 1, 'still there');

  // The erasure, account-wide, by an admin.
  const erased = await w.asAdmin('POST', '/v1/contacts/erase', { email: w.who.email, confirm: true });
  t.equal(erased.status, 200, JSON.stringify(erased.body));
  t.equal(erased.body.contacts.length, 2);
  const e1 = erased.body.contacts.find((e: { contactId: string }) => e.contactId === c1!.id);
  t.match(e1, { brandId: w.first.id, tombstone: /^ers_/, erasedAt: /Z$/, counts: { tickets: 2, attachments: 2, rawMails: 2, ratings: 1, portalTokens: 1 } });
  t.ok(e1.counts.comments >= 2, 'the reply by mail and the one through the portal');

  const left = await tracesLeft(w.who.traces, [w.other.accountId]);
  t.same(left, [], 'no table holds the email or the name');

  t.same([await ticketTotal(w.owner.live, w.base1), await ticketTotal(w.owner.live, w.base2)], before, 'every ticket is still there');
  const kept = (await w.owner.live('GET', `${w.base1}/tickets/${w.byApi.id}`)).body;
  t.match(kept, { id: w.byApi.id, ticketNumber: w.byApi.ticketNumber, body: '[erased]', title: `Refund for ${e1.tombstone}` }, 'the ticket, its body redacted');
  t.match((await w.owner.live('GET', `${w.base1}/contacts/${c1!.id}`)).body, { email: `${e1.tombstone}@erased.invalid`, name: e1.tombstone });
  t.equal((await client(app, w.minted.token as string)('GET', '/v1/portal/tickets')).status, 401, 'the portal token no longer opens anything');
  const queued = await db('attachment_file_deletions').where({ account_id: w.owner.accountId }).select('attachment_id');
  t.ok(queued.length >= 3, 'the attachment and the raw mails are queued for removal from storage');

  // The erasure's audit entries: counts, no personal data.
  const entries = await db('audit_log').where({ account_id: w.owner.accountId, event: 'contact.erased' }).select('entity_id', 'metadata', 'changes', 'performer_name');
  t.equal(entries.length, 2);
  for (const s of w.who.traces) t.notOk(JSON.stringify(entries).toLowerCase().includes(s.toLowerCase()), `the audit entries hold no ${s}`);

  // The webhook: contact.erased, without personal data.
  await dispatcher.deliverDue();
  const erasedHooks = w.hook.received.filter((r) => JSON.parse(r.body).event === 'contact.erased');
  t.equal(erasedHooks.length, 1, "brand 1's webhook hears of brand 1's contact");
  t.match(JSON.parse(erasedHooks[0]!.body).data, { contactId: c1!.id, brandId: w.first.id, tombstone: e1.tombstone, counts: e1.counts, erasedAt: e1.erasedAt });
  t.ok(erasedHooks[0]!.headers['webhook-signature'], 'signed');
  for (const s of w.who.traces) t.notOk(erasedHooks[0]!.body.toLowerCase().includes(s.toLowerCase()), `it names no ${s}`);

  // Again: the same answer, nothing more.
  const again = await w.owner.live('POST', `${w.base1}/contacts/${c1!.id}/erase`, { confirm: true });
  t.equal(again.status, 200);
  t.same(again.body, e1, 'the first erasure, as it was');
  t.same((await w.owner.live('POST', '/v1/contacts/erase', { email: w.who.email, confirm: true })).body, { contacts: [] }, 'the email is known no more');
  t.equal((await db('audit_log').where({ account_id: w.owner.accountId, event: 'contact.erased' })).length, 2, 'no second entry');
  await dispatcher.deliverDue();
  t.equal(w.hook.received.filter((r) => JSON.parse(r.body).event === 'contact.erased').length, 1, 'no second webhook');

  // The other account's contact and ticket are untouched.
  const theirs = await contactsOf(w.other.live, `/v1/brands/${w.otherBrand.id}`, w.who.email);
  t.match(theirs, [{ email: w.who.email, name: NAME }], "another account's contact keeps the email and name");
  t.match((await w.other.live('GET', `/v1/brands/${w.otherBrand.id}/tickets/${w.elsewhere.id}`)).body, { title: `About ${NAME}` });
});

t.test("a brand's erasure: that contact alone; another account's and another brand's contacts are out of reach", async (t) => {
  const w = await world();
  const [c1] = await contactsOf(w.owner.live, w.base1, w.who.email);
  const [c2] = await contactsOf(w.owner.live, w.base2, w.who.email);
  const [theirs] = await contactsOf(w.other.live, `/v1/brands/${w.otherBrand.id}`, w.who.email);
  t.equal((await w.other.live('POST', `${w.base1}/contacts/${c1!.id}/erase`, { confirm: true })).status, 404, "another account's key: 404");
  t.equal((await w.owner.live('POST', `${w.base1}/contacts/${theirs!.id}/erase`, { confirm: true })).status, 404, "another account's contact: 404");
  t.equal((await w.owner.live('POST', `${w.base1}/contacts/${c2!.id}/erase`, { confirm: true })).status, 404, "another brand's contact: 404");
  t.equal((await w.owner.live('GET', `${w.base1}/contacts/${c2!.id}/export`)).status, 404);

  const res = await w.owner.live('POST', `${w.base1}/contacts/${c1!.id}/erase`, { confirm: true });
  t.equal(res.status, 200);
  t.match(await contactsOf(w.owner.live, w.base2, w.who.email), [{ id: c2!.id, name: NAME }], "the second brand's contact is kept");
});

t.test('an erasure racing a reply on the same ticket leaves no trace of the person', async (t) => {
  const w = await world();
  const [c1] = await contactsOf(w.owner.live, w.base1, w.who.email);
  const [erased, replied] = await Promise.all([
    w.owner.live('POST', `${w.base1}/contacts/${c1!.id}/erase`, { confirm: true }),
    w.owner.live('POST', `${w.base1}/tickets/${w.byApi.id}/comments`, { body: 'We are on it.' }),
  ]);
  t.equal(erased.status, 200);
  t.equal(replied.status, 201);
  // Brand 2's contact is still the person's; everything of brand 1 is clean.
  const left = await db.raw(`select count(*)::int as n from comments where account_id = ? and brand_id = ? and (body ilike ? or body ilike ? or author_name ilike ?)`, [
    w.owner.accountId,
    w.first.id,
    `%${w.who.email}%`,
    `%${NAME}%`,
    `%${NAME}%`,
  ]);
  t.equal(left.rows[0].n, 0);
});

t.test('a person with hundreds of tickets: the export pages through them all, the erasure redacts them all', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live, 'Busy');
  const base = `/v1/brands/${brand.id}`;
  const who = person();
  const contact = await mustCreate(owner.live, `${base}/contacts`, { email: who.email, name: NAME });
  const many = 250;
  // The contact's id is an SQL literal of its own characters (cus_ and base32).
  const { sql, bindings } = bulkTickets({ accountId: owner.accountId, livemode: true, brandId: brand.id }, many, {
    customer_id: `'${contact.id}'`,
    body: `'Written by ${NAME} ' || i`,
  });
  await db.raw(sql, bindings as never[]);

  const exported = await app.inject({ method: 'GET', url: `${base}/contacts/${contact.id}/export`, headers: { authorization: `Bearer ${owner.liveKey}` } });
  t.equal(exported.statusCode, 200);
  const tickets = JSON.parse(exported.body).contacts[0].tickets as { id: string; body: string }[];
  t.equal(tickets.length, many, 'every ticket, over three pages');
  t.equal(new Set(tickets.map((tk) => tk.id)).size, many, 'each once');

  const erased = await owner.live('POST', `${base}/contacts/${contact.id}/erase`, { confirm: true });
  t.equal(erased.status, 200);
  t.equal(erased.body.counts.tickets, many);
  const left = await db('tickets').where({ account_id: owner.accountId, customer_id: contact.id }).whereNot('body', '[erased]').count({ n: '*' });
  t.equal(Number(left[0]!.n), 0, 'every body redacted');
});

t.test("the person's pattern: their address and name, not a longer address, nor a name inside a word", async (t) => {
  const scrub = async (text: string, name: string | null) =>
    (await db.raw(`select regexp_replace(?, ?, 'T', 'gi') as out`, [text, personPattern({ email: 'zeb.quill@x.example', name })])).rows[0].out as string;
  t.equal(
    await scrub('Write to Zeb.Quill@X.example, not joZeb.quill@x.example nor zeb.quill@x.example.au.', null),
    'Write to T, not joZeb.quill@x.example nor zeb.quill@x.example.au.',
  );
  t.equal(await scrub('Al said: call Al, not Alice or Sal', 'Al'), 'T said: call T, not Alice or Sal');
  t.equal(await scrub('Thanks, Ann (Support) and ann (support).', 'Ann (Support)'), 'Thanks, T and T.');
  t.equal(await scrub('a+b? [c]', 'a+b? [c]'), 'T', 'what a regular expression would read is taken as it is');
});
