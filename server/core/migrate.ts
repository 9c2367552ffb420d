import pg from 'pg';
import { distribute } from './citus.js';
import { connectionStringOf, createDb, type Db } from './db.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs fn holding a session advisory lock, on a connection of its own so the pool stays free.
 * knex creates its bookkeeping tables (and the lock row) without any lock: two processes
 * migrating an empty database at once would fail, or leave two lock rows, which locks
 * migrations for good.
 */
async function exclusively<T>(db: Db, fn: () => Promise<T>): Promise<T> {
  const lock = new pg.Client(db.client.config.connection as pg.ClientConfig);
  await lock.connect();
  try {
    await lock.query(`SELECT pg_advisory_lock(hashtext('ticketd:migrate'))`);
    return await fn();
  } finally {
    await lock.end(); // ending the session releases the lock
  }
}

/**
 * knex migrate:latest, then on a Citus coordinator the new tables placed on the cluster
 * (core/citus.ts), waiting while another process (a second server starting at the same
 * moment) migrates instead of failing. With `directUrl` (the database without a pooler in
 * between) it migrates over a pool of its own there: the lock is a session's, and a pooler in
 * transaction mode would leave it on a server connection that others then use.
 */
export async function migrateLatest(db: Db, directUrl?: string | null): Promise<string[]> {
  if (directUrl && directUrl !== connectionStringOf(db)) {
    const direct = createDb(directUrl, { poolMax: 2, poolMin: 0 });
    try {
      return await migrateLatest(direct);
    } finally {
      await direct.destroy();
    }
  }
  return exclusively(db, async () => {
    for (let attempt = 0; ; attempt++) {
      try {
        const [, applied] = (await db.migrate.latest()) as [number, string[]];
        // On a Citus coordinator, the tables the migrations made are placed on the cluster.
        await distribute(db);
        return applied;
      } catch (err) {
        if ((err as Error).name !== 'MigrationLocked' || attempt >= 100) throw err;
        await sleep(100);
      }
    }
  });
}

export interface MigrationStatus {
  completed: string[];
  pending: string[];
}

export async function migrationStatus(db: Db): Promise<MigrationStatus> {
  const [completed, pending] = (await db.migrate.list()) as [{ name: string }[], { file: string }[]];
  return { completed: completed.map((m) => m.name), pending: pending.map((m) => m.file) };
}

export async function rollback(db: Db, all: boolean): Promise<string[]> {
  const [, rolledBack] = (await db.migrate.rollback(undefined, all)) as [number, string[]];
  return rolledBack;
}
