import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { createDb } from '../../server/core/db.js';
import { migrateLatest } from '../../server/core/migrate.js';
import { EmbeddedPostgres } from '../../server/integrations/embedded-postgres.js';
import { findTool, inspectDatabase, toolDirs, type PgTool } from '../../server/integrations/pg-tools.js';
import { readArchive } from '../../server/integrations/backup-archive.js';
import { S3Storage, s3StagingDir } from '../../server/integrations/s3-storage.js';
import { migrateObjects } from '../../server/integrations/storage-migrate.js';
import { LocalDiskStorage, localStorageRoot } from '../../server/integrations/storage.js';
import { startS3 } from '../helpers/s3.js';
import { client, makeTicket, ownerWithBrand, testConfig } from '../helpers/app.js';
import { runCli, startServer, stopEmbedded, type CliResult, type Server } from '../helpers/cli.js';
import { adminUrl, freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

const work = mkdtempSync(path.join(os.tmpdir(), 'ticketd-backup-'));
chmodSync(work, 0o755); // as root, the embedded clusters below run as the postgres user
const servers: Server[] = [];
t.teardown(async () => {
  for (const server of servers) await stop(server);
  for (const dir of readdirSync(work)) await stopEmbedded(path.join(work, dir));
  rmSync(work, { recursive: true, force: true });
});

function exits(t: Test, res: CliResult, code: number, what: string) {
  t.equal(res.code, code, `${what}: exit ${code}`, { stdout: res.stdout, stderr: res.stderr });
}

async function stop(server: Server): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGTERM');
  await server.exited;
}

function dataDir(name: string): string {
  const dir = path.join(work, name);
  mkdirSync(dir, { mode: 0o755 });
  return dir;
}

/** A WAL position as a number, to compare. */
const lsn = (text: string) => {
  const [high, low] = text.split('/');
  return BigInt(`0x${high}`) * 2n ** 32n + BigInt(`0x${low}`);
};

// ---------------------------------------------------------------------------------------------
// The embedded database (no DATABASE_URL): a copy made while the server takes creates.
// ---------------------------------------------------------------------------------------------

const source = dataDir('source');
const copy = dataDir('copy');
const archive = path.join(work, 'embedded.tgz');
const attachmentBytes = Buffer.from(`%PDF-1.4 a receipt ${'x'.repeat(5000)}`);

interface Made {
  url: string;
  key: string;
  base: string;
  ticketId: string;
  attachmentId: string;
  /** Each create that was answered 201: the ticket, and a WAL position at or after its commit. */
  acknowledged: { id: string; ticketNumber: number; title: string; lsn: bigint }[];
  /** Titles of every create sent, answered or not. */
  sent: Set<string>;
  backup: { start: bigint; stop: bigint };
}
let made: Made | null = null;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function api(url: string, key: string, method: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: await res.json() };
}

// The two parts run side by side: each is mostly waiting on processes of its own.
t.jobs = 2;

