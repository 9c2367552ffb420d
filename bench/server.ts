/** What the benches share: database URLs, one-off SQL, bin/ticketd as a child process, a request rate, and ticketd's own code in this process for fast set-up. */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { EmbeddedPostgres } from '../server/integrations/embedded-postgres.js';
import { packageRoot } from '../server/core/paths.js';
import { createServices } from '../server/compose.js';
import { loadConfig } from '../server/core/config.js';
import { systemCtx } from '../server/core/context.js';
import { createDb } from '../server/core/db.js';
import type { Services } from '../server/core/services.js';
import { loginLink } from '../server/flows/sign-in.js';

/** Webhooks to a receiver in the bench process: loopback, which webhooks may not target by default. */
export const RECEIVER_ON_LOOPBACK = { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' };

/** An embedded cluster sized for a 1M-ticket seed and a loaded server (the benches' default). */
export const BENCH_POSTGRES_SETTINGS = {
  shared_buffers: '2GB',
  work_mem: '16MB',
  maintenance_work_mem: '512MB',
  max_wal_size: '8GB',
  checkpoint_timeout: '30min',
  max_connections: '200',
};

/** The admin URL of BENCH_DATABASE_URL, else of a fresh embedded cluster with these settings; cleanup stops and removes that one. */
export async function adminDatabase(settings: Record<string, string>): Promise<{ adminUrl: string; cleanup: () => Promise<void> }> {
  if (process.env.BENCH_DATABASE_URL) return { adminUrl: process.env.BENCH_DATABASE_URL, cleanup: async () => undefined };
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-bench-'));
  chmodSync(dataDir, 0o755);
  const handle = await new EmbeddedPostgres({ dataDir, settings }).acquire();
  return {
    adminUrl: withDatabase(handle.url, 'postgres'),
    cleanup: async () => {
      await handle.release();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function sql<R extends pg.QueryResultRow = Record<string, unknown>>(url: string, text: string, params: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<R>(text, params)).rows;
  } finally {
    await c.end();
  }
}

/** SIGTERM to each process; resolves once all have exited. */
export async function stop(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise((r) => {
          c.once('exit', r);
          c.kill('SIGTERM');
        }),
    ),
  );
}

/** `bin/ticketd start` in a role on databaseUrl (`nodeArgs`: node's own, e.g. --cpu-prof); resolves with its start-up JSON line once it serves. */
export async function startTicketd(
  role: 'all' | 'api' | 'dispatcher',
  databaseUrl: string,
  env: Record<string, string> = {},
  nodeArgs: readonly string[] = [],
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<{ child: ChildProcess; info: any }> {
  const child = spawn(process.execPath, [...nodeArgs, path.join(packageRoot, 'bin', 'ticketd'), 'start', '--role', role, '--json', '--port', '0', '--dispatcher-port', '0'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, TICKETD_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.on('exit', (code) => reject(new Error(`ticketd ${role} exited with ${code}`)));
  });
  return { child, info: JSON.parse(line) };
}

/** A member's session token, as an operator without mail gets one: `ticketd members login-link`, then POST /v1/auth/verify. */
export async function sessionTokenFor(databaseUrl: string, serverUrl: string, email: string): Promise<string> {
  const child = spawn(process.execPath, [path.join(packageRoot, 'bin', 'ticketd'), 'members', 'login-link', email, '--origin', 'http://localhost:5173', '--json'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, TICKETD_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`ticketd members login-link exited with ${code}`);
  const token = new URL((JSON.parse(out) as { url: string }).url).searchParams.get('token');
  const res = await fetch(`${serverUrl}/v1/auth/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
  if (res.status !== 200) throw new Error(`verify: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { sessionToken: string }).sessionToken;
}

/**
 * ticketd's services in this process, on databaseUrl with a small pool: for set-up that calls the
 * server's own code (members, sign-in links) where a CLI process per call would be too slow.
 */
export function inProcessServices(databaseUrl: string, env: Record<string, string> = {}): { services: Services; close: () => Promise<void> } {
  const config = loadConfig({ env: { DATABASE_URL: databaseUrl, TICKETD_LOG_LEVEL: 'warn', ...env } });
  const db = createDb(databaseUrl, { poolMax: 8, poolMin: 0, applicationName: 'ticketd-bench-setup' });
  const services = createServices({ config, db });
  return {
    services,
    close: async () => {
      await services.close();
      await db.destroy();
    },
  };
}

/**
 * sessionTokenFor without a process per member: the sign-in link from the server's own code in
 * this process (loginLink, what `ticketd members login-link` prints), spent at POST /v1/auth/verify
 * as the dashboard does, so the running server opens the session.
 */
export async function sessionTokenInProcess(services: Services, serverUrl: string, accountId: string, email: string): Promise<string> {
  const link = await loginLink(systemCtx(services, 'bench'), email, 'http://localhost:5173', accountId);
  const token = new URL(link.url).searchParams.get('token');
  const res = await fetch(`${serverUrl}/v1/auth/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
  if (res.status !== 200) throw new Error(`verify: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { sessionToken: string }).sessionToken;
}

/** A sample's value in Prometheus text (the first series of that name, or the one with exactly these `labels` as printed), NaN when absent. */
export function metricValue(body: string, name: string, labels?: string): number {
  if (labels === undefined) return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(body)?.[1] ?? NaN);
  const line = body.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return Number(line?.slice(line.lastIndexOf(' ') + 1) ?? NaN);
}

/** POST a JSON body to a running ticketd (with an API key, or none); the 201's body, or an error. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function post(base: string, key: string | null, url: string, body: unknown): Promise<any> {
  const res = await fetch(`${base}${url}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`POST ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** A request of requestsPerSecond: its method, path and JSON body. */
export interface RateRequest {
  method: 'POST' | 'PATCH';
  path: string;
  body: unknown;
}

/**
 * Requests per second over `seconds`, `connections` at once, each connection keeping to one of
 * `brandIds` (dealt in turn) and counting its requests from 1 (`n`); with `keyed`, each request
 * has an idempotency key of its own, as the SDK sends. Rejects when an answer is not 2xx.
 */
export function requestsPerSecond(
  url: string,
  headers: Record<string, string>,
  load: { connections: number; seconds: number; brandIds: readonly string[]; keyed: boolean },
  request: (brand: string, n: number) => RateRequest,
): Promise<number> {
  let dealt = 0;
  return new Promise((resolve, reject) =>
    autocannon(
      {
        url,
        connections: load.connections,
        duration: load.seconds,
        initialContext: {},
        requests: [
          {
            setupRequest: (req, context) => {
              const c = context as { brand?: string; n?: number };
              c.brand ??= load.brandIds[dealt++ % load.brandIds.length];
              c.n = (c.n ?? 0) + 1;
              const r = request(c.brand!, c.n);
              const keyed = load.keyed ? { 'x-idempotency-key': randomUUID() } : {};
              return { ...req, method: r.method, path: r.path, headers: { ...headers, ...keyed }, body: JSON.stringify(r.body) };
            },
          },
        ],
      },
      (err, result) => (err ? reject(err) : result.non2xx ? reject(new Error(`${result.non2xx} requests failed`)) : resolve(result.requests.average)),
    ),
  );
}
