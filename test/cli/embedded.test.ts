import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import t from 'tap';
import { runCli, startServer as startTicketd, stopEmbedded, type Server } from '../helpers/cli.js';
import { EmbeddedPostgres, isAlive, SERVER_SETTINGS } from '../../server/integrations/embedded-postgres.js';
import { shippedMigrations } from '../helpers/db.js';

// No DATABASE_URL anywhere in this file: every command runs the embedded PostgreSQL under its
// own TICKETD_DATA_DIR. initdb is slow, so only the tests that need a first start make a cluster.

const servers: Server[] = [];
const dataDirs: string[] = [];

function pidFile(dataDir: string): string {
  return path.join(dataDir, 'postgres', 'postmaster.pid');
}

function postmasterPid(dataDir: string): number | null {
  try {
    return Number(readFileSync(pidFile(dataDir), 'utf8').split('\n')[0]);
  } catch {
    return null;
  }
}

function newDataDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-embedded-'));
  chmodSync(dir, 0o755); // as root, the cluster runs as the postgres user, who must reach it
  dataDirs.push(dir);
  return dir;
}

/** `ticketd start --json --port 0` on the embedded cluster under dataDir, kept running. */
function startServer(dataDir: string, env: Record<string, string> = {}): Server {
  const server = startTicketd({ TICKETD_DATA_DIR: dataDir, ...env });
  servers.push(server);
  return server;
}

/** The exit code, or 'timeout' if the process is still running after ms. */
function exitWithin(server: Server, ms: number): Promise<number | null | 'timeout'> {
  // Unref'd: a deadline that was not needed must not keep the file's process alive until it passes.
  return Promise.race([server.exited, sleep(ms, 'timeout' as const, { ref: false })]);
}

/** Runs statements on the running cluster under dataDir, as its superuser. */
async function onCluster<T>(dataDir: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const cluster = new EmbeddedPostgres({ dataDir });
  const client = new pg.Client({ connectionString: cluster.urlFor(cluster.runningPort()!, 'postgres') });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The running cluster's answer to `show` for each setting. */
function shown(dataDir: string, names: string[]): Promise<Record<string, string>> {
  return onCluster(dataDir, async (client) => {
    const values: Record<string, string> = {};
    for (const name of names) values[name] = (await client.query<Record<string, string>>(`show ${name}`)).rows[0]![name]!;
    return values;
  });
}

async function waitUntil(check: () => boolean, ms = 5_000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) if (check()) return true;
  return check();
}

t.teardown(async () => {
  for (const server of servers) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) continue;
    server.child.kill('SIGTERM');
    if ((await exitWithin(server, 10_000)) === 'timeout') {
      server.child.kill('SIGKILL');
      await server.exited;
    }
  }
  for (const dir of dataDirs) {
    await stopEmbedded(dir);
    rmSync(dir, { recursive: true, force: true });
  }
});

