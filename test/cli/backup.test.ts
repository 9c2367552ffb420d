import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { createDb } from '../../server/core/db.js';
import { migrateLatest } from '../../server/core/migrate.js';
import { EmbeddedPostgres } from '../../server/integrations/embedded-postgres.js';
import { findTool, inspectDatabase, toolDirs, type PgTool } from '../../server/integrations/pg-tools.js';
import { client, makeTicket, ownerWithBrand, testConfig } from '../helpers/app.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { adminUrl, freshDatabase } from '../helpers/db.js';

const work = mkdtempSync(path.join(os.tmpdir(), 'ticketd-backup-'));
chmodSync(work, 0o755); // as root, a private cluster below runs as the postgres user
t.teardown(() => rmSync(work, { recursive: true, force: true }));

interface Server {
  source: string;
  target: string;
  dump: PgTool;
  restore: PgTool;
}

/** The newest client programs on this machine, if they sit beside their own server (Debian's /usr/lib/postgresql/N/bin). */
async function newestServerBinaries(dirs: string[]): Promise<{ dir: string; major: number } | null> {
  const found: { dir: string; major: number }[] = [];
  for (const dir of dirs) {
    if (!['pg_dump', 'pg_restore', 'initdb', 'pg_ctl'].every((f) => existsSync(path.join(dir, f)))) continue;
    found.push({ dir, major: (await findTool('pg_dump', 0, [dir])).major });
  }
  return found.sort((a, b) => b.major - a.major)[0] ?? null;
}

