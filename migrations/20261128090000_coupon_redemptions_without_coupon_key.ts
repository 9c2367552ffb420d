import type { Knex } from 'knex';

/**
 * coupon_redemptions loses its foreign key to coupons, so that on a Citus cluster `coupons` can
 * stay a plain table on the coordinator (decision 0091): as a reference table its row, locked and
 * counted by every redemption, was written on every node, and Citus refuses that write in a
 * transaction that read several shards before (a checkout found by its token). The key held
 * nothing the code does not: a redemption is written by coupons.redeem right after it makes and
 * locks the code's row, in the same transaction.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE coupon_redemptions DROP CONSTRAINT coupon_redemptions_coupon_code_foreign');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE coupon_redemptions ADD CONSTRAINT coupon_redemptions_coupon_code_foreign FOREIGN KEY (coupon_code) REFERENCES coupons (code)');
}
