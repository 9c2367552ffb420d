import type { Knex } from 'knex';

/**
 * Ticket search and list indexes for large brands.
 *
 * Search (PostgreSQL full-text): `tickets.search_vector` holds the title (weight A), the customer's
 * name and email (B) and the body (C) as a tsvector in the 'simple' configuration: no stemming and
 * no stop words, so every language is treated alike. Before the parser sees it the text goes
 * through ticketd_search_text(): accents folded (unaccent, both in the stored text and in the
 * query, so "résumé" and "resume" find each other) and every run of characters that is not a letter
 * or digit turned into one space, so e-mail addresses, URLs and hyphenated words are split into
 * their words and user input can never carry a tsquery operator. ticketd_search_query() builds the
 * query the same way: every word must match, the last one as a prefix (search as you type).
 *
 * Relation sort keys: the list sorts by the customer's, company's, assignee's and category's name.
 * Those names live in other tables, which no index on tickets can follow, so tickets carry them
 * denormalized (customer_sort, company_sort, assignee_sort, category_sort; '' for none) together
 * with customer_text (the customer's name and email, for search). Triggers keep them exact in the
 * same transaction as the change: a BEFORE trigger on tickets fills them when a ticket is written,
 * and AFTER triggers on contacts, companies, members and categories rewrite the live tickets that
 * show a renamed record. Renaming a customer with many tickets therefore writes all those tickets.
 *
 * Every list sort has an index that matches its sort expression and the id tie-break, over live,
 * non-spam tickets (the default list); creation order and status use the indexes of 0800.
 */

