import * as audit from '../../core/audit.js';
import type { Config, CouponConfig, PlanConfig } from '../../core/config.js';
import { withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { badRequest, conflict, HttpError, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { CouponRedemption, CouponUsage } from './model.js';
import type { CouponView } from './schemas.js';

/**
 * Coupons: their terms come from the configuration; how often each was redeemed, and a limit an
 * instance administrator set, from the coupons table (one row per code, for the whole
 * installation). A redemption takes the code's row lock, so concurrent ones count one after the
 * other and never pass the limit.
 */

/** The configured coupon a customer's code names (in any case), or null. */
export function findCoupon(config: Pick<Config, 'coupons'>, code: string): CouponConfig | null {
  const wanted = code.trim().toLowerCase();
  return config.coupons.find((c) => c.code.toLowerCase() === wanted) ?? null;
}

/** The limit in force: the one an instance administrator set, else the configured one; null: unlimited. */
function limitOf(coupon: CouponConfig, usage: CouponUsage | null): number | null {
  return usage?.limitSet ? usage.maxRedemptions : coupon.maxRedemptions;
}

const expired = (coupon: CouponConfig, now: number) => coupon.expiresAt !== undefined && Date.parse(coupon.expiresAt) <= now;

function view(coupon: CouponConfig, usage: CouponUsage | null, now: number): CouponView {
  const maxRedemptions = limitOf(coupon, usage);
  const timesRedeemed = usage?.timesRedeemed ?? 0;
  return {
    code: coupon.code,
    object: 'coupon',
    percentOff: coupon.percentOff ?? null,
    amountOff: coupon.amountOff ?? null,
    currency: coupon.currency ?? null,
    maxRedemptions,
    configuredMaxRedemptions: coupon.maxRedemptions,
    timesRedeemed,
    expiresAt: coupon.expiresAt ? new Date(coupon.expiresAt).toISOString() : null,
    plans: coupon.plans ? [...coupon.plans] : null,
    valid: !expired(coupon, now) && (maxRedemptions === null || timesRedeemed < maxRedemptions),
  };
}

/** Every configured coupon with what it used, in the configuration's order. */
export async function list(ctx: BaseCtx): Promise<CouponView[]> {
  const { coupons } = ctx.services.config;
  const rows = await CouponUsage.query(ctx.db).whereIn(
    'code',
    coupons.map((c) => c.code),
  );
  const byCode = new Map(rows.map((r) => [r.code, r]));
  return coupons.map((c) => view(c, byCode.get(c.code) ?? null, ctx.services.now()));
}

/** The code's row, made when missing and locked until the transaction ends. */
async function lockUsage(tx: BaseCtx, code: string): Promise<CouponUsage> {
  await tx.db('coupons').insert({ code }).onConflict('code').ignore();
  return (await CouponUsage.query(tx.db).where('code', code).forUpdate().first())!;
}

/** PATCH /v1/auth/coupons/{code}: the usage limit (null: unlimited), over the configured one; audited on the administrator's account. */
export async function setLimit(ctx: TenantCtx, code: string, maxRedemptions: number | null): Promise<CouponView> {
  const coupon = findCoupon(ctx.services.config, code);
  if (!coupon) throw notFound('Coupon');
  return withTx(ctx, async (tx) => {
    const before = await lockUsage(tx, coupon.code);
    const [after] = (await CouponUsage.query(tx.db)
      .where('code', coupon.code)
      .patch({ limitSet: true, maxRedemptions, updatedAt: new Date(tx.services.now()) } as never)
      .returning('*')) as unknown as CouponUsage[];
    await audit.record(tx, {
      brandId: null,
      entityType: 'coupon',
      entityId: coupon.code,
      event: 'coupon.updated',
      changes: [{ field: 'maxRedemptions', from: limitOf(coupon, before), to: maxRedemptions }],
    });
    return view(coupon, after!, tx.services.now());
  });
}

/** How much the coupon takes off the plan's price, in minor units (never more than the price). */
export function amountOff(coupon: CouponConfig, plan: PlanConfig): number {
  if (coupon.percentOff !== undefined) return Math.round((plan.price * coupon.percentOff) / 100);
  return Math.min(coupon.amountOff ?? 0, plan.price);
}

const cannotBeUsed = () => [{ field: 'couponCode', message: 'cannot be used' }];
const exhausted = (coupon: CouponConfig) => `The coupon ${coupon.code} has been used as often as it may be`;
const alreadyRedeemed = (coupon: CouponConfig) => `This account has already used the coupon ${coupon.code}: a coupon discounts one plan change per account`;

/**
 * The coupon a code names, if it applies to `plan` now: 400 unknown_coupon, coupon_expired or
 * coupon_not_applicable (another plan, or an amount in another currency).
 */
export function requireApplicable(ctx: BaseCtx, code: string, plan: PlanConfig): CouponConfig {
  const coupon = findCoupon(ctx.services.config, code);
  if (!coupon) throw badRequest(`There is no coupon ${code}`, [{ field: 'couponCode', message: 'is not a coupon' }], 'unknown_coupon');
  if (expired(coupon, ctx.services.now())) throw badRequest(`The coupon ${coupon.code} expired on ${coupon.expiresAt}`, cannotBeUsed(), 'coupon_expired');
  if ((coupon.plans && !coupon.plans.includes(plan.slug)) || (coupon.currency && coupon.currency !== plan.currency)) {
    throw badRequest(`The coupon ${coupon.code} does not apply to the ${plan.name} plan`, cannotBeUsed(), 'coupon_not_applicable');
  }
  return coupon;
}

/**
 * Refuses, when an upgrade names it, a coupon the account already used (400
 * coupon_already_redeemed) or that is used up (400 coupon_exhausted). Read without a lock: redeem
 * checks again under it.
 */
export async function assertAvailable(ctx: TenantCtx, coupon: CouponConfig): Promise<void> {
  if (await CouponRedemption.ofAccount(ctx).where('couponRedemptions.couponCode', coupon.code).first()) {
    throw badRequest(alreadyRedeemed(coupon), cannotBeUsed(), 'coupon_already_redeemed');
  }
  await assertNotExhausted(ctx, coupon);
}

/** Refuses a coupon used up (400 coupon_exhausted); read without a lock: redeem checks again under it. */
export async function assertNotExhausted(ctx: BaseCtx, coupon: CouponConfig): Promise<void> {
  const usage = (await CouponUsage.query(ctx.db).where('code', coupon.code).first()) ?? null;
  const limit = limitOf(coupon, usage);
  if (limit !== null && (usage?.timesRedeemed ?? 0) >= limit) throw badRequest(exhausted(coupon), cannotBeUsed(), 'coupon_exhausted');
}

/**
 * Redeems the coupon for the invoice it discounted (in that invoice's transaction), under the
 * code's row lock: past the limit, or a second time for the account, it is 409 and the caller's
 * whole change rolls back.
 */
export async function redeem(
  tx: TenantCtx,
  coupon: CouponConfig,
  invoice: { id: string; subscriptionId: string; planSlug: string; amountOff: number; currency: string },
): Promise<void> {
  const usage = await lockUsage(tx, coupon.code);
  const limit = limitOf(coupon, usage);
  if (limit !== null && usage.timesRedeemed >= limit) throw conflict(exhausted(coupon), 'coupon_exhausted');
  if (await CouponRedemption.ofAccount(tx).where('couponRedemptions.couponCode', coupon.code).first()) throw conflict(alreadyRedeemed(coupon), 'coupon_already_redeemed');
  const now = new Date(tx.services.now());
  await CouponUsage.query(tx.db)
    .where('code', coupon.code)
    .patch({ timesRedeemed: usage.timesRedeemed + 1, updatedAt: now } as never);
  const redemption = await CouponRedemption.query(tx.db)
    .insert({
      accountId: tx.accountId,
      id: newId(ID_PREFIX.couponRedemption),
      couponCode: coupon.code,
      subscriptionId: invoice.subscriptionId,
      invoiceId: invoice.id,
      amountOff: invoice.amountOff,
      currency: invoice.currency,
      createdAt: now,
    })
    .returning('*');
  await audit.record(tx, {
    brandId: null,
    entityType: 'coupon',
    entityId: coupon.code,
    event: 'coupon.redeemed',
    metadata: { redemptionId: redemption.id, plan: invoice.planSlug, invoiceId: invoice.id, amountOff: invoice.amountOff, currency: invoice.currency },
  });
}

/** A plan change that writes no invoice now (a scheduled or kept plan, a free one) has nothing for a coupon to discount. */
export function notApplicableNow(coupon: CouponConfig, plan: PlanConfig): HttpError {
  return badRequest(
    `The coupon ${coupon.code} discounts the invoice of a plan that starts now; moving to the ${plan.name} plan is not invoiced now`,
    cannotBeUsed(),
    'coupon_not_applicable',
  );
}
