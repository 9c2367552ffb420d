import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { ImportReport } from '../../server/flows/import-run.js';
import { client, makeTicket, mustCreate, signup, testApp, type Reply, type Signup } from '../helpers/app.js';
import { runCli, runCliKilledWhen, jsonLines } from '../helpers/cli.js';
import { EICAR, EICAR_SIGNATURE, noClamd, startClamd } from '../helpers/clamd.js';

// `ticketd import dispatch` of the real bin/ticketd: a source ticketd (this file's own app, on its
// own database, listening on a loopback port behind a proxy that can fail) populated through its
// API, imported into an account of a second ticketd's database, and compared through the target's
// API: every ticket, comment and attachment (its bytes' checksum) alike.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-import-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const allowPrivate = { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' };
const source = await testApp(t, { ...allowPrivate, TICKETD_DATA_DIR: mkdtempSync(path.join(dataDir, 'source-')) });
const target = await testApp(t, { ...allowPrivate, TICKETD_DATA_DIR: dataDir });
const listen = async (app: typeof source.app) => {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
};
const sourceUrl = await listen(source.app);
const targetUrl = await listen(target.app);

/**
 * A loopback proxy to the source that answers the next request matching a rule with a failure
 * (a status, or the source's answer cut after some lines), once each; it notes the paths asked.
 */
