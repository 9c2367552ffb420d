import type { Knex } from 'knex';

/**
 * Tickets, their tags, and idempotency keys.
 *
 * Scope: tickets carry (account_id, livemode, brand_id) and reference the brand, contact and
 * category with composite keys, so a ticket can never point at a row of another brand, account
 * or mode. assignee_id references members (account-wide, mode-free) by (account_id, id), so it
 * cannot name another account's member. Deleting a contact, category or member clears only that
 * column (ON DELETE SET NULL (col), PostgreSQL 15+); deleting a brand takes its tickets.
 *
 * ticket_number is unique per brand; the service allocates it from brands.next_ticket_number.
 *
 * idempotency_keys are per account and mode: (account_id, livemode, key). A request claims its key
 * by inserting the row inside its transaction; `resource_id` is what it created (a ticket, a comment).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE members ADD CONSTRAINT members_account_id_unique UNIQUE (account_id, id)');

  await knex.schema.createTable('tickets', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.integer('ticket_number').notNullable();
    t.text('title').notNullable();
    t.text('body');
    t.text('status').notNullable();
    t.text('priority');
    t.text('assignee_id');
    t.text('created_by');
    t.text('customer_id');
    t.text('category_id');
    t.jsonb('links').notNullable().defaultTo('[]');
    t.jsonb('custom_fields');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.text('source').notNullable().defaultTo('api');
    t.text('source_id');
    t.jsonb('source_data');
    t.boolean('is_spam').notNullable().defaultTo(false);
    t.text('merged_into_id');
    t.integer('comment_count').notNullable().defaultTo(0);
    t.integer('attachment_count').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('deleted_at', { useTz: true });
    t.foreign(['account_id', 'livemode', 'brand_id'], 'tickets_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'tickets_scope_id_unique' });
    t.unique(['account_id', 'livemode', 'brand_id', 'ticket_number'], { indexName: 'tickets_number_unique' });
    t.check("priority is null or priority in ('low', 'normal', 'medium', 'high', 'urgent')", [], 'tickets_priority_check');
    t.check("source in ('api', 'web', 'email', 'slack', 'sms', 'discord', 'instagram', 'twitter', 'whatsapp', 'custom')", [], 'tickets_source_check');
    t.check('ticket_number > 0', [], 'tickets_number_check');
  });
  await knex.raw(`ALTER TABLE tickets ADD CONSTRAINT tickets_assignee_fk
    FOREIGN KEY (account_id, assignee_id) REFERENCES members (account_id, id) ON DELETE SET NULL (assignee_id)`);
  await knex.raw(`ALTER TABLE tickets ADD CONSTRAINT tickets_customer_fk
    FOREIGN KEY (account_id, livemode, brand_id, customer_id) REFERENCES contacts (account_id, livemode, brand_id, id) ON DELETE SET NULL (customer_id)`);
  await knex.raw(`ALTER TABLE tickets ADD CONSTRAINT tickets_category_fk
    FOREIGN KEY (account_id, livemode, brand_id, category_id) REFERENCES categories (account_id, livemode, brand_id, id) ON DELETE SET NULL (category_id)`);
  // Indexes lead with the scope; the counts (stats, contact _count) read live tickets only.
  await knex.raw('CREATE INDEX tickets_status_idx ON tickets (account_id, livemode, brand_id, status) WHERE deleted_at IS NULL');
  await knex.raw('CREATE INDEX tickets_category_idx ON tickets (account_id, livemode, brand_id, category_id) WHERE deleted_at IS NULL');
  await knex.raw('CREATE INDEX tickets_customer_idx ON tickets (account_id, livemode, brand_id, customer_id) WHERE deleted_at IS NULL');
  await knex.raw('CREATE INDEX tickets_assignee_idx ON tickets (account_id, assignee_id) WHERE assignee_id IS NOT NULL');

  await knex.schema.createTable('ticket_tags', (t) => {
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('ticket_id').notNullable();
    t.text('tag_id').notNullable();
    t.primary(['account_id', 'livemode', 'brand_id', 'ticket_id', 'tag_id'], { constraintName: 'ticket_tags_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id', 'ticket_id'], 'ticket_tags_ticket_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('tickets')
      .onDelete('CASCADE');
    t.foreign(['account_id', 'livemode', 'brand_id', 'tag_id'], 'ticket_tags_tag_fk').references(['account_id', 'livemode', 'brand_id', 'id']).inTable('tags').onDelete('CASCADE');
  });
  // Tag stats, tag merge and the tagIds filter go from the tag to its tickets.
  await knex.raw('CREATE INDEX ticket_tags_tag_idx ON ticket_tags (account_id, livemode, brand_id, tag_id, ticket_id)');

  await knex.schema.createTable('idempotency_keys', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.boolean('livemode').notNullable();
    t.text('key').notNullable();
    t.text('fingerprint').notNullable().comment('sha256 of method, route and canonical JSON body');
    t.text('resource_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.primary(['account_id', 'livemode', 'key'], { constraintName: 'idempotency_keys_pkey' });
  });
  // For the purge job (idempotency.purgeExpired): DELETE … WHERE expires_at < now().
  await knex.raw('CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('idempotency_keys');
  await knex.schema.dropTable('ticket_tags');
  await knex.schema.dropTable('tickets');
  await knex.raw('ALTER TABLE members DROP CONSTRAINT members_account_id_unique');
}
