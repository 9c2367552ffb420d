import type { Db } from './db.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * knex migrate:latest, waiting while another process (a second server starting at the same
 * moment) holds the migration lock instead of failing.
 */
export async function migrateLatest(db: Db): Promise<string[]> {
  for (let attempt = 0; ; attempt++) {
    try {
      const [, applied] = (await db.migrate.latest()) as [number, string[]];
      return applied;
    } catch (err) {
      if ((err as Error).name !== 'MigrationLocked' || attempt >= 100) throw err;
      await sleep(100);
    }
  }
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
