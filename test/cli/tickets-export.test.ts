import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { makeTicket, ownerWithBrand, testConfig } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// `ticketd tickets export`, through the real binary: to a file with a filter and comments, the
// same tickets as the HTTP export; CSV to stdout; refusals. Four spawns.
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());
const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-export-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('tickets export: a file with the filtered tickets and their comments, CSV on stdout, usage errors', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const open = await makeTicket(owner.live, base, { title: 'Open, "quoted"', tags: ['printer'] });
  await makeTicket(owner.live, base, { title: 'Closed', status: 'closed' });
  const later = await makeTicket(owner.live, base, { title: 'Another open one' });
  const comment = (await owner.live('POST', `${base}/tickets/${open.id}/comments`, { body: 'Hello' })).body;

  const file = path.join(dir, 'open.ndjson');
  const run = await runCli(['tickets', 'export', brand.id, '--account', owner.accountId, '--status', 'open', '--comments', '--out', file, '--json'], env);
  t.equal(run.code, 0, { stderr: run.stderr });
  t.same(JSON.parse(run.stdout), { brandId: brand.id, format: 'ndjson', tickets: 2, file });
  const lines = readFileSync(file, 'utf8')
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
  const http = await app.inject({ method: 'GET', url: `${base}/tickets/export?status=open`, headers: { authorization: `Bearer ${owner.liveKey}` } });
  const overHttp = http.body
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
  t.same(
    lines.map((l) => l.id),
    [open.id, later.id],
    'the open tickets, oldest first',
  );
  t.strictSame(
    lines.map(({ comments: _, ...ticket }) => ticket),
    overHttp,
    'the tickets as the HTTP export gives them',
  );
  t.same(
    lines[0].comments.map((c: { id: string }) => c.id),
    [comment.id],
    'with their comments',
  );
  t.notOk(existsSync(`${file}.partial`), 'no partial file left');

  const csv = await runCli(['tickets', 'export', brand.id, '--format', 'csv', '--tag-ids', open.tags[0].id], env);
  t.equal(csv.code, 0, { stderr: csv.stderr });
  const rows = csv.stdout.trimEnd().split('\n');
  t.equal(rows.length, 2, 'the header and the one tagged ticket');
  t.match(rows[1], new RegExp(`^${open.id},${open.ticketNumber},"Open, ""quoted""",`));
  t.match(csv.stderr, /1 tickets exported/);

  const bad = await runCli(['tickets', 'export', brand.id, '--format', 'csv', '--comments'], env);
  t.equal(bad.code, 2, 'CSV with comments: a usage error');
  t.match(bad.stderr, /--comments needs --format ndjson/);
  const badFilter = await runCli(['tickets', 'export', brand.id, '--created-after', 'yesterday'], env);
  t.equal(badFilter.code, 2, 'a bad filter: a usage error');
  t.match(badFilter.stderr, /createdAfter must match format "date-time"/);
  const elsewhere = await runCli(['tickets', 'export', brand.id, '--account', 'acct_elsewhere', '--out', path.join(dir, 'none.ndjson')], env);
  t.equal(elsewhere.code, 2, 'a brand of another account: refused');
  t.match(elsewhere.stderr, /is not in account acct_elsewhere/);
  t.notOk(existsSync(path.join(dir, 'none.ndjson')), 'and no file');
});
