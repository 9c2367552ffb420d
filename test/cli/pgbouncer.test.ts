import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { freePort } from '../../server/integrations/embedded-postgres.js';
import { startServer, statusAfterNotify } from '../helpers/cli.js';
import { adminQuery, freshDatabase, queryAt } from '../helpers/db.js';
import { receiver } from '../helpers/receiver.js';

// The real bin/ticketd behind PgBouncer in transaction mode, with LISTEN and migrations on the
// direct URL. Runs only where pgbouncer is installed.

const pgbouncer = (process.env.PATH ?? '')
  .split(':')
  .map((dir) => path.join(dir, 'pgbouncer'))
  .find((file) => existsSync(file));

/** PgBouncer refuses to run as root: then it runs as the postgres user (or nobody). */
function unprivileged(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  try {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    return { uid: 65534, gid: 65534 };
  }
}

/** PgBouncer in transaction mode on a free loopback port, in front of `databaseUrl`; the database is named `ticketd` there. */
async function startPgbouncer(t: Test, databaseUrl: string): Promise<{ url: string; admin: string; version: string }> {
  const target = new URL(databaseUrl);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-pgbouncer-'));
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const quote = (v: string) => `'${decodeURIComponent(v).replace(/'/g, "\\'")}'`;
  const ini = path.join(dir, 'pgbouncer.ini');
  writeFileSync(
    ini,
    [
      '[databases]',
      // PgBouncer refuses an empty quoted value: a server on trust authentication gets no password at all.
      `ticketd = host=${target.hostname} port=${target.port} dbname=${target.pathname.slice(1)} user=${quote(target.username)}${target.password ? ` password=${quote(target.password)}` : ''}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      // No authentication on loopback; the console (SHOW SERVERS) is open to any user name too.
      'auth_type = any',
      'pool_mode = transaction',
      // Fewer server connections than the clients' pools hold: sessions are really shared.
      'default_pool_size = 3',
      'max_client_conn = 200',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const owner = unprivileged();
  const version = execFileSync(pgbouncer!, ['-V'], { encoding: 'utf8' }).trim();
  const child = spawn(pgbouncer!, [ini], { ...(owner ?? {}), stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => {
    log += d;
  });
  const exited = new Promise((resolve) => child.on('close', resolve));
  t.teardown(async () => {
    child.kill('SIGKILL');
    await exited;
  });
  for (let attempt = 0; ; attempt++) {
    const connected = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (connected) break;
    if (attempt > 200 || child.exitCode !== null) throw new Error(`pgbouncer did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `postgres://ticketd@127.0.0.1:${port}/ticketd`, admin: `postgres://pgbouncer@127.0.0.1:${port}/pgbouncer`, version };
}

t.test('behind PgBouncer in transaction mode', { skip: pgbouncer ? false : 'pgbouncer is not on PATH (apt-get install pgbouncer to run this test)' }, async (t) => {
  const { url, name } = await freshDatabase(t);
  const bouncer = await startPgbouncer(t, url);
  t.comment(bouncer.version);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-pgbouncer-data-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = {
    DATABASE_URL: bouncer.url,
    DATABASE_DIRECT_URL: url,
    TICKETD_DATABASE_TRANSACTION_POOLING: 'true',
    TICKETD_DATA_DIR: dataDir,
    TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true',
    TICKETD_LOG_LEVEL: 'warn',
  };
  // Two processes starting at once: the second waits for the first's migration lock, which must
  // live on a direct session (through the pooler it would stay on a server connection for good).
  const servers = [startServer(env, ['--role', 'all']), startServer(env, ['--role', 'api'])];
  t.teardown(async () => {
    for (const s of servers) s.child.kill('SIGTERM');
    await Promise.all(servers.map((s) => s.exited));
  });
  const [all, api] = await Promise.all(servers.map((s) => s.ready.catch(() => null)));
  if (!all || !api) throw new Error(`a process did not start:\n${servers.map((s) => s.stderr()).join('\n')}`);
  const key: string = (all.bootstrap ?? api.bootstrap).apiKeys.live.key;
  const brandId: string = (all.bootstrap ?? api.bootstrap).brand.id;
  const call = async (base: string, method: string, p: string, body?: unknown, credential = key) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `Bearer ${credential}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };

  const hook = await receiver(t);
  t.equal((await call(all.url, 'POST', `/v1/brands/${brandId}/webhooks`, { url: hook.url, events: ['ticket.created'] })).status, 201);

  const CREATES = 30;
  const statuses = await Promise.all(
    Array.from({ length: CREATES }, (_, i) =>
      call(i % 2 ? api.url : all.url, 'POST', `/v1/brands/${brandId}/tickets`, { title: `Pooled ${i}`, customerEmail: `c${i % 4}@example.com`, tags: ['pooled'] }).then(
        (r) => r.status,
      ),
    ),
  );
  t.same(statuses, Array(CREATES).fill(201), 'every create answered 201');
  const page = await call(api.url, 'GET', `/v1/brands/${brandId}/tickets?limit=100`);
  t.equal(page.status, 200);
  const numbers: number[] = page.body.data.map((x: { ticketNumber: number }) => x.ticketNumber).sort((a: number, b: number) => a - b);
  t.same(
    numbers,
    Array.from({ length: CREATES }, (_, i) => numbers[0]! + i),
    'the list shows every ticket, numbered without a gap',
  );
  t.equal((await call(all.url, 'GET', `/v1/brands/${brandId}/tickets?search=pooled&limit=100`)).body.data.length, CREATES, 'search answers');
  t.notMatch(servers.map((s) => s.stderr()).join('\n'), /batch of ticket creates failed|prepared statement/, 'no named statement met a session that did not know it');

  const deadline = Date.now() + 30_000;
  while (hook.received.length < CREATES && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.equal(hook.received.length, CREATES, 'the dispatcher delivered every ticket.created');

  // LISTEN sessions are direct, one per listener (two in the all process, one in the api one), none a pooled connection.
  const listeners = (await adminQuery(`select pid from pg_stat_activity where datname = $1 and application_name = 'ticketd-listen'`, [name])).rows.map((r) => r.pid);
  const pooled = (await queryAt(bouncer.admin, 'SHOW SERVERS')).rows.map((r) => Number(r.remote_pid));
  t.ok(listeners.length >= 3, 'the key caches and the dispatcher listen', { listeners });
  t.same(
    listeners.filter((pid) => pooled.includes(pid)),
    [],
    'no listener goes through the pooler',
  );
  const stats = (await queryAt(bouncer.admin, 'SHOW STATS')).rows.find((r) => r.database === 'ticketd');
  t.ok(Number(stats?.total_xact_count) > CREATES, 'the requests went through the pooler', { stats });

  // The key cache of one process hears a revocation made through the other.
  const extra = await call(all.url, 'POST', '/v1/accounts/me/api-keys', { name: 'pooled' });
  t.equal((await call(api.url, 'GET', '/v1/brands', undefined, extra.body.key)).status, 200);
  t.equal((await call(api.url, 'GET', '/v1/brands', undefined, extra.body.key)).status, 200, 'cached in the api process');
  t.equal((await call(all.url, 'DELETE', `/v1/accounts/me/api-keys/${extra.body.id}`)).status, 200);
  t.equal(await statusAfterNotify(() => call(api.url, 'GET', '/v1/brands', undefined, extra.body.key), 401), 401, 'refused by the other process');
});
