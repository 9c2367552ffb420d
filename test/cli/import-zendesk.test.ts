import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { ImportReport } from '../../server/flows/import-run.js';
import { signup, testApp, type Reply } from '../helpers/app.js';
import { runCli, runCliKilledWhen, jsonLines } from '../helpers/cli.js';
import { testNow } from '../helpers/clock.js';
import { attachment, startFakeZendesk, type Json } from '../helpers/fake-zendesk.js';

// `ticketd import zendesk` of the real bin/ticketd against a fake Zendesk (test/helpers/fake-zendesk.ts,
// written from Zendesk's API reference) on loopback, into an account of a ticketd database, compared
// through the target's API: every ticket, comment and file (its bytes' checksum), and the ratings.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-import-zendesk-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const target = await testApp(t, { TICKETD_DATA_DIR: dataDir });
const zd = await startFakeZendesk(t);
// The same person is an admin of the Zendesk account and the owner of the ticketd account.
const into = await signup(target.app, 'agent@example.com');
const env = { DATABASE_URL: target.url, TICKETD_DATA_DIR: dataDir, TICKETD_ZENDESK_TOKEN: zd.token };
const importArgs = (...more: string[]) => [
  'import',
  'zendesk',
  '--subdomain',
  'acme',
  '--base-url',
  zd.url,
  '--email',
  zd.email,
  '--account',
  into.accountId,
  '--keep-numbers',
  '--json',
  ...more,
];

// The Zendesk account, a month before the test's day.
const start = Math.floor(testNow() / 60_000) * 60_000 - 30 * 86_400_000;
const at = (minutes: number) => new Date(start + minutes * 60_000).toISOString().replace('.000Z', 'Z');
zd.brands.push({ id: 1001, name: 'Acme Support', subdomain: 'acme', default: true, active: true, created_at: at(0), updated_at: at(0) });
const user = (id: number, name: string, email: string | null, role: string, more: Record<string, unknown> = {}) =>
  zd.users.push({ id, name, email, role, organization_id: null, created_at: at(1), updated_at: at(1), ...more });
user(501, 'Agent Smith', 'agent@example.com', 'admin');
user(502, 'Gone Agent', 'gone@example.com', 'agent');
user(601, 'Jane Roe', 'jane@globex.example', 'end-user', { organization_id: 701 });
user(602, 'Bob Stone', 'bob@example.net', 'end-user');
user(603, 'Phone Only', null, 'end-user');
for (let i = 4; i <= 8; i++) user(600 + i, `Customer ${i}`, `customer${i}@example.org`, 'end-user');
zd.organizations.push({ id: 701, name: 'Globex', domain_names: ['globex.example'], created_at: at(1), updated_at: at(1) });
zd.groups.push({ id: 801, name: 'Tier 1', created_at: at(1), updated_at: at(1) }, { id: 802, name: 'Billing', created_at: at(1), updated_at: at(1) });
zd.ticketFields.push(
  { id: 9001, type: 'subject', title: 'Subject', removable: false, position: 0 },
  {
    id: 9002,
    type: 'tagger',
    title: 'Plan tier',
    removable: true,
    position: 1,
    custom_field_options: [
      { id: 1, name: 'Gold', value: 'plan_gold' },
      { id: 2, name: 'Silver', value: 'plan_silver' },
    ],
  },
  { id: 9003, type: 'integer', title: 'Order number', removable: true, position: 2 },
  { id: 9004, type: 'checkbox', title: 'VIP', removable: true, position: 3 },
  { id: 9005, type: 'lookup', title: 'Linked account', removable: true, position: 4 },
);

