import type { Knex } from 'knex';

/**
 * The request counts every API process shares (server/core/rate-limit.ts): one row per budget and
 * subject (`api/key:<keyId>`, `api/ip:<addr>`, `signup/ip:<addr>`) and fixed window, times in ms
 * since the epoch. Keyed by subject, not by account: an address belongs to no account. UNLOGGED:
 * the counts are worth nothing after a crash (budgets start afresh), so they cost no WAL.
 * Ended windows are deleted by the processes that write them.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE UNLOGGED TABLE rate_limit_counters (
      bucket text NOT NULL,
      window_start bigint NOT NULL,
      window_end bigint NOT NULL,
      hits integer NOT NULL,
      PRIMARY KEY (bucket, window_start)
    )`);
  await knex.raw('CREATE INDEX rate_limit_counters_window_end_idx ON rate_limit_counters (window_end)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE rate_limit_counters');
}
