import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { freePort } from '../../server/integrations/embedded-postgres.js';
import { makeTicket, ownerWithBrand, testConfig } from '../helpers/app.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';
import { clamdBinary, startClamd } from '../helpers/clamd.js';

// The real bin/ticketd against databases of this file; the app makes the data doctor looks at.
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-doctor-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const doctor = (env: Record<string, string>, json = true) => runCli(['doctor', ...(json ? ['--json'] : [])], { TICKETD_DATA_DIR: dataDir, ...env });
const CHECKS = ['config', 'database', 'migrations', 'clock', 'outbox', 'deadDeliveries', 'cluster', 'disk', 'storage', 'scanner'];

interface Check {
  name: string;
  status: string;
  message: string;
  details?: Record<string, unknown>;
}

function checksOf(t: Test, res: CliResult, code: number): Record<string, Check> {
  t.equal(res.code, code, `exit ${code}`, { stdout: res.stdout, stderr: res.stderr });
  const report = res.json() as { status: string; checks: Check[] };
  t.same(
    report.checks.map((c) => c.name),
    CHECKS,
    'every check, in order',
  );
  return Object.fromEntries(report.checks.map((c) => [c.name, c]));
}

t.test('a healthy installation: exit 0, one line per check', async (t) => {
  const { url } = await freshDatabase(t);
  const res = await doctor({ DATABASE_URL: url });
  const checks = checksOf(t, res, 0);
  for (const name of ['config', 'database', 'migrations', 'clock', 'outbox', 'deadDeliveries', 'cluster']) t.equal(checks[name]!.status, 'ok', `${name}: ${checks[name]!.message}`);
  t.not(checks.disk!.status, 'fail', `disk: ${checks.disk!.message}`);
  t.match(checks.database!.details, { embedded: false, serverVersion: /^\d+/ });
  t.match(checks.migrations!.details, { pending: [] });
  t.ok((checks.migrations!.details!.applied as number) > 10, 'the applied migrations are counted');
  t.match(checks.outbox!.details, { backlog: 0, oldestPendingAgeSeconds: null });
  t.type(checks.clock!.details!.skewMs, 'number');
  t.match(checks.disk!.details, { path: dataDir, writable: true });
  t.ok((checks.disk!.details!.freeBytes as number) > 0);
  t.equal(res.json().status === 'fail', false);

  const human = await doctor({ DATABASE_URL: url }, false);
  t.equal(human.code, 0);
  for (const name of ['config', 'database', 'migrations', 'clock', 'outbox', 'deadDeliveries', 'cluster'])
    t.match(human.stdout, new RegExp(`^ok\\s+${name}\\s`, 'm'), `a line for ${name}`);
  t.match(human.stdout, /^(ok|warn)\s+disk\s+.* free of /m);
  t.match(checks.cluster!.message, /one PostgreSQL server \(no citus extension\)/);

  // db distribute: nothing to place without Citus, and it says so.
  const distribute = await runCli(['db', 'distribute', '--json'], { TICKETD_DATA_DIR: dataDir, DATABASE_URL: url });
  t.equal(distribute.code, 1, 'db distribute without the citus extension: exit 1');
  t.match(distribute.stderr, /^error: the database has no citus extension/m);
  t.match(distribute.json(), { error: { code: 'no_citus' } });
});

t.test('a pending migration fails, and the outbox is not looked at', async (t) => {
  const { url, db } = await freshDatabase(t);
  const last = (await db('knex_migrations').orderBy('id', 'desc').first()) as { id: number; name: string };
  await db('knex_migrations').where({ id: last.id }).delete();
  const checks = checksOf(t, await doctor({ DATABASE_URL: url }), 1);
  t.equal(checks.database!.status, 'ok');
  t.equal(checks.migrations!.status, 'fail');
  t.match(checks.migrations!.message, last.name.replace(/\.js$/, ''), 'names the migration');
  t.match(checks.migrations!.message, /ticketd db migrate/, 'and what to do');
  t.equal(checks.outbox!.status, 'skip');
  t.equal(checks.deadDeliveries!.status, 'skip');
  t.equal(checks.cluster!.status, 'skip');
  const human = await doctor({ DATABASE_URL: url }, false);
  t.equal(human.code, 1);
  t.match(human.stdout, /^fail\s+migrations\s+1 pending/m);
  t.match(human.stdout, /1 failed/);
});