let commentId = 5000;
let attachmentId = 2000;
const files = new Map<number, Buffer>();
function file(name: string, type: string, bytes: Buffer): Json {
  files.set(++attachmentId, bytes);
  return attachment(zd, attachmentId, name, type, bytes);
}
const comment = (ticketId: number, authorId: number, body: string, minute: number, more: Record<string, unknown> = {}) => {
  const list = zd.comments.get(ticketId) ?? [];
  list.push({ id: ++commentId, type: 'Comment', author_id: authorId, body, public: true, attachments: [], via: { channel: 'web' }, created_at: at(minute), ...more });
  zd.comments.set(ticketId, list);
};
const ticket = (id: number, subject: string, status: string, requester: number, minute: number, more: Record<string, unknown> = {}) => {
  zd.tickets.push({
    id,
    subject,
    raw_subject: subject,
    status,
    priority: 'normal',
    type: 'question',
    requester_id: requester,
    submitter_id: requester,
    assignee_id: null,
    group_id: null,
    brand_id: 1001,
    tags: [],
    custom_fields: [],
    via: { channel: 'email' },
    created_at: at(minute),
    updated_at: at(minute + 30),
    ...more,
  });
  comment(id, requester, `${subject}: the details.`, minute, { via: { channel: 'email' } });
};

ticket(101, 'Invoice is wrong', 'open', 601, 100, {
  priority: 'high',
  assignee_id: 501,
  group_id: 802,
  tags: ['billing', 'vip', 'plan_gold'],
  custom_fields: [
    { id: 9002, value: 'plan_gold' },
    { id: 9003, value: '42' },
    { id: 9004, value: true },
    { id: 9005, value: null },
  ],
});
zd.comments.get(101)![0]!.attachments = [file('invoice.pdf', 'application/pdf', Buffer.from('%PDF-1.4 the invoice\n'))];
comment(101, 501, 'Which invoice number?', 105);
comment(101, 501, 'Checked with finance.', 106, { public: false });
comment(101, 601, 'INV-2031', 110, { attachments: [file('scan.png', 'image/png', Buffer.alloc(200_000, 7))] });
ticket(102, 'Password reset', 'solved', 602, 200, { assignee_id: 501 });
comment(102, 501, 'Done.', 210);
ticket(103, 'Waiting for parts', 'hold', 601, 300, { assignee_id: 502, group_id: 801 });
ticket(104, 'Old question', 'closed', 602, 400, { priority: 'low' });
ticket(105, 'Spam we deleted', 'deleted', 602, 500);
ticket(106, 'Brand new', 'new', 604, 600, { priority: null });
zd.ratings.push(
  { id: 3001, ticket_id: 102, assignee_id: 501, group_id: 801, requester_id: 602, score: 'good', comment: 'Quick!', created_at: at(240), updated_at: at(245) },
  { id: 3002, ticket_id: 104, assignee_id: null, group_id: null, requester_id: 602, score: 'bad', comment: null, created_at: at(440), updated_at: at(441) },
  { id: 3003, ticket_id: 106, assignee_id: null, group_id: null, requester_id: 604, score: 'offered', comment: null, created_at: at(640), updated_at: at(640) },
);
/** What the target's customFields should say of each ticket (the Zendesk side is above). */
const fieldsOf: Record<number, Record<string, unknown> | null> = { 101: { group: 'Billing', plan_tier: 'Gold', order_number: 42, vip: true }, 103: { group: 'Tier 1' } };

const STATUS: Record<string, string> = { new: 'open', open: 'open', pending: 'pending', hold: 'on_hold', solved: 'resolved', closed: 'closed' };
const iso = (s: unknown) => new Date(String(s)).toISOString();
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const userOf = (id: unknown) => zd.users.find((u) => u.id === id);

