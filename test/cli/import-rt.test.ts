import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { ImportReport } from '../../server/flows/import-run.js';
import { signup, testApp, type Reply, type Signup } from '../helpers/app.js';
import { jsonLines, runCli, runCliKilledWhen } from '../helpers/cli.js';
import { noRt5, startRt5, type Rt5 } from '../helpers/rt5.js';

// `ticketd import rt` of the real bin/ticketd against a real Request Tracker 5 (Debian's, started by
// the shared tool kit). RT's database outlives the test: everything here is made under a name of
// this run's own, and only that queue is imported. The queue is filled once through REST2 (as its
// customers and an agent), imported, and compared through the target's API.

const skip = noRt5();
if (skip) {
  t.comment(`skipped: ${skip}`);
  t.pass('skipped', { skip });
} else {
  await importRtTests();
}

/** An object as the API shows it. */
type Shown = Reply['body'];
interface Line {
  kind?: string;
  outcome?: string;
  sourceId?: string;
  report?: ImportReport;
}

async function importRtTests(): Promise<void> {
  const started = Date.now();
  const rt: Rt5 = await startRt5();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-import-rt-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const target = await testApp(t, { TICKETD_DATA_DIR: dataDir });
  await target.app.listen({ port: 0, host: '127.0.0.1' });
  const targetUrl = `http://127.0.0.1:${(target.app.server.address() as AddressInfo).port}`;

  // -------------------------------------------------------------------------------------------
  // The source: a queue with a custom field, two customers and an agent (the target's owner by
  // email), tickets with replies both ways, an internal comment, files, status changes, one
  // deleted, and a few more to be killed among.
  const run = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const queue = `Support ${run}`;
  const people = {
    jane: { user: `${run}-jane`, password: 'jane-secret-1', email: `jane-${run}@example.com`, name: 'Jane Roe' },
    bob: { user: `${run}-bob`, password: 'bob-secret-1', email: `bob-${run}@example.com`, name: 'Bob Poe' },
    agent: { user: `${run}-agent`, password: 'agent-secret-1', email: `agent-${run}@example.com`, name: 'Agent Smith' },
  };
  const into: Signup = await signup(target.app, people.agent.email);
  await rt.call('POST', 'queue', { Name: queue, Description: 'ticketd import test' });
  for (const [who, p] of Object.entries(people))
    await rt.call('POST', 'user', { Name: p.user, EmailAddress: p.email, RealName: p.name, Password: p.password, Privileged: who === 'agent' ? 1 : 0 });
  await rt.grantEveryone(queue, ['SeeQueue', 'ShowTicket', 'CreateTicket', 'ReplyToTicket', 'CommentOnTicket', 'ModifyTicket', 'OwnTicket']);
  const plan = `Plan ${run}`;
  await rt.call('POST', 'customfield', { Name: plan, Type: 'Freeform', MaxValues: 1, Queue: queue });
  const as = (who: keyof typeof people) => ({ user: people[who].user, password: people[who].password });

  /** What the test wrote into each ticket, in order: its body, its messages (text as ticketd shows it) and files. */
  const written = new Map<string, { body: string | null; messages: string[]; files: { filename: string; sha256: string }[] }>();
  const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  const file = (filename: string, type: string, bytes: Buffer) => ({ FileName: filename, FileType: type, FileContent: bytes.toString('base64') });

  async function ticket(by: keyof typeof people | 'root', fields: Record<string, unknown>): Promise<string> {
    const made = await rt.call('POST', 'ticket', { Queue: queue, ContentType: 'text/plain', ...fields }, by === 'root' ? undefined : as(by));
    written.set(String(made.id), { body: typeof fields.Content === 'string' ? fields.Content : null, messages: [], files: [] });
    return String(made.id);
  }
  async function message(
    id: string,
    kind: 'correspond' | 'comment',
    by: keyof typeof people | 'root',
    content: { text: string; shown?: string; html?: boolean; files?: { filename: string; type: string; bytes: Buffer }[] },
  ): Promise<void> {
    const files = content.files ?? [];
    await rt.call(
      'POST',
      `ticket/${id}/${kind}`,
      {
        Content: content.text,
        ContentType: content.html ? 'text/html' : 'text/plain',
        ...(files.length ? { Attachments: files.map((f) => file(f.filename, f.type, f.bytes)) } : {}),
      },
      by === 'root' ? undefined : as(by),
    );
    const w = written.get(id)!;
    w.messages.push(content.shown ?? content.text);
    w.files.push(...files.map((f) => ({ filename: f.filename, sha256: sha256(f.bytes) })));
  }

  const form = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256)); // every byte value
  const scan = randomBytes(5_000);
  const invoice = await ticket('jane', { Requestor: people.jane.email, Subject: 'Invoice is wrong', Content: 'The March invoice counts twice.', CustomFields: { [plan]: 'gold' } });
  await message(invoice, 'correspond', 'agent', {
    text: '<p>Which <b>invoice</b> number?</p>',
    shown: 'Which invoice number?',
    html: true,
    files: [{ filename: 'form.pdf', type: 'application/pdf', bytes: form }],
  });
  await message(invoice, 'comment', 'root', { text: 'Checked with finance.' });
  await message(invoice, 'correspond', 'jane', { text: 'INV-2031, scan attached.', files: [{ filename: 'scan.bin', type: 'application/octet-stream', bytes: scan }] });
  await rt.call('PUT', `ticket/${invoice}`, { Status: 'resolved', Owner: people.agent.user }, as('agent'));
  const reset = await ticket('bob', { Requestor: people.bob.email, Subject: 'Password reset', Content: 'I cannot sign in.' });
  await rt.call('PUT', `ticket/${reset}`, { Status: 'stalled' }, as('agent'));
  await ticket('agent', { Subject: 'Call back', Requestor: people.jane.email });
  const spam = await ticket('bob', { Requestor: people.bob.email, Subject: 'Cheap watches', Content: 'Buy now' });
  await rt.call('DELETE', `ticket/${spam}`);
  written.delete(spam);
  for (let i = 0; i < 8; i++) await ticket('root', { Subject: `Bulk ${i}`, Content: `number ${i}`, Requestor: i % 2 ? people.bob.email : people.jane.email });

  const importArgs = (...more: string[]) => ['import', 'rt', '--url', rt.url, '--queue', queue, '--account', into.accountId, '--keep-numbers', '--json', ...more];
  const env = { DATABASE_URL: target.url, TICKETD_DATA_DIR: dataDir, TICKETD_RT_TOKEN: rt.token };
  const linesOf = (stdout: string) => jsonLines<Line>(stdout);
  const reportOf = (stdout: string): ImportReport => linesOf(stdout).pop()!.report!;
  const at = (iso: unknown) => new Date(String(iso)).toISOString();
  const STATUS: Record<string, string> = { new: 'new', open: 'open', stalled: 'pending', resolved: 'resolved', rejected: 'closed' };
  const emailOf = new Map(Object.values(people).map((p) => [p.user, p.email]));

  /** What the target must show of each ticket, read from RT (times, statuses, history) and from what the test wrote. */
  async function expected() {
    const q = encodeURIComponent(`Queue = '${queue}'`);
    const listed = (await rt.call('GET', `tickets?query=${q}&per_page=100&fields=Subject,Status,Created,LastUpdated,Requestor,Owner,CustomFields`)).items as Shown[];
    const txnQuery = encodeURIComponent(
      JSON.stringify([
        { field: 'ObjectType', value: 'RT::Ticket' },
        { field: 'ObjectId', operator: 'IN', value: listed.map((x) => Number(x.id)) },
      ]),
    );
    const txns: Shown[] = [];
    for (let page = 1; ; page++) {
      const got = (await rt.call('GET', `transactions?query=${txnQuery}&orderby=id&per_page=100&page=${page}&fields=ObjectId,Type,Creator,Created,OldValue,NewValue`))
        .items as Shown[];
      txns.push(...got);
      if (got.length < 100) break;
    }
    const out = [];
    for (const tk of listed) {
      const w = written.get(String(tk.id))!;
      const messages = [...w.messages];
      const comments = [];
      for (const h of txns.filter((x) => x.ObjectId === tk.id)) {
        const creator = h.Creator.id as string;
        const author =
          creator === people.agent.user
            ? 'owner'
            : creator === 'RT_System'
              ? 'The RT System itself'
              : creator === 'root'
                ? 'Enoch Root'
                : Object.values(people).find((p) => p.user === creator)!.name;
        const authorType = creator === 'RT_System' ? 'SYSTEM' : creator === 'root' || creator === people.agent.user ? 'AGENT' : 'CUSTOMER';
        if (h.Type === 'Correspond' || h.Type === 'Comment')
          comments.push({ body: messages.shift(), isInternal: h.Type === 'Comment', author, authorType, createdAt: at(h.Created) });
        if (h.Type === 'Status') comments.push({ body: `Status changed from ${h.OldValue} to ${h.NewValue}`, isInternal: true, author, authorType, createdAt: at(h.Created) });
      }
      out.push({
        ticketNumber: Number(tk.id),
        title: tk.Subject,
        status: STATUS[tk.Status],
        body: w.body,
        customer: emailOf.get(tk.Requestor[0].id),
        assigned: tk.Owner.id === people.agent.user,
        customFields: (tk.CustomFields as Shown[]).some((c) => c.values.length) ? { [`plan_${run}`]: 'gold' } : null,
        createdAt: at(tk.Created),
        updatedAt: at(tk.LastUpdated),
        comments,
        files: [...w.files].sort((a, b) => a.filename.localeCompare(b.filename)),
      });
    }
    return out.sort((a, b) => a.ticketNumber - b.ticketNumber);
  }

  /** What the target's API shows of the brand's tickets, in the same terms. */
  async function shown(call = into.live) {
    const brand = ((await call('GET', '/v1/brands')).body as Shown[]).find((b) => b.slug === `support-${run}`);
    if (!brand) return [];
    const base = `/v1/brands/${brand.id}`;
    const tickets = (await call('GET', `${base}/tickets?status=all&sort=createdAt&order=asc&limit=100`)).body.data as Shown[];
    const out = [];
    for (const tk of tickets) {
      const comments = ((await call('GET', `${base}/tickets/${tk.id}/comments`)).body as Shown[]).flatMap((c) => [c, ...(c.replies as Shown[])]);
      const files = [];
      for (const a of (await call('GET', `${base}/tickets/${tk.id}/attachments`)).body as Shown[]) {
        const one = (await call('GET', `${base}/tickets/${tk.id}/attachments/${a.id}`)).body;
        const link = new URL(one.downloadUrl);
        const res = await fetch(new URL(link.pathname + link.search, targetUrl), { headers: { authorization: `Bearer ${call === into.live ? into.liveKey : into.testKey}` } });
        files.push({ filename: a.filename, sha256: sha256(Buffer.from(await res.arrayBuffer())) });
      }
      out.push({
        ticketNumber: tk.ticketNumber,
        title: tk.title,
        status: tk.status,
        body: tk.body,
        customer: tk.customer?.email,
        assigned: tk.assigneeId === into.ownerId,
        customFields: tk.customFields,
        createdAt: tk.createdAt,
        updatedAt: tk.updatedAt,
        comments: comments.map((c) => ({
          body: c.body,
          isInternal: c.isInternal,
          author: c.authorId === into.ownerId ? 'owner' : c.authorName,
          authorType: c.authorType,
          createdAt: c.createdAt,
        })),
        files: files.sort((a, b) => a.filename.localeCompare(b.filename)),
      });
    }
    return out.sort((a, b) => a.ticketNumber - b.ticketNumber);
  }

  let wanted: Awaited<ReturnType<typeof expected>> = [];
  t.comment(`RT filled in ${Date.now() - started} ms`);
  t.test('a full import: every ticket, reply, comment, status change and file, at the source times', async (t) => {
    const result = await runCli(importArgs(), env);
    t.equal(result.code, 0, result.stderr);
    const report = reportOf(result.stdout);
    t.match(report.counts, {
      brand: { created: 1 },
      status: { created: 1 },
      field: { created: 1 },
      contact: { created: 2 },
      ticket: { created: 11, skipped: 1 },
      attachment: { created: 2, skipped: 0 },
    });
    t.match(report.skipped, [{ kind: 'ticket', sourceId: spam, reason: /deleted in Request Tracker/ }], 'the deleted ticket is reported');
    t.same(report.renumbered, [], "--keep-numbers: RT's ids are the numbers");
    const want = (wanted = await expected());
    t.equal(want.flatMap((x) => x.comments).filter((c) => c.author === 'owner').length, 3, 'the agent is matched to the target owner (a reply, two status changes)');
    t.same(await shown(), want);
    const brand = ((await into.live('GET', '/v1/brands')).body as Shown[]).find((b) => b.slug === `support-${run}`);
    const fieldDefs = (await into.live('GET', `/v1/brands/${brand.id}/fields/ticket`)).body as Shown[];
    t.match(fieldDefs, [{ key: `plan_${run}`, label: plan, type: 'text' }], 'the custom field is a field definition');
    const statusList = (await into.live('GET', `/v1/brands/${brand.id}/statuses`)).body as Shown[];
    t.ok(
      statusList.some((s) => s.key === 'new' && !s.isSystem),
      "RT's new is a custom status",
    );
  });

  t.test('a second run creates nothing', async (t) => {
    const result = await runCli(importArgs(), env);
    t.equal(result.code, 0, result.stderr);
    const report = reportOf(result.stdout);
    for (const [kind, c] of Object.entries(report.counts)) {
      t.equal(c.created, 0, `${kind}: none created`);
      t.equal(c.updated, 0, `${kind}: none updated`);
    }
    t.same(await shown(), wanted, 'still alike (nothing changed in RT)');
  });

  t.test('--since reads only what changed since: a new reply and a new ticket', async (t) => {
    await message(reset, 'correspond', 'bob', { text: 'Still locked out.' });
    const since = (await rt.call('GET', `ticket/${reset}`)).LastUpdated as string;
    await ticket('jane', { Requestor: people.jane.email, Subject: 'Late arrival', Content: 'One more.' });
    const result = await runCli(importArgs('--since', since), env);
    t.equal(result.code, 0, result.stderr);
    const report = reportOf(result.stdout);
    t.match(report.counts.ticket, { created: 1, updated: 1, unchanged: 0 });
    t.same(await shown(), await expected(), 'alike again');
  });

  t.test('killed midway, run again: completes with no duplicates (into the test data this time)', async (t) => {
    const lines = await runCliKilledWhen<Line>(importArgs('--mode', 'test'), env, (seen) => seen.filter((l) => l.kind === 'ticket' && l.outcome === 'created').length >= 4);
    const before = lines.filter((l) => l.kind === 'ticket' && l.outcome === 'created').length;
    t.ok(before >= 4 && before < written.size, `killed after ${before} tickets`);
    t.notOk(
      lines.some((l) => l.report),
      'it did not finish',
    );
    const again = await runCli(importArgs('--mode', 'test'), env);
    t.equal(again.code, 0, again.stderr);
    const report = reportOf(again.stdout);
    t.equal(report.resumed, true, 'the run goes on from its cursor');
    const unchanged = report.counts.ticket?.unchanged ?? 0;
    t.ok(unchanged <= 1, 'a ticket written before the kill is not written again (the one in flight is found unchanged)');
    t.equal((report.counts.ticket?.created ?? 0) + unchanged, written.size, 'the counts go on from the killed run');
    // Not the deleted ticket, which every run reports skipped at its end.
    const read = linesOf(again.stdout).filter((l) => l.kind === 'ticket' && l.outcome !== 'skipped').length;
    t.ok(read <= written.size - before + 1, `the tickets before the cursor are not read again (${read} read)`);
    t.same(await shown(into.test), await shown(into.live), 'every ticket once, as in the live import');
  });

  t.test('a token RT refuses: exit 1 naming the answer', async (t) => {
    const refused = await runCli(importArgs(), { ...env, TICKETD_RT_TOKEN: '1-1-0000000000000000000000000000000' });
    t.equal(refused.code, 1);
    t.match(refused.json(), { error: { code: 'failed', message: /answered 401/ } });
  });
}
