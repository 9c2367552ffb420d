import type { Knex } from 'knex';

/**
 * brands.field_rules: what validating a custom-field value needs of the brand's field definitions
 * ({ ticket: [{ key, type, options, required }, …], customer: […], company: […] }, in display
 * order), kept on the brand row by a trigger in the same transaction as the definition change.
 * Ticket create already reads the brand row, so it validates customFields without reading
 * field_definitions: one statement fewer on the hottest write.
 *
 * The trigger locks the brand row before reading the definitions, and a PL/pgSQL statement takes
 * a fresh snapshot: two concurrent definition changes in one brand are serialized, and the second
 * recomputes with the first's rows, never from a stale view. The lock is FOR NO KEY UPDATE: the
 * definition's foreign key already holds FOR KEY SHARE on the brand row, which that mode does not
 * conflict with (FOR UPDATE would deadlock two concurrent inserts).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE brands ADD COLUMN field_rules jsonb NOT NULL DEFAULT '{}'`);
  await knex.raw(`
    CREATE FUNCTION brand_field_rules(p_account_id text, p_livemode boolean, p_brand_id text) RETURNS jsonb LANGUAGE sql STABLE AS $$
      SELECT coalesce(jsonb_object_agg(entity_type, rules), '{}') FROM (
        SELECT entity_type, jsonb_agg(jsonb_build_object('key', key, 'type', type, 'options', options, 'required', required) ORDER BY sort_order, id) AS rules
        FROM field_definitions WHERE account_id = p_account_id AND livemode = p_livemode AND brand_id = p_brand_id
        GROUP BY entity_type) per_entity
    $$`);
  await knex.raw(`
    CREATE FUNCTION field_definitions_refresh_brand() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE d field_definitions;
    BEGIN
      d := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
      PERFORM 1 FROM brands WHERE account_id = d.account_id AND livemode = d.livemode AND id = d.brand_id FOR NO KEY UPDATE;
      UPDATE brands SET field_rules = brand_field_rules(d.account_id, d.livemode, d.brand_id)
        WHERE account_id = d.account_id AND livemode = d.livemode AND id = d.brand_id;
      RETURN NULL;
    END $$`);
  await knex.raw(`CREATE TRIGGER field_definitions_refresh_brand AFTER INSERT OR UPDATE OR DELETE ON field_definitions
    FOR EACH ROW EXECUTE FUNCTION field_definitions_refresh_brand()`);
  await knex.raw('UPDATE brands SET field_rules = brand_field_rules(account_id, livemode, id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER field_definitions_refresh_brand ON field_definitions');
  await knex.raw('DROP FUNCTION field_definitions_refresh_brand()');
  await knex.raw('DROP FUNCTION brand_field_rules(text, boolean, text)');
  await knex.raw('ALTER TABLE brands DROP COLUMN field_rules');
}
