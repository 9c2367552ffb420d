import { systemActor, withTx, type Actor, type BaseCtx, type TenantCtx } from '../core/context.js';
import type { CouponConfig, PlanConfig } from '../core/config.js';
import { badRequest, notFound } from '../core/errors.js';
import * as audit from '../core/audit.js';
import { normalizeEmail } from '../core/text.js';
import * as coupons from '../domains/billing/coupons.js';
import type { SignupCheckout } from '../domains/billing/model.js';
import type { Subscription } from '../domains/billing/model.js';
import type { CreateCheckoutInput, CreateCheckoutView } from '../domains/billing/schemas.js';
import * as billing from '../domains/billing/service.js';
import * as signupCheckouts from '../domains/billing/signup-checkouts.js';
import { dashboardUrl } from './billing.js';
import { emailExists, lockAddress, openOrganization } from './sign-in.js';

/**
 * A paid sign-up (POST /v1/auth/checkout): a checkout for a paid plan before any account exists.
 * Everything a client can get wrong is refused before a checkout is made (and before a provider
 * is asked anything). Completing it makes the account, its owner (the organization is the
 * account), the subscription, and mails the owner a sign-in link, once: the checkout row is
 * locked and remembers the account it made. An address that got an account meanwhile is not
 * given a second one: the checkout is refused (failed_at), docs/decisions/0084-….
 */

export interface PreparedCheckout {
  email: string;
  accountName: string | null;
  plan: PlanConfig;
  coupon: CouponConfig | null;
  successUrl: string;
  cancelUrl: string;
}

/** 400 for what no checkout can be made of: unknown or free plan, URLs off the dashboard, an address with an account, a coupon that does not apply. */
export async function prepare(base: BaseCtx, input: CreateCheckoutInput): Promise<PreparedCheckout> {
  const plan = billing.requirePlan(base.services.config, input.planId ?? input.planRef, 'planId');
  if (plan.price === 0) {
    throw badRequest(`The ${plan.name} plan is free: sign up with POST /v1/auth/signup, no checkout needed`, [{ field: 'planId', message: 'is free' }], 'free_plan');
  }
  const successUrl = dashboardUrl(base, input.successUrl, 'successUrl');
  const cancelUrl = dashboardUrl(base, input.cancelUrl, 'cancelUrl');
  const email = normalizeEmail(input.email);
  if (await emailExists(base, email)) {
    throw badRequest(
      'This email is already a member of an organization: sign in, then upgrade its plan (POST /v1/auth/subscription/upgrade)',
      [{ field: 'email', message: 'is already registered' }],
      'email_exists',
    );
  }
  const coupon = input.couponCode ? coupons.requireApplicable(base, input.couponCode, plan) : null;
  if (coupon) await coupons.assertNotExhausted(base, coupon);
  return { email, accountName: input.accountName?.trim() ?? null, plan, coupon, successUrl, cancelUrl };
}

export function inputOf(p: PreparedCheckout): signupCheckouts.SignupCheckoutInput {
  return { email: p.email, accountName: p.accountName, planSlug: p.plan.slug, couponCode: p.coupon?.code ?? null, successUrl: p.successUrl, cancelUrl: p.cancelUrl };
}

/** The local provider's checkout: ticketd's own page, whose Confirm completes it at once. */
export async function startLocal(base: BaseCtx, input: CreateCheckoutInput, baseUrl: string): Promise<CreateCheckoutView> {
  const prepared = await prepare(base, input);
  const { checkout, token } = await withTx(base, (tx) => signupCheckouts.createLocal(tx, inputOf(prepared)));
  return { url: `${baseUrl}/billing/signup/${token}`, checkoutSessionId: checkout.id, expiresAt: new Date(checkout.expiresAt).toISOString() };
}

export type Completion = { kind: 'completed'; accountId: string; created: boolean } | { kind: 'refused'; failure: string; now: boolean };

/**
 * Completes a checkout the caller locked, in the caller's transaction: the account, its owner and
 * the sign-in link, then `subscribe` starts the subscription in the new account. Once: a checkout
 * completed (or refused) before answers what it did then.
 */
