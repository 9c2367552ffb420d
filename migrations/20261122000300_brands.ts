import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('brands', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.boolean('livemode').notNullable();
    t.text('name').notNullable();
    t.text('slug').notNullable();
    t.text('ticket_prefix').notNullable();
    t.integer('next_ticket_number').notNullable();
    t.text('url');
    t.text('icon_url');
    t.jsonb('settings').notNullable().defaultTo('{}');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.jsonb('ticket_schema');
    t.boolean('inbound_email_enabled').notNullable().defaultTo(true);
    t.boolean('autoresponse_enabled').notNullable().defaultTo(false);
    t.text('autoresponse_subject');
    t.text('autoresponse_body');
    t.text('from_name');
    t.text('from_email');
    t.specificType('portal_origins', 'text[]').notNullable().defaultTo('{}');
    t.boolean('csat_enabled').notNullable().defaultTo(false);
    t.text('csat_type').notNullable().defaultTo('thumbs');
    t.integer('csat_delay_minutes').notNullable().defaultTo(60);
    t.text('csat_email_subject');
    t.text('csat_email_body');
    t.boolean('sla_enabled').notNullable().defaultTo(false);
    t.integer('sla_default_hours');
    t.jsonb('sla_by_priority');
    t.boolean('sla_notify_overdue').notNullable().defaultTo(false);
    t.boolean('sla_business_hours_only').notNullable().defaultTo(false);
    t.jsonb('sla_business_hours');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['account_id', 'livemode', 'slug'], { indexName: 'brands_slug_unique' });
    // Child tables reference (account_id, livemode, id), so a cross-tenant link cannot be stored.
    t.unique(['account_id', 'livemode', 'id'], { indexName: 'brands_scope_id_unique' });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('brands');
}
