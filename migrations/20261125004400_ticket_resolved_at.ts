import type { Knex } from 'knex';

/**
 * What the cross-brand dashboard counts (GET /v1/tickets/stats, /trends, /team-metrics).
 *
 * resolved_at: when the ticket last became done (status resolved or closed) from a status that is
 * not done; null while it is not done. A move from resolved to closed keeps the time (it was
 * already done); reopening clears it. A trigger keeps it, so every path that writes a status
 * (update, bulk resolve/close, merge, inbound mail reopening a ticket) agrees. Tickets done before
 * this migration take their updated_at, the closest time known.
 *
 * Two indexes over live, non-spam tickets (what the dashboard counts), each led by the brand:
 * - (status, created_at): counts by status read the index alone; created-per-day counts over a
 *   date range skip from status to status inside it (PostgreSQL 18 skip scan);
 * - (resolved_at) with created_at, assignee_id and status carried: resolved-per-day, the average
 *   resolution time and resolutions per member over a date range read the index alone.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE tickets ADD COLUMN resolved_at timestamptz');
  await knex.raw(`
    CREATE FUNCTION tickets_resolved_at() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.status NOT IN ('resolved', 'closed') THEN
        NEW.resolved_at := NULL;
      ELSIF TG_OP = 'INSERT' THEN
        NEW.resolved_at := coalesce(NEW.resolved_at, now());
      ELSIF OLD.status NOT IN ('resolved', 'closed') THEN
        NEW.resolved_at := now();
      END IF;
      RETURN NEW;
    END $$`);
  await knex.raw('CREATE TRIGGER tickets_resolved_at BEFORE INSERT OR UPDATE OF status ON tickets FOR EACH ROW EXECUTE FUNCTION tickets_resolved_at()');
  await knex.raw(`UPDATE tickets SET resolved_at = updated_at WHERE status IN ('resolved', 'closed')`);
  await knex.raw('CREATE INDEX tickets_stats_idx ON tickets (account_id, livemode, brand_id, status, created_at) WHERE deleted_at IS NULL AND NOT is_spam');
  await knex.raw(`CREATE INDEX tickets_resolved_idx ON tickets (account_id, livemode, brand_id, resolved_at) INCLUDE (created_at, assignee_id, status)
    WHERE resolved_at IS NOT NULL AND deleted_at IS NULL AND NOT is_spam`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX tickets_resolved_idx');
  await knex.raw('DROP INDEX tickets_stats_idx');
  await knex.raw('DROP TRIGGER tickets_resolved_at ON tickets');
  await knex.raw('DROP FUNCTION tickets_resolved_at()');
  await knex.raw('ALTER TABLE tickets DROP COLUMN resolved_at');
}