const SORT_INDEXES: Record<string, string> = {
  updated: `((extract(epoch from (updated_at at time zone 'UTC')) * 1000000)::bigint)`,
  priority: `((case priority when 'low' then 1 when 'normal' then 2 when 'medium' then 3 when 'high' then 4 when 'urgent' then 5 else 0 end))`,
  number: 'ticket_number',
  title: 'lower(title)',
  customer: 'customer_sort',
  company: 'company_sort',
  assignee: 'assignee_sort',
  category: 'category_sort',
  due: `(coalesce((extract(epoch from (due_at at time zone 'UTC')) * 1000000)::bigint, 9223372036854775807))`,
};

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE EXTENSION IF NOT EXISTS unaccent');
  const ext = await knex.raw(`SELECT n.nspname AS schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'unaccent'`);
  const schema = ident(ext.rows[0].schema as string);

  // unaccent() is STABLE (its dictionary could be reconfigured); we treat the shipped rules as fixed,
  // which an index and a stored column require. Changing them means recomputing search_vector.
  await knex.raw(`
    CREATE FUNCTION ticketd_search_text(text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
      SELECT regexp_replace(${schema}.unaccent('${schema.replace(/'/g, "''")}.unaccent'::regdictionary, $1), '[^[:alnum:]]+', ' ', 'g')
    $$`);
  await knex.raw(`
    CREATE FUNCTION ticketd_ticket_vector(title text, customer text, body text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT setweight(to_tsvector('pg_catalog.simple', ticketd_search_text(coalesce(title, ''))), 'A')
          || setweight(to_tsvector('pg_catalog.simple', ticketd_search_text(coalesce(customer, ''))), 'B')
          || setweight(to_tsvector('pg_catalog.simple', ticketd_search_text(coalesce(body, ''))), 'C')
    $$`);
  // Words AND-ed, the last as a prefix; at most 32 words. NULL (matches nothing) when no word is left.
  // The words hold letters and digits only, so quoting them is enough to keep to_tsquery's syntax out.
  await knex.raw(`
    CREATE FUNCTION ticketd_search_query(text) RETURNS tsquery LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
      SELECT CASE WHEN count(*) = 0 THEN NULL
        ELSE to_tsquery('pg_catalog.simple', string_agg('''' || w || '''', ' & ' ORDER BY n) || ':*') END
      FROM (SELECT w, n FROM unnest(string_to_array(btrim(ticketd_search_text($1)), ' ')) WITH ORDINALITY AS t (w, n)
            WHERE w <> '' AND length(w) <= 256 ORDER BY n LIMIT 32) AS words
    $$`);

  await knex.raw(`ALTER TABLE tickets
    ADD COLUMN customer_text text NOT NULL DEFAULT '',
    ADD COLUMN customer_sort text NOT NULL DEFAULT '',
    ADD COLUMN company_sort text NOT NULL DEFAULT '',
    ADD COLUMN assignee_sort text NOT NULL DEFAULT '',
    ADD COLUMN category_sort text NOT NULL DEFAULT '',
    ADD COLUMN search_vector tsvector NOT NULL DEFAULT ''::tsvector`);

  // The derived columns of one ticket, from its own row and the records it points at.
  await knex.raw(`
    CREATE FUNCTION tickets_derived_columns() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' OR NEW.customer_id IS DISTINCT FROM OLD.customer_id THEN
        NEW.customer_sort := ''; NEW.customer_text := ''; NEW.company_sort := '';
        IF NEW.customer_id IS NOT NULL THEN
          SELECT lower(coalesce(nullif(c.name, ''), c.email)), btrim(coalesce(c.name, '') || ' ' || c.email), coalesce(lower(co.name), '')
            INTO NEW.customer_sort, NEW.customer_text, NEW.company_sort
            FROM contacts c
            LEFT JOIN companies co ON co.account_id = c.account_id AND co.livemode = c.livemode AND co.brand_id = c.brand_id AND co.id = c.company_id
            WHERE c.account_id = NEW.account_id AND c.livemode = NEW.livemode AND c.brand_id = NEW.brand_id AND c.id = NEW.customer_id;
          NEW.customer_sort := coalesce(NEW.customer_sort, ''); NEW.customer_text := coalesce(NEW.customer_text, ''); NEW.company_sort := coalesce(NEW.company_sort, '');
        END IF;
      END IF;
      IF TG_OP = 'INSERT' OR NEW.assignee_id IS DISTINCT FROM OLD.assignee_id THEN
        NEW.assignee_sort := coalesce((SELECT lower(coalesce(nullif(m.name, ''), m.email)) FROM members m
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

  // Renames reach the live tickets that show them (deleted tickets are never listed again).
  await knex.raw(`
    CREATE FUNCTION tickets_follow_contact() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE tickets t SET
        customer_sort = lower(coalesce(nullif(NEW.name, ''), NEW.email)),
        customer_text = btrim(coalesce(NEW.name, '') || ' ' || NEW.email),
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
      UPDATE tickets t SET assignee_sort = lower(coalesce(nullif(NEW.name, ''), NEW.email))
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

  // Existing tickets: fill the new columns once (the trigger does it from now on).
  await knex.raw(`UPDATE tickets t SET
      customer_text = coalesce((SELECT btrim(coalesce(c.name, '') || ' ' || c.email) FROM contacts c WHERE c.account_id = t.account_id AND c.livemode = t.livemode AND c.brand_id = t.brand_id AND c.id = t.customer_id), ''),
      customer_sort = coalesce((SELECT lower(coalesce(nullif(c.name, ''), c.email)) FROM contacts c WHERE c.account_id = t.account_id AND c.livemode = t.livemode AND c.brand_id = t.brand_id AND c.id = t.customer_id), ''),
      company_sort = coalesce((SELECT lower(co.name) FROM contacts c JOIN companies co ON co.account_id = c.account_id AND co.livemode = c.livemode AND co.brand_id = c.brand_id AND co.id = c.company_id
        WHERE c.account_id = t.account_id AND c.livemode = t.livemode AND c.brand_id = t.brand_id AND c.id = t.customer_id), ''),
      assignee_sort = coalesce((SELECT lower(coalesce(nullif(m.name, ''), m.email)) FROM members m WHERE m.account_id = t.account_id AND m.id = t.assignee_id), ''),
      category_sort = coalesce((SELECT lower(ca.name) FROM categories ca WHERE ca.account_id = t.account_id AND ca.livemode = t.livemode AND ca.brand_id = t.brand_id AND ca.id = t.category_id), '')`);
  await knex.raw(`UPDATE tickets SET search_vector = ticketd_ticket_vector(title, customer_text, body)`);

  await knex.raw(`CREATE TRIGGER tickets_derived_columns BEFORE INSERT OR UPDATE OF title, body, customer_id, customer_text, assignee_id, category_id
    ON tickets FOR EACH ROW EXECUTE FUNCTION tickets_derived_columns()`);
  await knex.raw(`CREATE TRIGGER tickets_follow_contact AFTER UPDATE OF name, email, company_id ON contacts FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.email IS DISTINCT FROM NEW.email OR OLD.company_id IS DISTINCT FROM NEW.company_id)
    EXECUTE FUNCTION tickets_follow_contact()`);
  await knex.raw(`CREATE TRIGGER tickets_follow_company AFTER UPDATE OF name ON companies FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION tickets_follow_company()`);
  await knex.raw(`CREATE TRIGGER tickets_follow_member AFTER UPDATE OF name, email ON members FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.email IS DISTINCT FROM NEW.email) EXECUTE FUNCTION tickets_follow_member()`);
  await knex.raw(`CREATE TRIGGER tickets_follow_category AFTER UPDATE OF name ON categories FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION tickets_follow_category()`);

  // Search: one GIN index over live tickets (the scope is checked on the matching rows).
  await knex.raw('CREATE INDEX tickets_search_idx ON tickets USING gin (search_vector) WHERE deleted_at IS NULL');
  for (const [name, expr] of Object.entries(SORT_INDEXES)) {
    await knex.raw(`CREATE INDEX tickets_sort_${name}_idx ON tickets (account_id, livemode, brand_id, ${expr}, id) WHERE deleted_at IS NULL AND NOT is_spam`);
  }
  // (account_id, livemode, brand_id, status) is a prefix of tickets_list_status_idx: one index less to write.
  await knex.raw('DROP INDEX tickets_status_idx');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX tickets_status_idx ON tickets (account_id, livemode, brand_id, status) WHERE deleted_at IS NULL');
  for (const name of Object.keys(SORT_INDEXES)) await knex.raw(`DROP INDEX tickets_sort_${name}_idx`);
  await knex.raw('DROP INDEX tickets_search_idx');
  await knex.raw('DROP TRIGGER tickets_follow_category ON categories');
  await knex.raw('DROP TRIGGER tickets_follow_member ON members');
  await knex.raw('DROP TRIGGER tickets_follow_company ON companies');
  await knex.raw('DROP TRIGGER tickets_follow_contact ON contacts');
  await knex.raw('DROP TRIGGER tickets_derived_columns ON tickets');
  await knex.raw('DROP FUNCTION tickets_follow_category(), tickets_follow_member(), tickets_follow_company(), tickets_follow_contact(), tickets_derived_columns()');
  await knex.raw(`ALTER TABLE tickets DROP COLUMN search_vector, DROP COLUMN category_sort, DROP COLUMN assignee_sort,
    DROP COLUMN company_sort, DROP COLUMN customer_sort, DROP COLUMN customer_text`);
  await knex.raw('DROP FUNCTION ticketd_search_query(text), ticketd_ticket_vector(text, text, text), ticketd_search_text(text)');
  // unaccent stays: other objects (or the operator) may use it.
}