/** The Zendesk account as the target should show it. */
function expected() {
  return zd.tickets
    .filter((x) => x.status !== 'deleted')
    .sort((a, b) => Date.parse(String(a.created_at)) - Date.parse(String(b.created_at)))
    .map((x) => {
      const [first, ...rest] = zd.comments.get(x.id)!;
      const requester = userOf(x.requester_id)!;
      return {
        ticketNumber: x.id,
        title: x.subject,
        body: first!.body,
        status: STATUS[String(x.status)],
        priority: x.priority,
        assigned: x.assignee_id === 501,
        customer: { email: requester.email, name: requester.name, company: requester.organization_id ? 'Globex' : null },
        tags: [...(x.tags as string[])].sort(),
        customFields: fieldsOf[x.id] ?? null,
        commentCount: rest.length,
        createdAt: iso(x.created_at),
        updatedAt: iso(x.updated_at),
        comments: rest.map((c) => ({
          body: c.body,
          byOwner: c.author_id === 501,
          authorName: userOf(c.author_id)!.name,
          authorType: userOf(c.author_id)!.role === 'end-user' ? 'CUSTOMER' : 'AGENT',
          isInternal: c.public === false,
          createdAt: iso(c.created_at),
        })),
        files: [first!, ...rest]
          .flatMap((c) => c.attachments as Json[])
          .map((a) => ({ filename: a.file_name, contentType: a.content_type, size: a.size, sha256: sha256(files.get(a.id)!) }))
          .sort((a, b) => String(a.filename).localeCompare(String(b.filename))),
      };
    });
}

type Shown = Reply['body'];
async function brandBase(call = into.live): Promise<string> {
  const acme = ((await call('GET', '/v1/brands')).body as Shown[]).find((b) => b.slug === 'acme');
  return `/v1/brands/${acme.id}`;
}

/** What the target's API shows of the imported brand's tickets. */
async function actual(call = into.live) {
  const base = await brandBase(call);
  const tickets = (await call('GET', `${base}/tickets?status=all&sort=createdAt&order=asc&limit=100`)).body.data as Shown[];
  const out = [];
  for (const x of tickets) {
    const comments = ((await call('GET', `${base}/tickets/${x.id}/comments`)).body as Shown[]).flatMap((c) => [c, ...(c.replies as Shown[])]);
    const attached = (await call('GET', `${base}/tickets/${x.id}/attachments`)).body as Shown[];
    out.push({
      ticketNumber: x.ticketNumber,
      title: x.title,
      body: x.body,
      status: x.status,
      priority: x.priority,
      assigned: x.assigneeId === into.ownerId,
      customer: x.customer && { email: x.customer.email, name: x.customer.name, company: x.customer.company?.name ?? null },
      tags: x.tags.map((g: { name: string }) => g.name).sort(),
      customFields: x.customFields,
      commentCount: x.commentCount,
      createdAt: x.createdAt,
      updatedAt: x.updatedAt,
      comments: comments.map((c) => ({
        body: c.body,
        byOwner: c.authorId === into.ownerId,
        authorName: c.authorName,
        authorType: c.authorType,
        isInternal: c.isInternal,
        createdAt: c.createdAt,
      })),
      files: attached
        .map((a) => ({ filename: a.filename, contentType: a.contentType, size: a.size, sha256: a.sha256 }))
        .sort((a, b) => String(a.filename).localeCompare(String(b.filename))),
    });
  }
  return out;
}

interface Line {
  kind?: string;
  outcome?: string;
  retry?: { reason: string; waitMs: number };
  note?: string;
  report?: ImportReport;
}
const linesOf = (stdout: string) => jsonLines<Line>(stdout);
const reportOf = (stdout: string): ImportReport => linesOf(stdout).pop()!.report!;
const count = async (sql: string, params: unknown[] = []) => Number((await target.db.raw(sql, params as string[])).rows[0].n);

