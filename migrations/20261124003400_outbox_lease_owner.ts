import type { Knex } from 'knex';

/**
 * The leases by owner, for the dispatchers' reclaim of the messages of a dispatcher that is gone
 * (the outbox service's reclaimGone): it lists the owners holding leases and makes one owner's
 * rows due. Only rows under a lease are in it (a settle clears lease_owner), so it stays small.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX outbox_lease_owner_idx ON outbox (lease_owner) WHERE lease_owner IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX outbox_lease_owner_idx');
}
