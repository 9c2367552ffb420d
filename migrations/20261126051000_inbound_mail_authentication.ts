import type { Knex } from 'knex';

/**
 * inbound_emails.authentication: what the SPF, DKIM, DMARC and ARC checks of the message said
 * when it arrived ({ spf, dkim, dmarc, arc }, each { result, domain }). Null for messages taken in
 * before the checks existed.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('inbound_emails', (t) => {
    t.jsonb('authentication');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('inbound_emails', (t) => {
    t.dropColumn('authentication');
  });
}
