import type { Knex } from 'knex';

/**
 * Service levels (docs/decisions/0077). A brand's settings revision lets a ticket create that
 * computed its dueAt from a remembered service level check the brand still has it. A ticket's
 * clock: whether its dueAt was set by hand, when its clock was paused (pending) and how much
 * working time it has spent paused, and when its ticket.overdue was announced.
 *
 * The dispatcher finds the tickets past their dueAt in every account with one range of
 * tickets_overdue_idx, which holds only live, unresolved tickets with a deadline not announced yet.
 * Team metrics read resolutions with their dueAt (SLA attainment) from tickets_resolved_idx alone.
 * Queued mail may hold an overdue notification (kind 'overdue').
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE brands
    ADD COLUMN settings_revision integer NOT NULL DEFAULT 0,
    ADD COLUMN sla_pause_on_pending boolean NOT NULL DEFAULT false`);
  await knex.raw(`ALTER TABLE tickets
    ADD COLUMN due_at_manual boolean NOT NULL DEFAULT false,
    ADD COLUMN sla_paused_at timestamptz,
    ADD COLUMN sla_paused_seconds integer NOT NULL DEFAULT 0,
    ADD COLUMN overdue_at timestamptz`);
  await knex.raw(`CREATE INDEX tickets_overdue_idx ON tickets (due_at) INCLUDE (account_id, livemode, brand_id, id)
    WHERE due_at IS NOT NULL AND overdue_at IS NULL AND resolved_at IS NULL AND deleted_at IS NULL AND NOT is_spam`);
  await knex.raw('DROP INDEX tickets_resolved_idx');
  await knex.raw(`CREATE INDEX tickets_resolved_idx ON tickets (account_id, livemode, brand_id, resolved_at) INCLUDE (created_at, assignee_id, status, due_at)
    WHERE resolved_at IS NOT NULL AND deleted_at IS NULL AND NOT is_spam`);
  await setMailKinds(knex, [...MAIL_KINDS, 'overdue']);
}

/** The kinds of queued mail before this migration; it adds the overdue notification. */
const MAIL_KINDS = ['agent_reply', 'autoresponse', 'watcher_notification', 'mention'];

async function setMailKinds(knex: Knex, kinds: readonly string[]): Promise<void> {
  await knex.raw('ALTER TABLE mail_messages DROP CONSTRAINT mail_messages_kind_check');
  await knex.raw(`ALTER TABLE mail_messages ADD CONSTRAINT mail_messages_kind_check CHECK (kind in (${kinds.map((k) => `'${k}'`).join(', ')}))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("DELETE FROM mail_messages WHERE kind = 'overdue'");
  await setMailKinds(knex, MAIL_KINDS);
  await knex.raw('DROP INDEX tickets_resolved_idx');
  await knex.raw(`CREATE INDEX tickets_resolved_idx ON tickets (account_id, livemode, brand_id, resolved_at) INCLUDE (created_at, assignee_id, status)
    WHERE resolved_at IS NOT NULL AND deleted_at IS NULL AND NOT is_spam`);
  await knex.raw('DROP INDEX tickets_overdue_idx');
  await knex.raw('ALTER TABLE tickets DROP COLUMN due_at_manual, DROP COLUMN sla_paused_at, DROP COLUMN sla_paused_seconds, DROP COLUMN overdue_at');
  await knex.raw('ALTER TABLE brands DROP COLUMN settings_revision, DROP COLUMN sla_pause_on_pending');
}
