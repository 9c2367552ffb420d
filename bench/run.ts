/**
 * `npm run bench`: starts the real server (bin/ticketd start) on loopback against a fresh database
 * and drives it with autocannon from this process. Prints numbers; asserts nothing.
 *
 *   npm run bench -- [--duration 5] [--connections 32]
 *   BENCH_DATABASE_URL=postgres://admin@host/postgres npm run bench   (else an embedded cluster)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import pg from 'pg';
import { packageRoot } from '../server/core/paths.js';
import { EmbeddedPostgres } from '../server/integrations/embedded-postgres.js';

const { values } = parseArgs({ options: { duration: { type: 'string', default: '5' }, connections: { type: 'string', default: '32' } } });
const duration = Number(values.duration);
const connections = Number(values.connections);

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin(url: string, sql: string) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try { await c.query(sql); } finally { await c.end(); }
}

function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  return Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024);
}

async function startServer(databaseUrl: string): Promise<{ child: ChildProcess; url: string; liveKey: string; brandId: string; startupMs: number }> {
  const started = Date.now();
  const child = spawn(process.execPath, [path.join(packageRoot, 'bin', 'ticketd'), 'start', '--json', '--port', '0'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, TICKETD_LOG_LEVEL: 'warn', TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000000' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  const info = JSON.parse(line);
  return { child, url: info.url, liveKey: info.bootstrap.apiKeys.live.key, brandId: info.bootstrap.brand.id, startupMs: Date.now() - started };
}

interface Row { scenario: string; reqPerSec: number; p50ms: number; p99ms: number; non2xx: number; errors: number; rssMiB: number }

async function measure(scenario: string, pid: number, opts: autocannon.Options): Promise<Row> {
  await autocannon({ duration: 1, connections, ...opts }); // warm-up: JIT and the connection pool
  const result = await autocannon({ duration, connections, ...opts });
  return {
    scenario,
    reqPerSec: Math.round(result.requests.average),
    p50ms: result.latency.p50,
    p99ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    rssMiB: rssMiB(pid),
  };
}

async function main() {
  let adminUrl = process.env.BENCH_DATABASE_URL;
  let cleanup = async () => undefined as void;
  if (!adminUrl) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-bench-'));
    chmodSync(dataDir, 0o755);
    const handle = await new EmbeddedPostgres({ dataDir }).acquire();
    adminUrl = withDatabase(handle.url, 'postgres');
    cleanup = async () => { await handle.release(); rmSync(dataDir, { recursive: true, force: true }); };
  }
  const database = `ticketd_bench_${randomBytes(4).toString('hex')}`;
  await admin(adminUrl, `CREATE DATABASE ${database}`);
  const server = await startServer(withDatabase(adminUrl, database));
  const auth = { authorization: `Bearer ${server.liveKey}`, 'content-type': 'application/json' };
  try {
    const rows: Row[] = [];
    rows.push(await measure('GET /v1/health/live (no auth, no SQL)', server.child.pid!, { url: `${server.url}/v1/health/live` }));
    rows.push(await measure('GET /v1/brands (API key + list)', server.child.pid!, { url: `${server.url}/v1/brands`, headers: auth }));
    rows.push(await measure('GET /v1/brands/:id (API key + get)', server.child.pid!, { url: `${server.url}/v1/brands/${server.brandId}`, headers: auth }));
    let n = 0;
    rows.push(await measure('POST /v1/brands (insert)', server.child.pid!, {
      url: `${server.url}/v1/brands`, method: 'POST', headers: auth,
      requests: [{ setupRequest: (req) => ({ ...req, body: JSON.stringify({ name: 'Bench', slug: `bench-${process.pid}-${n++}` }) }) }],
    }));
    rows.push(await measure('GET /v1/brands (401, bad key)', server.child.pid!, { url: `${server.url}/v1/brands`, headers: { authorization: 'Bearer sk_live_nope' } }));

    process.stdout.write(`\nticketd bench: ${duration}s per scenario, ${connections} connections, loopback, ${os.cpus().length} cores\n`);
    process.stdout.write(`server start-up on an empty database (migrate + bootstrap): ${server.startupMs} ms\n\n`);
    console.table(rows);
    process.stdout.write(`${JSON.stringify({ startupMs: server.startupMs, duration, connections, rows })}\n`);
  } finally {
    server.child.kill('SIGTERM');
    await new Promise((r) => server.child.once('exit', r));
    await admin(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
  }
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack}\n`);
  process.exit(1);
});
