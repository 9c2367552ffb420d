import type { Knex } from 'knex';

/**
 * Ticket comments.
 *
 * Scope: a comment carries (account_id, livemode, brand_id, ticket_id) and references its ticket
 * with that composite key, so it can never sit on another brand's, account's or mode's ticket; it
 * goes with the ticket (and so with the brand). A reply's parent is referenced with
 * (scope, ticket_id, parent_id): the parent must be a comment of the SAME ticket, and moving a
 * ticket's comments to another ticket (merge) must move whole threads in one statement.
 *
 * Comments are soft-deleted (deleted_at); is_internal mirrors metadata.isInternal as a column so
 * mail and the portal can filter on it. cc keeps the extra recipients for outbound mail.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('comments', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('ticket_id').notNullable();
    t.text('parent_id');
    t.text('body').notNullable();
    t.text('author_id');
    t.text('author_name');
    t.text('author_type').notNullable().defaultTo('AGENT');
    t.boolean('is_internal').notNullable().defaultTo(false);
    t.jsonb('links').notNullable().defaultTo('[]');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.text('source').notNullable().defaultTo('api');
    t.text('source_id');
    t.jsonb('source_data');
    t.specificType('cc', 'text[]').notNullable().defaultTo('{}');
    t.text('connection_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('deleted_at', { useTz: true });
    t.foreign(['account_id', 'livemode', 'brand_id', 'ticket_id'], 'comments_ticket_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('tickets')
      .onDelete('CASCADE');
    // Also the index of the list: a ticket's comments in id (= creation) order.
    t.unique(['account_id', 'livemode', 'brand_id', 'ticket_id', 'id'], { indexName: 'comments_ticket_id_unique' });
    t.check("author_type in ('CUSTOMER', 'AGENT', 'SYSTEM')", [], 'comments_author_type_check');
    t.check("source in ('api', 'web', 'email', 'slack', 'sms', 'discord', 'instagram', 'twitter', 'whatsapp', 'custom')", [], 'comments_source_check');
    t.check('parent_id is null or parent_id <> id', [], 'comments_parent_check');
  });
  await knex.raw(`ALTER TABLE comments ADD CONSTRAINT comments_parent_fk
    FOREIGN KEY (account_id, livemode, brand_id, ticket_id, parent_id)
    REFERENCES comments (account_id, livemode, brand_id, ticket_id, id) ON DELETE CASCADE`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('comments');
}
