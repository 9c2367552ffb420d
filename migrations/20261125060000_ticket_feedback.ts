import type { Knex } from 'knex';

/**
 * Satisfaction ratings (CSAT): one row per resolution of a ticket whose brand asks for ratings.
 *
 * A trigger makes the row when a ticket becomes resolved (from a status that is not done), so every
 * path that resolves (update, bulk resolve) agrees, in the resolving transaction. The row starts
 * `scheduled`, due at `send_at` (now plus the brand's csatDelayMinutes). It carries the brand's
 * rating type of that moment, the ticket's customer and its assignee (the resolver the rating is
 * credited to). A new resolution cancels the ticket's earlier unrated rows: only the latest
 * resolution is rated.
 *
 * The dispatcher sends the due rows: it mints the token (`fb_…`, stored as its SHA-256), mails the
 * link through the outbox and marks the row `sent` with its expiry, or `cancelled` when the ticket
 * is no longer resolved by then. A rating (by the mailed link or from the portal) makes the row
 * `rated`, once. Rows go with their ticket (and so with the brand and the account).
 *
 * Found by token hash alone (a public link names no account) and claimed when due across accounts:
 * two cross-tenant indexes. The team metrics read rated rows by brand and submission time.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('ticket_feedback', (t) => {
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('id').notNullable();
    t.text('ticket_id').notNullable();
    t.text('contact_id').notNullable();
    t.text('resolver_id');
    t.text('rating_type').notNullable();
    t.text('status').notNullable().defaultTo('scheduled');
    t.timestamp('send_at', { useTz: true }).notNullable();
    t.text('token_hash');
    t.timestamp('sent_at', { useTz: true });
    t.timestamp('expires_at', { useTz: true });
    t.integer('rating');
    t.text('comment');
    t.timestamp('submitted_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'ticket_feedback_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id', 'ticket_id'], 'ticket_feedback_ticket_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('tickets')
      .onDelete('CASCADE');
    t.index(['account_id', 'livemode', 'brand_id', 'ticket_id', 'id'], 'ticket_feedback_ticket_idx');
    t.check("status in ('scheduled', 'sent', 'rated', 'cancelled')", [], 'ticket_feedback_status_check');
    t.check("rating_type in ('thumbs', 'scale5', 'scale10')", [], 'ticket_feedback_rating_type_check');
  });
  await knex.raw('CREATE INDEX ticket_feedback_token_hash_idx ON ticket_feedback (token_hash) WHERE token_hash IS NOT NULL');
  await knex.raw(`CREATE INDEX ticket_feedback_due_idx ON ticket_feedback (send_at) WHERE status = 'scheduled'`);
  await knex.raw(`CREATE INDEX ticket_feedback_rated_idx ON ticket_feedback (account_id, livemode, brand_id, submitted_at) INCLUDE (resolver_id, rating, rating_type)
    WHERE status = 'rated'`);
  await knex.raw(`
    CREATE FUNCTION tickets_feedback_on_resolve() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE ticket_feedback SET status = 'cancelled'
      WHERE account_id = NEW.account_id AND livemode = NEW.livemode AND brand_id = NEW.brand_id AND ticket_id = NEW.id AND status IN ('scheduled', 'sent');
      INSERT INTO ticket_feedback (account_id, livemode, brand_id, id, ticket_id, contact_id, resolver_id, rating_type, send_at)
      SELECT NEW.account_id, NEW.livemode, NEW.brand_id, ticketd_new_id('fb'), NEW.id, NEW.customer_id, NEW.assignee_id, b.csat_type,
        now() + make_interval(mins => b.csat_delay_minutes)
      FROM brands b WHERE b.account_id = NEW.account_id AND b.livemode = NEW.livemode AND b.id = NEW.brand_id AND b.csat_enabled;
      RETURN NULL;
    END $$`);
  await knex.raw(`CREATE TRIGGER tickets_feedback_on_resolve AFTER UPDATE OF status ON tickets FOR EACH ROW
    WHEN (NEW.status = 'resolved' AND OLD.status NOT IN ('resolved', 'closed') AND NEW.customer_id IS NOT NULL AND NOT NEW.is_spam AND NEW.deleted_at IS NULL)
    EXECUTE FUNCTION tickets_feedback_on_resolve()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER tickets_feedback_on_resolve ON tickets');
  await knex.raw('DROP FUNCTION tickets_feedback_on_resolve()');
  await knex.schema.dropTable('ticket_feedback');
}
