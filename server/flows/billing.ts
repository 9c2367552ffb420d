import { sessionMemberId, systemActor, tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import type { CouponConfig, PlanConfig } from '../core/config.js';
import { badRequest, HttpError, notFound } from '../core/errors.js';
import { isDashboardOrigin } from '../core/origins.js';
import * as audit from '../core/audit.js';
import * as coupons from '../domains/billing/coupons.js';
import * as billing from '../domains/billing/service.js';
import * as members from '../domains/members/service.js';
import type { Subscription } from '../domains/billing/model.js';
import type { BillingProvider } from '../domains/billing/provider.js';
import type { CancelInput, ConfirmInput, DoneView, SubscriptionView, UpgradeInput, UpgradeView } from '../domains/billing/schemas.js';

/**
 * Plan changes with the local billing provider: no card data ever. An upgrade opens a checkout
 * (a page ticketd serves, or POST /v1/auth/subscription/confirm) that confirms at once. A plan of
 * a higher price takes effect now, with a new period; a lower one is scheduled for the end of the
 * period, and refused when the account uses more than it allows. Every change is audited as the
 * member's, on the account (no brand).
 */

export const PROVIDER = 'local' as const;

/** The browser goes back to the dashboard only: an absolute http(s) URL on a dashboard origin. */
export function dashboardUrl(ctx: Pick<BaseCtx, 'services'>, url: string, field: string): string {
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch {
    parsed = null;
  }
  if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.username || parsed.password || !isDashboardOrigin(ctx.services, parsed.origin)) {
    throw badRequest(
      `${field} must be a page of a dashboard origin (dashboardOrigins): the browser is never sent elsewhere`,
      [{ field, message: 'is not on a dashboard origin' }],
      'url_not_allowed',
    );
  }
  return parsed.toString();
}

export function view(ctx: TenantCtx, s: Subscription): SubscriptionView {
  return billing.subscriptionView(ctx.services.config, s);
}

/** POST /v1/auth/subscription/upgrade: a checkout for the plan; the browser confirms it at `url`. */
export async function upgrade(ctx: TenantCtx, input: UpgradeInput, baseUrl: string): Promise<UpgradeView> {
  const plan = billing.requirePlan(ctx.services.config, input.planId ?? input.planRef, 'planId');
  const successUrl = dashboardUrl(ctx, input.successUrl, 'successUrl');
  const cancelUrl = dashboardUrl(ctx, input.cancelUrl, 'cancelUrl');
  return withTx(ctx, async (tx) => {
    const subscription = await billing.current(tx);
    const now = await billing.effectivePlan(tx, subscription);
    if (subscription && now.slug === plan.slug && !subscription.pendingPlanSlug && !subscription.cancelAtPeriodEnd) {
      throw badRequest(`The account is already on the ${plan.name} plan`, [{ field: 'planId', message: 'is the current plan' }], 'already_on_plan');
    }
    if (plan.price < now.price) await billing.assertFits(tx, plan);
    const coupon = input.couponCode ? coupons.requireApplicable(tx, input.couponCode, plan) : null;
    if (coupon && !invoicedNow(tx, subscription, plan)) throw coupons.notApplicableNow(coupon, plan);
    if (coupon) await coupons.assertAvailable(tx, coupon);
    const couponCode = coupon?.code ?? null;
    const { session, token } = await billing.createCheckout(tx, { planSlug: plan.slug, memberId: sessionMemberId(tx), successUrl, cancelUrl, couponCode });
    await audit.record(tx, {
      brandId: null,
      entityType: 'checkout',
      entityId: session.id,
      event: 'checkout.created',
      metadata: { plan: plan.slug, ...(couponCode ? { coupon: couponCode } : {}) },
    });
    return { url: `${baseUrl}/billing/checkout/${token}`, checkoutSessionId: session.id, expiresAt: session.expiresAt.toISOString() };
  });
}

/** How the account moves to `plan`: a first subscription, the plan it is on kept, a cheaper plan at the period's end, or another plan now. */
function moveOf(tx: TenantCtx, subscription: Subscription | null, plan: PlanConfig): 'start' | 'keep' | 'schedule' | 'switch' {
  if (!subscription) return 'start';
  if (subscription.planSlug === plan.slug) return 'keep';
  const from = billing.findPlan(tx.services.config, subscription.planSlug);
  return from && plan.price < from.price ? 'schedule' : 'switch';
}

/** Whether moving to `plan` writes an invoice now: what a coupon discounts. */
function invoicedNow(tx: TenantCtx, subscription: Subscription | null, plan: PlanConfig): boolean {
  const move = moveOf(tx, subscription, plan);
  return plan.price > 0 && (move === 'start' || move === 'switch');
}

/**
 * The account moves to `plan` (in a transaction holding the current subscription's lock): a first
 * subscription starts now; a dearer plan takes effect now; a cheaper one waits for the period's
 * end. A coupon discounts the invoice written now, and is refused when none is.
 */
