import type { Knex } from 'knex';

/**
 * What the triggers on tickets and ticket_tags kept up to date (resolved_at, the sort keys and
 * search vector, ticket_count_changes, ticket_tags' copy of status and priority, rating requests,
 * the spam adjustment of ticket usage) is written by the application's own statements
 * (server/core/ticket-writes.ts, server/core/ticket-names.ts and the ticket create statement):
 * Citus runs no trigger on a distributed table (decision 0090). `down` puts the triggers and their
 * functions back as they were.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER tickets_count_insert ON tickets;
    DROP TRIGGER tickets_count_update ON tickets;
    DROP TRIGGER tickets_count_delete ON tickets;
    DROP TRIGGER tickets_derived_columns ON tickets;
    DROP TRIGGER tickets_derived_columns_on_insert ON tickets;
    DROP TRIGGER tickets_resolved_at ON tickets;
    DROP TRIGGER tickets_copy_to_tags ON tickets;
    DROP TRIGGER tickets_feedback_on_resolve ON tickets;
    DROP TRIGGER tickets_usage_on_spam ON tickets;
    DROP TRIGGER ticket_tags_copy_ticket ON ticket_tags;
    DROP FUNCTION tickets_count_changes();
    DROP FUNCTION tickets_derived_columns();
    DROP FUNCTION tickets_resolved_at();
    DROP FUNCTION tickets_copy_to_tags();
    DROP FUNCTION tickets_feedback_on_resolve();
    DROP FUNCTION ticketd_ticket_usage_on_spam();
    DROP FUNCTION ticket_tags_copy_ticket();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
CREATE FUNCTION tickets_count_changes()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        
  INSERT INTO ticket_count_changes (account_id, livemode, brand_id, day, status, created, resolved, resolution_seconds)
  SELECT account_id, livemode, brand_id, day, status, sum(created), sum(resolved), sum(resolution_seconds)
  FROM (
  SELECT r.account_id, r.livemode, r.brand_id, c.day, r.status,
    1 * c.created AS created, 1 * c.resolved AS resolved, 1 * c.seconds AS resolution_seconds
  FROM new_rows r CROSS JOIN LATERAL (VALUES
    ((r.created_at AT TIME ZONE 'UTC')::date, 1, 0, 0::numeric),
    ((r.resolved_at AT TIME ZONE 'UTC')::date, 0, 1, extract(epoch FROM r.resolved_at - r.created_at))
  ) AS c (day, created, resolved, seconds)
  WHERE r.deleted_at IS NULL AND NOT r.is_spam AND c.day IS NOT NULL) AS d
  GROUP BY account_id, livemode, brand_id, day, status
  HAVING sum(created) <> 0 OR sum(resolved) <> 0 OR sum(resolution_seconds) <> 0;
      ELSIF TG_OP = 'UPDATE' THEN
        
  INSERT INTO ticket_count_changes (account_id, livemode, brand_id, day, status, created, resolved, resolution_seconds)
  SELECT account_id, livemode, brand_id, day, status, sum(created), sum(resolved), sum(resolution_seconds)
  FROM (
  SELECT r.account_id, r.livemode, r.brand_id, c.day, r.status,
    1 * c.created AS created, 1 * c.resolved AS resolved, 1 * c.seconds AS resolution_seconds
  FROM new_rows r CROSS JOIN LATERAL (VALUES
    ((r.created_at AT TIME ZONE 'UTC')::date, 1, 0, 0::numeric),
    ((r.resolved_at AT TIME ZONE 'UTC')::date, 0, 1, extract(epoch FROM r.resolved_at - r.created_at))
  ) AS c (day, created, resolved, seconds)
  WHERE r.deleted_at IS NULL AND NOT r.is_spam AND c.day IS NOT NULL UNION ALL 
  SELECT r.account_id, r.livemode, r.brand_id, c.day, r.status,
    -1 * c.created AS created, -1 * c.resolved AS resolved, -1 * c.seconds AS resolution_seconds
  FROM old_rows r CROSS JOIN LATERAL (VALUES
    ((r.created_at AT TIME ZONE 'UTC')::date, 1, 0, 0::numeric),
    ((r.resolved_at AT TIME ZONE 'UTC')::date, 0, 1, extract(epoch FROM r.resolved_at - r.created_at))
  ) AS c (day, created, resolved, seconds)
  WHERE r.deleted_at IS NULL AND NOT r.is_spam AND c.day IS NOT NULL) AS d
  GROUP BY account_id, livemode, brand_id, day, status
  HAVING sum(created) <> 0 OR sum(resolved) <> 0 OR sum(resolution_seconds) <> 0;
      ELSE
        
  INSERT INTO ticket_count_changes (account_id, livemode, brand_id, day, status, created, resolved, resolution_seconds)
  SELECT account_id, livemode, brand_id, day, status, sum(created), sum(resolved), sum(resolution_seconds)
  FROM (
  SELECT r.account_id, r.livemode, r.brand_id, c.day, r.status,
    -1 * c.created AS created, -1 * c.resolved AS resolved, -1 * c.seconds AS resolution_seconds
  FROM old_rows r CROSS JOIN LATERAL (VALUES
    ((r.created_at AT TIME ZONE 'UTC')::date, 1, 0, 0::numeric),
    ((r.resolved_at AT TIME ZONE 'UTC')::date, 0, 1, extract(epoch FROM r.resolved_at - r.created_at))
  ) AS c (day, created, resolved, seconds)
  WHERE r.deleted_at IS NULL AND NOT r.is_spam AND c.day IS NOT NULL) AS d
  GROUP BY account_id, livemode, brand_id, day, status
  HAVING sum(created) <> 0 OR sum(resolved) <> 0 OR sum(resolution_seconds) <> 0;
      END IF;
      RETURN NULL;
    END $function$`);
  await knex.raw(`
CREATE FUNCTION tickets_derived_columns()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
    BEGIN
      IF TG_OP = 'INSERT' OR NEW.customer_id IS DISTINCT FROM OLD.customer_id THEN
        NEW.customer_sort := ''; NEW.customer_text := ''; NEW.company_sort := '';
        IF NEW.customer_id IS NOT NULL THEN
          SELECT ticketd_person_sort(c.name, c.email), ticketd_person_text(c.name, c.email), coalesce(lower(co.name), '')
            INTO NEW.customer_sort, NEW.customer_text, NEW.company_sort
            FROM contacts c
            LEFT JOIN companies co ON co.account_id = c.account_id AND co.livemode = c.livemode AND co.brand_id = c.brand_id AND co.id = c.company_id
            WHERE c.account_id = NEW.account_id AND c.livemode = NEW.livemode AND c.brand_id = NEW.brand_id AND c.id = NEW.customer_id;
          NEW.customer_sort := coalesce(NEW.customer_sort, ''); NEW.customer_text := coalesce(NEW.customer_text, ''); NEW.company_sort := coalesce(NEW.company_sort, '');
        END IF;
      END IF;
      IF TG_OP = 'INSERT' OR NEW.assignee_id IS DISTINCT FROM OLD.assignee_id THEN
        NEW.assignee_sort := coalesce((SELECT ticketd_person_sort(m.name, m.email) FROM members m
          WHERE m.account_id = NEW.account_id AND m.id = NEW.assignee_id), '');
      END IF;
      IF TG_OP = 'INSERT' OR NEW.category_id IS DISTINCT FROM OLD.category_id THEN
        NEW.category_sort := coalesce((SELECT lower(ca.name) FROM categories ca
          WHERE ca.account_id = NEW.account_id AND ca.livemode = NEW.livemode AND ca.brand_id = NEW.brand_id AND ca.id = NEW.category_id), '');
      END IF;
      IF TG_OP = 'INSERT' OR NEW.title IS DISTINCT FROM OLD.title OR NEW.body IS DISTINCT FROM OLD.body OR NEW.customer_text IS DISTINCT FROM OLD.customer_text THEN
        NEW.search_vector := ticketd_ticket_vector(NEW.title, NEW.customer_text, NEW.body);
      END IF;
      RETURN NEW;
    END $function$`);
  await knex.raw(`
CREATE FUNCTION tickets_resolved_at()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
    BEGIN
      IF NEW.status NOT IN ('resolved', 'closed') THEN
        NEW.resolved_at := NULL;
      ELSIF TG_OP = 'INSERT' THEN
        NEW.resolved_at := coalesce(NEW.resolved_at, now());
      ELSIF OLD.status NOT IN ('resolved', 'closed') THEN
        NEW.resolved_at := now();
      END IF;
      RETURN NEW;
    END $function$`);
  await knex.raw(`
CREATE FUNCTION tickets_copy_to_tags()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
    BEGIN
      UPDATE ticket_tags SET status = NEW.status, priority = NEW.priority
      WHERE account_id = NEW.account_id AND livemode = NEW.livemode AND brand_id = NEW.brand_id AND ticket_id = NEW.id;
      RETURN NULL;
    END $function$`);
  await knex.raw(`
CREATE FUNCTION tickets_feedback_on_resolve()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
    BEGIN
      UPDATE ticket_feedback SET status = 'cancelled'
      WHERE account_id = NEW.account_id AND livemode = NEW.livemode AND brand_id = NEW.brand_id AND ticket_id = NEW.id AND status IN ('scheduled', 'sent');
      INSERT INTO ticket_feedback (account_id, livemode, brand_id, id, ticket_id, contact_id, resolver_id, rating_type, send_at)
      SELECT NEW.account_id, NEW.livemode, NEW.brand_id, ticketd_new_id('fb'), NEW.id, NEW.customer_id, NEW.assignee_id, b.csat_type,
        now() + make_interval(mins => b.csat_delay_minutes)
      FROM brands b WHERE b.account_id = NEW.account_id AND b.livemode = NEW.livemode AND b.id = NEW.brand_id AND b.csat_enabled;
      RETURN NULL;
    END $function$`);
  await knex.raw(`
CREATE FUNCTION ticketd_ticket_usage_on_spam()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
  BEGIN
    UPDATE ticket_usage p SET adjustment = p.adjustment + CASE WHEN NEW.is_spam THEN -1 ELSE 1 END
    WHERE p.account_id = NEW.account_id AND p.period_start = (
      SELECT max(q.period_start) FROM ticket_usage q WHERE q.account_id = NEW.account_id AND q.period_start <= NEW.created_at);
    RETURN NULL;
  END $function$`);
  await knex.raw(`
CREATE FUNCTION ticket_tags_copy_ticket()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
    BEGIN
      SELECT t.status, t.priority INTO NEW.status, NEW.priority FROM tickets t
      WHERE t.account_id = NEW.account_id AND t.livemode = NEW.livemode AND t.brand_id = NEW.brand_id AND t.id = NEW.ticket_id;
      RETURN NEW;
    END $function$`);
  await knex.raw(`
CREATE TRIGGER tickets_count_insert AFTER INSERT ON tickets REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tickets_count_changes()`);
  await knex.raw(`
CREATE TRIGGER tickets_count_update AFTER UPDATE ON tickets REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tickets_count_changes()`);
  await knex.raw(`
CREATE TRIGGER tickets_count_delete AFTER DELETE ON tickets REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tickets_count_changes()`);
  await knex.raw(`
CREATE TRIGGER tickets_derived_columns BEFORE UPDATE OF title, body, customer_id, customer_text, assignee_id, category_id ON tickets FOR EACH ROW EXECUTE FUNCTION tickets_derived_columns()`);
  await knex.raw(`
CREATE TRIGGER tickets_derived_columns_on_insert BEFORE INSERT ON tickets FOR EACH ROW WHEN ((new.search_vector = ''::tsvector)) EXECUTE FUNCTION tickets_derived_columns()`);
  await knex.raw(`
CREATE TRIGGER tickets_resolved_at BEFORE INSERT OR UPDATE OF status ON tickets FOR EACH ROW EXECUTE FUNCTION tickets_resolved_at()`);
  await knex.raw(`
CREATE TRIGGER tickets_copy_to_tags AFTER UPDATE OF status, priority ON tickets FOR EACH ROW WHEN (((old.status IS DISTINCT FROM new.status) OR (old.priority IS DISTINCT FROM new.priority))) EXECUTE FUNCTION tickets_copy_to_tags()`);
  await knex.raw(`
CREATE TRIGGER tickets_feedback_on_resolve AFTER UPDATE OF status ON tickets FOR EACH ROW WHEN (((new.status = 'resolved'::text) AND (old.status <> ALL (ARRAY['resolved'::text, 'closed'::text])) AND (new.customer_id IS NOT NULL) AND (NOT new.is_spam) AND (new.deleted_at IS NULL))) EXECUTE FUNCTION tickets_feedback_on_resolve()`);
  await knex.raw(`
CREATE TRIGGER tickets_usage_on_spam AFTER UPDATE OF is_spam ON tickets FOR EACH ROW WHEN ((new.livemode AND (old.is_spam IS DISTINCT FROM new.is_spam))) EXECUTE FUNCTION ticketd_ticket_usage_on_spam()`);
  await knex.raw(`
CREATE TRIGGER ticket_tags_copy_ticket BEFORE INSERT ON ticket_tags FOR EACH ROW WHEN ((new.status IS NULL)) EXECUTE FUNCTION ticket_tags_copy_ticket()`);
}
