import type { Knex } from 'knex';

/**
 * The follow-the-name triggers on contacts, companies, members and categories (migrations 1300 and
 * 2200) and the field-rules trigger on field_definitions (1700) are dropped, with their functions
 * (and brand_field_rules, which only the trigger called). Citus refuses to distribute a table with
 * triggers unless unsafe triggers are on, and could not plan the field-rules trigger at all. The
 * services that rename a row or change a definition now run the same update in the same
 * transaction (core/ticket-names.ts, fields/service.ts refreshFieldRules): decision 0087.
 *
 * `down` restores the functions and triggers as those migrations left them.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER tickets_follow_contact ON contacts');
  await knex.raw('DROP TRIGGER tickets_follow_company ON companies');
  await knex.raw('DROP TRIGGER tickets_follow_member ON members');
  await knex.raw('DROP TRIGGER tickets_follow_category ON categories');
  await knex.raw('DROP TRIGGER field_definitions_refresh_brand ON field_definitions');
  await knex.raw('DROP FUNCTION tickets_follow_contact(), tickets_follow_company(), tickets_follow_member(), tickets_follow_category()');
  await knex.raw('DROP FUNCTION field_definitions_refresh_brand(), brand_field_rules(text, boolean, text)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION tickets_follow_contact() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE tickets t SET
        customer_sort = ticketd_person_sort(NEW.name, NEW.email),
        customer_text = ticketd_person_text(NEW.name, NEW.email),
        company_sort = coalesce((SELECT lower(co.name) FROM companies co
          WHERE co.account_id = NEW.account_id AND co.livemode = NEW.livemode AND co.brand_id = NEW.brand_id AND co.id = NEW.company_id), '')
      WHERE t.account_id = NEW.account_id AND t.livemode = NEW.livemode AND t.brand_id = NEW.brand_id AND t.customer_id = NEW.id AND t.deleted_at IS NULL;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE FUNCTION tickets_follow_company() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE tickets t SET company_sort = lower(NEW.name)
        FROM contacts c
        WHERE c.account_id = NEW.account_id AND c.livemode = NEW.livemode AND c.brand_id = NEW.brand_id AND c.company_id = NEW.id
          AND t.account_id = c.account_id AND t.livemode = c.livemode AND t.brand_id = c.brand_id AND t.customer_id = c.id AND t.deleted_at IS NULL;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE FUNCTION tickets_follow_member() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE tickets t SET assignee_sort = ticketd_person_sort(NEW.name, NEW.email)
        WHERE t.account_id = NEW.account_id AND t.assignee_id = NEW.id AND t.deleted_at IS NULL;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE FUNCTION tickets_follow_category() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE tickets t SET category_sort = lower(NEW.name)
        WHERE t.account_id = NEW.account_id AND t.livemode = NEW.livemode AND t.brand_id = NEW.brand_id AND t.category_id = NEW.id AND t.deleted_at IS NULL;
      RETURN NULL;
    END $$`);
  await knex.raw(`CREATE TRIGGER tickets_follow_contact AFTER UPDATE OF name, email, company_id ON contacts FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.email IS DISTINCT FROM NEW.email OR OLD.company_id IS DISTINCT FROM NEW.company_id)
    EXECUTE FUNCTION tickets_follow_contact()`);
  await knex.raw(`CREATE TRIGGER tickets_follow_company AFTER UPDATE OF name ON companies FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION tickets_follow_company()`);
  await knex.raw(`CREATE TRIGGER tickets_follow_member AFTER UPDATE OF name, email ON members FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.email IS DISTINCT FROM NEW.email) EXECUTE FUNCTION tickets_follow_member()`);
  await knex.raw(`CREATE TRIGGER tickets_follow_category AFTER UPDATE OF name ON categories FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION tickets_follow_category()`);

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
}
