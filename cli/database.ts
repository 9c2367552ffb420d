import type { Config } from '../server/core/config.js';
import { createDb } from '../server/core/db.js';
import type { Services } from '../server/core/services.js';
import { createServices } from '../server/compose.js';
import { migrateLatest } from '../server/core/migrate.js';
import { openDatabase, type DatabaseHandle } from '../server/integrations/embedded-postgres.js';
import { note } from './io.js';

/** Runs fn with the configured database (see withServices), without a pool: for PostgreSQL's own programs. */
export async function withDatabase<T>(config: Config, fn: (handle: DatabaseHandle) => Promise<T>): Promise<T> {
  const handle = await openDatabase(config, (line) => note(line));
  try {
    return await fn(handle);
  } finally {
    await handle.release();
  }
}

/**
 * Runs fn with the services of this command, on the configured database: an external one, or the
 * embedded cluster, reached if a server is running it and started for the duration of the command
 * otherwise.
 */
export async function withServices<T>(config: Config, fn: (services: Services) => Promise<T>, options: { migrate?: boolean } = {}): Promise<T> {
  return withDatabase(config, async (handle) => {
    const db = createDb(handle.url, { poolMax: 2, poolMin: 0, transactionPooling: config.databaseTransactionPooling });
    const directUrl = handle.embedded ? null : config.databaseDirectUrl;
    const services = createServices({ config, db, directUrl });
    try {
      if (options.migrate) await migrateLatest(db, directUrl);
      return await fn(services);
    } finally {
      await services.close();
      await db.destroy();
    }
  });
}
