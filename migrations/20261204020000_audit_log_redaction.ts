import type { Knex } from 'knex';

/**
 * The audit log stays append-only but for one change: a data subject's erasure (decision 0120)
 * replaces the person's email and name in the entries' old values, metadata and performer's name.
 * The guard lets an UPDATE through only when the transaction has said it is that redaction
 * (`ticketd.redacting_audit` set locally) and the update keeps every other column as it was, so
 * no entry changes what happened, who did it, or when. DELETE is refused as before, except when
 * the whole account goes.
 */
const KEPT = ['id', 'account_id', 'livemode', 'brand_id', 'ticket_id', 'entity_type', 'entity_id', 'event', 'performer_type', 'performer_id', 'source', 'request_id', 'created_at'];

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM accounts WHERE id = OLD.account_id) THEN
        RETURN OLD;
      END IF;
      IF TG_OP = 'UPDATE' AND current_setting('ticketd.redacting_audit', true) = 'on'
        AND ${KEPT.map((c) => `NEW.${c} IS NOT DISTINCT FROM OLD.${c}`).join(' AND ')} THEN
        RETURN NEW;
      END IF;
      RAISE EXCEPTION 'audit_log is append-only' USING ERRCODE = 'insufficient_privilege';
    END $$`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM accounts WHERE id = OLD.account_id) THEN
        RETURN OLD;
      END IF;
      RAISE EXCEPTION 'audit_log is append-only' USING ERRCODE = 'insufficient_privilege';
    END $$`);
}