export async function complete(
  btx: BaseCtx,
  checkout: SignupCheckout,
  actor: Actor | null,
  subscribe: (tx: TenantCtx, plan: PlanConfig) => Promise<Subscription>,
): Promise<Completion> {
  if (checkout.completedAccountId) return { kind: 'completed', accountId: checkout.completedAccountId, created: false };
  if (checkout.failedAt) return { kind: 'refused', failure: checkout.failure ?? 'failed', now: false };
  await lockAddress(btx, checkout.email);
  if (await emailExists(btx, checkout.email)) {
    await signupCheckouts.markFailed(btx, checkout.id, 'email_exists');
    btx.services.log.warn(
      { signupCheckout: checkout.id, provider: checkout.provider },
      'signup checkout completed for an address that got an account meanwhile: no second account made',
    );
    return { kind: 'refused', failure: 'email_exists', now: true };
  }
  const plan = billing.requirePlan(btx.services.config, checkout.planSlug, 'planId');
  const origin = new URL(checkout.successUrl).origin;
  const opened = await openOrganization(btx, { email: checkout.email, accountName: checkout.accountName ?? undefined }, origin);
  const tx: TenantCtx = actor ? { ...opened.ctx, actor } : opened.ctx;
  const subscription = await subscribe(tx, plan);
  await audit.record(tx, {
    brandId: null,
    entityType: 'subscription',
    entityId: subscription.id,
    event: 'subscription.created',
    metadata: { plan: plan.slug, provider: checkout.provider },
  });
  await audit.record(tx, {
    brandId: null,
    entityType: 'checkout',
    entityId: checkout.id,
    event: 'checkout.completed',
    metadata: { plan: plan.slug, provider: checkout.provider, signup: true, ...(checkout.couponCode ? { coupon: checkout.couponCode } : {}) },
  });
  await signupCheckouts.markCompleted(btx, checkout.id, opened.account.id);
  return { kind: 'completed', accountId: opened.account.id, created: true };
}

function refusedError(failure: string) {
  return failure === 'email_exists'
    ? badRequest(
        'This email got an account while the checkout was open: no second organization was made; sign in instead',
        [{ field: 'email', message: 'is already registered' }],
        'email_exists',
      )
    : badRequest('This checkout failed: start again', undefined, 'checkout_failed');
}

/** The local checkout page, as a browser opens it; 404 for an unknown token. */
export async function localPage(base: BaseCtx, token: string) {
  const checkout = await signupCheckouts.byToken(base, token);
  if (!checkout) throw notFound('Checkout');
  const plan = billing.requirePlan(base.services.config, checkout.planSlug, 'planId');
  const coupon = checkout.couponCode ? coupons.findCoupon(base.services.config, checkout.couponCode) : null;
  return {
    plan,
    email: checkout.email,
    coupon: coupon ? { code: coupon.code, amountOff: coupons.amountOff(coupon, plan) } : null,
    cancelUrl: checkout.cancelUrl,
    successUrl: checkout.successUrl,
    completed: checkout.completedAccountId !== null,
  };
}

/**
 * The local page's Confirm: completes the checkout at once (the subscription started here, its
 * first invoice discounted by the coupon); answers where the browser goes next. Confirmed again:
 * the same place, nothing more made. Expired: 400 checkout_expired.
 */
export async function confirmLocal(base: BaseCtx, token: string): Promise<string> {
  const done = await withTx({ ...base, actor: systemActor('checkout') }, async (btx) => {
    const checkout = await signupCheckouts.byToken(btx, token);
    if (!checkout) throw notFound('Checkout');
    const open = !checkout.completedAccountId && !checkout.failedAt;
    if (open && new Date(checkout.expiresAt).getTime() <= btx.services.now()) {
      throw badRequest('This checkout has expired: start the sign-up again', undefined, 'checkout_expired');
    }
    const completion = await complete(btx, checkout, null, async (tx, plan) => {
      // The coupon is checked again (it may have expired or left the configuration since); redeemed with the first invoice.
      const coupon = checkout.couponCode ? coupons.requireApplicable(tx, checkout.couponCode, plan) : null;
      return billing.start(tx, plan, 'local', coupon);
    });
    return { completion, successUrl: checkout.successUrl };
  });
  // A refusal is committed (the checkout stays refused), then told.
  if (done.completion.kind === 'refused') throw refusedError(done.completion.failure);
  return done.successUrl;
}
