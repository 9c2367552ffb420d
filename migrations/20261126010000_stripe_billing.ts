import type { Knex } from 'knex';

/**
 * The Stripe billing provider: what ticketd keeps of Stripe's objects (Stripe holds the rest).
 *
 * billing_customers: the provider's customer of an account (Stripe's cus_ id), made once by the
 * first checkout or payment-method call. A notification names the customer alone: it is found by
 * the customer id (a cross-tenant index).
 *
 * checkout_sessions.provider and provider_ref: a checkout made at the provider (Stripe's cs_ id,
 * one row per id and account); such a checkout has no page of ticketd's, so no token.
 *
 * subscriptions.provider_ref (from the billing migration) holds Stripe's sub_ id, one row per id
 * and account; a subscription whose payment failed is past_due.
 *
 * billing_events: the provider's event ids already applied, so a redelivered event changes
 * nothing. An event is verified and recorded before its account is known: a table of no tenant.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('billing_customers', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('provider').notNullable();
    t.text('customer_ref').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'provider'], { constraintName: 'billing_customers_pkey' });
  });
  await knex.raw('CREATE INDEX billing_customers_ref_idx ON billing_customers (provider, customer_ref)');
  await knex.schema.alterTable('checkout_sessions', (t) => {
    t.text('provider').notNullable().defaultTo('local');
    t.text('provider_ref');
    t.setNullable('token_hash');
  });
  await knex.raw('CREATE UNIQUE INDEX checkout_sessions_provider_ref_unique ON checkout_sessions (account_id, provider, provider_ref) WHERE provider_ref IS NOT NULL');
  await knex.raw('CREATE UNIQUE INDEX subscriptions_provider_ref_unique ON subscriptions (account_id, provider, provider_ref) WHERE provider_ref IS NOT NULL');
  await knex.raw('ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_status_check');
  await knex.raw("ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_status_check CHECK (status in ('active', 'past_due', 'canceled'))");
  await knex.schema.createTable('billing_events', (t) => {
    t.text('provider').notNullable();
    t.text('event_id').notNullable();
    t.text('type').notNullable();
    t.timestamp('received_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['provider', 'event_id'], { constraintName: 'billing_events_pkey' });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('billing_events');
  await knex('subscriptions').where({ status: 'past_due' }).update({ status: 'active' });
  await knex.raw('ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_status_check');
  await knex.raw("ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_status_check CHECK (status in ('active', 'canceled'))");
  await knex.raw('DROP INDEX subscriptions_provider_ref_unique');
  await knex.raw('DROP INDEX checkout_sessions_provider_ref_unique');
  await knex('checkout_sessions').whereNull('token_hash').delete();
  await knex.schema.alterTable('checkout_sessions', (t) => {
    t.dropNullable('token_hash');
    t.dropColumn('provider_ref');
    t.dropColumn('provider');
  });
  await knex.raw('DROP INDEX billing_customers_ref_idx');
  await knex.schema.dropTable('billing_customers');
}