t.test('a full import through a Zendesk that rate-limits and fails a download once: everything alike', async (t) => {
  zd.failures.push({ match: /^\/api\/v2\/incremental\/tickets\/cursor\.json/, status: 429, headers: { 'retry-after': '1' } }, { match: /^\/files\/tok2002$/, status: 500 });
  zd.spendBudgetOnce();
  const run = await runCli(importArgs(), env);
  t.equal(run.code, 0, run.stderr);
  t.ok(
    zd.failures.every((f) => f.served),
    'the 429 and the 500 were answered',
  );
  const lines = linesOf(run.stdout);
  const retries = lines.filter((l) => l.retry).map((l) => l.retry!.reason);
  t.match(retries, [/slow down/, /rate limited \(429\)/, /answered 500/], 'the spent budget, the 429 and the failed download were waited out (a line each)');
  const report = lines.pop()!.report!;
  t.match(report.counts, {
    brand: { created: 1 },
    status: { created: 1 },
    field: { created: 4, skipped: 1 },
    company: { created: 1 },
    contact: { created: 7, skipped: 1 },
    tag: { created: 3 },
    ticket: { created: 5, skipped: 1 },
    comment: { created: 4 },
    attachment: { created: 2, skipped: 0 },
    rating: { created: 2 },
  });
  t.match(
    report.skipped.filter((s) => s.kind === 'ticket'),
    [{ sourceId: '105', reason: 'deleted in Zendesk' }],
    'the deleted ticket is reported',
  );
  t.match(report.skipped.find((s) => s.kind === 'field')?.reason, /lookup field has no counterpart/);
  t.ok(
    lines.some((l) => l.note?.includes('assignee 502 is no member')),
    'an agent who is no member is noted',
  );
  t.same(report.renumbered, [], "--keep-numbers: Zendesk's ids are the numbers");
  t.same(await actual(), expected(), 'every ticket, comment and file alike: times, authors, public/internal, numbers, fields, tags, bytes');
  t.ok(
    zd.requests.filter((r) => r.path.startsWith('/files/')).every((r) => !r.authorized),
    'the token did not follow the redirect to the file host',
  );

  const base = await brandBase();
  const onHold = ((await into.live('GET', `${base}/statuses`)).body as Shown[]).find((s) => s.key === 'on_hold');
  t.match(onHold, { name: 'On hold', isSystem: false }, 'hold became a status of its own');
  const plan = ((await into.live('GET', `${base}/fields/ticket`)).body as Shown[]).find((f) => f.key === 'plan_tier');
  t.match(plan, { label: 'Plan tier', type: 'select', options: ['Gold', 'Silver'] }, "a tagger field's options by name");
  const { rows: ratings } = await target.db.raw(
    `select t.ticket_number, f.status, f.rating_type, f.rating, f.comment, f.resolver_id, f.submitted_at from ticket_feedback f join tickets t on t.account_id = f.account_id and t.id = f.ticket_id
    where f.account_id = ? order by t.ticket_number`,
    [into.accountId],
  );
  t.same(
    ratings.map((r: Record<string, unknown>) => [r.ticket_number, r.status, r.rating_type, r.rating, r.comment, r.resolver_id, (r.submitted_at as Date).toISOString()]),
    [
      [102, 'rated', 'thumbs', 1, 'Quick!', into.ownerId, iso(at(245))],
      [104, 'rated', 'thumbs', -1, null, null, iso(at(441))],
    ],
    'ratings given: good and bad, credited to the member, at their times; the one only offered is not',
  );
  t.equal(await count('select count(*) as n from outbox where account_id = ?', [into.accountId]), 0, 'no webhook delivery or mail queued');
  t.ok(await count(`select count(*) as n from audit_log where account_id = ? and source = 'import' and event = 'ticket.rated'`, [into.accountId]), 'audited with source import');
});

t.test('a second run creates nothing new', async (t) => {
  const run = await runCli(importArgs(), env);
  t.equal(run.code, 0, run.stderr);
  const report = reportOf(run.stdout);
  for (const [kind, c] of Object.entries(report.counts)) {
    t.equal(c.created, 0, `${kind}: none created`);
    t.equal(c.updated, 0, `${kind}: none updated`);
  }
  t.match(report.counts.ticket, { unchanged: 5, skipped: 1 });
  t.same(await actual(), expected(), 'still alike');
});

t.test('--dry-run counts a new ticket and writes nothing', async (t) => {
  ticket(107, 'Arrived later', 'open', 605, 700);
  const runsBefore = await count('select count(*) as n from import_runs where account_id = ?', [into.accountId]);
  const run = await runCli(
    importArgs('--dry-run').filter((a) => a !== '--json'),
    env,
  );
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^Dry run \(nothing written\): import from .*zendesk:acme:\n(.*\n)* {2}ticket +1 created, 0 updated, 5 unchanged, 1 skipped\n/);
  t.equal((await actual()).length, 5, 'the ticket was not written');
  t.equal(await count('select count(*) as n from import_runs where account_id = ?', [into.accountId]), runsBefore, 'no run recorded');
});

