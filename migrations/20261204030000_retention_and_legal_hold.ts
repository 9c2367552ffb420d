import type { Knex } from 'knex';

/**
 * A brand's retention policy (null: everything is kept) and a ticket's legal hold, which no
 * retention touches. anonymized_at marks a ticket whose personal data retention removed, so a
 * second run passes it by. The indexes are what the dispatcher's retention job reads by brand and
 * age: the closed tickets not anonymized yet (resolved_at is set only while a ticket is resolved or
 * closed; a delete policy reads tickets_resolved_idx), raw mails and attachments of a brand oldest
 * first (theirs lead with the ticket).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE brands ADD COLUMN retention jsonb');
  await knex.raw('ALTER TABLE tickets ADD COLUMN legal_hold boolean NOT NULL DEFAULT false, ADD COLUMN anonymized_at timestamptz');
  await knex.raw('CREATE INDEX tickets_retention_idx ON tickets (account_id, livemode, brand_id, resolved_at) WHERE anonymized_at IS NULL AND NOT legal_hold');
  await knex.raw('CREATE INDEX raw_mails_brand_created_idx ON raw_mails (account_id, livemode, brand_id, created_at)');
  await knex.raw('CREATE INDEX attachments_brand_created_idx ON attachments (account_id, livemode, brand_id, created_at) WHERE ticket_id IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX attachments_brand_created_idx');
  await knex.raw('DROP INDEX raw_mails_brand_created_idx');
  await knex.raw('DROP INDEX tickets_retention_idx');
  await knex.raw('ALTER TABLE tickets DROP COLUMN anonymized_at, DROP COLUMN legal_hold');
  await knex.raw('ALTER TABLE brands DROP COLUMN retention');
}