async function createDatabase(url: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * Where the round trip runs: databases of the test cluster when this machine's pg_dump can read
 * it; otherwise (the embedded distribution ships no pg_dump, and a system one may be older) a
 * private cluster of the newest PostgreSQL installed beside its client programs.
 */
async function roundTripServer(t: Test): Promise<Server | null> {
  const dirs = await toolDirs(false);
  const { serverMajor } = await inspectDatabase(adminUrl());
  const tools = await Promise.all([findTool('pg_dump', serverMajor, dirs), findTool('pg_restore', serverMajor, dirs)]).catch(() => null);
  if (tools) {
    const source = await freshDatabase(t);
    const target = await freshDatabase(t, { fromTemplate: false });
    return { source: source.url, target: target.url, dump: tools[0], restore: tools[1] };
  }
  const system = await newestServerBinaries(dirs);
  if (!system) return null;
  const cluster = new EmbeddedPostgres({
    dataDir: path.join(work, 'cluster'),
    binaries: { initdb: path.join(system.dir, 'initdb'), pg_ctl: path.join(system.dir, 'pg_ctl') },
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' },
  });
  const handle = await cluster.acquire();
  t.teardown(() => handle.release());
  const migrating = createDb(handle.url, { poolMin: 0 });
  await migrateLatest(migrating);
  await migrating.destroy();
  const tool = (name: 'pg_dump' | 'pg_restore') => findTool(name, system.major, [system.dir]);
  return { source: handle.url, target: await createDatabase(handle.url, 'restored'), dump: await tool('pg_dump'), restore: await tool('pg_restore') };
}

const server = await roundTripServer(t);
if (server) await roundTrip(server);
else t.test('round trip', { skip: 'no PostgreSQL client programs on this machine can dump the test server, and none sit beside a server of their own' }, async () => undefined);

/**
 * The URL with a password: a server on trust authentication (CI's) asks for none and ignores it,
 * and the test still sees whether the password stays off every command line.
 */
function withPassword(url: string): string {
  const u = new URL(url);
  if (!u.password) u.password = 'kept-off-the-command-line';
  return u.toString();
}

async function roundTrip(server: Server): Promise<void> {
  const [source, target] = [withPassword(server.source), withPassword(server.target)];

  // pg_dump and pg_restore on PATH are wrappers that log how they were called, then run the real ones.
  const wrappers = path.join(work, 'bin');
  const calls = path.join(work, 'calls.log');
  mkdirSync(wrappers);
  for (const tool of [server.dump, server.restore]) {
    const file = path.join(wrappers, path.basename(tool.path));
    writeFileSync(file, `#!/bin/sh\necho "$0 $*" >> ${calls}\n[ -n "$PGPASSWORD" ] && echo "PGPASSWORD is set" >> ${calls}\nexec ${tool.path} "$@"\n`, { flag: 'w' });
    chmodSync(file, 0o755);
  }
  const PATH = `${wrappers}${path.delimiter}${process.env.PATH ?? ''}`;
  const cli = (url: string, args: string[]) => runCli(args, { DATABASE_URL: url, PATH });
  const backupFile = path.join(work, 'ticketd.dump');

  function exits(t: Test, res: CliResult, code: number, what: string) {
    t.equal(res.code, code, `${what}: exit ${code}`, { stdout: res.stdout, stderr: res.stderr });
  }

  /** An app on `url` for the length of fn: its pool and listener are gone when it returns. */
  async function withApp<T>(url: string, fn: (app: Awaited<ReturnType<typeof buildApp>>) => Promise<T>): Promise<T> {
    const db = createDb(url, { poolMin: 0 });
    const app = await buildApp({ config: testConfig({ DATABASE_URL: url }), db });
    try {
      return await fn(app);
    } finally {
      await app.close();
      await db.destroy();
      // The server ends a closed session's backend a moment later.
      for (let i = 0; i < 100 && (await inspectDatabase(url)).otherSessions > 0; i++) await sleep(50);
    }
  }

  // What is backed up: an account with a brand, a ticket and a reply, made through the API.
  const made = await withApp(source, async (app) => {
    const { owner, base } = await ownerWithBrand(app);
    const ticket = await makeTicket(owner.live, base, { title: 'Kept across a restore', customerEmail: 'jane@customer.example' });
    await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'We are on it.' });
    return { key: owner.liveKey, base, ticketId: ticket.id };
  });

  async function ticketsIn(url: string): Promise<{ titles: string[]; comments: number }> {
    return withApp(url, async (app) => {
      const call = client(app, made.key);
      const list = await call('GET', `${made.base}/tickets`);
      const comments = await call('GET', `${made.base}/tickets/${made.ticketId}/comments`);
      const titles = list.status === 200 ? (list.body.data as { title: string }[]).map((x) => x.title).sort() : [];
      return { titles, comments: comments.status === 200 ? comments.body.length : -1 };
    });
  }

  t.test('backup writes a pg_dump archive, the password kept off the command line', async (t) => {
    const res = await cli(source, ['db', 'backup', backupFile, '--json']);
    exits(t, res, 0, 'db backup');
    t.match(res.json(), { file: backupFile, database: new URL(source).pathname.slice(1) });
    t.ok(res.json().bytes > 1000 && readFileSync(backupFile).subarray(0, 5).toString() === 'PGDMP', 'a custom-format archive');
    const log = readFileSync(calls, 'utf8');
    t.match(log, /pg_dump --format=custom /);
    t.match(log, /PGPASSWORD is set/);
    const password = decodeURIComponent(new URL(source).password);
    t.ok(password.length > 0, 'the database URL has a password');
    t.notOk(log.includes(password), 'which no command line carries');
    t.same(
      readdirSync(work).filter((f) => f.includes('.partial-')),
      [],
      'no partial file is left',
    );

    exits(t, await cli(source, ['db', 'backup', backupFile]), 2, 'an existing file without --yes');
    exits(t, await cli(source, ['db', 'backup', backupFile, '--yes']), 0, 'replaced with --yes');
  });

  t.test('restore into an empty database: the data is there', async (t) => {
    t.equal((await inspectDatabase(target)).relations, 0, 'the target starts empty');
    const res = await cli(target, ['db', 'restore', backupFile, '--json']);
    exits(t, res, 0, 'db restore');
    t.match(res.json(), { replaced: false, file: backupFile });
    t.ok(res.json().relations > 20, 'the tables are back');
    t.same(await ticketsIn(target), { titles: ['Kept across a restore'], comments: 1 }, 'the same key reads the same ticket and its reply');
    t.match(readFileSync(calls, 'utf8'), /pg_restore --single-transaction --no-owner --no-privileges /);
  });

  t.test('restore over a database that is not empty wants --yes, a real backup and no one connected', async (t) => {
    await withApp(target, async (app) => {
      await makeTicket(client(app, made.key), made.base, { title: 'Made after the backup' });
      const busy = await cli(target, ['db', 'restore', backupFile, '--yes']);
      exits(t, busy, 1, 'while the app is connected');
      t.match(busy.stderr, /other session\(s\) are connected/);
    });
    const refused = await cli(target, ['db', 'restore', backupFile]);
    exits(t, refused, 2, 'without --yes');
    t.match(refused.stderr, /--yes/);
    const notABackup = path.join(work, 'not-a-backup');
    writeFileSync(notABackup, 'hello');
    exits(t, await cli(target, ['db', 'restore', notABackup, '--yes']), 1, 'a file that is no backup');
    exits(t, await cli(target, ['db', 'restore', path.join(work, 'absent.dump'), '--yes']), 1, 'a missing file');
    t.same((await ticketsIn(target)).titles, ['Kept across a restore', 'Made after the backup'], 'none of them changed anything');

    const replaced = await cli(target, ['db', 'restore', backupFile, '--yes', '--json']);
    exits(t, replaced, 0, 'with --yes');
    t.match(replaced.json(), { replaced: true });
    t.same(await ticketsIn(target), { titles: ['Kept across a restore'], comments: 1 }, "the backup's state, nothing of what came after");
  });
}
