import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { client, testConfig } from '../helpers/app.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// `ticketd init` against an external PostgreSQL (this file's own database): the real bin/ticketd,
// no terminal, so every missing answer is a usage error. The embedded choice is covered by
// embedded.test.ts (initdb is slow).
const { url, db } = await freshDatabase(t);
const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-init-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const configFile = path.join(dir, 'ticketd.config.json');
const init = (args: string[]) => runCli(['--config', configFile, 'init', ...args]);
const app = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url }), db });
t.teardown(() => app.close());

function exits(t: Test, res: CliResult, code: number, what: string) {
  t.equal(res.code, code, `${what}: exit ${code}`, { stdout: res.stdout, stderr: res.stderr });
}
const accountCount = async () => Number((await db('accounts').count({ n: '*' }))[0]!.n);

t.test('contradictory or missing database choices are usage errors that write nothing', async (t) => {
  const [both, bogus, noUrl] = await Promise.all([
    init(['--database', 'embedded', '--database-url', url, '--owner-email', 'owner@example.com', '--json']),
    init(['--database', 'sqlite', '--owner-email', 'owner@example.com', '--json']),
    init(['--database', 'external', '--owner-email', 'owner@example.com', '--json']),
  ]);
  exits(t, both, 2, '--database embedded with --database-url');
  t.match(both.stderr, /--database embedded takes no --database-url/);
  exits(t, bogus, 2, '--database sqlite');
  t.match(bogus.stderr, /--database must be embedded or external/);
  exits(t, noUrl, 2, '--database external without a URL');
  t.match(noUrl.stderr, /--database-url/);
  t.throws(() => statSync(configFile), 'no config file was written');
  t.equal(await accountCount(), 0, 'no account was created');
});

t.test('init saves the choice, migrates, and bootstraps an owner with working keys; a second run creates nothing', async (t) => {
  writeFileSync(configFile, `${JSON.stringify({ port: 4321 })}\n`);
  const first = await init(['--database-url', url, '--owner-email', 'owner@example.com', '--account-name', 'Acme', '--brand-name', 'Support', '--json']);
  exits(t, first, 0, 'init');
  const out = first.json();
  t.equal(out.database, 'external', '--database-url implies external');
  t.equal(out.configFile, configFile);
  t.equal(out.created.account.name, 'Acme');
  t.equal(out.created.owner.email, 'owner@example.com');
  t.equal(out.created.brand.name, 'Support');
  t.same(JSON.parse(readFileSync(configFile, 'utf8')), { port: 4321, databaseUrl: url }, 'the URL is saved beside what the file held');
  t.equal(statSync(configFile).mode & 0o777, 0o600, "the file (it may hold a password) is its owner's only");

  const brands = await client(app, out.created.apiKeys.live.key)('GET', '/v1/brands');
  t.equal(brands.status, 200, 'the printed live key authenticates');
  t.same(
    brands.body.map((b: { id: string }) => b.id),
    [out.created.brand.id],
  );

  const again = await init(['--database-url', url, '--owner-email', 'other@example.com', '--json']);
  exits(t, again, 0, 'init again');
  t.equal(again.json().created, null, 'a database with accounts gets no new one');
  t.equal(await accountCount(), 1);
});
