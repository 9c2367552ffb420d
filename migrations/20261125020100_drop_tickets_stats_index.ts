import type { Knex } from 'knex';

/**
 * tickets_stats_idx served the stats and trends statements that counted tickets; they read the
 * kept counts now (migration 20261125020000), so the index is only a cost on every ticket write.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX tickets_stats_idx');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX tickets_stats_idx ON tickets (account_id, livemode, brand_id, status, created_at) WHERE deleted_at IS NULL AND NOT is_spam');
}