const failures: { match: RegExp; status?: number; cutAfterLines?: number; headers?: Record<string, string>; served?: boolean }[] = [];
const proxied: string[] = [];
const proxy = http.createServer((req, res) => {
  proxied.push(req.url!);
  const failure = failures.find((f) => !f.served && f.match.test(req.url!));
  if (failure) failure.served = true;
  if (failure?.status) {
    res.writeHead(failure.status, { 'content-type': 'application/json', ...failure.headers });
    res.end(JSON.stringify({ statusCode: failure.status, error: 'Failure', message: 'try again', code: 'failure' }));
    return;
  }
  const forward = http.request(`${sourceUrl}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
    res.writeHead(answer.statusCode!, answer.headers);
    if (!failure?.cutAfterLines) return void answer.pipe(res);
    // Those lines and a part of the next; the connection goes a moment later (the lines read first).
    let lines = 0;
    answer.on('data', (chunk: Buffer) => {
      if (lines >= failure.cutAfterLines!) return;
      for (let i = 0; i < chunk.length; i++) {
        if (chunk[i] !== 10 || ++lines < failure.cutAfterLines!) continue;
        res.write(chunk.subarray(0, i + 10));
        setTimeout(() => (answer.destroy(), res.destroy()), 300);
        return;
      }
      res.write(chunk);
    });
  });
  req.pipe(forward);
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => proxy.close(() => resolve())));
const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;

// The same person owns both accounts: assignees and watchers are matched by email.
const from: Signup = await signup(source.app, 'agent@example.com');
const into: Signup = await signup(target.app, 'agent@example.com');
const env = { DATABASE_URL: target.url, TICKETD_DATA_DIR: dataDir, ...allowPrivate };
const importArgs = (...more: string[]) => ['import', 'dispatch', '--from-url', proxyUrl, '--account', into.accountId, '--keep-numbers', '--json', ...more];
const importEnv = { ...env, TICKETD_IMPORT_API_KEY: from.liveKey };

// The source: a brand with settings, a custom status, a field, a category, a company, a contact,
// tickets with comments (public, internal, the customer's, a reply), files, a watcher, spam, a webhook.
const brand = await mustCreate(from.live, '/v1/brands', { name: 'Acme', slug: 'acme', ticketPrefix: 'ACM', csatEnabled: true, settings: { theme: 'dark' } });
const base = `/v1/brands/${brand.id}`;
await mustCreate(from.live, `${base}/statuses`, { key: 'waiting_on_vendor', name: 'Waiting on vendor', color: '#123456' });
await mustCreate(from.live, `${base}/fields/ticket`, { key: 'plan', label: 'Plan', type: 'text' });
const billing = await mustCreate(from.live, `${base}/categories`, { name: 'Billing', color: '#ff0000' });
await mustCreate(from.live, `${base}/companies`, { name: 'Globex', domain: 'globex.example' });
await mustCreate(from.live, `${base}/contacts`, { email: 'jane@globex.example', name: 'Jane Roe' });
await mustCreate(from.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] });

// Merged into a ticket created after it: imported before the ticket it went into.
const dup = await makeTicket(from.live, base, { title: 'Same problem again', customerEmail: 'jane@globex.example' });
const first = await makeTicket(from.live, base, {
  title: 'Invoice is wrong',
  body: 'The March invoice counts twice.',
  customerEmail: 'jane@globex.example',
  assigneeId: from.ownerId,
  categoryId: billing.id,
  tags: ['vip', 'invoices'],
  customFields: { plan: 'gold' },
  status: 'waiting_on_vendor',
  priority: 'high',
  metadata: { channel: 'phone' },
});
const merged = await from.live('POST', `${base}/tickets/${first.id}/merge`, { sourceTicketIds: [dup.id] });
if (merged.status !== 200) throw new Error(`merge: ${merged.status} ${JSON.stringify(merged.body)}`);
const comment = (ticketId: string, body: Record<string, unknown>) => mustCreate(from.live, `${base}/tickets/${ticketId}/comments`, body);
const asked = await comment(first.id, { body: 'Which invoice number?', authorId: from.ownerId, authorName: 'Agent Smith' });
await comment(first.id, { body: 'Checked with finance.', metadata: { isInternal: true }, authorName: 'Agent Smith' });
await comment(first.id, { body: 'INV-2031', authorType: 'CUSTOMER', authorName: 'Jane Roe', parentId: asked.id });
await mustCreate(from.live, `${base}/tickets/${first.id}/watchers`, { memberId: from.ownerId, notifyOnComment: false });
const second = await makeTicket(from.live, base, { title: 'Password reset', customerEmail: 'bob@example.net', status: 'resolved' });
await comment(second.id, { body: 'Done.', authorType: 'AGENT' });
const spam = await makeTicket(from.live, base, { title: 'Cheap watches' });
await from.live('POST', `${base}/tickets/${spam.id}/spam`, { isSpam: true });

async function upload(ticketId: string, filename: string, bytes: Buffer): Promise<void> {
  const form = new FormData();
  form.append('file', new Blob([bytes], { type: 'application/pdf' }), filename);
  const res = await fetch(`${sourceUrl}${base}/tickets/${ticketId}/attachments/upload`, { method: 'POST', headers: { authorization: `Bearer ${from.liveKey}` }, body: form });
  if (res.status !== 201) throw new Error(`upload: ${res.status} ${await res.text()}`);
}
await upload(first.id, 'invoice.pdf', Buffer.from('%PDF-1.4 the invoice\n'));
await upload(first.id, 'scan.pdf', Buffer.alloc(300_000, 7));
await upload(second.id, 'log.txt', Buffer.from('reset at 10:02\n'));

// The target already has the brand (by its slug) with an enabled webhook: imported changes must not reach it.
const targetBrand = await mustCreate(into.live, '/v1/brands', { name: 'Acme (old)', slug: 'acme' });
await mustCreate(into.live, `/v1/brands/${targetBrand.id}/webhooks`, {
  url: 'http://127.0.0.1:9/target-hook',
  events: ['ticket.created', 'ticket.updated', 'comment.created', 'attachment.created'],
});
const tbase = `/v1/brands/${targetBrand.id}`;
// And a contact of one of the source's emails: taken as that contact, not made again.
const janeBefore = await mustCreate(into.live, `${tbase}/contacts`, { email: 'Jane@Globex.example', name: 'J. (old)' });

/** An object as the API shows it. */
type Shown = Reply['body'];
/** A line `import --json` prints: an object's outcome, a retry, or the report. */
interface Line {
  kind?: string;
  outcome?: string;
  retry?: unknown;
  report?: ImportReport;
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Everything the interface shows of a brand's tickets, ids replaced by what they name; files by their bytes' checksum. */
async function snapshot(call: ReturnType<typeof client>, baseUrl: string, origin: string, key: string, ownerId: string) {
  const listed = async (spamOnly: boolean) => (await call('GET', `${baseUrl}/tickets?status=all&sort=createdAt&order=asc&limit=100&isSpam=${spamOnly}`)).body.data as Shown[];
  const tickets = [...(await listed(false)), ...(await listed(true))];
  const out = [];
  for (const t of tickets) {
    const comments = ((await call('GET', `${baseUrl}/tickets/${t.id}/comments`)).body as Shown[]).flatMap((c) => [c, ...(c.replies as Shown[])]);
    const bodyOf = new Map(comments.map((c) => [c.id, c.body]));
    const files = [];
    for (const a of (await call('GET', `${baseUrl}/tickets/${t.id}/attachments`)).body as Shown[]) {
      const one = (await call('GET', `${baseUrl}/tickets/${t.id}/attachments/${a.id}`)).body;
      const res = await fetch(new URL(new URL(one.downloadUrl).pathname + new URL(one.downloadUrl).search, origin), { headers: { authorization: `Bearer ${key}` } });
      const bytes = Buffer.from(await res.arrayBuffer());
      files.push({ filename: a.filename, contentType: a.contentType, size: a.size, sha256: a.sha256, bytes: sha256(bytes), uploadedBy: a.uploadedBy, createdAt: a.createdAt });
    }
    const watchers = ((await call('GET', `${baseUrl}/tickets/${t.id}/watchers`)).body as Shown[]).map((w) => ({ email: w.memberEmail, notifyOnComment: w.notifyOnComment }));
    out.push({
      ticketNumber: t.ticketNumber,
      mergedInto: t.mergedIntoId ? tickets.find((x) => x.id === t.mergedIntoId)?.title : null,
      title: t.title,
      body: t.body,
      status: t.status,
      statusName: t.statusRef?.name,
      priority: t.priority,
      assigned: t.assigneeId === ownerId,
      customer: t.customer && { email: t.customer.email, name: t.customer.name, company: t.customer.company?.name ?? null },
      category: t.category?.name ?? null,
      tags: t.tags.map((g: { name: string }) => g.name).sort(),
      customFields: t.customFields,
      metadata: t.metadata,
      source: t.source,
      isSpam: t.isSpam,
      commentCount: t.commentCount,
      attachmentCount: t.attachmentCount,
      createdAt: t.createdAt,
      updatedAt: t.updatedAt,
      comments: comments.map((c) => ({
        body: c.body,
        author: c.authorId === ownerId ? 'owner' : c.authorId,
        authorName: c.authorName,
        authorType: c.authorType,
        isInternal: c.isInternal,
        parent: c.parentId ? bodyOf.get(c.parentId) : null,
        metadata: c.metadata,
        createdAt: c.createdAt,
        updatedAt: c.updatedAt,
      })),
      files,
      watchers,
    });
  }
  return out;
}
const sourceSnapshot = () => snapshot(from.live, base, sourceUrl, from.liveKey, from.ownerId);
const targetSnapshot = () => snapshot(into.live, tbase, targetUrl, into.liveKey, into.ownerId);

const linesOf = (stdout: string) => jsonLines<Line>(stdout);
const reportOf = (stdout: string): ImportReport => linesOf(stdout).pop()!.report!;
/** The ids of the source brand's tickets (spam and deleted ones left out), in the export's order. */
const sourceTicketsInOrder = async () =>
  ((await from.live('GET', `${base}/tickets?status=all&sort=createdAt&order=asc&limit=100`)).body.data as Shown[]).map((x) => x.id as string).sort();
const count = async (sql: string, params: string[] = []) => Number((await target.db.raw(sql, params)).rows[0].n);

t.test('a full import through a source that rate-limits once, fails once and cuts its export once: nothing the interface shows is lost', async (t) => {
  failures.push(
    { match: /^\/v1\/brands(\?|$)/, status: 429, headers: { 'retry-after': '1' } },
    { match: /\/tickets\/export\?/, status: 503 },
    { match: /\/tickets\/export\?/, cutAfterLines: 3 },
  );
  proxied.length = 0;
  // Pages of 2: the export is cut within the second page.
  const run = await runCli(importArgs('--page-size', '2'), importEnv);
  t.equal(run.code, 0, run.stderr);
  t.ok(
    failures.every((f) => f.served),
    'the 429, the 503 and the cut were answered',
  );
  const lines = linesOf(run.stdout);
  t.equal(lines.filter((l) => l.retry).length, 3, 'each was tried again (a line says so)');
  const exports = proxied.filter((p) => p.startsWith(`${base}/tickets/export?`)).map((p) => new URL(p, proxyUrl).searchParams);
  t.same(
    exports.map((q) => [q.get('isSpam'), q.get('after')]),
    [
      ['false', null],
      ['false', null],
      ['false', (await sourceTicketsInOrder())[1]],
      ['true', null],
    ],
    'the tickets read through the export with their comments and watchers, taken up after the last page written when cut, then the spam',
  );
  t.notOk(
    proxied.some((p) => /\/(comments|watchers)(\?|$)/.test(p)),
    'no request for comments or watchers: they came with the tickets',
  );
  const report = lines.pop()!.report!;
  t.match(report.counts, {
    brand: { created: 1 },
    status: { created: 5 },
    field: { created: 1 },
    category: { created: 1 },
    tag: { created: 2 },
    company: { created: 1 },
    ticket: { created: 4, skipped: 0 },
    comment: { created: 6 },
    merge: { created: 1 },
    attachment: { created: 3, skipped: 0 },
    watcher: { created: 1 },
    webhook: { created: 1 },
  });
  t.match(report.notes.join(' '), /created disabled/, 'the report says the webhooks were created disabled');
  t.same(report.renumbered, [], '--keep-numbers: every number was free');

  const shown = await sourceSnapshot();
  t.match(
    [shown.length, shown.flatMap((x) => x.comments).length, shown.flatMap((x) => x.files).length, shown.flatMap((x) => x.watchers).length],
    [4, 6, 3, 1],
    'the comparison covers every ticket, comment, file and watcher',
  );
  t.equal(shown.find((x) => x.title === 'Same problem again')?.mergedInto, 'Invoice is wrong', 'and a merge');
  t.same(await targetSnapshot(), shown, 'every ticket, comment and attachment alike: times, authors, internal flags, numbers, bytes');
  const b = (await into.live('GET', tbase)).body;
  t.match(b, { name: 'Acme', ticketPrefix: 'ACM', csatEnabled: true, settings: { theme: 'dark' } }, "the brand took the source's settings");
  t.equal(b.nextTicketNumber, (await from.live('GET', base)).body.nextTicketNumber, "--keep-numbers: the next number is the source's");
  const hooks = (await into.live('GET', `${tbase}/webhooks`)).body as { url: string; enabled: boolean }[];
  t.match(
    hooks.find((h) => h.url.endsWith('/hook')),
    { enabled: false },
    'the imported webhook is disabled',
  );

  const search = await into.live('GET', `${tbase}/tickets?search=invoice&status=all`);
  t.equal(search.body.data.length, 1, 'imported tickets are found by search');
  t.match(
    (await into.live('GET', `${tbase}/contacts?search=globex`)).body.data,
    [{ id: janeBefore.id, name: 'Jane Roe' }],
    "the target's contact of the same email is the source's",
  );
  const counts = (await into.live('GET', `${tbase}/statuses/stats`)).body as { key: string; ticketCount: number }[];
  t.equal(counts.find((s) => s.key === 'waiting_on_vendor')?.ticketCount, 1, 'and counted by status');

  t.equal(await count('select count(*) as n from outbox where account_id = ?', [into.accountId]), 0, 'no webhook delivery or mail queued for imported objects');
  t.equal(await count('select count(*) as n from mail_messages where account_id = ?', [into.accountId]), 0, 'no mail');
  t.ok(await count(`select count(*) as n from audit_log where account_id = ? and source = 'import' and event = 'ticket.created'`, [into.accountId]), 'audited with source import');
});

t.test('a second run creates nothing new, also from the list of a source without the export (as the hosted product)', async (t) => {
  failures.push({ match: /\/tickets\/export\?/, status: 404 });
  proxied.length = 0;
  const run = await runCli(importArgs(), importEnv);
  t.equal(run.code, 0, run.stderr);
  t.equal(proxied.filter((p) => p.includes('/tickets/export?')).length, 1, 'the export was asked for once');
  t.ok(
    proxied.some((p) => p.startsWith(`${base}/tickets?`)),
    'then the list was paged',
  );
  const report = reportOf(run.stdout);
  t.equal(report.counts.ticket.unchanged, 4, 'every ticket found, unchanged');
  for (const [kind, c] of Object.entries(report.counts) as [string, { created: number; updated: number }][]) {
    t.equal(c.created, 0, `${kind}: none created`);
    t.equal(c.updated, 0, `${kind}: none updated`);
  }
  t.same(await targetSnapshot(), await sourceSnapshot(), 'still alike');
});

t.test('--dry-run counts a new ticket and writes nothing', async (t) => {
  const fresh = await makeTicket(from.live, base, { title: 'Not imported yet' });
  const runsBefore = await count('select count(*) as n from import_runs where account_id = ?', [into.accountId]);
  const mappingsBefore = await count('select count(*) as n from import_mappings where account_id = ?', [into.accountId]);
  // Read by people this time: the report in words.
  const run = await runCli(
    importArgs('--dry-run').filter((a) => a !== '--json'),
    importEnv,
  );
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^Dry run \(nothing written\): import from .*\n(.*\n)* {2}ticket +1 created, 0 updated, \d+ unchanged, 0 skipped\n/);
  t.match(run.stdout, /Not copied: members/);
  const listed = (await into.live('GET', `${tbase}/tickets?status=all&search=imported`)).body.data;
  t.equal(listed.length, 0, 'the ticket was not written');
  t.equal(await count('select count(*) as n from import_runs where account_id = ?', [into.accountId]), runsBefore, 'no run recorded');
  t.equal(await count('select count(*) as n from import_mappings where account_id = ?', [into.accountId]), mappingsBefore, 'no mapping');
  await from.live('DELETE', `${base}/tickets/${fresh.id}`);
});

t.test('--since picks up a changed ticket and a new one', async (t) => {
  const jam = await makeTicket(from.live, base, { title: 'Printer jam', customerEmail: 'bob@example.net' });
  t.equal((await runCli(importArgs('--since', jam.createdAt), importEnv)).code, 0);
  const changed = (await from.live('PATCH', `${base}/tickets/${second.id}`, { title: 'Password reset (again)', status: 'open' })).body;
  await comment(second.id, { body: 'It happened again.', authorType: 'CUSTOMER', authorName: 'Bob' });
  await makeTicket(from.live, base, { title: 'Late arrival', customerEmail: 'jane@globex.example' });
  // Resolved in the source after it was imported open, in a brand asking for ratings: history asks no customer for one.
  await from.live('PATCH', `${base}/tickets/${jam.id}`, { status: 'resolved' });
  const run = await runCli(importArgs('--since', changed.updatedAt), importEnv);
  t.equal(run.code, 0, run.stderr);
  const report = reportOf(run.stdout);
  t.match(report.counts.ticket, { created: 1, updated: 2 });
  t.equal(await count('select count(*) as n from ticket_feedback where account_id = ?', [into.accountId]), 0, 'no rating request scheduled');
  t.equal(report.counts.ticket.unchanged ?? 0, 0, 'tickets not changed since were not read');
  t.same(await targetSnapshot(), await sourceSnapshot(), 'alike again');
});

t.test('killed midway, run again: completes with no duplicates', async (t) => {
  for (let i = 0; i < 40; i++) await makeTicket(from.live, base, { title: `Bulk ${i}`, body: `number ${i}` });
  // Pages of 10: the new tickets of a page are written in one transaction.
  const lines = await runCliKilledWhen<Line>(importArgs('--page-size', '10'), importEnv, (seen) => seen.filter((l) => l.kind === 'ticket' && l.outcome === 'created').length >= 10);
  const before = lines.filter((l) => l.kind === 'ticket' && l.outcome === 'created').length;
  t.ok(before >= 10 && before < 40, `killed after ${before} tickets`);
  t.ok(!lines.some((l) => l.report), 'it did not finish');

  // A run with other options (its cursors belong to another listing order) starts afresh.
  const latest = ((await from.live('GET', `${base}/tickets?sort=updatedAt&order=desc&limit=1`)).body.data as Shown[])[0];
  const delta = await runCli(importArgs('--since', latest.updatedAt), importEnv);
  t.equal(delta.code, 0, delta.stderr);
  t.equal(reportOf(delta.stdout).resumed, false, 'a --since run does not take over the killed full run');

  const again = await runCli(importArgs(), importEnv);
  t.equal(again.code, 0, again.stderr);
  const report = reportOf(again.stdout);
  t.equal(report.resumed, true, 'the full run goes on from its cursor');
  t.same(await targetSnapshot(), await sourceSnapshot(), 'every ticket once, alike');
  t.equal(await count(`select count(*) as n from tickets where account_id = ? and title like 'Bulk %'`, [into.accountId]), 40, 'no duplicate');
});

t.test("--map takes a source status and field as the target's instead of creating them (here into the account's test data)", async (t) => {
  const mapFile = path.join(dataDir, 'map.json');
  writeFileSync(mapFile, JSON.stringify({ statuses: { waiting_on_vendor: 'pending' }, fields: { 'ticket.plan': 'tier' } }));
  // And files held to the upload limit of the target: the 300 kB scan is over it.
  const run = await runCli(['import', 'dispatch', '--from-url', sourceUrl, '--account', into.accountId, '--mode', 'test', '--map', mapFile, '--json'], {
    ...importEnv,
    TICKETD_ATTACHMENT_MAX_BYTES: '100000',
  });
  t.equal(run.code, 0, run.stderr);
  const report = reportOf(run.stdout);
  t.match(report.counts.attachment, { created: 2, skipped: 1 });
  t.match(report.skipped, [{ kind: 'attachment', reason: /larger than the upload limit \(100000 bytes\)/ }], 'the report says which file and why');
  t.same(report.mapped, [
    { kind: 'status', from: 'waiting_on_vendor', to: 'pending' },
    { kind: 'field', from: 'ticket.plan', to: 'ticket.tier' },
  ]);
  t.equal(report.counts.ticket!.skipped, 0);
  const testBrand = ((await into.test('GET', '/v1/brands')).body as Shown[]).find((b) => b.slug === 'acme');
  const b = `/v1/brands/${testBrand.id}`;
  t.notOk(
    ((await into.test('GET', `${b}/statuses`)).body as Shown[]).some((s) => s.key === 'waiting_on_vendor'),
    'the mapped status was not created',
  );
  t.same((await into.test('GET', `${b}/fields/ticket`)).body, [], 'nor the mapped field');
  const [ticket] = (await into.test('GET', `${b}/tickets?status=all&search=invoice`)).body.data as Shown[];
  t.match(ticket, { status: 'pending', customFields: { tier: 'gold' } }, "its tickets take the target's status and field key");
  t.equal((await into.live('GET', `${tbase}/tickets/${ticket.id}`)).status, 404, 'live data untouched: another mode');
});

t.test('--map with unmapped skip creates no status or field the target lacks: their tickets and values are left out, and reported', async (t) => {
  const elsewhere = await signup(target.app, 'skip@example.com');
  const mapFile = path.join(dataDir, 'skip-map.json');
  writeFileSync(mapFile, JSON.stringify({ unmapped: 'skip' }));
  // And into a target that refuses webhooks to private addresses: the source's (to 127.0.0.1) is skipped, saying why.
  const run = await runCli(['import', 'dispatch', '--from-url', sourceUrl, '--account', elsewhere.accountId, '--map', mapFile, '--json'], {
    ...importEnv,
    TICKETD_WEBHOOK_ALLOW_PRIVATE: 'false',
  });
  t.equal(run.code, 0, run.stderr);
  const report = reportOf(run.stdout);
  const reasons = (kind: string) => report.skipped.filter((s) => s.kind === kind).map((s) => s.reason);
  t.match(reasons('status'), [/--map does not name it/], 'the custom status is skipped');
  t.match(reasons('field'), [/--map does not name it/], 'so is the field');
  t.match(reasons('ticket'), [/its status waiting_on_vendor is no status of the target brand/], 'and the ticket in that status');
  t.match(reasons('webhook'), [/url refused: .*non-public address/], 'the webhook the target refuses is skipped');
  const b = `/v1/brands/${((await elsewhere.live('GET', '/v1/brands')).body as Shown[]).find((x) => x.slug === 'acme').id}`;
  t.notOk(
    ((await elsewhere.live('GET', `${b}/statuses`)).body as Shown[]).some((s) => s.key === 'waiting_on_vendor'),
    'no status created',
  );
  t.same((await elsewhere.live('GET', `${b}/fields/ticket`)).body, [], 'no field created');
  t.ok(report.counts.ticket!.created > 0, 'the other tickets are in');
  t.equal(((await elsewhere.live('GET', `${b}/tickets?status=all&search=invoice`)).body.data as Shown[]).length, 0, 'the skipped ticket is not');
});

t.test('a --map file that is not a map is a usage error; a key the source refuses, a failure naming its answer', async (t) => {
  const mapFile = path.join(dataDir, 'bad-map.json');
  writeFileSync(mapFile, JSON.stringify({ statuses: ['pending'] }));
  const bad = await runCli(['import', 'dispatch', '--from-url', sourceUrl, '--account', into.accountId, '--map', mapFile], importEnv);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--map .* must be/);

  const refused = await runCli(['import', 'dispatch', '--from-url', sourceUrl, '--account', into.accountId, '--json'], { ...env, TICKETD_IMPORT_API_KEY: 'sk_live_wrong' });
  t.equal(refused.code, 1);
  t.match(refused.json(), { error: { code: 'failed', message: /answered 401/ } });
});

t.test('with clamd scanning the target: an infected file of the source is skipped and reported, the rest of its ticket imported', { skip: noClamd() }, async (t) => {
  const clamd = await startClamd(t);
  const infected = await makeTicket(from.live, base, { title: 'Suspicious attachment', customerEmail: 'jane@globex.example' });
  await upload(infected.id, 'eicar.com', Buffer.from(EICAR));
  await upload(infected.id, 'notes.txt', Buffer.from('nothing to see\n'));
  const run = await runCli(importArgs('--since', infected.createdAt), { ...importEnv, TICKETD_CLAMD_SOCKET: clamd.socket });
  t.equal(run.code, 0, run.stderr);
  const report = reportOf(run.stdout);
  t.match(report.counts.attachment, { created: 1, skipped: 1 });
  t.match(report.skipped, [{ kind: 'attachment', reason: new RegExp(`contains a virus \\(${EICAR_SIGNATURE.replace(/\./g, '\\.')}\\)`) }]);
  const [imported] = (await into.live('GET', `${tbase}/tickets?status=all&search=Suspicious`)).body.data as Shown[];
  const files = (await into.live('GET', `${tbase}/tickets/${imported!.id}/attachments`)).body as Shown[];
  t.same(
    files.map((f) => [f.filename, f.scanStatus]),
    [['notes.txt', 'clean']],
    'the clean file, scanned',
  );
});
