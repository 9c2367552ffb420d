import type { Knex } from 'knex';

/**
 * signup_checkouts: a paid sign-up under way (POST /v1/auth/checkout), before any account exists:
 * the address, the plan (and coupon) chosen, the organization's name and where the browser goes
 * after. It is completed once: completed_account_id names the account it made, so a completion
 * reported again (the page posted twice, Stripe's notification re-sent) makes nothing more. A
 * completion refused (the address got an account meanwhile) sets failed_at and failure.
 *
 * It belongs to no tenant: its account does not exist until it completes. It is found by its
 * page's token (the local provider; SHA-256 stored) or by the provider's checkout id (Stripe's
 * cs_ id). completed_account_id carries no foreign key: the table is global (a reference table
 * on a sharded PostgreSQL), and the account may be deleted later.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('signup_checkouts', (t) => {
    t.text('id').primary({ constraintName: 'signup_checkouts_pkey' });
    t.text('provider').notNullable();
    t.text('token_hash');
    t.text('provider_ref');
    t.text('email').notNullable();
    t.text('account_name');
    t.text('plan_slug').notNullable();
    t.text('coupon_code');
    t.text('success_url').notNullable();
    t.text('cancel_url').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('completed_at', { useTz: true });
    t.text('completed_account_id');
    t.timestamp('failed_at', { useTz: true });
    t.text('failure');
    t.check('token_hash is not null or provider_ref is not null', [], 'signup_checkouts_found_check');
  });
  await knex.raw('CREATE UNIQUE INDEX signup_checkouts_token_hash_unique ON signup_checkouts (token_hash) WHERE token_hash IS NOT NULL');
  await knex.raw('CREATE UNIQUE INDEX signup_checkouts_provider_ref_unique ON signup_checkouts (provider, provider_ref) WHERE provider_ref IS NOT NULL');
  // The dispatcher deletes the checkouts that expired long ago, oldest first.
  await knex.raw('CREATE INDEX signup_checkouts_expires_idx ON signup_checkouts (expires_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('signup_checkouts');
}
