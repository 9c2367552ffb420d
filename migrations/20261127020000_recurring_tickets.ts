import type { Knex } from 'knex';

/**
 * Recurring tickets: a brand's ticket template and when to open it. A calendar `schedule` (jsonb:
 * frequency, day, time of day, time zone, skip weekends) or a five-field `cron_expr`, exactly one
 * of the two, evaluated in `timezone`. `next_run_at` is the next instant it is due; the dispatcher
 * runs the due enabled ones. No foreign key to the assignee or category: when they go, the runs
 * fail visibly (fail_count, last_error) instead of changing the template behind its owner's back.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('recurring_tickets', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('title').notNullable();
    t.text('body');
    t.text('priority');
    t.text('assignee_id');
    t.text('category_id');
    t.specificType('tags', 'text[]').notNullable().defaultTo('{}');
    t.jsonb('custom_fields').notNullable().defaultTo('{}');
    t.jsonb('schedule');
    t.text('cron_expr');
    t.text('timezone').notNullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.timestamp('next_run_at', { useTz: true }).notNullable();
    t.timestamp('last_run_at', { useTz: true });
    t.text('last_ticket_id');
    t.integer('run_count').notNullable().defaultTo(0);
    t.integer('fail_count').notNullable().defaultTo(0);
    t.text('last_error');
    t.text('created_by');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'recurring_tickets_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id'], 'recurring_tickets_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    // The brand's list (a few dozen rows a brand), sorted in memory of the database.
    t.index(['account_id', 'livemode', 'brand_id', 'id'], 'recurring_tickets_brand_idx');
  });
  await knex.raw(`ALTER TABLE recurring_tickets ADD CONSTRAINT recurring_tickets_one_rule_check CHECK ((schedule IS NULL) <> (cron_expr IS NULL))`);
  await knex.raw(`ALTER TABLE recurring_tickets ADD CONSTRAINT recurring_tickets_priority_check CHECK (priority IN ('low', 'normal', 'medium', 'high', 'urgent'))`);
  // The dispatcher takes the due enabled schedules of every account, the longest due first.
  await knex.raw('CREATE INDEX recurring_tickets_due_idx ON recurring_tickets (next_run_at) WHERE enabled');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('recurring_tickets');
}
