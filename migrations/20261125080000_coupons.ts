import type { Knex } from 'knex';

/**
 * Coupons: the discounts a plan change may name. Their terms live in the configuration (codes are
 * stored as configured); what changes as they are used lives here.
 *
 * coupons: one row per configured code that was redeemed or given a limit, for the whole
 * installation (no tenant): times_redeemed over every account, and the limit an instance
 * administrator set (limit_set; max_redemptions null with it: unlimited), which then wins over
 * the configured one. Redemptions lock the row, so the count never passes the limit.
 *
 * coupon_redemptions: each use by an account, with the invoice it discounted; one per account and
 * coupon. checkout_sessions.coupon_code: the coupon an upgrade named, redeemed on completion.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('coupons', (t) => {
    t.text('code').primary({ constraintName: 'coupons_pkey' });
    t.integer('times_redeemed').notNullable().defaultTo(0);
    t.boolean('limit_set').notNullable().defaultTo(false);
    t.integer('max_redemptions');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check('times_redeemed >= 0 and (max_redemptions is null or max_redemptions >= 0)', [], 'coupons_counts_check');
  });
  await knex.schema.alterTable('checkout_sessions', (t) => {
    t.text('coupon_code');
  });
  await knex.schema.createTable('coupon_redemptions', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('id').notNullable();
    t.text('coupon_code').notNullable().references('code').inTable('coupons');
    t.text('subscription_id').notNullable();
    t.text('invoice_id').notNullable();
    t.bigInteger('amount_off').notNullable();
    t.text('currency').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'coupon_redemptions_pkey' });
    t.unique(['account_id', 'coupon_code'], { indexName: 'coupon_redemptions_once_unique' });
    t.foreign(['account_id', 'invoice_id'], 'coupon_redemptions_invoice_fk').references(['account_id', 'id']).inTable('invoices').onDelete('CASCADE');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('coupon_redemptions');
  await knex.schema.alterTable('checkout_sessions', (t) => {
    t.dropColumn('coupon_code');
  });
  await knex.schema.dropTable('coupons');
}