async function moveTo(tx: TenantCtx, plan: PlanConfig, coupon: CouponConfig | null = null): Promise<Subscription> {
  const subscription = await billing.current(tx);
  if (coupon && !invoicedNow(tx, subscription, plan)) throw coupons.notApplicableNow(coupon, plan);
  const move = moveOf(tx, subscription, plan);
  if (!subscription) {
    const started = await billing.start(tx, plan, PROVIDER, coupon);
    await audit.record(tx, { brandId: null, entityType: 'subscription', entityId: started.id, event: 'subscription.created', metadata: { plan: plan.slug } });
    return started;
  }
  // The plan it is on already: it stays, without a scheduled change or cancellation (a repeated confirm changes nothing more).
  if (move === 'keep') {
    if (!subscription.pendingPlanSlug && !subscription.cancelAtPeriodEnd) return subscription;
    const kept = await billing.keep(tx, subscription);
    await audit.record(tx, { brandId: null, entityType: 'subscription', entityId: subscription.id, event: 'subscription.updated', metadata: { plan: plan.slug, kept: true } });
    return kept;
  }
  if (move === 'schedule') {
    await billing.assertFits(tx, plan);
    const scheduled = await billing.schedule(tx, subscription, plan);
    await audit.record(tx, {
      brandId: null,
      entityType: 'subscription',
      entityId: subscription.id,
      event: 'subscription.change_scheduled',
      metadata: { plan: plan.slug, effectiveAt: scheduled.pendingEffectiveAt },
    });
    return scheduled;
  }
  const switched = await billing.switchNow(tx, subscription, plan, coupon);
  await audit.record(tx, {
    brandId: null,
    entityType: 'subscription',
    entityId: subscription.id,
    event: 'subscription.updated',
    changes: [{ field: 'plan', from: subscription.planSlug, to: plan.slug }],
  });
  return switched;
}

/** Completes a checkout the caller locked: once; a second completion answers the subscription it made. */
async function complete(
  tx: TenantCtx,
  checkout: { id: string; planSlug: string; completedAt: Date | null; expiresAt: Date; subscriptionId: string | null; couponCode: string | null },
): Promise<Subscription> {
  if (checkout.completedAt) {
    const made = checkout.subscriptionId ? await billing.subscriptionById(tx, checkout.subscriptionId) : null;
    if (made) return made;
  }
  if (new Date(checkout.expiresAt).getTime() <= tx.services.now()) throw badRequest('This checkout has expired: start the upgrade again', undefined, 'checkout_expired');
  const plan = billing.requirePlan(tx.services.config, checkout.planSlug, 'planRef');
  // The coupon is checked again (it may have expired or left the configuration since); its count, under its lock as it is redeemed.
  const coupon = checkout.couponCode ? coupons.requireApplicable(tx, checkout.couponCode, plan) : null;
  const subscription = await moveTo(tx, plan, coupon);
  await tx
    .db('checkoutSessions')
    .where({ accountId: tx.accountId, id: checkout.id })
    .update({ completedAt: new Date(tx.services.now()), subscriptionId: subscription.id });
  return subscription;
}

/**
 * POST /v1/auth/subscription/confirm: a checkout by its id (`checkoutSessionId`, its plan checked
 * against `planRef` when both are given), or straight to the plan `planRef` names.
 */
export async function confirm(ctx: TenantCtx, input: ConfirmInput): Promise<{ subscription: SubscriptionView }> {
  if (!input.checkoutSessionId) {
    const plan = billing.requirePlan(ctx.services.config, input.planRef || undefined, 'planRef');
    return withTx(ctx, async (tx) => ({ subscription: view(tx, await moveTo(tx, plan)) }));
  }
  return withTx(ctx, async (tx) => {
    const checkout = await billing.checkoutById(tx, input.checkoutSessionId!);
    if (!checkout) throw notFound('Checkout session');
    if (input.planRef && input.planRef !== checkout.planSlug) {
      throw badRequest(`This checkout is for the plan ${checkout.planSlug}, not ${input.planRef}`, [{ field: 'planRef', message: "is not the checkout's plan" }], 'unknown_plan');
    }
    return { subscription: view(tx, await complete(tx, checkout)) };
  });
}

/** The checkout page, as a browser opens it: the plan, its coupon, and where Cancel goes. 404 for an unknown token. */
export async function checkoutPage(
  base: BaseCtx,
  token: string,
): Promise<{ plan: PlanConfig; coupon: { code: string; amountOff: number } | null; cancelUrl: string; completed: boolean; successUrl: string }> {
  const checkout = await billing.checkoutByToken(base, token);
  if (!checkout) throw notFound('Checkout');
  const plan = billing.requirePlan(base.services.config, checkout.planSlug, 'planRef');
  // A coupon that left the configuration is not shown; Confirm then says why it cannot be used.
  const coupon = checkout.couponCode ? coupons.findCoupon(base.services.config, checkout.couponCode) : null;
  return {
    plan,
    coupon: coupon ? { code: coupon.code, amountOff: coupons.amountOff(coupon, plan) } : null,
    cancelUrl: checkout.cancelUrl,
    successUrl: checkout.successUrl,
    completed: checkout.completedAt !== null,
  };
}

