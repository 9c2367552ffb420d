import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Test } from 'tap';
import { createDb, type Db } from '../../server/core/db.js';
import { distRoot } from '../../server/core/paths.js';

export function adminUrl(): string {
  const url = process.env.TICKETD_TEST_ADMIN_URL;
  if (!url || !process.env.TICKETD_TEST_TEMPLATE) throw new Error('Run the tests with `npm test`: it prepares the database they need');
  return url;
}

export function urlFor(database: string): string {
  const u = new URL(adminUrl());
  u.pathname = `/${database}`;
  return u.toString();
}

export async function adminQuery(sql: string, params: unknown[] = []): Promise<pg.QueryResult> {
  return queryAt(adminUrl(), sql, params);
}

/** One statement on its own connection to `url` (without parameters, pg sends it by the simple protocol). */
export async function queryAt(url: string, sql: string, params: unknown[] = []): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An empty database, dropped when the test ends. `fromTemplate` clones the migrated template. */
export async function freshDatabase(t: Test, options: { fromTemplate?: boolean } = {}): Promise<{ url: string; name: string; db: Db }> {
  const name = `ticketd_t_${randomBytes(6).toString('hex')}`;
  const template = options.fromTemplate === false ? 'template0' : process.env.TICKETD_TEST_TEMPLATE!;
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
      break;
    } catch (err) {
      // 55006: another file is cloning the template this instant.
      if ((err as { code?: string }).code !== '55006' || attempt > 50) throw err;
      await sleep(50 + Math.random() * 100);
    }
  }
  // Commits need not wait for the disk: no test outlives its server, and an external server (fsync on)
  // would otherwise spend milliseconds on every commit. The embedded cluster runs so already.
  await adminQuery(`ALTER DATABASE "${name}" SET synchronous_commit = off`);
  const url = urlFor(name);
  const db = createDb(url, { poolMax: 5, poolMin: 0 });
  t.teardown(async () => {
    await db.destroy();
    await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });
  return { url, name, db };
}

/** The migrations this build ships (compiled files in dist/migrations). */
export function shippedMigrations(): string[] {
  return readdirSync(path.join(distRoot, 'migrations'))
    .filter((f) => f.endsWith('.js'))
    .sort();
}
