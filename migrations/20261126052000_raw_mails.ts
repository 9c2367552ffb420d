import type { Knex } from 'knex';

/**
 * raw_mails: the bytes of an inbound message exactly as it arrived, kept for the ticket's readers
 * (rawMailRetentionDays, then deleted by the dispatcher). The bytes live in attachment storage
 * under the row's id. The statements that delete rows (the retention purge, a brand's deletion)
 * queue their files in attachment_file_deletions themselves, in the same transaction, so a file is
 * removed after the commit, never inside it. No trigger: on Citus a trigger that writes another
 * table is not allowed. comment_id: the comment the message became, null for the message that
 * opened the ticket.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('raw_mails', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('ticket_id').notNullable();
    t.text('comment_id');
    t.text('inbound_email_id').notNullable();
    t.text('message_id').notNullable();
    t.bigInteger('size').notNullable();
    t.text('sha256').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'raw_mails_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id', 'ticket_id'], 'raw_mails_ticket_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('tickets')
      .onDelete('CASCADE');
    // A ticket's messages, oldest first.
    t.index(['account_id', 'livemode', 'brand_id', 'ticket_id', 'id'], 'raw_mails_ticket_idx');
    t.check('size >= 0', [], 'raw_mails_size_check');
  });
  await knex.raw('CREATE INDEX raw_mails_created_idx ON raw_mails (created_at)');
}

export async function down(knex: Knex): Promise<void> {
  // The files of the rows it drops are queued for removal first.
  await knex.raw('INSERT INTO attachment_file_deletions (account_id, attachment_id) SELECT account_id, id FROM raw_mails ON CONFLICT DO NOTHING');
  await knex.schema.dropTable('raw_mails');
}
