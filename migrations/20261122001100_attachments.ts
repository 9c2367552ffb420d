import type { Knex } from 'knex';

/**
 * Attachments and the server's own secrets.
 *
 * attachments: the record of a file whose bytes live in storage under the attachment id.
 * ticket_id null = pending (uploaded before its ticket exists; ticket create links it). The
 * ticket FK is composite (a link across brand, account or mode cannot be stored), cascades
 * with the ticket, and is DEFERRABLE INITIALLY DEFERRED: ticket create links pending
 * attachments before its last statement inserts the ticket, and the check runs at commit.
 * comment_id is a plain column for now. Deleting an attachment deletes the row (the audit log
 * keeps the record); status PENDING → UPLOADED once its bytes are stored and confirmed.
 *
 * attachment_file_deletions: the files still to remove from storage (see below).
 *
 * server_secrets: server-wide keys (the attachment URL signing key), made once by the first
 * process that needs one and shared by every process on the database.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('attachments', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('ticket_id');
    t.text('comment_id');
    t.text('filename').notNullable();
    t.text('content_type').notNullable();
    t.bigInteger('size').notNullable();
    t.text('status').notNullable().defaultTo('PENDING');
    t.text('sha256').comment('hex sha256 of the stored bytes; set when they arrive');
    t.text('uploaded_by');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'attachments_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.check("status in ('PENDING', 'UPLOADED', 'FAILED')", [], 'attachments_status_check');
    t.check('size >= 0', [], 'attachments_size_check');
    t.check("status <> 'UPLOADED' or sha256 is not null", [], 'attachments_uploaded_sha256_check');
  });
  await knex.raw(`ALTER TABLE attachments ADD CONSTRAINT attachments_ticket_fk
    FOREIGN KEY (account_id, livemode, brand_id, ticket_id) REFERENCES tickets (account_id, livemode, brand_id, id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED`);
  // A ticket's attachments (list, counts, merge); the cleanup's two sweeps by age.
  await knex.raw('CREATE INDEX attachments_ticket_idx ON attachments (account_id, livemode, brand_id, ticket_id, id) WHERE ticket_id IS NOT NULL');
  await knex.raw("CREATE INDEX attachments_cleanup_idx ON attachments (created_at) WHERE ticket_id IS NULL OR status = 'PENDING'");

  // Every deleted attachment row, however it went (its own DELETE, the cleanup, a brand or account
  // delete cascading), leaves its id here in the same transaction; the dispatcher then removes the
  // file and the entry. So a committed delete never leaves bytes behind, and a rolled-back one
  // never loses them.
  await knex.schema.createTable('attachment_file_deletions', (t) => {
    t.text('attachment_id').primary();
    t.timestamp('deleted_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(`
    CREATE FUNCTION attachments_queue_file_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO attachment_file_deletions (attachment_id) VALUES (OLD.id) ON CONFLICT DO NOTHING;
      RETURN OLD;
    END $$`);
  await knex.raw('CREATE TRIGGER attachments_queue_file_deletion AFTER DELETE ON attachments FOR EACH ROW EXECUTE FUNCTION attachments_queue_file_deletion()');

  await knex.schema.createTable('server_secrets', (t) => {
    t.text('name').primary();
    t.text('value').notNullable().comment('base64');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('server_secrets');
  await knex.schema.dropTable('attachments');
  await knex.raw('DROP FUNCTION attachments_queue_file_deletion()');
  await knex.schema.dropTable('attachment_file_deletions');
}
