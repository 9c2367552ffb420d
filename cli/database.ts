import type { Config } from '../server/core/config.js';
import { createDb, type Db } from '../server/core/db.js';
import { migrateLatest } from '../server/core/migrate.js';
import { openDatabase } from '../server/integrations/embedded-postgres.js';
import { note } from './io.js';

/**
 * Runs fn against the configured database: an external one, or the embedded cluster, reached if
 * a server is running it and started for the duration of the command otherwise.
 */
export async function withDb<T>(config: Config, fn: (db: Db) => Promise<T>, options: { migrate?: boolean } = {}): Promise<T> {
  const handle = await openDatabase(config, (line) => note(line));
  const db = createDb(handle.url, { poolMax: 2, poolMin: 0 });
  try {
    if (options.migrate) await migrateLatest(db);
    return await fn(db);
  } finally {
    await db.destroy();
    await handle.release();
  }
}
