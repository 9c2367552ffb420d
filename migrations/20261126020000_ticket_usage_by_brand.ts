import type { Knex } from 'knex';

/**
 * The ticket allowance counted per brand, each brand within a budget granted from the account's
 * allowance, so that concurrent creates of different brands no longer wait for one account row.
 *
 * ticket_usage (one row per account and period): the allowance the budgets were granted under,
 * and the adjustment for tickets marked spam (-1) or unmarked (+1) after they were counted. Its
 * lock is the account's: whoever grants or takes back budgets holds it.
 *
 * ticket_usage_brands (one row per account, period and brand): the brand's live tickets counted
 * (used) and its budget. The account's usage is adjustment + sum(used); sum(budget) + adjustment
 * never passes the allowance, and used never passes budget, so usage never passes the allowance.
 *
 * The usual way (the ticket create statement, plain SQL): each brand adds to its own count within
 * its budget, brand rows locked in id order; when one cannot (no row yet, no room, another plan),
 * ticketd_counted_within_budgets raises SQLSTATE TQ002 and the creates go again the exact way.
 *
 * ticketd_count_tickets, the exact way, one create at a time per account (the period row's lock):
 * budgets granted from what the account has not granted (what a brand lacks and a share of an
 * eighth of the rest), or, when that is not enough, every brand's unused budget taken back first
 * (waiting for the creates in flight); still no room: SQLSTATE TQ001 (DETAIL: plan, allowance,
 * had) and nothing of the statement stays. A period's first count, and a brand's, start from the
 * tickets already created in it (allowances configured mid-period); p_new_ids are the calling
 * statement's own tickets, left out of those counts whatever the function sees of them.
 *
 * Lock order: brands (the ticket numbers), then the period row, then brand usage rows in id order.
 * The usual way never waits for the period row: it holds brand usage rows.
 */
const COUNT_TICKETS = `
  CREATE FUNCTION ticketd_count_tickets(p_account text, p_period timestamptz, p_plan text, p_allowance integer,
    p_brands text[], p_counts integer[], p_new_ids text[]) RETURNS boolean
  LANGUAGE plpgsql AS $$
  DECLARE
    v_adjustment integer;
    v_plan_changed boolean;
    v_short integer;
    v_short_brands integer;
    v_pool integer;
  BEGIN
    IF coalesce(cardinality(p_brands), 0) = 0 THEN RETURN true; END IF;
    INSERT INTO ticket_usage (account_id, period_start, allowance) VALUES (p_account, p_period, p_allowance)
    ON CONFLICT (account_id, period_start) DO NOTHING;
    IF FOUND THEN
      INSERT INTO ticket_usage_brands (account_id, period_start, brand_id, used, budget, allowance)
      SELECT p_account, p_period, x.brand_id, count(*), count(*), p_allowance FROM tickets x
      WHERE x.account_id = p_account AND x.livemode AND x.created_at >= p_period AND NOT x.is_spam AND x.id <> ALL (p_new_ids)
      GROUP BY x.brand_id;
    END IF;
    SELECT p.adjustment, p.allowance IS DISTINCT FROM p_allowance INTO v_adjustment, v_plan_changed FROM ticket_usage p
    WHERE p.account_id = p_account AND p.period_start = p_period FOR UPDATE;
    IF v_plan_changed THEN
      -- The plan changed: every budget back to what its brand used, to be granted under the new allowance.
      PERFORM 1 FROM ticket_usage_brands u WHERE u.account_id = p_account AND u.period_start = p_period ORDER BY u.brand_id FOR UPDATE;
      UPDATE ticket_usage_brands u SET budget = u.used, allowance = p_allowance WHERE u.account_id = p_account AND u.period_start = p_period;
      UPDATE ticket_usage p SET allowance = p_allowance WHERE p.account_id = p_account AND p.period_start = p_period;
    END IF;
    INSERT INTO ticket_usage_brands (account_id, period_start, brand_id, used, budget, allowance)
    SELECT p_account, p_period, c.brand_id, k.n, k.n, p_allowance FROM unnest(p_brands) AS c(brand_id)
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS n FROM tickets x WHERE x.account_id = p_account AND x.livemode AND x.brand_id = c.brand_id
        AND x.created_at >= p_period AND NOT x.is_spam AND x.id <> ALL (p_new_ids)) k
    WHERE NOT EXISTS (SELECT 1 FROM ticket_usage_brands u WHERE u.account_id = p_account AND u.period_start = p_period AND u.brand_id = c.brand_id);

    IF p_allowance IS NOT NULL THEN
      -- The statement's brands are written only by this statement now (their brand rows' locks), budgets only under the period row's.
      SELECT coalesce(sum(u.used + c.n - u.budget), 0), count(*) INTO v_short, v_short_brands
      FROM ticket_usage_brands u JOIN unnest(p_brands, p_counts) AS c(brand_id, n) ON u.brand_id = c.brand_id
      WHERE u.account_id = p_account AND u.period_start = p_period AND u.used + c.n > u.budget;
      IF v_short > 0 THEN
        SELECT p_allowance - v_adjustment - coalesce(sum(u.budget), 0) INTO v_pool FROM ticket_usage_brands u
        WHERE u.account_id = p_account AND u.period_start = p_period;
        IF v_pool < v_short THEN
          -- Take back what the other brands were granted and have not used (waiting for their creates in flight).
          PERFORM 1 FROM ticket_usage_brands u WHERE u.account_id = p_account AND u.period_start = p_period ORDER BY u.brand_id FOR UPDATE;
          UPDATE ticket_usage_brands u SET budget = u.used WHERE u.account_id = p_account AND u.period_start = p_period AND u.budget > u.used;
          SELECT coalesce(sum(c.n), 0), count(*) INTO v_short, v_short_brands FROM unnest(p_counts) AS c(n);
          SELECT p_allowance - v_adjustment - coalesce(sum(u.budget), 0) INTO v_pool FROM ticket_usage_brands u
          WHERE u.account_id = p_account AND u.period_start = p_period;
          IF v_pool < v_short THEN
            RAISE EXCEPTION 'the ticket allowance of the plan is used up' USING ERRCODE = 'TQ001',
              DETAIL = json_build_object('plan', p_plan, 'allowance', p_allowance, 'had', p_allowance - v_pool)::text;
          END IF;
        END IF;
        UPDATE ticket_usage_brands u SET budget = u.used + c.n + (v_pool - v_short) / 8 / v_short_brands
        FROM unnest(p_brands, p_counts) AS c(brand_id, n)
        WHERE u.account_id = p_account AND u.period_start = p_period AND u.brand_id = c.brand_id AND u.used + c.n > u.budget;
      END IF;
    END IF;
    UPDATE ticket_usage_brands u SET used = u.used + c.n FROM unnest(p_brands, p_counts) AS c(brand_id, n)
    WHERE u.account_id = p_account AND u.period_start = p_period AND u.brand_id = c.brand_id;
    RETURN true;
  END $$`;

