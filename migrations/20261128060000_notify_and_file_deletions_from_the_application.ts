import type { Knex } from 'knex';

/**
 * The NOTIFYs of outbox inserts (ticketd_outbox) and of session and member changes
 * (ticketd_sessions) are sent by the application on the writing transaction's own connection
 * (core/notify.ts notifyAtCommit, outboxAdded, credentialsChanged), no longer by triggers: on a
 * distributed database a trigger runs on the node holding the shard, while ticketd listens on the
 * one it connects to, and Citus refuses triggers on distributed tables unless told to run unsafe
 * ones. `down` puts back the triggers and functions of migrations 1900 and 5000 as they were.
 *
 * Likewise the file-deletion queue: a deleted attachment or avatar row queues its file in
 * attachment_file_deletions through the deleting statement (core/file-deletions.ts), and a cascade
 * (a brand, a member, an account deleted) queues them just before it, no longer through the AFTER
 * DELETE triggers of migrations 1100 and 010100 (`down` restores them with the body of migration 000100).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER outbox_notify ON outbox;
    DROP FUNCTION outbox_notify();
    DROP TRIGGER sessions_notify_sessions ON sessions;
    DROP TRIGGER members_notify_sessions ON members;
    DROP FUNCTION ticketd_notify_sessions();
    DROP TRIGGER attachments_queue_file_deletion ON attachments;
    DROP TRIGGER avatars_queue_file_deletion ON avatars;
    DROP FUNCTION attachments_queue_file_deletion();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION attachments_queue_file_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO attachment_file_deletions (account_id, attachment_id) VALUES (OLD.account_id, OLD.id) ON CONFLICT DO NOTHING;
      RETURN OLD;
    END $$`);
  await knex.raw('CREATE TRIGGER attachments_queue_file_deletion AFTER DELETE ON attachments FOR EACH ROW EXECUTE FUNCTION attachments_queue_file_deletion()');
  await knex.raw('CREATE TRIGGER avatars_queue_file_deletion AFTER DELETE ON avatars FOR EACH ROW EXECUTE FUNCTION attachments_queue_file_deletion()');
  await knex.raw(`
    CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM added) THEN
        PERFORM pg_notify('ticketd_outbox', 'new');
      END IF;
      RETURN NULL;
    END $$`);
  await knex.raw('CREATE TRIGGER outbox_notify AFTER INSERT ON outbox REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()');
  await knex.raw(`
    CREATE FUNCTION ticketd_notify_sessions() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('ticketd_sessions', OLD.id);
      RETURN NULL;
    END $$;
    CREATE TRIGGER members_notify_sessions AFTER UPDATE OR DELETE ON members
      FOR EACH ROW EXECUTE FUNCTION ticketd_notify_sessions();
    CREATE TRIGGER sessions_notify_sessions AFTER UPDATE OF revoked_at OR DELETE ON sessions
      FOR EACH ROW EXECUTE FUNCTION ticketd_notify_sessions();
  `);
}