t.test('--since reads the export from then: a changed ticket and a new one', async (t) => {
  const changed = zd.tickets.find((x) => x.id === 102)!;
  Object.assign(changed, { status: 'open', subject: 'Password reset (again)', updated_at: at(800) });
  comment(102, 602, 'It happened again.', 790);
  zd.tickets.find((x) => x.id === 107)!.updated_at = at(801);
  const run = await runCli(importArgs('--since', iso(at(800))), env);
  t.equal(run.code, 0, run.stderr);
  const report = reportOf(run.stdout);
  t.match(report.counts.ticket, { created: 1, updated: 1 });
  t.equal(report.counts.ticket!.unchanged, 0, 'tickets not changed since were not read');
  t.match(report.counts.comment, { created: 1 });
  t.same(await actual(), expected(), 'alike again');
});

t.test('--map: hold taken as pending and a field under the target key, the rest not created (unmapped skip), into test data', async (t) => {
  const mapFile = path.join(dataDir, 'map.json');
  writeFileSync(mapFile, JSON.stringify({ statuses: { hold: 'pending' }, fields: { 'ticket.plan_tier': 'tier' }, unmapped: 'skip' }));
  const run = await runCli([...importArgs('--mode', 'test', '--map', mapFile)], env);
  t.equal(run.code, 0, run.stderr);
  const report = reportOf(run.stdout);
  t.same(report.mapped, [
    { kind: 'status', from: 'hold', to: 'pending' },
    { kind: 'field', from: 'ticket.plan_tier', to: 'ticket.tier' },
  ]);
  const base = await brandBase(into.test);
  t.notOk(
    ((await into.test('GET', `${base}/statuses`)).body as Shown[]).some((s) => s.key === 'on_hold'),
    'on_hold was not created',
  );
  t.same((await into.test('GET', `${base}/fields/ticket`)).body, [], 'nor any field');
  const shown = await actual(into.test);
  t.match(
    shown.find((x) => x.ticketNumber === 103),
    { status: 'pending', customFields: null },
  );
  t.match(
    shown.find((x) => x.ticketNumber === 101),
    { customFields: { tier: 'Gold' } },
  );
});

t.test('killed midway, run again: goes on from its cursor, every ticket once', async (t) => {
  for (let i = 0; i < 40; i++) ticket(1000 + i, `Bulk ${i}`, 'open', 606 + (i % 3), 1000 + i);
  const lines = await runCliKilledWhen<Line>(importArgs(), env, (seen) => seen.filter((l) => l.kind === 'ticket' && l.outcome === 'created').length >= 15);
  const before = lines.filter((l) => l.kind === 'ticket' && l.outcome === 'created').length;
  t.ok(before >= 15 && before < 40, `killed after ${before} tickets`);
  t.notOk(
    lines.some((l) => l.report),
    'it did not finish',
  );
  const again = await runCli(importArgs(), env);
  t.equal(again.code, 0, again.stderr);
  const report = reportOf(again.stdout);
  t.equal(report.resumed, true, 'the run goes on from its saved export cursor');
  const read = linesOf(again.stdout).filter((l) => l.kind === 'ticket').length;
  t.ok(read < zd.tickets.length, `the pages done before the kill were not read again (${read} of ${zd.tickets.length} tickets read)`);
  t.same(await actual(), expected(), 'every ticket once, alike');
  t.equal(await count(`select count(*) as n from tickets where account_id = ? and title like 'Bulk %'`, [into.accountId]), 40, 'no duplicate');
});

t.test('a wrong token: exit 1, naming the 401', async (t) => {
  const refused = await runCli(importArgs(), { ...env, TICKETD_ZENDESK_TOKEN: 'wrong' });
  t.equal(refused.code, 1);
  t.match(refused.json(), { error: { code: 'failed', message: /answered 401/ } });
});