const COUNTED_WITHIN_BUDGETS = `
  CREATE FUNCTION ticketd_counted_within_budgets(p_brands integer, p_counted integer) RETURNS boolean
  LANGUAGE plpgsql AS $$
  BEGIN
    IF p_counted < p_brands THEN
      RAISE EXCEPTION 'a brand has no room in its budget of the ticket allowance' USING ERRCODE = 'TQ002';
    END IF;
    RETURN true;
  END $$`;

// Spam is not billed: a ticket marked spam leaves the count of the period it was created in, and comes back when unmarked.
const ON_SPAM = `
  CREATE FUNCTION ticketd_ticket_usage_on_spam() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    UPDATE ticket_usage p SET adjustment = p.adjustment + CASE WHEN NEW.is_spam THEN -1 ELSE 1 END
    WHERE p.account_id = NEW.account_id AND p.period_start = (
      SELECT max(q.period_start) FROM ticket_usage q WHERE q.account_id = NEW.account_id AND q.period_start <= NEW.created_at);
    RETURN NULL;
  END $$`;

const SPAM_TRIGGER = `CREATE TRIGGER tickets_usage_on_spam AFTER UPDATE OF is_spam ON tickets
  FOR EACH ROW WHEN (NEW.livemode AND OLD.is_spam IS DISTINCT FROM NEW.is_spam) EXECUTE FUNCTION ticketd_ticket_usage_on_spam()`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER tickets_usage_on_spam ON tickets');
  await knex.raw('DROP FUNCTION ticketd_ticket_usage_on_spam()');
  await knex.raw('DROP FUNCTION ticketd_refuse_over_allowance(text, integer, integer, integer)');
  // The counts are rebuilt from the tickets by the next create of each period (deleted and merged tickets are rows still).
  await knex.schema.dropTable('ticket_usage');
  await knex.schema.createTable('ticket_usage', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.timestamp('period_start', { useTz: true }).notNullable();
    t.integer('allowance');
    t.integer('adjustment').notNullable().defaultTo(0);
    t.primary(['account_id', 'period_start'], { constraintName: 'ticket_usage_pkey' });
  });
  await knex.schema.createTable('ticket_usage_brands', (t) => {
    t.text('account_id').notNullable();
    t.timestamp('period_start', { useTz: true }).notNullable();
    // No foreign key to brands: a deleted brand's tickets stay counted, as deleted tickets do.
    t.text('brand_id').notNullable();
    t.integer('used').notNullable();
    t.integer('budget').notNullable();
    t.integer('allowance');
    t.primary(['account_id', 'period_start', 'brand_id'], { constraintName: 'ticket_usage_brands_pkey' });
    t.foreign(['account_id', 'period_start'], 'ticket_usage_brands_period_fk').references(['account_id', 'period_start']).inTable('ticket_usage').onDelete('CASCADE');
  });
  await knex.raw(COUNT_TICKETS);
  await knex.raw(COUNTED_WITHIN_BUDGETS);
  await knex.raw(ON_SPAM);
  await knex.raw(SPAM_TRIGGER);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER tickets_usage_on_spam ON tickets');
  await knex.raw('DROP FUNCTION ticketd_ticket_usage_on_spam()');
  await knex.raw('DROP FUNCTION ticketd_counted_within_budgets(integer, integer)');
  await knex.raw('DROP FUNCTION ticketd_count_tickets(text, timestamptz, text, integer, text[], integer[], text[])');
  await knex.schema.dropTable('ticket_usage_brands');
  await knex.schema.dropTable('ticket_usage');
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
  await knex.raw(`
    CREATE FUNCTION ticketd_ticket_usage_on_spam() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE ticket_usage u SET used = u.used + CASE WHEN NEW.is_spam THEN -1 ELSE 1 END
      WHERE u.account_id = NEW.account_id AND u.period_start = (
        SELECT max(p.period_start) FROM ticket_usage p WHERE p.account_id = NEW.account_id AND p.period_start <= NEW.created_at);
      RETURN NULL;
    END $$`);
  await knex.raw(SPAM_TRIGGER);
}
