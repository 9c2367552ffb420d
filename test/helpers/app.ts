import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { loadConfig, type Config } from '../../server/core/config.js';
import { createDb, type Db } from '../../server/core/db.js';
import type { Services } from '../../server/core/services.js';
import { createServices } from '../../server/compose.js';
import { testNow } from './clock.js';
import { freshDatabase } from './db.js';

/** A directory with no ticketd.config.json in it, so a developer's own config never leaks into tests. */
export const emptyDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-cwd-'));
process.on('exit', () => rmSync(emptyDir, { recursive: true, force: true }));

export function testConfig(env: Record<string, string>): Config {
  // DNS goes to a loopback port where nothing answers (refused at once), never to the network; tests that look names up start their own server (helpers/dns.ts).
  // An IMAP server that does not answer (the world's mailbox) is given up on quickly.
  // Connected stores are called on a loopback port where nothing answers unless a test starts a fake store (helpers/bigcommerce-store.ts).
  return loadConfig({
    env: {
      TICKETD_LOG_LEVEL: process.env.TICKETD_TEST_LOG_LEVEL ?? 'silent',
      TICKETD_DNS_SERVERS: '127.0.0.1:9',
      TICKETD_MAILBOX_TIMEOUT_MS: '500',
      TICKETD_COMMERCE_BIGCOMMERCE_API_URL: 'http://127.0.0.1:9',
      // The S3 mode of a file-bearing test (helpers/s3.ts inS3Mode): its files in a bucket.
      ...(JSON.parse(process.env.TICKETD_TEST_STORAGE_ENV ?? '{}') as Record<string, string>),
      ...env,
    },
    cwd: emptyDir,
  });
}

export interface TestApp {
  app: FastifyInstance;
  db: Db;
  url: string;
  config: Config;
}

/** A second app with its own pool on the same database as `first`, as another API process would be. */
export async function secondInstance(t: Test, first: TestApp): Promise<{ app: FastifyInstance; db: Db }> {
  const db = createDb(first.url, { poolMax: 3, poolMin: 0 });
  const app = await buildApp({ config: first.config, db, services: servicesOf(db, first.config) });
  t.teardown(async () => {
    await app.close();
    await servicesOf(db).close();
    await db.destroy();
  });
  return { app, db };
}

/** The real Fastify app on this file's own fresh database; `clock` replaces the services' clock (default: testNow). */
export async function testApp(t: Test, env: Record<string, string> = {}, options: { clock?: () => number } = {}): Promise<TestApp> {
  const { url, db } = await freshDatabase(t);
  const config = testConfig({ DATABASE_URL: url, ...env });
  const services = servicesOf(db, config, options.clock);
  const app = await buildApp({ config, db, services });
  t.teardown(async () => {
    await app.close();
    await services.close();
  });
  return { app, db, url, config };
}

const servicesByDb = new WeakMap<Db, Services>();

/**
 * The services tests call with a system ctx on `db`: one instance per pool, the same one the
 * test's app serves with (so a test sees the app's caches).
 */
export function servicesOf(db: Db, config?: Config, clock?: () => number): Services {
  let services = servicesByDb.get(db);
  if (!services) servicesByDb.set(db, (services = createServices({ config: config ?? testConfig({}), db, clock: clock ?? testNow })));
  return services;
}

export interface Reply {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  headers: OutgoingHttpHeaders;
}

