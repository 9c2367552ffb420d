import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Test } from 'tap';
import { createDb, type Db } from '../../server/core/db.js';
import { migrateLatest } from '../../server/core/migrate.js';
import { distRoot } from '../../server/core/paths.js';
import { createClusterDatabase } from '../citus/database.js';

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

/** Whether the suite runs on a Citus cluster (its Citus mode, TEST_CITUS_URL). */
export const onCitusCluster = process.env.TICKETD_TEST_CITUS === '1';

/** Whether a statement of this database waits for a lock; on a cluster, on whichever node holds it. */
export async function aStatementWaitsForALock(db: Db): Promise<boolean> {
  const sql = onCitusCluster
    ? `select count(*) as n from citus_lock_waits w join citus_stat_activity a on a.global_pid = w.waiting_gpid where a.datname = current_database()`
    : `select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
  return Number((await db.raw(sql)).rows[0].n) > 0;
}

/**
 * Runs the statements that make (or drop) a trigger injecting a fault, on a cluster too: Citus
 * takes a trigger on a distributed table only with its unsafe-trigger switch on, set here for this
 * one transaction (ticketd itself runs with it off). There the trigger fires on the worker that
 * holds the row.
 */
export async function faultTriggerDdl(db: Db, ...statements: string[]): Promise<void> {
  await db.transaction(async (trx) => {
    if (onCitusCluster) {
      await trx.raw('set local citus.enable_unsafe_triggers = on');
      // Function and trigger DDL in one transaction goes over one connection per node.
      await trx.raw(`set local citus.multi_shard_modify_mode to 'sequential'`);
    }
    for (const sql of statements) await trx.raw(sql);
  });
}

/**
 * Whether a commit of this database sleeps in a deferred trigger: a COMMIT, or a statement run on
 * its own (its commit ends it); on a cluster, a worker's PREPARE or COMMIT too. Only the test's
 * trigger sleeps.
 */
export async function aCommitSleeps(db: Db): Promise<boolean> {
  const sql = onCitusCluster
    ? `select 1 from citus_stat_activity where datname = current_database() and wait_event = 'PgSleep'`
    : `select 1 from pg_stat_activity where datname = current_database() and wait_event = 'PgSleep'`;
  return (await db.raw(sql)).rows.length > 0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An empty database, dropped when the test ends. `fromTemplate` clones the migrated template. */
export async function freshDatabase(t: Test, options: { fromTemplate?: boolean } = {}): Promise<{ url: string; name: string; db: Db }> {
  const name = `ticketd_t_${randomBytes(6).toString('hex')}`;
  if (onCitusCluster) return citusDatabase(t, name, options.fromTemplate !== false);
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

/**
 * The Citus mode (TEST_CITUS_URL): a database made on the cluster whose coordinator is the admin
 * URL, with the extension and the nodes registered in it, migrated (which distributes the tables)
 * unless `migrated` is false. Citus copies no template, so each file migrates its own; four shards
 * per table keep the distribution short and still spread an account's neighbours over the workers.
 */
async function citusDatabase(t: Test, name: string, migrated: boolean): Promise<{ url: string; name: string; db: Db }> {
  const { url, drop } = await createClusterDatabase(adminUrl(), name, { 'citus.shard_count': '4', synchronous_commit: 'off' });
  const db = createDb(url, { poolMax: 5, poolMin: 0 });
  t.teardown(async () => {
    await db.destroy();
    await drop();
  });
  if (migrated) await migrateLatest(db);
  return { url, name, db };
}
