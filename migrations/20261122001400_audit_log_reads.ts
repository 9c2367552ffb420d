import type { Knex } from 'knex';

/**
 * What the audit log routes need.
 *
 * source: where a change came from (`api`, `dashboard`, `portal`, `system`, later `email`). It is
 * a fact of the moment of writing, so it is stored rather than guessed later from the performer
 * type. Existing rows are filled from their performer type; the append-only trigger is switched
 * off for that one statement only (a migration is the operator, not the application).
 *
 * Indexes for the brand log list, which is newest first (by id) and filtered by at most one of
 * these in the dashboard: event, entity type, performer type. Each gets (brand, filter, id) so a
 * page at any depth is one index range scan. The date range needs no index of its own: entry ids
 * are time-ordered and created_at is the id's time, so startDate/endDate become id bounds on
 * whichever index serves the rest. entityType with entityId uses audit_log_entity_idx (0900).
 * Account-level entries (brand_id null) are never listed by brand, so these indexes leave them out.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE audit_log ADD COLUMN source text');
  await knex.raw('ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only');
  await knex.raw(`UPDATE audit_log SET source = CASE performer_type
    WHEN 'api' THEN 'api' WHEN 'user' THEN 'dashboard' WHEN 'customer' THEN 'portal' ELSE 'system' END`);
  await knex.raw('ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only');
  await knex.raw('ALTER TABLE audit_log ALTER COLUMN source SET NOT NULL');
  await knex.raw('CREATE INDEX audit_log_brand_event_idx ON audit_log (account_id, livemode, brand_id, event, id) WHERE brand_id IS NOT NULL');
  await knex.raw('CREATE INDEX audit_log_brand_entity_type_idx ON audit_log (account_id, livemode, brand_id, entity_type, id) WHERE brand_id IS NOT NULL');
  await knex.raw('CREATE INDEX audit_log_brand_performer_idx ON audit_log (account_id, livemode, brand_id, performer_type, id) WHERE brand_id IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX audit_log_brand_performer_idx');
  await knex.raw('DROP INDEX audit_log_brand_entity_type_idx');
  await knex.raw('DROP INDEX audit_log_brand_event_idx');
  await knex.raw('ALTER TABLE audit_log DROP COLUMN source');
}