async function api(baseUrl: string, key: string, method = 'GET', body?: unknown) {
  const res = await fetch(`${baseUrl}/v1/brands`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

const lifecycleDir = newDataDir();
const run = (args: string[], dataDir = lifecycleDir) => runCli(args, { TICKETD_DATA_DIR: dataDir }, { timeoutMs: 120_000 });

t.test('db migrate on an empty data dir initialises the cluster, migrates, and stops it again', async (t) => {
  const res = await run(['db', 'migrate', '--json']);
  t.equal(res.code, 0, 'exit 0', { stderr: res.stderr });
  t.same(res.json().applied, shippedMigrations(), 'every migration applied');
  t.match(res.stderr, /initialising embedded PostgreSQL/);
  t.ok(existsSync(path.join(lifecycleDir, 'postgres', 'PG_VERSION')), 'the cluster exists');
  t.notOk(existsSync(pidFile(lifecycleDir)), 'no PostgreSQL left running');

  const status = await run(['db', 'status', '--json']);
  t.equal(status.code, 0, 'db status: exit 0', { stderr: status.stderr });
  t.same(status.json().pending, [], 'nothing pending');
  t.same(status.json().completed, shippedMigrations());
  t.notMatch(status.stderr, /initialising/, 'initialised only once');
  t.notOk(existsSync(pidFile(lifecycleDir)), 'still no PostgreSQL left running');
});

let first: Server;
let info: any; // eslint-disable-line @typescript-eslint/no-explicit-any
let postedBrandId = '';

t.test('start prints its URL and bootstrap keys, and serves the API', async (t) => {
  first = startServer(lifecycleDir);
  info = await first.ready;
  t.ok(info, 'printed a start-up line', { stderr: first.stderr() });
  if (!info) return;
  t.match(info.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  t.equal(info.database, 'embedded');
  t.match(info.bootstrap.apiKeys.live.key, /^sk_live_/);
  t.match(info.bootstrap.apiKeys.test.key, /^sk_test_/);
  t.match(info.bootstrap.brand.id, /^br_/);
  t.match(info.curl, `${info.url}/v1/brands`);
  t.match(info.curl, info.bootstrap.apiKeys.live.key);

  const live = await api(info.url, info.bootstrap.apiKeys.live.key);
  t.equal(live.status, 200);
  t.same(
    live.body.map((b: { id: string }) => b.id),
    [info.bootstrap.brand.id],
    'the live key sees the bootstrap brand',
  );
  const test = await api(info.url, info.bootstrap.apiKeys.test.key);
  t.equal(test.status, 200);
  t.same(test.body, [], 'the test key sees nothing');
  const posted = await api(info.url, info.bootstrap.apiKeys.live.key, 'POST', { name: 'Posted Brand' });
  t.equal(posted.status, 201, 'POST /v1/brands creates a brand');
  postedBrandId = posted.body.id;
});

t.test('CLI commands use the running cluster and leave it running', async (t) => {
  if (!info) return t.fail('the server did not start');
  const pgPid = postmasterPid(lifecycleDir);
  t.ok(pgPid && isAlive(pgPid), 'the server runs PostgreSQL');
  const listed = await run(['brands', 'list', '--json']);
  t.equal(listed.code, 0, 'brands list: exit 0', { stderr: listed.stderr });
  t.same(
    listed
      .json()
      .map((b: { id: string }) => b.id)
      .sort(),
    [info.bootstrap.brand.id, postedBrandId].sort(),
    "sees the server's brands",
  );
  t.notMatch(listed.stderr, /starting embedded PostgreSQL/, 'did not start a second cluster');
  t.notMatch(listed.stderr, /stopping embedded PostgreSQL/, 'did not stop the cluster');
  t.equal(postmasterPid(lifecycleDir), pgPid, 'same postmaster');
  t.ok(isAlive(pgPid!), 'still running');
  t.equal((await api(info.url, info.bootstrap.apiKeys.live.key)).status, 200, 'the server still answers');
  const ready = await fetch(`${info.url}/v1/health/ready`);
  t.equal(ready.status, 200, 'and its database is ready');
  t.same(await shown(lifecycleDir, Object.keys(SERVER_SETTINGS)), SERVER_SETTINGS, "the cluster runs ticketd's settings for a server");
  await onCluster(lifecycleDir, (client) => client.query("alter system set checkpoint_timeout = '10min'"));
});

t.test('SIGTERM stops the server and the embedded PostgreSQL', async (t) => {
  if (!info) return t.fail('the server did not start');
  const pgPid = postmasterPid(lifecycleDir);
  first.child.kill('SIGTERM');
  t.equal(await exitWithin(first, 15_000), 0, 'exit 0');
  t.notOk(existsSync(pidFile(lifecycleDir)), 'postmaster.pid is gone');
  t.ok(await waitUntil(() => !isAlive(pgPid!)), 'the postmaster process ended');
});

t.test('a restart on the same data dir creates nothing new and keeps the data', async (t) => {
  if (!info) return t.fail('the first start failed');
  const again = startServer(lifecycleDir);
  const next = await again.ready;
  t.ok(next, 'printed a start-up line', { stderr: again.stderr() });
  if (!next) return;
  t.equal(next.bootstrap, null, 'no bootstrap on a database that has accounts');
  t.same(
    await shown(lifecycleDir, ['checkpoint_timeout', 'max_wal_size']),
    { checkpoint_timeout: '10min', max_wal_size: SERVER_SETTINGS.max_wal_size },
    "the operator's ALTER SYSTEM wins over ticketd's settings",
  );
  const conf = readFileSync(path.join(new EmbeddedPostgres({ dataDir: lifecycleDir }).clusterDir, 'postgresql.conf'), 'utf8');
  t.equal(conf.split('\n').filter((l) => l.startsWith('include_if_exists')).length, 1, 'postgresql.conf includes them once, after two starts');
  t.equal(next.curl, null);
  const brands = await api(next.url, info.bootstrap.apiKeys.live.key);
  t.equal(brands.status, 200, "the first start's key still works");
  t.same(brands.body.map((b: { id: string }) => b.id).sort(), [info.bootstrap.brand.id, postedBrandId].sort(), 'both brands are still there');
  again.child.kill('SIGINT');
  t.equal(await exitWithin(again, 15_000), 0, 'SIGINT: exit 0');
  t.notOk(existsSync(pidFile(lifecycleDir)), 'postmaster.pid is gone');
  const accounts = await run(['accounts', 'list', '--json']);
  t.equal(accounts.json().length, 1, 'still one account');
});

t.test('a signal during start-up still stops cleanly, and leaves no PostgreSQL running', async (t) => {
  const dir = newDataDir();
  // A deadline far shorter than a first start-up: it counts from the end of start-up, not from the signal.
  const server = startServer(dir, { TICKETD_SHUTDOWN_TIMEOUT_MS: '1000' });
  t.ok(await waitUntil(() => server.stderr().includes('starting embedded PostgreSQL'), 30_000), 'the cluster is being started');
  server.child.kill('SIGTERM');
  t.equal(await exitWithin(server, 20_000), 0, 'exits 0 once start-up is done and everything is stopped', { stderr: server.stderr() });
  t.notOk(existsSync(pidFile(dir)), 'no PostgreSQL left running');
});

t.test('a request still running at the shutdown deadline: exit 1, and PostgreSQL is stopped all the same', async (t) => {
  // The lifecycle's cluster, stopped by now: a start that needs no initdb.
  const dir = lifecycleDir;
  const server = startServer(dir, { TICKETD_SHUTDOWN_TIMEOUT_MS: '500' });
  const info = await server.ready;
  t.ok(info, 'started', { stderr: server.stderr() });
  // A request whose body never finishes arriving is in flight until the request timeout (minutes).
  const url = new URL(info.url);
  const socket = net.connect(Number(url.port), url.hostname);
  await once(socket, 'connect');
  socket.write(`POST /v1/brands HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na`);
  await sleep(200);
  server.child.kill('SIGTERM');
  t.equal(await exitWithin(server, 20_000), 1, 'exits 1: the drain ran past its deadline', { stderr: server.stderr() });
  t.match(server.stderr(), /shutdown took longer than 500 ms/);
  t.notOk(existsSync(pidFile(dir)), 'no PostgreSQL left running');
  socket.destroy();
});

t.test('two first starts at the same moment: one cluster, one bootstrap, one account', async (t) => {
  const dir = newDataDir();
  const a = startServer(dir);
  const b = startServer(dir);
  const [infoA, infoB] = await Promise.all([a.ready, b.ready]);
  t.ok(infoA, 'the first came up', { stderr: a.stderr() });
  t.ok(infoB, 'the second came up', { stderr: b.stderr() });
  const up = [infoA, infoB].filter(Boolean);
  t.equal(up.filter((i) => i.bootstrap).length, 1, 'exactly one of them bootstrapped');
  const key = up.find((i) => i.bootstrap)?.bootstrap.apiKeys.live.key;
  for (const i of up) {
    const res = await api(i.url, key);
    t.equal(res.status, 200, `${i.url} accepts the bootstrap key`);
    t.equal(res.body.length, 1, `${i.url} sees the one brand`);
  }

  // Both stop at the same moment: the last one out must still stop PostgreSQL.
  a.child.kill('SIGTERM');
  b.child.kill('SIGTERM');
  const [codeA, codeB] = await Promise.all([exitWithin(a, 15_000), exitWithin(b, 15_000)]);
  if (infoA) t.equal(codeA, 0, 'the first exits 0');
  else t.equal(codeA, 1, 'the first failed cleanly');
  if (infoB) t.equal(codeB, 0, 'the second exits 0');
  else t.equal(codeB, 1, 'the second failed cleanly');
  t.notOk(existsSync(pidFile(dir)), 'no PostgreSQL left running after both stopped');

  const accounts = await run(['accounts', 'list', '--json'], dir);
  t.equal(accounts.code, 0, 'accounts list: exit 0', { stderr: accounts.stderr });
  t.equal(accounts.json().length, 1, 'exactly one account');
  const status = await run(['db', 'status', '--json'], dir);
  t.same(status.json(), { completed: status.json().completed, pending: [] }, 'fully migrated');
  t.same(status.json().completed, shippedMigrations());
  t.notOk(existsSync(pidFile(dir)), 'and nothing left running');
});
