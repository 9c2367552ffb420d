import type { Knex } from 'knex';

/**
 * The ticket allowance of a plan (tickets per billing period), held exactly under concurrency.
 *
 * ticket_usage: the live-mode tickets an account created in a billing period, spam left out
 * (at creation, and by tickets_usage_on_spam when marked later), kept by the ticket create
 * statement while any plan has an allowance. The statement
 * adds its tickets to the row after inserting them: the row's lock is taken last and held to the
 * commit, so concurrent creates count one after the other. A first row of a period starts from
 * the tickets already created in it (the count before allowances were configured).
 *
 * ticketd_refuse_over_allowance: raises SQLSTATE TQ001 when a count went over the allowance, so
 * the whole statement (its tickets included) rolls back; DETAIL carries the plan, the allowance and
 * what the account had, for the 403 the API answers.
 *
 * held_inbound_emails: a message that would make a ticket over the allowance is kept, not lost:
 * its inbound_emails row says held, and its raw bytes wait here until the period rolls over or the
 * plan grows (the dispatcher receives it again then).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('ticket_usage', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.timestamp('period_start', { useTz: true }).notNullable();
    t.integer('used').notNullable();
    t.primary(['account_id', 'period_start'], { constraintName: 'ticket_usage_pkey' });
  });
  await knex.raw(`
    CREATE FUNCTION ticketd_refuse_over_allowance(plan_name text, allowance integer, used integer, added integer) RETURNS boolean
    LANGUAGE plpgsql AS $$
    BEGIN
      IF allowance IS NOT NULL AND used > allowance THEN
        RAISE EXCEPTION 'the ticket allowance of the plan is used up' USING ERRCODE = 'TQ001',
          DETAIL = json_build_object('plan', plan_name, 'allowance', allowance, 'had', used - added)::text;
      END IF;
      RETURN false;
    END $$`);

  // Spam is not billed: a ticket marked spam leaves the count of the period it was created in, and comes back when unmarked.
  await knex.raw(`
    CREATE FUNCTION ticketd_ticket_usage_on_spam() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE ticket_usage u SET used = u.used + CASE WHEN NEW.is_spam THEN -1 ELSE 1 END
      WHERE u.account_id = NEW.account_id AND u.period_start = (
        SELECT max(p.period_start) FROM ticket_usage p WHERE p.account_id = NEW.account_id AND p.period_start <= NEW.created_at);
      RETURN NULL;
    END $$`);
  await knex.raw(`CREATE TRIGGER tickets_usage_on_spam AFTER UPDATE OF is_spam ON tickets
    FOR EACH ROW WHEN (NEW.livemode AND OLD.is_spam IS DISTINCT FROM NEW.is_spam) EXECUTE FUNCTION ticketd_ticket_usage_on_spam()`);

  await knex.raw('ALTER TABLE inbound_emails DROP CONSTRAINT inbound_emails_action_check');
  await knex.raw("ALTER TABLE inbound_emails ADD CONSTRAINT inbound_emails_action_check CHECK (action in ('ticket_created', 'comment_created', 'spam', 'ignored', 'held'))");
  await knex.schema.createTable('held_inbound_emails', (t) => {
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('inbound_email_id').notNullable();
    t.binary('raw').notNullable();
    t.specificType('envelope', 'text[]').notNullable();
    t.timestamp('held_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'inbound_email_id'], { constraintName: 'held_inbound_emails_pkey' });
    t.foreign(['account_id', 'inbound_email_id'], 'held_inbound_emails_inbound_email_fk').references(['account_id', 'id']).inTable('inbound_emails').onDelete('CASCADE');
  });
  // The dispatcher's "which accounts have mail waiting", oldest first, across accounts.
  await knex.raw('CREATE INDEX held_inbound_emails_held_at_idx ON held_inbound_emails (held_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('held_inbound_emails');
  await knex.raw("DELETE FROM inbound_emails WHERE action = 'held'");
  await knex.raw('ALTER TABLE inbound_emails DROP CONSTRAINT inbound_emails_action_check');
  await knex.raw("ALTER TABLE inbound_emails ADD CONSTRAINT inbound_emails_action_check CHECK (action in ('ticket_created', 'comment_created', 'spam', 'ignored'))");
  await knex.raw('DROP TRIGGER tickets_usage_on_spam ON tickets');
  await knex.raw('DROP FUNCTION ticketd_ticket_usage_on_spam()');
  await knex.raw('DROP FUNCTION ticketd_refuse_over_allowance(text, integer, integer, integer)');
  await knex.schema.dropTable('ticket_usage');
}
