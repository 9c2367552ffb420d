import type { Knex } from 'knex';

/**
 * A ticket's derived columns (migration 1300: the customer's, company's, assignee's and category's
 * sort names, customer_text, search_vector) may be filled by the statement that inserts it. Ticket
 * create does (tickets/service.ts writeStatement): it has the customer, assignee and category at
 * hand, and a per-row PL/pgSQL trigger running three lookups of its own was ~13% of the database's
 * CPU on a create. An insert that leaves search_vector empty still gets them from the trigger;
 * updates always do.
 *
 * A person (customer, assignee) sorts by name, else email, and is searched by name and email: one
 * SQL function each, used by the trigger, the rename triggers and ticket create alike.
 */
const PERSON_FUNCTIONS = `
  CREATE FUNCTION ticketd_person_sort(name text, email text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lower(coalesce(nullif(name, ''), email))
  $$;
  CREATE FUNCTION ticketd_person_text(name text, email text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT btrim(coalesce(name, '') || ' ' || email)
  $$`;

/** The trigger functions of migration 1300, with a person's expressions spelled out ('inline') or as the functions above. */
async function defineTriggerFunctions(knex: Knex, person: 'inline' | 'functions'): Promise<void> {
  const sort = (n: string, e: string) => (person === 'inline' ? `lower(coalesce(nullif(${n}, ''), ${e}))` : `ticketd_person_sort(${n}, ${e})`);
  const text = (n: string, e: string) => (person === 'inline' ? `btrim(coalesce(${n}, '') || ' ' || ${e})` : `ticketd_person_text(${n}, ${e})`);
  await knex.raw(`
    CREATE OR REPLACE FUNCTION tickets_derived_columns() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' OR NEW.customer_id IS DISTINCT FROM OLD.customer_id THEN
        NEW.customer_sort := ''; NEW.customer_text := ''; NEW.company_sort := '';
        IF NEW.customer_id IS NOT NULL THEN
          SELECT ${sort('c.name', 'c.email')}, ${text('c.name', 'c.email')}, coalesce(lower(co.name), '')
            INTO NEW.customer_sort, NEW.customer_text, NEW.company_sort
            FROM contacts c
            LEFT JOIN companies co ON co.account_id = c.account_id AND co.livemode = c.livemode AND co.brand_id = c.brand_id AND co.id = c.company_id
            WHERE c.account_id = NEW.account_id AND c.livemode = NEW.livemode AND c.brand_id = NEW.brand_id AND c.id = NEW.customer_id;
          NEW.customer_sort := coalesce(NEW.customer_sort, ''); NEW.customer_text := coalesce(NEW.customer_text, ''); NEW.company_sort := coalesce(NEW.company_sort, '');
        END IF;
      END IF;
      IF TG_OP = 'INSERT' OR NEW.assignee_id IS DISTINCT FROM OLD.assignee_id THEN
        NEW.assignee_sort := coalesce((SELECT ${sort('m.name', 'm.email')} FROM members m
          WHERE m.account_id = NEW.account_id AND m.id = NEW.assignee_id), '');
      END IF;
      IF TG_OP = 'INSERT' OR NEW.category_id IS DISTINCT FROM OLD.category_id THEN
        NEW.category_sort := coalesce((SELECT lower(ca.name) FROM categories ca
          WHERE ca.account_id = NEW.account_id AND ca.livemode = NEW.livemode AND ca.brand_id = NEW.brand_id AND ca.id = NEW.category_id), '');
      END IF;
      IF TG_OP = 'INSERT' OR NEW.title IS DISTINCT FROM OLD.title OR NEW.body IS DISTINCT FROM OLD.body OR NEW.customer_text IS DISTINCT FROM OLD.customer_text THEN
        NEW.search_vector := ticketd_ticket_vector(NEW.title, NEW.customer_text, NEW.body);
      END IF;
      RETURN NEW;
    END $$`);
  await knex.raw(`
    CREATE OR REPLACE FUNCTION tickets_follow_contact() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE tickets t SET
        customer_sort = ${sort('NEW.name', 'NEW.email')},
        customer_text = ${text('NEW.name', 'NEW.email')},
        company_sort = coalesce((SELECT lower(co.name) FROM companies co
          WHERE co.account_id = NEW.account_id AND co.livemode = NEW.livemode AND co.brand_id = NEW.brand_id AND co.id = NEW.company_id), '')
      WHERE t.account_id = NEW.account_id AND t.livemode = NEW.livemode AND t.brand_id = NEW.brand_id AND t.customer_id = NEW.id AND t.deleted_at IS NULL;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE OR REPLACE FUNCTION tickets_follow_member() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE tickets t SET assignee_sort = ${sort('NEW.name', 'NEW.email')}
        WHERE t.account_id = NEW.account_id AND t.assignee_id = NEW.id AND t.deleted_at IS NULL;
      RETURN NULL;
    END $$`);
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw(PERSON_FUNCTIONS);
  await defineTriggerFunctions(knex, 'functions');
  await knex.raw('DROP TRIGGER tickets_derived_columns ON tickets');
  await knex.raw(`CREATE TRIGGER tickets_derived_columns BEFORE UPDATE OF title, body, customer_id, customer_text, assignee_id, category_id
    ON tickets FOR EACH ROW EXECUTE FUNCTION tickets_derived_columns()`);
  await knex.raw(`CREATE TRIGGER tickets_derived_columns_on_insert BEFORE INSERT ON tickets
    FOR EACH ROW WHEN (NEW.search_vector = ''::tsvector) EXECUTE FUNCTION tickets_derived_columns()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER tickets_derived_columns_on_insert ON tickets');
  await knex.raw('DROP TRIGGER tickets_derived_columns ON tickets');
  await knex.raw(`CREATE TRIGGER tickets_derived_columns BEFORE INSERT OR UPDATE OF title, body, customer_id, customer_text, assignee_id, category_id
    ON tickets FOR EACH ROW EXECUTE FUNCTION tickets_derived_columns()`);
  await defineTriggerFunctions(knex, 'inline');
  await knex.raw('DROP FUNCTION ticketd_person_sort(text, text), ticketd_person_text(text, text)');
}