/** A client bound to one credential: call('GET', '/v1/brands'). */
export function client(app: FastifyInstance, key?: string) {
  return async (method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> => {
    const res = await app.inject({
      method: method as 'GET',
      url,
      // A string body is sent as-is (to test malformed JSON); objects are encoded by inject.
      headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(typeof body === 'string' ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body === undefined ? {} : { payload: body as string | object }),
    });
    let parsed: unknown = res.body;
    try {
      parsed = res.body ? JSON.parse(res.body) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.statusCode, body: parsed, headers: res.headers };
  };
}

export interface Signup {
  accountId: string;
  ownerId: string;
  liveKey: string;
  testKey: string;
  live: ReturnType<typeof client>;
  test: ReturnType<typeof client>;
}

/** A new account through the public API, with clients for its live and test keys. */
export async function signup(app: FastifyInstance, email = `owner-${Math.random().toString(36).slice(2)}@example.com`): Promise<Signup> {
  const res = await client(app)('POST', '/v1/accounts', { email, name: 'Test Owner' });
  if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${JSON.stringify(res.body)}`);
  const { account, owner, apiKeys } = res.body;
  return {
    accountId: account.id,
    ownerId: owner.id,
    liveKey: apiKeys.live.key,
    testKey: apiKeys.test.key,
    live: client(app, apiKeys.live.key),
    test: client(app, apiKeys.test.key),
  };
}

/** The documented error shape: status, stable code, a sentence, and the request id of the header. */
export function assertErrorShape(t: Test, res: Reply, status: number, code: string): void {
  t.equal(res.status, status, `status ${status}`);
  t.equal(res.body?.statusCode, status);
  t.equal(res.body?.code, code, `code ${code}`);
  t.type(res.body?.error, 'string');
  t.type(res.body?.message, 'string');
  t.ok(String(res.body?.message).length > 5, 'message is a sentence');
  t.equal(res.body?.requestId, res.headers['x-request-id'], 'body names the request id of the header');
}

let brandSeq = 0;

/** A brand in the mode of `call`, with a slug unique in this test process. */
export async function makeBrand(call: ReturnType<typeof client>, name = 'Acme Support'): Promise<{ id: string }> {
  const res = await call('POST', '/v1/brands', { name, slug: `brand-${process.pid}-${++brandSeq}` });
  if (res.status !== 201) throw new Error(`brand create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A new account with one live brand: the owner's clients, the brand and its base path. */
export async function ownerWithBrand(app: FastifyInstance): Promise<{ owner: Signup; brand: { id: string }; base: string }> {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  return { owner, brand, base: `/v1/brands/${brand.id}` };
}

/** Set-up step: a POST that must answer 201; returns what it created. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function mustCreate(call: ReturnType<typeof client>, url: string, body: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await call('POST', url, body, headers);
  if (res.status !== 201) throw new Error(`create failed: POST ${url} ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Set-up step: a ticket in the brand at `base` (`/v1/brands/<id>`). */
export function makeTicket(
  call: ReturnType<typeof client>,
  base: string,
  body: Record<string, unknown> = { title: 'A ticket' },
  headers: Record<string, string> = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<any> {
  return mustCreate(call, `${base}/tickets`, body, headers);
}

/** A 404 in the error shape, labelled with what was out of reach. */
export function assertNotFound(t: Test, res: Reply, label: string): void {
  t.equal(res.status, 404, `${label}: 404`);
  assertErrorShape(t, res, 404, 'not_found');
}

/**
 * Statements the app sends on `db` while `fn` runs (the app and the test share this knex), less
 * those no one request owns: the rate limiter's, which syncs on a timer of its own, and a key's
 * last-used time, written now and then whatever the request.
 */
/** A query's statement: on Citus, runInAccount sends it as the text of a call (core/citus.ts), split at its tables. */
export function statementOf(q: { sql: string; bindings?: unknown[] }): string {
  if (!q.sql.includes('ticketd_in_account(')) return q.sql;
  const [, parts, tables] = q.bindings as [string, string[], string[]];
  return parts.reduce((sql, part, i) => sql + (i ? tables[i - 1] : '') + part, '');
}

export async function statementsDuring(db: Db, fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => {
    if (!q.sql.includes('rate_limit_counters') && !q.sql.includes('last_used_at')) seen.push(statementOf(q));
  };
  db.on('query', listener);
  try {
    await fn();
  } finally {
    db.removeListener('query', listener);
  }
  return seen;
}

/**
 * Who may not reach the objects of `owner`'s brand at `base`, each with the brand path it asks
 * under: another account (under the owner's brand and under its own), another brand of the same
 * account, and the other mode. Each must get 404 for the owner's ids.
 */
export async function outsiders(app: FastifyInstance, owner: Signup, base: string): Promise<[string, ReturnType<typeof client>, string][]> {
  const stranger = await ownerWithBrand(app);
  const side = await makeBrand(owner.live, 'Side');
  const testBrand = await makeBrand(owner.test, 'Test desk');
  return [
    ['another account, the owner’s brand', stranger.owner.live, base],
    ['another account, its own brand', stranger.owner.live, stranger.base],
    ['another brand of the account', owner.live, `/v1/brands/${side.id}`],
    ['the other mode', owner.test, `/v1/brands/${testBrand.id}`],
  ];
}
