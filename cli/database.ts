import type { Config } from '../server/core/config.js';
import type { Services } from '../server/core/services.js';
import type { DatabaseHandle } from '../server/integrations/embedded-postgres.js';
import { note } from './io.js';

// The database's modules (knex, pg, the services) load when a command opens it, not on every
// start of the CLI: `ticketd --help` and the commands that need no database do without them.

/** Runs fn with the configured database (see withServices), without a pool: for PostgreSQL's own programs. */
export async function withDatabase<T>(config: Config, fn: (handle: DatabaseHandle) => Promise<T>): Promise<T> {
  const { openDatabase } = await import('../server/integrations/embedded-postgres.js');
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
export async function withServices<T>(config: Config, fn: (services: Services) => Promise<T>, options: { migrate?: boolean; poolMax?: number } = {}): Promise<T> {
  const [{ createDb }, { createServices }, { migrateLatest }] = await Promise.all([
    import('../server/core/db.js'),
    import('../server/compose.js'),
    import('../server/core/migrate.js'),
  ]);
  return withDatabase(config, async (handle) => {
    const db = createDb(handle.url, { poolMax: options.poolMax ?? 2, poolMin: 0, transactionPooling: config.databaseTransactionPooling });
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
