import type { Knex } from 'knex';

/**
 * Web forms: a brand's public intake. A form's token is the last segment of its public URL
 * (`POST /v1/forms/<token>`), which anyone may post a submission to; the submission becomes a
 * ticket with source `web`. The token is stored as it is, not hashed: the dashboard shows it (the
 * embed code) on every list, and it is published in the page source of the site that embeds the
 * form, so it is an address, not a secret (docs/decisions/0055). Submission is found by the token
 * alone (it names no account), through a cross-tenant index.
 *
 * field_mapping maps a submitted field name to what it fills (`email`, `name`, `subject`,
 * `message`, `customFields.<key>`); honeypot_field names a field a person never fills;
 * allowed_origins, when not empty, are the only page origins a submission is taken from.
 * submission_count and last_submission_at count the tickets the form created.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('forms', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('name').notNullable();
    t.text('token').notNullable();
    t.text('success_url');
    t.text('error_url');
    t.text('thank_you_message');
    t.jsonb('field_mapping');
    t.boolean('enabled').notNullable().defaultTo(true);
    t.text('honeypot_field');
    t.specificType('allowed_origins', 'text[]').notNullable().defaultTo('{}');
    t.integer('submission_count').notNullable().defaultTo(0);
    t.timestamp('last_submission_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'forms_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id'], 'forms_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    // The brand's list, oldest first.
    t.index(['account_id', 'livemode', 'brand_id', 'id'], 'forms_brand_idx');
  });
  await knex.raw('CREATE INDEX forms_token_idx ON forms (token)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('forms');
}
