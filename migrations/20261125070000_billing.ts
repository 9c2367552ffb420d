import type { Knex } from 'knex';

/**
 * Billing: what an account pays for. Plans live in the configuration (their slugs are stored).
 *
 * accounts.plan_slug: an operator's override (`ticketd accounts plan`): the plan of an account
 * without a subscription; null: the configured default plan.
 *
 * subscriptions: an account's subscriptions, current and past. At most one is current (ended_at
 * null). A scheduled change (a downgrade at the period's end) is pending_plan_slug with its date;
 * cancel_at_period_end ends it then. provider and provider_ref name it at the billing provider.
 *
 * checkout_sessions: an upgrade under way: the plan chosen and where to send the browser after;
 * completed once (completed_at), into the subscription it made or changed. Its checkout page is
 * opened by a browser without the member's session: the page's URL carries a token (stored as
 * its SHA-256), found by its hash alone.
 *
 * invoices: what each period of a subscription cost (the local provider writes one per period).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('accounts', (t) => {
    t.text('plan_slug');
  });
  await knex.schema.createTable('subscriptions', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('id').notNullable();
    t.text('plan_slug').notNullable();
    t.text('status').notNullable();
    t.text('provider').notNullable();
    t.text('provider_ref');
    t.timestamp('current_period_start', { useTz: true }).notNullable();
    t.timestamp('current_period_end', { useTz: true }).notNullable();
    t.boolean('cancel_at_period_end').notNullable().defaultTo(false);
    t.text('pending_plan_slug');
    t.timestamp('pending_effective_at', { useTz: true });
    t.timestamp('canceled_at', { useTz: true });
    t.timestamp('ended_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'subscriptions_pkey' });
    t.check("status in ('active', 'canceled')", [], 'subscriptions_status_check');
  });
  // One current subscription per account; also the renewal job's "whose period ended" reads the first.
  await knex.raw('CREATE UNIQUE INDEX subscriptions_current_idx ON subscriptions (account_id) WHERE ended_at IS NULL');
  await knex.raw('CREATE INDEX subscriptions_period_end_idx ON subscriptions (current_period_end) WHERE ended_at IS NULL');
  await knex.schema.createTable('checkout_sessions', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('id').notNullable();
    t.text('token_hash').notNullable();
    t.text('plan_slug').notNullable();
    t.text('member_id');
    t.text('success_url').notNullable();
    t.text('cancel_url').notNullable();
    t.text('subscription_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('completed_at', { useTz: true });
    t.primary(['account_id', 'id'], { constraintName: 'checkout_sessions_pkey' });
  });
  await knex.raw('CREATE INDEX checkout_sessions_token_hash_idx ON checkout_sessions (token_hash)');
  await knex.schema.createTable('invoices', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('id').notNullable();
    t.text('subscription_id').notNullable();
    t.integer('number').notNullable();
    t.text('status').notNullable();
    t.text('plan_slug').notNullable();
    t.bigInteger('amount_due').notNullable();
    t.bigInteger('amount_paid').notNullable();
    t.text('currency').notNullable();
    t.timestamp('period_start', { useTz: true }).notNullable();
    t.timestamp('period_end', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'invoices_pkey' });
    t.unique(['account_id', 'number'], { indexName: 'invoices_number_unique' });
    t.foreign(['account_id', 'subscription_id'], 'invoices_subscription_fk').references(['account_id', 'id']).inTable('subscriptions').onDelete('CASCADE');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('invoices');
  await knex.schema.dropTable('checkout_sessions');
  await knex.schema.dropTable('subscriptions');
  await knex.schema.alterTable('accounts', (t) => {
    t.dropColumn('plan_slug');
  });
}