/** The checkout page's Confirm: completes it as the member who started it; answers where the browser goes next. */
export async function confirmCheckoutPage(base: BaseCtx, token: string): Promise<string> {
  const found = await billing.checkoutByToken(base, token);
  if (!found) throw notFound('Checkout');
  return withTx(tenantCtx(base, found.accountId, true), async (btx) => {
    const checkout = await billing.checkoutById(btx, found.id);
    if (!checkout) throw notFound('Checkout');
    const [member] = checkout.memberId ? await members.findMany(btx, [checkout.memberId]) : [];
    const actor = member ? { type: 'user' as const, id: member.id, name: member.name ?? member.email } : systemActor('checkout');
    await complete({ ...btx, actor }, checkout);
    return checkout.successUrl;
  });
}

export async function requireCurrent(tx: TenantCtx): Promise<Subscription> {
  const subscription = await billing.current(tx);
  if (!subscription) throw notFound('Subscription');
  return subscription;
}

/** POST /v1/auth/subscription/cancel: at the end of the period (default) or now; 404 without one, 409 when already canceled. */
export async function cancel(ctx: TenantCtx, input: CancelInput): Promise<DoneView> {
  return withTx(ctx, async (tx) => {
    const subscription = await requireCurrent(tx);
    const canceled = await billing.cancel(tx, subscription, input.immediate === true);
    await audit.record(tx, {
      brandId: null,
      entityType: 'subscription',
      entityId: subscription.id,
      event: 'subscription.canceled',
      metadata: { immediate: input.immediate === true },
    });
    const endsAt = (canceled.endedAt ?? canceled.currentPeriodEnd) as Date;
    const when = new Date(endsAt).toISOString();
    return { success: true as const, message: input.immediate ? 'The subscription has ended' : `The subscription is canceled and ends on ${when.slice(0, 10)}`, endsAt: when };
  });
}

/** POST /v1/auth/subscription/reactivate: undoes a cancellation at the period's end. */
export async function reactivate(ctx: TenantCtx): Promise<DoneView> {
  return withTx(ctx, async (tx) => {
    const subscription = await requireCurrent(tx);
    await billing.reactivate(tx, subscription);
    await audit.record(tx, { brandId: null, entityType: 'subscription', entityId: subscription.id, event: 'subscription.reactivated' });
    return { success: true as const, message: 'The subscription goes on' };
  });
}

/** POST /v1/auth/subscription/cancel-pending-change: keeps the current plan; 404 without a scheduled change. */
export async function cancelPendingChange(ctx: TenantCtx): Promise<DoneView> {
  return withTx(ctx, async (tx) => {
    const subscription = await requireCurrent(tx);
    if (!subscription.pendingPlanSlug) throw notFound('Scheduled plan change');
    await billing.dropPendingChange(tx, subscription);
    await audit.record(tx, {
      brandId: null,
      entityType: 'subscription',
      entityId: subscription.id,
      event: 'subscription.change_canceled',
      metadata: { plan: subscription.pendingPlanSlug },
    });
    return { success: true as const, message: 'The scheduled plan change was canceled: the current plan stays' };
  });
}

/** The local provider keeps no card data: adding a payment method says so. */
export function noPaymentMethods(): never {
  throw new HttpError(400, 'not_supported', 'The local billing provider keeps no payment methods: nothing is charged to a card');
}

function noSuchPaymentMethod(): never {
  throw notFound('Payment method');
}

/** The local provider: no card data; checkouts confirmed on ticketd's page; invoices written here. */
export const localProvider: BillingProvider = {
  name: PROVIDER,
  checkoutMode: 'redirect',
  upgrade,
  confirm,
  cancel,
  reactivate,
  cancelPendingChange,
  clientToken: async () => ({ provider: PROVIDER, token: null, expiresAt: null }),
  addPaymentMethod: async () => noPaymentMethods(),
  paymentMethods: async () => [],
  setDefaultPaymentMethod: async () => noSuchPaymentMethod(),
  removePaymentMethod: async () => noSuchPaymentMethod(),
  invoices: (ctx, limit) => billing.invoices(ctx, limit),
  receive: async () => {
    throw notFound('Billing provider notifications');
  },
};

/** The dispatcher's job: renews the subscriptions whose period ended (a scheduled change applied, a cancellation ended). */
export async function renewDue(base: BaseCtx, now: Date): Promise<number> {
  return withTx(base, async (btx) => {
    const due = await billing.dueForRenewal(btx, now, 100);
    for (const subscription of due) {
      const tx = tenantCtx(btx, subscription.accountId, true);
      const renewed = await billing.renew(tx, subscription);
      await audit.record(tx, {
        brandId: null,
        entityType: 'subscription',
        entityId: subscription.id,
        event: renewed.endedAt ? 'subscription.ended' : 'subscription.renewed',
        metadata: { plan: renewed.planSlug },
      });
    }
    return due.length;
  });
}
