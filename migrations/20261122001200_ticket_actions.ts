import type { Knex } from 'knex';

/**
 * Ticket actions: close reason and due date on tickets, and the watchers of a ticket.
 *
 * ticket_watchers carries the ticket's scope and references it with a composite key, so a watcher
 * can never point at a ticket of another brand, account or mode. That key is DEFERRABLE INITIALLY
 * DEFERRED: ticket create writes the watchers it is given before its last statement (the one that
 * numbers and inserts the ticket while holding the brand row lock), so the check runs at commit.
 * Its ON DELETE CASCADE still acts at once (PostgreSQL never defers referential actions).
 * member_id references members by (account_id, id): only members of the ticket's account, and a
 * removed member stops watching. One row per ticket and member.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('tickets', (t) => {
    t.text('close_reason');
    t.timestamp('due_at', { useTz: true });
    t.check("close_reason is null or close_reason in ('no_response', 'out_of_scope', 'customer_left', 'duplicate')", [], 'tickets_close_reason_check');
  });

  await knex.schema.createTable('ticket_watchers', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('ticket_id').notNullable();
    t.text('member_id').notNullable();
    t.text('member_email').notNullable();
    t.text('member_name');
    t.text('added_by');
    t.boolean('notify_on_comment').notNullable().defaultTo(true);
    t.boolean('notify_on_status_change').notNullable().defaultTo(true);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['account_id', 'livemode', 'brand_id', 'ticket_id', 'member_id'], { indexName: 'ticket_watchers_member_unique' });
  });
  await knex.raw(`ALTER TABLE ticket_watchers ADD CONSTRAINT ticket_watchers_ticket_fk
    FOREIGN KEY (account_id, livemode, brand_id, ticket_id) REFERENCES tickets (account_id, livemode, brand_id, id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED`);
  await knex.raw(`ALTER TABLE ticket_watchers ADD CONSTRAINT ticket_watchers_member_fk
    FOREIGN KEY (account_id, member_id) REFERENCES members (account_id, id) ON DELETE CASCADE`);
  // For the member cascade and "what does this member watch" (notifications).
  await knex.raw('CREATE INDEX ticket_watchers_member_idx ON ticket_watchers (account_id, member_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('ticket_watchers');
  await knex.schema.alterTable('tickets', (t) => {
    t.dropColumn('due_at');
    t.dropColumn('close_reason'); // takes its check constraint with it
  });
}
