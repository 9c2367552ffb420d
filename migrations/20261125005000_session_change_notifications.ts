import type { Knex } from 'knex';

/**
 * Sessions are authenticated from a per-process cache that forgets an entry when its session, its
 * member or its account changes (core/credential-cache.ts). The services say so themselves in the
 * transaction of each change; these triggers say it too for whatever else changes the rows (a
 * cascade from an account's deletion, an operator's SQL), so no session outlives its member for
 * longer than a notification takes. A session's own sliding-expiry writes do not notify: only its
 * revocation and deletion do.
 */
export async function up(knex: Knex): Promise<void> {
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

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER sessions_notify_sessions ON sessions;
    DROP TRIGGER members_notify_sessions ON members;
    DROP FUNCTION ticketd_notify_sessions();
  `);
}
