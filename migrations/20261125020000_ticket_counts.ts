import type { Knex } from 'knex';

/**
 * Counts of tickets kept as tickets change, so the dashboard's stats and trends read a few rows per
 * brand and day instead of every ticket (decision 0053).
 *
 * A counted ticket (live: deleted_at is null, and not spam) contributes, under its brand and its
 * status now:
 * - created +1 on the UTC day of created_at;
 * - once resolved_at is set: resolved +1 and resolution_seconds + (resolved_at - created_at) in
 *   seconds, on the UTC day of resolved_at.
 *
 * ticket_counts holds those sums per (brand, day, status) up to the last roll-up, and per (brand,
 * status) over every day under day '-infinity': all-time stats read those few rows instead of one
 * per day (two years of 20 brands are 58,000 rows, 30-45 ms to sum). ticket_count_changes holds
 * what changed since, appended by statement-level triggers on tickets: per statement, what the
 * rows it wrote contribute now minus what they contributed before, summed per key, keys that did
 * not move left out. Appending (no counter row updated in the writer's transaction) keeps
 * concurrent creates of one brand from queueing on one row. The dispatcher's roll-up
 * (server/domains/tickets/counts.ts) moves committed changes into ticket_counts every tick;
 * readers sum both tables in one statement, so a change counts as soon as it commits.
 *
 * ticket_count_changes has no foreign key: deleting a brand or an account never waits on it or
 * fails over it; the roll-up drops the changes of brands that are gone.
 *
 * ticketd_rebuild_ticket_counts() computes ticket_counts from tickets afresh: the backfill below,
 * and loads made with the triggers off (bench/seed.ts, session_replication_role = replica).
 */

/** What the rows of `rows` contribute to the counts, times sign: the one definition the triggers and the rebuild share. */
const contributions = (rows: string, sign: 1 | -1) => `
  SELECT r.account_id, r.livemode, r.brand_id, c.day, r.status,
    ${sign} * c.created AS created, ${sign} * c.resolved AS resolved, ${sign} * c.seconds AS resolution_seconds
  FROM ${rows} r CROSS JOIN LATERAL (VALUES
    ((r.created_at AT TIME ZONE 'UTC')::date, 1, 0, 0::numeric),
    ((r.resolved_at AT TIME ZONE 'UTC')::date, 0, 1, extract(epoch FROM r.resolved_at - r.created_at))
  ) AS c (day, created, resolved, seconds)
  WHERE r.deleted_at IS NULL AND NOT r.is_spam AND c.day IS NOT NULL`;

/** Contributions summed per key into `table`, keys whose sums are all zero left out. */
const summedInto = (table: string, parts: string[]) => `
  INSERT INTO ${table} (account_id, livemode, brand_id, day, status, created, resolved, resolution_seconds)
  SELECT account_id, livemode, brand_id, day, status, sum(created), sum(resolved), sum(resolution_seconds)
  FROM (${parts.join(' UNION ALL ')}) AS d
  GROUP BY account_id, livemode, brand_id, day, status
  HAVING sum(created) <> 0 OR sum(resolved) <> 0 OR sum(resolution_seconds) <> 0`;

/** Also the roll-up's lock (server/domains/tickets/counts.ts). */
const LOCK = `hashtext('ticketd:ticket-counts')`;

/** The columns both tables share after their keys' leading parts. */
const COUNT_COLUMNS = `livemode boolean NOT NULL, brand_id text NOT NULL, day date NOT NULL, status text NOT NULL,
      created integer NOT NULL, resolved integer NOT NULL, resolution_seconds numeric NOT NULL`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE ticket_counts (
      account_id text NOT NULL,
      ${COUNT_COLUMNS},
      CONSTRAINT ticket_counts_pkey PRIMARY KEY (account_id, livemode, brand_id, day, status),
      CONSTRAINT ticket_counts_brand_fk FOREIGN KEY (account_id, livemode, brand_id) REFERENCES brands (account_id, livemode, id) ON DELETE CASCADE
    )`);
  await knex.raw(`
    CREATE TABLE ticket_count_changes (
      account_id text NOT NULL,
      id bigint GENERATED ALWAYS AS IDENTITY,
      ${COUNT_COLUMNS},
      CONSTRAINT ticket_count_changes_pkey PRIMARY KEY (account_id, id)
    )`);

  // One function for the three triggers: a trigger with transition tables fires on one event only.
  await knex.raw(`
    CREATE FUNCTION tickets_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        ${summedInto('ticket_count_changes', [contributions('new_rows', 1)])};
      ELSIF TG_OP = 'UPDATE' THEN
        ${summedInto('ticket_count_changes', [contributions('new_rows', 1), contributions('old_rows', -1)])};
      ELSE
        ${summedInto('ticket_count_changes', [contributions('old_rows', -1)])};
      END IF;
      RETURN NULL;
    END $$`);
  await knex.raw(`CREATE TRIGGER tickets_count_insert AFTER INSERT ON tickets REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION tickets_count_changes()`);
  await knex.raw(`CREATE TRIGGER tickets_count_update AFTER UPDATE ON tickets REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION tickets_count_changes()`);
  await knex.raw(`CREATE TRIGGER tickets_count_delete AFTER DELETE ON tickets REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION tickets_count_changes()`);

  // The roll-up's lock keeps a roll-up from moving changes meanwhile; SHARE on tickets waits for the
  // ticket writes in flight to commit and holds off new ones, so the changes deleted are exactly
  // those the tickets read afterwards already hold. Run it in a READ COMMITTED transaction (each
  // statement then reads what committed before it).
  await knex.raw(`
    CREATE FUNCTION ticketd_rebuild_ticket_counts() RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(${LOCK});
      LOCK TABLE tickets IN SHARE MODE;
      DELETE FROM ticket_count_changes;
      DELETE FROM ticket_counts;
      ${summedInto('ticket_counts', [contributions('tickets', 1)])};
      INSERT INTO ticket_counts (account_id, livemode, brand_id, day, status, created, resolved, resolution_seconds)
      SELECT account_id, livemode, brand_id, '-infinity', status, sum(created), sum(resolved), sum(resolution_seconds)
      FROM ticket_counts GROUP BY account_id, livemode, brand_id, status;
    END $$`);
  await knex.raw('SELECT ticketd_rebuild_ticket_counts()');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION ticketd_rebuild_ticket_counts()');
  for (const op of ['insert', 'update', 'delete']) await knex.raw(`DROP TRIGGER tickets_count_${op} ON tickets`);
  await knex.raw('DROP FUNCTION tickets_count_changes()');
  await knex.raw('DROP TABLE ticket_count_changes, ticket_counts');
}
