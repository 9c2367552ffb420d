import type { Knex } from 'knex';

/**
 * The audit log: one row per mutation, written in the mutation's own transaction, so a change
 * that rolled back leaves no entry. Rows are append-only: a trigger refuses UPDATE, and DELETE is
 * refused too except when the whole account goes (the account FK cascades; the trigger lets a
 * cascade through by checking that the account row is gone).
 *
 * brand_id is null for account-level entries (API keys, members). ticket_id is set on entries about
 * a ticket or something of it (comments, attachments, watchers): the ticket history reads by it. Entries outlive the brand and
 * the ticket they describe: history is kept when a brand is deleted.
 * changes is a list of { field, from, to }.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('audit_log', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.boolean('livemode').notNullable();
    t.text('brand_id');
    t.text('ticket_id');
    t.text('entity_type').notNullable();
    t.text('entity_id').notNullable();
    t.text('event').notNullable();
    t.text('performer_type').notNullable();
    t.text('performer_id');
    t.text('performer_name');
    t.jsonb('changes').notNullable().defaultTo('[]');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.text('request_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("performer_type in ('api', 'user', 'customer', 'system')", [], 'audit_log_performer_type_check');
  });
  await knex.raw('CREATE INDEX audit_log_brand_idx ON audit_log (account_id, livemode, brand_id, id)');
  await knex.raw('CREATE INDEX audit_log_ticket_idx ON audit_log (account_id, livemode, ticket_id, id) WHERE ticket_id IS NOT NULL');
  await knex.raw('CREATE INDEX audit_log_entity_idx ON audit_log (account_id, livemode, entity_type, entity_id, id)');
  await knex.raw(`
    CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM accounts WHERE id = OLD.account_id) THEN
        RETURN OLD;
      END IF;
      RAISE EXCEPTION 'audit_log is append-only' USING ERRCODE = 'insufficient_privilege';
    END $$`);
  await knex.raw('CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('audit_log');
  await knex.raw('DROP FUNCTION audit_log_append_only()');
}