t.test('the embedded database', async (t) => {
  t.test('embedded: db backup while creates run, with the files', async (t) => {
    const server = startServer({ TICKETD_DATA_DIR: source }, ['--role', 'api']);
    servers.push(server);
    const info = await server.ready;
    if (!t.ok(info, 'the source server started', { stderr: server.stderr() })) return;
    const key = info.bootstrap.apiKeys.live.key;
    const base = `${info.url}/v1/brands/${info.bootstrap.brand.id}`;

    const ticket = await api(`${base}/tickets`, key, 'POST', { title: 'Before the backup', customerEmail: 'jane@customer.example' });
    t.equal(ticket.status, 201, 'a ticket');
    t.equal((await api(`${base}/tickets/${ticket.body.id}/comments`, key, 'POST', { body: 'We are on it.' })).status, 201, 'a reply');
    const form = new FormData();
    form.append('file', new Blob([attachmentBytes], { type: 'application/pdf' }), 'receipt.pdf');
    const uploaded = await fetch(`${base}/tickets/${ticket.body.id}/attachments/upload`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
    t.equal(uploaded.status, 201, 'an attachment');
    const attachmentId = ((await uploaded.json()) as { attachment: { id: string } }).attachment.id;

    // Creates from two clients until the backup is done; after each answer, where the WAL is.
    const cluster = new EmbeddedPostgres({ dataDir: source });
    const wal = new pg.Pool({ connectionString: cluster.urlFor(cluster.runningPort()!), max: 2 });
    const state: Pick<Made, 'acknowledged' | 'sent'> = { acknowledged: [], sent: new Set() };
    let done = false;
    const workers = [0, 1].map(async (w) => {
      for (let n = 0; !done; n++) {
        const title = `worker ${w} ticket ${n}`;
        state.sent.add(title);
        const res = await api(`${base}/tickets`, key, 'POST', { title });
        if (res.status !== 201) throw new Error(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
        const { rows } = await wal.query('select pg_current_wal_lsn() as lsn');
        state.acknowledged.push({ id: res.body.id, ticketNumber: res.body.ticketNumber, title, lsn: lsn(rows[0].lsn) });
        await sleep(10); // a steady stream, not a flood that slows the backup down
      }
    });
    while (state.acknowledged.length < 20) await sleep(20);
    const res = await runCli(['db', 'backup', archive, '--with-files', '--json'], { TICKETD_DATA_DIR: source });
    done = true;
    await Promise.all(workers);
    await wal.end();
    exits(t, res, 0, 'db backup');
    const result = res.json();
    t.match(result, { file: archive, kind: 'embedded', method: 'pg_backup_start', database: 'ticketd', serverVersion: /^18\./, withFiles: true, files: 1 });
    t.notMatch(res.stderr, /pg_dump/, 'no pg_dump needed');
    const backup = { start: lsn(result.wal.start), stop: lsn(result.wal.stop) };
    const during = state.acknowledged.filter((a) => a.lsn > backup.start && a.lsn <= backup.stop);
    t.ok(during.length > 0, `creates were acknowledged while the backup ran (${during.length})`);
    made = { url: info.url, key, base, ticketId: ticket.body.id, attachmentId, ...state, backup };

    await stop(server);
  });

  t.test('embedded: verified, and restored into a new data directory, the server starts with every acknowledged ticket, the reply, the attachment and the keys', async (t) => {
    if (!made) return t.fail('no backup was made');
    const [verified, restored] = await Promise.all([runCli(['db', 'verify', archive, '--json']), runCli(['db', 'restore', archive, '--json'], { TICKETD_DATA_DIR: copy })]);
    exits(t, verified, 0, 'db verify');
    t.match(verified.json(), { ok: true, kind: 'embedded', withFiles: true, problems: [] });
    exits(t, restored, 0, 'db restore');
    t.match(restored.json(), { kind: 'embedded', replaced: false, movedAside: null, withFiles: true });

    const server = startServer({ TICKETD_DATA_DIR: copy }, ['--role', 'api']);
    servers.push(server);
    const info = await server.ready;
    if (!t.ok(info, 'the server starts on the restored data', { stderr: server.stderr() })) return;
    t.equal(info.bootstrap, null, 'nothing bootstrapped: the accounts are there');
    const base = made.base.replace(made.url, info.url);

    const tickets = new Map<string, { ticketNumber: number; title: string }>();
    for (let cursor = ''; ; ) {
      const page = await api(`${base}/tickets?status=all&limit=100${cursor ? `&cursor=${cursor}` : ''}`, made.key, 'GET');
      if (!t.equal(page.status, 200, 'the same API key is valid')) return;
      for (const ticket of page.body.data) tickets.set(ticket.id, ticket);
      if (!page.body.pagination.hasMore) break;
      cursor = page.body.pagination.nextCursor;
    }
    // Every create answered before pg_backup_stop returned (its commit is at or before the stop position) is there.
    const guaranteed = made.acknowledged.filter((a) => a.lsn <= made!.backup.stop);
    const missing = guaranteed.filter((a) => tickets.get(a.id)?.title !== a.title);
    t.same(missing, [], `all ${guaranteed.length} creates acknowledged before the backup's end are restored`);
    t.same(
      [...tickets.values()].filter((x) => x.title !== 'Before the backup' && !made!.sent.has(x.title)),
      [],
      'nothing that was never sent',
    );
    const numbers = [...tickets.values()].map((x) => x.ticketNumber).sort((a, b) => a - b);
    t.same(
      numbers,
      numbers.map((_, i) => numbers[0]! + i),
      'ticket numbers without a gap: one consistent moment',
    );

    const comments = await api(`${base}/tickets/${made.ticketId}/comments`, made.key, 'GET');
    t.same(
      comments.body.map((c: { body: string }) => c.body),
      ['We are on it.'],
      'the reply',
    );
    const attachment = await api(`${base}/tickets/${made.ticketId}/attachments/${made.attachmentId}`, made.key, 'GET');
    t.equal(attachment.status, 200, 'the attachment');
    const { pathname, search } = new URL(attachment.body.downloadUrl);
    const download = await fetch(`${info.url}${pathname}${search}`);
    t.ok(Buffer.from(await download.arrayBuffer()).equals(attachmentBytes), "and its file's bytes");

    const running = await runCli(['db', 'restore', archive, '--yes'], { TICKETD_DATA_DIR: copy });
    exits(t, running, 1, 'restore over a cluster that runs');
    t.match(running.stderr, /is running: stop ticketd/);
    await stop(server);
  });

  t.test('embedded: restore over an existing cluster wants --yes and moves it aside; a damaged archive changes nothing', async (t) => {
    if (!made) return t.fail('no backup was made');
    const damaged = path.join(work, 'damaged.tgz');
    const bytes = readFileSync(archive);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    writeFileSync(damaged, bytes);
    const [refused, checked, restoredDamaged] = await Promise.all([
      runCli(['db', 'restore', archive], { TICKETD_DATA_DIR: copy }),
      runCli(['db', 'verify', damaged, '--json']),
      runCli(['db', 'restore', damaged, '--yes'], { TICKETD_DATA_DIR: copy }),
    ]);
    exits(t, refused, 2, 'without --yes');
    t.match(refused.stderr, /--yes/);
    exits(t, checked, 1, 'verify of a damaged archive');
    t.match(checked.json(), { ok: false, problems: [/damaged|checksum/] });
    exits(t, restoredDamaged, 1, 'restore of a damaged archive');
    t.same(
      readdirSync(copy).filter((f) => f.startsWith('replaced-') || f.startsWith('restore-')),
      [],
      'which moved nothing and left nothing',
    );

    const replaced = await runCli(['db', 'restore', archive, '--yes', '--json'], { TICKETD_DATA_DIR: copy });
    exits(t, replaced, 0, 'with --yes');
    const { movedAside } = replaced.json();
    t.match(movedAside, new RegExp(`^${copy}/replaced-`));
    t.ok(existsSync(path.join(movedAside, 'postgres', 'PG_VERSION')) && existsSync(path.join(movedAside, 'attachments')), 'the replaced cluster and files are kept aside');
  });
});

// ---------------------------------------------------------------------------------------------
// An external database (DATABASE_URL): pg_dump and pg_restore, when this machine has them.
// ---------------------------------------------------------------------------------------------

interface External {
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
async function roundTripServer(t: Test): Promise<External | null> {
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

t.test('an external database', async (t) => {
  const external = await roundTripServer(t);
  if (external) await roundTrip(t, external);
  else
    t.test(
      'external round trip',
      { skip: 'no PostgreSQL client programs on this machine can dump the test server, and none sit beside a server of their own' },
      async () => undefined,
    );
});

/**
 * The URL with a password: a server on trust authentication (CI's) asks for none and ignores it,
 * and the test still sees whether the password stays off every command line.
 */
function withPassword(url: string): string {
  const u = new URL(url);
  if (!u.password) u.password = 'kept-off-the-command-line';
  return u.toString();
}

async function roundTrip(t: Test, server: External): Promise<void> {
  const [source, target] = [withPassword(server.source), withPassword(server.target)];
  const [sourceFiles, targetFiles] = [dataDir('external-source'), dataDir('external-target')];

  // pg_dump and pg_restore on PATH are wrappers that log how they were called, then run the real ones.
  const wrappers = dataDir('bin');
  const calls = path.join(work, 'calls.log');
  for (const tool of [server.dump, server.restore]) {
    const file = path.join(wrappers, path.basename(tool.path));
    writeFileSync(file, `#!/bin/sh\necho "$0 $*" >> ${calls}\n[ -n "$PGPASSWORD" ] && echo "PGPASSWORD is set" >> ${calls}\nexec ${tool.path} "$@"\n`, { flag: 'w' });
    chmodSync(file, 0o755);
  }
  const PATH = `${wrappers}${path.delimiter}${process.env.PATH ?? ''}`;
  const cli = (url: string, files: string, args: string[], env: Record<string, string> = {}) => runCli(args, { DATABASE_URL: url, TICKETD_DATA_DIR: files, PATH, ...env });
  const backupFile = path.join(work, 'external.tgz');

  /** An app on `url` with its files under `files`, for the length of fn: its pool and listener are gone when it returns. */
  async function withApp<T>(url: string, files: string, fn: (app: Awaited<ReturnType<typeof buildApp>>) => Promise<T>, env: Record<string, string> = {}): Promise<T> {
    const db = createDb(url, { poolMin: 0 });
    const app = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url, TICKETD_DATA_DIR: files, ...env }), db });
    try {
      return await fn(app);
    } finally {
      await app.close();
      await db.destroy();
      // The server ends a closed session's backend a moment later.
      for (let i = 0; i < 100 && (await inspectDatabase(url)).otherSessions > 0; i++) await sleep(50);
    }
  }

  // What is backed up: an account with a brand, a ticket, a reply and an attachment, made through the API.
  const made = await withApp(source, sourceFiles, async (app) => {
    const { owner, base } = await ownerWithBrand(app);
    const ticket = await makeTicket(owner.live, base, { title: 'Kept across a restore', customerEmail: 'jane@customer.example' });
    await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'We are on it.' });
    const boundary = 'ticketd-backup-test';
    const upload = await app.inject({
      method: 'POST',
      url: `${base}/tickets/${ticket.id}/attachments/upload`,
      headers: { authorization: `Bearer ${owner.liveKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      payload: Buffer.concat([
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="receipt.pdf"\r\nContent-Type: application/pdf\r\n\r\n`),
        attachmentBytes,
        Buffer.from(`\r\n--${boundary}--\r\n`),
      ]),
    });
    if (upload.statusCode !== 201) throw new Error(`upload failed: ${upload.body}`);
    return { key: owner.liveKey, base, ticketId: ticket.id, attachmentId: JSON.parse(upload.body).attachment.id as string };
  });

  /** What the backed-up key reads through `app`: ticket titles, the reply count, the attachment's bytes. */
  async function ticketsIn(app: Awaited<ReturnType<typeof buildApp>>): Promise<{ titles: string[]; comments: number; attachment: Buffer | null }> {
    const call = client(app, made.key);
    const list = await call('GET', `${made.base}/tickets`);
    const comments = await call('GET', `${made.base}/tickets/${made.ticketId}/comments`);
    const attachment = await call('GET', `${made.base}/tickets/${made.ticketId}/attachments/${made.attachmentId}`);
    const download = attachment.status === 200 ? await app.inject({ method: 'GET', url: new URL(attachment.body.downloadUrl).pathname }) : null;
    return {
      titles: list.status === 200 ? (list.body.data as { title: string }[]).map((x) => x.title).sort() : [],
      comments: comments.status === 200 ? comments.body.length : -1,
      attachment: download?.statusCode === 200 ? download.rawPayload : null,
    };
  }

  t.test('external: backup puts a pg_dump and the files in one archive, the password kept off the command line', async (t) => {
    const res = await cli(source, sourceFiles, ['db', 'backup', backupFile, '--with-files', '--json']);
    exits(t, res, 0, 'db backup');
    t.match(res.json(), { file: backupFile, kind: 'external', method: 'pg_dump', database: new URL(source).pathname.slice(1), withFiles: true, files: 1 });
    const log = readFileSync(calls, 'utf8');
    t.match(log, /pg_dump --format=custom /);
    t.match(log, /PGPASSWORD is set/);
    const password = decodeURIComponent(new URL(source).password);
    t.ok(password.length > 0, 'the database URL has a password');
    t.notOk(log.includes(password), 'which no command line carries');
    // Only this archive's: the embedded part runs beside this one and may be writing its own.
    t.same(
      readdirSync(work).filter((f) => f.startsWith(`${path.basename(backupFile)}.partial-`)),
      [],
      'no partial file is left',
    );
    exits(t, await cli(source, sourceFiles, ['db', 'backup', backupFile]), 2, 'an existing file without --yes');
  });

  t.test('external: restore into an empty database brings back the data and the files; over one that is not empty it wants --yes and no one connected', async (t) => {
    t.equal((await inspectDatabase(target)).relations, 0, 'the target starts empty');
    const res = await cli(target, targetFiles, ['db', 'restore', backupFile, '--json']);
    exits(t, res, 0, 'db restore');
    t.match(res.json(), { kind: 'external', replaced: false, withFiles: true, file: backupFile });
    t.ok(res.json().relations > 20, 'the tables are back');
    t.match(readFileSync(calls, 'utf8'), /pg_restore --single-transaction --no-owner --no-privileges /);

    // A bare pg_dump file, as an older ticketd wrote: restore still reads it.
    const legacy = path.join(work, 'legacy.dump');
    await promisify(execFile)(server.dump.path, ['--format=custom', `--file=${legacy}`, `--dbname=${server.source}`]);
    await withApp(target, targetFiles, async (app) => {
      const restored = await ticketsIn(app);
      t.same(restored.titles, ['Kept across a restore'], 'the same key reads the same ticket');
      t.equal(restored.comments, 1, 'and its reply');
      t.ok(restored.attachment?.equals(attachmentBytes), "and its attachment's bytes");
      await makeTicket(client(app, made.key), made.base, { title: 'Made after the backup' });
      const busy = await cli(target, targetFiles, ['db', 'restore', legacy, '--yes']);
      exits(t, busy, 1, 'restore while the app is connected');
      t.match(busy.stderr, /other session\(s\) are connected/);
    });
    const refused = await cli(target, targetFiles, ['db', 'restore', backupFile]);
    exits(t, refused, 2, 'without --yes');
    t.match(refused.stderr, /--yes/);

    const replaced = await cli(target, targetFiles, ['db', 'restore', legacy, '--yes', '--json']);
    exits(t, replaced, 0, 'a bare pg_dump file, with --yes');
    t.match(replaced.json(), { replaced: true, withFiles: false });
    t.same(await withApp(target, targetFiles, async (app) => (await ticketsIn(app)).titles), ['Kept across a restore'], "the backup's state, nothing of what came after");
  });

  t.test('external, object storage: --with-files lists the bucket, --copy-objects copies it; a restore puts the objects into the storage configured then', async (t) => {
    const [bucket, elsewhere] = await Promise.all([startS3('backed-up'), startS3('restored-into')]);
    t.teardown(() => Promise.all([bucket.stop(), elsewhere.stop()]));
    // The source's files move to its bucket, as `storage migrate --to s3` moves them.
    const into = new S3Storage(bucket.settings, s3StagingDir(sourceFiles));
    await migrateObjects(new LocalDiskStorage(localStorageRoot(sourceFiles)), into, path.join(work, 'migrate.journal'), () => undefined);
    await into.destroy();
    rmSync(localStorageRoot(sourceFiles), { recursive: true });

    const [listOnly, copied] = [path.join(work, 'listed.tgz'), path.join(work, 'copied.tgz')];
    const [listed, withObjects, without, onDisk] = await Promise.all([
      cli(source, sourceFiles, ['db', 'backup', listOnly, '--with-files', '--json'], bucket.env),
      cli(source, sourceFiles, ['db', 'backup', copied, '--with-files', '--copy-objects', '--json'], bucket.env),
      cli(source, sourceFiles, ['db', 'backup', path.join(work, 'never.tgz'), '--copy-objects'], bucket.env),
      cli(source, sourceFiles, ['db', 'backup', path.join(work, 'never.tgz'), '--with-files', '--copy-objects']),
    ]);
    exits(t, listed, 0, 'backup with the object list');
    t.match(listed.json(), { withFiles: true, files: 0, objects: { count: 1, bytes: attachmentBytes.length, copied: false } });
    exits(t, withObjects, 0, 'backup with the objects');
    t.match(withObjects.json(), { withFiles: true, objects: { count: 1, bytes: attachmentBytes.length, copied: true } });
    const objectsIn = async (file: string) => [...(await readArchive(file)).members.keys()].filter((m) => m.startsWith('objects/'));
    t.same(await objectsIn(copied), [`objects/${made.attachmentId}`], "the attachment's object is in the archive");
    t.same(await objectsIn(listOnly), [], 'and in the list-only one, only its name');
    exits(t, without, 2, '--copy-objects without --with-files');
    exits(t, onDisk, 2, '--copy-objects on local storage');
    t.match(onDisk.stderr, /object storage/);
    exits(t, await runCli(['db', 'verify', copied]), 0, 'db verify');

    // Into another bucket, one that has never held these objects: the copied ones are put there.
    const restored = await cli(target, targetFiles, ['db', 'restore', copied, '--yes', '--json'], elsewhere.env);
    exits(t, restored, 0, 'restore with the objects');
    t.match(restored.json(), { withFiles: true, objects: { restored: 1, missing: 0 } });
    const read = await withApp(target, targetFiles, (app) => ticketsIn(app), elsewhere.env);
    t.same(read.titles, ['Kept across a restore']);
    t.ok(read.attachment?.equals(attachmentBytes), "the attachment's bytes, from the other bucket");

    // A list alone restores no bytes: a bucket without them is reported.
    const missing = await cli(target, targetFiles, ['db', 'restore', listOnly, '--yes', '--json'], { ...elsewhere.env, TICKETD_S3_PREFIX: 'elsewhere/' });
    exits(t, missing, 0, 'restore with the list only');
    t.match(missing.json(), { objects: { restored: 0, missing: 1 } });
    const warned = await cli(target, targetFiles, ['db', 'restore', listOnly, '--yes'], { ...elsewhere.env, TICKETD_S3_PREFIX: 'elsewhere/' });
    t.match(warned.stdout, /warning: 1 objects the backup listed are not in storage/);
  });
}
