import type { Knex } from 'knex';

/**
 * Every INSERT into outbox that adds rows NOTIFYs the dispatchers (channel ticketd_outbox), once
 * per statement. NOTIFY is delivered at commit, so a rolled-back change wakes nobody. In the
 * database rather than beside each insert so that an insert folded into a larger statement (ticket
 * create's last statement fans its event out inside it) needs no second statement to announce it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM added) THEN
        PERFORM pg_notify('ticketd_outbox', 'new');
      END IF;
      RETURN NULL;
    END $$`);
  await knex.raw('CREATE TRIGGER outbox_notify AFTER INSERT ON outbox REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER outbox_notify ON outbox');
  await knex.raw('DROP FUNCTION outbox_notify()');
}