t.test('an unreachable database fails without echoing its password', async (t) => {
  const res = await doctor({ DATABASE_URL: `postgres://ticketd:hunter2-secret@127.0.0.1:${await freePort()}/ticketd` });
  const checks = checksOf(t, res, 1);
  t.equal(checks.database!.status, 'fail');
  t.match(checks.database!.message, /unreachable \(external, 127\.0\.0\.1:\d+\/ticketd\)/);
  for (const name of ['migrations', 'clock', 'outbox', 'deadDeliveries', 'cluster']) t.equal(checks[name]!.status, 'skip', `${name} skipped`);
  t.equal(checks.config!.status, 'ok');
  t.not(checks.disk!.status, 'skip', 'the disk is checked all the same');
  t.notOk(`${res.stdout}${res.stderr}`.includes('hunter2'), 'the password is never printed');
});

t.test('an invalid configuration fails and nothing else is checked', async (t) => {
  const checks = checksOf(t, await doctor({ TICKETD_LOG_LEVEL: 'loud' }), 1);
  t.equal(checks.config!.status, 'fail');
  t.match(checks.config!.message, /logLevel \(TICKETD_LOG_LEVEL\)/);
  for (const name of CHECKS.slice(1)) t.equal(checks[name]!.status, 'skip');
});

t.test('dead deliveries and a stale backlog are warnings: exit 0', async (t) => {
  const { url, db } = await freshDatabase(t);
  const app = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url }), db });
  t.teardown(() => app.close());
  const { owner, base } = await ownerWithBrand(app);
  await owner.live('POST', `${base}/webhooks`, { url: 'https://93.184.215.14/hooks', events: ['ticket.created'] });
  for (const title of ['A', 'B', 'C']) await makeTicket(owner.live, base, { title });
  // No dispatcher runs: two deliveries ran out of attempts, the third has waited ten minutes.
  const ids = (await db('outbox').orderBy('id').pluck('id')) as string[];
  await db('outbox').whereIn('id', ids.slice(0, 2)).update({ status: 'dead' });
  await db('outbox')
    .where({ id: ids[2] })
    .update({ createdAt: db.raw(`now() - interval '10 minutes'`) });

  const res = await doctor({ DATABASE_URL: url });
  const checks = checksOf(t, res, 0);
  t.equal(res.json().status, 'warn');
  t.equal(checks.deadDeliveries!.status, 'warn');
  t.same(checks.deadDeliveries!.details, { dead: 2 });
  t.match(checks.deadDeliveries!.message, /outbox list --status dead/);
  t.equal(checks.outbox!.status, 'warn');
  t.equal(checks.outbox!.details!.backlog, 1);
  t.ok((checks.outbox!.details!.oldestPendingAgeSeconds as number) >= 600, 'ten minutes old');
  t.match(checks.outbox!.message, /dispatcher/);
});

t.test('the virus scanner: off, answering PING, or not (a failure under scanFailure refuse, a warning under allow)', async (t) => {
  const { url } = await freshDatabase(t);
  t.match(checksOf(t, await doctor({ DATABASE_URL: url }), 0).scanner, { status: 'ok', message: /^off/ });
  const down = { DATABASE_URL: url, TICKETD_CLAMD_HOST: '127.0.0.1', TICKETD_CLAMD_PORT: String(await freePort()) };
  t.match(checksOf(t, await doctor(down), 1).scanner, { status: 'fail', message: /^clamd at 127\.0\.0\.1:\d+: .*ECONNREFUSED.*refused \(503\)/ });
  t.match(checksOf(t, await doctor({ ...down, TICKETD_SCAN_FAILURE: 'allow' }), 0).scanner, { status: 'warn', message: /kept unscanned/ });
  if (!clamdBinary()) return void t.comment('clamd is not installed (apt-get install clamav-daemon): the answering case is not checked');
  const clamd = await startClamd(t);
  t.match(checksOf(t, await doctor({ DATABASE_URL: url, TICKETD_CLAMD_SOCKET: clamd.socket }), 0).scanner, { status: 'ok', message: /answers PING/ });
});

t.test('help documents the exit codes', async (t) => {
  const help = await runCli(['doctor', '--help']);
  t.match(help.stdout, /Exit code: 1 when a check fails/);
  t.match((await runCli(['--help'])).stdout, /^\s+doctor\b/m);
});
