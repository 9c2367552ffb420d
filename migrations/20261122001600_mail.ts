import type { Knex } from 'knex';

/**
 * Mail in and out.
 *
 * mail_messages: every message ticketd means to send, built in the transaction of the change that
 * causes it (a public agent comment, an autoresponse, a watcher notification) and stored as the
 * serialisable message (jsonb) with its stable Message-ID. The outbox's mail handler will deliver
 * from here; the unique Message-ID per scope makes a repeated enqueue of the same event a no-op.
 * Inbound replies are threaded by looking their In-Reply-To/References up in message_id.
 *
 * inbound_emails: one row per inbound message accepted for a brand, keyed by its Message-ID: the
 * unique index is the idempotency of inbound delivery (the same message delivered twice creates
 * one ticket or comment), and the Message-IDs of a ticket's inbound mail thread later replies.
 *
 * Both reference the brand (cascade) and, when set, the ticket with the composite scope key, so a
 * row can never point across brands, accounts or modes. The ticket FK of inbound_emails is
 * DEFERRABLE: the row is claimed before the ticket it creates exists.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('mail_messages', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('ticket_id');
    t.text('kind').notNullable();
    t.jsonb('message').notNullable();
    t.text('message_id').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'mail_messages_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.foreign(['account_id', 'livemode', 'brand_id', 'ticket_id'], 'mail_messages_ticket_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('tickets')
      .onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'message_id'], { indexName: 'mail_messages_message_id_unique' });
    t.check("kind in ('agent_reply', 'autoresponse', 'watcher_notification')", [], 'mail_messages_kind_check');
  });

  await knex.schema.createTable('inbound_emails', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('message_id').notNullable();
    t.text('from_email').notNullable();
    t.text('action').notNullable();
    t.text('reason');
    t.text('ticket_id');
    t.text('comment_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'inbound_emails_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'message_id'], { indexName: 'inbound_emails_message_id_unique' });
    t.check("action in ('ticket_created', 'comment_created', 'spam', 'ignored')", [], 'inbound_emails_action_check');
  });
  await knex.raw(`ALTER TABLE inbound_emails ADD CONSTRAINT inbound_emails_ticket_fk
    FOREIGN KEY (account_id, livemode, brand_id, ticket_id) REFERENCES tickets (account_id, livemode, brand_id, id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED`);
  // A ticket's inbound Message-IDs, oldest first (threading headers of outbound mail).
  await knex.raw('CREATE INDEX inbound_emails_ticket_idx ON inbound_emails (account_id, livemode, brand_id, ticket_id, id) WHERE ticket_id IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('inbound_emails');
  await knex.schema.dropTable('mail_messages');
}
