import type { Knex } from 'knex';

/**
 * Companies, contacts (served as /contacts and /customers) and blocked sources, per brand.
 *
 * Every table carries (account_id, livemode, brand_id) and references the brand with a composite
 * key, so a row can never belong to a brand of another account or mode. Each table is unique on
 * (account_id, livemode, brand_id, id): children reference that, so a contact cannot point at a
 * company of another brand (and tickets will reference contacts the same way).
 *
 * Search: `name_key` holds the folded name (lower-cased, accents and ß folded) computed by the
 * service, so matching does not depend on the database collation. Trigram GIN indexes serve
 * "contains" search; btree text_pattern_ops indexes serve prefix autocomplete.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE EXTENSION IF NOT EXISTS pg_trgm');

  await knex.schema.createTable('companies', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('name').notNullable();
    t.text('name_key').notNullable();
    t.text('domain');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'companies_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'companies_scope_id_unique' });
    // One company per domain and brand: auto-linking contacts by domain is then unambiguous.
    t.unique(['account_id', 'livemode', 'brand_id', 'domain'], { indexName: 'companies_domain_unique' });
  });
  await knex.raw('CREATE INDEX companies_name_prefix ON companies (account_id, livemode, brand_id, name_key text_pattern_ops)');
  await knex.raw('CREATE INDEX companies_name_trgm ON companies USING gin (name_key gin_trgm_ops)');
  await knex.raw('CREATE INDEX companies_domain_trgm ON companies USING gin (domain gin_trgm_ops)');

  await knex.schema.createTable('contacts', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('email').notNullable();
    t.text('name');
    t.text('name_key').notNullable().defaultTo('');
    t.text('avatar_url');
    t.text('company_id');
    t.boolean('notify_email').notNullable().defaultTo(true);
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'contacts_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'contacts_scope_id_unique' });
    // Emails are stored trimmed and lower-cased, so this is uniqueness after normalization.
    t.unique(['account_id', 'livemode', 'brand_id', 'email'], { indexName: 'contacts_email_unique' });
    t.index(['account_id', 'livemode', 'brand_id', 'company_id'], 'contacts_company_idx');
  });
  // Deleting a company unlinks its contacts: only company_id is nulled (PostgreSQL 15+).
  await knex.raw(`ALTER TABLE contacts ADD CONSTRAINT contacts_company_fk
    FOREIGN KEY (account_id, livemode, brand_id, company_id)
    REFERENCES companies (account_id, livemode, brand_id, id) ON DELETE SET NULL (company_id)`);
  await knex.raw('CREATE INDEX contacts_email_prefix ON contacts (account_id, livemode, brand_id, email text_pattern_ops)');
  await knex.raw('CREATE INDEX contacts_name_prefix ON contacts (account_id, livemode, brand_id, name_key text_pattern_ops)');
  await knex.raw('CREATE INDEX contacts_email_trgm ON contacts USING gin (email gin_trgm_ops)');
  await knex.raw('CREATE INDEX contacts_name_trgm ON contacts USING gin (name_key gin_trgm_ops)');

  await knex.schema.createTable('blocked_sources', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('type').notNullable();
    t.text('value').notNullable();
    t.text('reason');
    t.text('created_by');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'blocked_sources_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'blocked_sources_scope_id_unique' });
    t.unique(['account_id', 'livemode', 'brand_id', 'type', 'value'], { indexName: 'blocked_sources_value_unique' });
    t.check("type in ('email', 'domain')", [], 'blocked_sources_type_check');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('blocked_sources');
  await knex.schema.dropTable('contacts');
  await knex.schema.dropTable('companies');
  // pg_trgm stays: other tables (or the operator) may use it.
}
