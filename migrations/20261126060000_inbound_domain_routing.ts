import type { Knex } from 'knex';

/**
 * Mail to any address at a verified INBOUND domain goes to its brand: the receiving side finds
 * the brand by the recipient's domain, over every account (the message names no account).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE INDEX brand_domains_inbound_idx ON brand_domains (domain, verified_at) WHERE verified AND type = 'INBOUND'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX brand_domains_inbound_idx');
}
