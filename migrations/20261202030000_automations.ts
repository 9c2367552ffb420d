import type { Knex } from 'knex';

/**
 * Automations (decision 0097): what the dispatcher needs to run a brand's time rules every minute.
 *
 * Three moments of a ticket, written by the statements that change them (core/ticket-writes.ts,
 * ticket create, comment create), never by a database trigger:
 * - status_changed_at: when its status last changed (set at create). Tickets older than this
 *   migration have none: their last update stands in (coalesce with updated_at), the latest
 *   their status can have changed, so an automation fires late on them rather than early;
 * - last_customer_message_at, last_agent_reply_at: the customer's last public message (the one
 *   that opened the ticket included) and an agent's last public reply. Unknown (null) before this
 *   migration: a duration from a moment never recorded is none, and its conditions do not hold.
 *
 * automation_firings: the automations that fired on a ticket, with the ticket's updated_at after
 * their firing. An automation fires on a ticket again only once the ticket has changed since.
 *
 * The candidate query of each automation reads one range of one index: the brand's live,
 * non-spam tickets that are not closed (automations never touch those, and they are most of an
 * old helpdesk, so these indexes stay small), by status, then by the moment its duration
 * condition bounds. The dispatcher finds the brands with enabled automations from
 * rules_automations_idx.
 */
const LIVE = `deleted_at IS NULL AND NOT is_spam AND status <> 'closed'`;
const MOMENT_INDEXES: Record<string, { key: string; where?: string }> = {
  tickets_automation_created_idx: { key: 'created_at' },
  tickets_automation_updated_idx: { key: 'updated_at' },
  tickets_automation_status_changed_idx: { key: '(coalesce(status_changed_at, updated_at))' },
  tickets_automation_resolved_idx: { key: 'resolved_at', where: 'resolved_at IS NOT NULL' },
  tickets_automation_customer_message_idx: { key: 'last_customer_message_at', where: 'last_customer_message_at IS NOT NULL' },
  tickets_automation_agent_reply_idx: { key: 'last_agent_reply_at', where: 'last_agent_reply_at IS NOT NULL' },
  tickets_automation_due_idx: { key: 'due_at', where: 'due_at IS NOT NULL' },
};

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE tickets
    ADD COLUMN status_changed_at timestamptz,
    ADD COLUMN last_customer_message_at timestamptz,
    ADD COLUMN last_agent_reply_at timestamptz`);
  for (const [name, { key, where }] of Object.entries(MOMENT_INDEXES)) {
    await knex.raw(`CREATE INDEX ${name} ON tickets (account_id, livemode, brand_id, status, ${key}) WHERE ${LIVE}${where ? ` AND ${where}` : ''}`);
  }
  await knex.raw(`CREATE INDEX rules_automations_idx ON rules (account_id, livemode, brand_id) WHERE kind = 'automation' AND enabled`);

  await knex.schema.createTable('automation_firings', (t) => {
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('rule_id').notNullable();
    t.text('ticket_id').notNullable();
    t.timestamp('ticket_updated_at', { useTz: true }).notNullable();
    t.timestamp('fired_at', { useTz: true }).notNullable();
    t.primary(['account_id', 'rule_id', 'ticket_id'], { constraintName: 'automation_firings_pkey' });
    t.foreign(['account_id', 'rule_id'], 'automation_firings_rule_fk').references(['account_id', 'id']).inTable('rules').onDelete('CASCADE');
    t.foreign(['account_id', 'livemode', 'brand_id', 'ticket_id'], 'automation_firings_ticket_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('tickets')
      .onDelete('CASCADE');
    // A ticket's firings of every automation (the sweep reads them; a ticket's deletion finds them).
    t.index(['account_id', 'livemode', 'brand_id', 'ticket_id'], 'automation_firings_ticket_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('automation_firings');
  await knex.raw('DROP INDEX rules_automations_idx');
  for (const name of Object.keys(MOMENT_INDEXES)) await knex.raw(`DROP INDEX ${name}`);
  await knex.raw('ALTER TABLE tickets DROP COLUMN status_changed_at, DROP COLUMN last_customer_message_at, DROP COLUMN last_agent_reply_at');
}
