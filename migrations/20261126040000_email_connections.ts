import type { Knex } from 'knex';

/**
 * A brand's existing mailboxes, pulled into tickets over IMAP. The password (or OAuth refresh
 * token) is sealed (core/sealed.ts). uid_validity and last_uid say how far the mailbox was taken
 * in; they are written in the transaction of the tickets a sync created, so a message is taken in
 * once however often it is fetched. status: ACTIVE, SYNCING, ERROR (network: retried after
 * retry_at), DISCONNECTED (the server refused the credentials: waits for new ones).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('email_connections', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('name').notNullable();
    t.text('provider').notNullable();
    t.text('email').notNullable();
    t.text('host').notNullable();
    t.integer('port').notNullable();
    t.boolean('tls').notNullable();
    t.text('username').notNullable();
    t.text('secret').notNullable();
    t.text('mailbox').notNullable().defaultTo('INBOX');
    t.text('move_to');
    t.boolean('is_primary').notNullable().defaultTo(false);
    t.text('status').notNullable().defaultTo('ACTIVE');
    t.text('error_message');
    t.integer('failures').notNullable().defaultTo(0);
    t.timestamp('retry_at', { useTz: true });
    t.timestamp('last_sync_at', { useTz: true });
    t.bigInteger('uid_validity');
    t.bigInteger('last_uid').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'email_connections_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id'], 'email_connections_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    // The brand's list, oldest first: the dashboard polls it for every brand.
    t.index(['account_id', 'livemode', 'brand_id', 'id'], 'email_connections_brand_idx');
  });
  await knex.raw(`ALTER TABLE email_connections ADD CONSTRAINT email_connections_status_check CHECK (status IN ('ACTIVE', 'SYNCING', 'ERROR', 'DISCONNECTED'))`);
  await knex.raw(`ALTER TABLE email_connections ADD CONSTRAINT email_connections_provider_check CHECK (provider IN ('IMAP', 'GMAIL', 'OUTLOOK'))`);
  await knex.raw(`ALTER TABLE email_connections ADD CONSTRAINT email_connections_port_check CHECK (port BETWEEN 1 AND 65535)`);
  await knex.raw('CREATE UNIQUE INDEX email_connections_one_primary ON email_connections (account_id, livemode, brand_id) WHERE is_primary');
  await knex.raw('CREATE UNIQUE INDEX email_connections_mailbox_unique ON email_connections (account_id, livemode, brand_id, lower(email))');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('email_connections');
}
