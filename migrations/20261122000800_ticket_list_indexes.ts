import type { Knex } from 'knex';

/**
 * Indexes for the ticket list's common paths (live tickets only): the default order (creation,
 * i.e. id) and status filters in that order. The other sorts get theirs in 1300.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX tickets_list_created_idx ON tickets (account_id, livemode, brand_id, id) WHERE deleted_at IS NULL');
  await knex.raw('CREATE INDEX tickets_list_status_idx ON tickets (account_id, livemode, brand_id, status, id) WHERE deleted_at IS NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX tickets_list_status_idx');
  await knex.raw('DROP INDEX tickets_list_created_idx');
}
