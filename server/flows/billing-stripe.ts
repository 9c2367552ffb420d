import type Stripe from 'stripe';
import { sessionMemberId, systemActor, tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import type { PlanConfig } from '../core/config.js';
import { badRequest, conflict, HttpError, notFound } from '../core/errors.js';
import { newId, ID_PREFIX } from '../core/ids.js';
import * as audit from '../core/audit.js';
import { invoiceSubscription, stripeBilling, subscriptionFacts, type StripeBilling, type StripeSubscriptionFacts } from '../integrations/stripe-billing.js';
import type { Subscription } from '../domains/billing/model.js';
import type { BillingProvider } from '../domains/billing/provider.js';
import * as records from '../domains/billing/provider-records.js';
import * as billing from '../domains/billing/service.js';
import type { CreateCheckoutInput, CreateCheckoutView, DoneView, InvoiceListView, ProviderNotificationView, SubscriptionView, UpgradeView } from '../domains/billing/schemas.js';
import type { SignupCheckout } from '../domains/billing/model.js';
import * as signupCheckouts from '../domains/billing/signup-checkouts.js';
import { dashboardUrl, localProvider, requireCurrent, view } from './billing.js';
import { complete as completeSignup, inputOf, prepare as prepareSignup } from './signup-checkout.js';

/**
 * The stripe billing provider. Stripe is called outside every transaction: each flow reads what
 * it needs, asks Stripe (with an idempotency key derived from what it read, so a retried or
 * concurrent request does not change Stripe twice), then mirrors Stripe's answer into the local
 * row in a short transaction holding the account's lock. A first subscription is Stripe's
 * Checkout; a plan change on a Stripe subscription is made on it at once (a dearer plan prorated
 * now, a cheaper one priced for the next renewal while the account keeps the plan it paid for).
 * A subscription the local provider made keeps being the local provider's.
 */

const PROVIDER = 'stripe' as const;
const SETUP_TOKEN_TTL_MS = 60 * 60_000;

const api = (ctx: BaseCtx): StripeBilling => ctx.services.get(stripeBilling);
const isStripe = (s: Subscription | null): s is Subscription => s?.provider === PROVIDER && s.providerRef !== null;
/** Keys for Stripe's idempotency: the same state read gives the same key. */
const keyOf = (...parts: (string | number)[]) => `ticketd:${parts.join(':')}`;
const stamp = (s: Subscription) => new Date(s.updatedAt).getTime();

function priceOf(plan: PlanConfig): string {
  if (!plan.stripePriceId) throw badRequest(`The ${plan.name} plan has no Stripe price: it cannot be paid through Stripe`, undefined, 'plan_not_for_sale');
  return plan.stripePriceId;
}

/** The account's Stripe customer, made once (the first of two concurrent makers is kept). */
async function ensureCustomer(ctx: TenantCtx): Promise<string> {
  const known = await records.customerRef(ctx, PROVIDER);
  if (known) return known;
  const account = (await ctx.db('accounts').where({ id: ctx.accountId }).first('name')) as { name: string | null } | undefined;
  const ref = await api(ctx).createCustomer({ accountId: ctx.accountId, name: account?.name ?? null }, keyOf('customer', ctx.accountId));
  return records.saveCustomer(ctx, PROVIDER, ref);
}

/**
 * Stripe's answer written into the account's current subscription, under the account's lock;
 * audited when something changed. `scheduled`: a cheaper plan the account moves to when Stripe's
 * next period starts.
 */
async function mirrorCurrent(
  ctx: TenantCtx,
  expected: Subscription,
  facts: StripeSubscriptionFacts,
  event: string,
  metadata: Record<string, unknown> = {},
  scheduled: { planSlug: string } | null = null,
): Promise<Subscription> {
  return withTx(ctx, async (tx) => {
    const row = (await billing.current(tx)) ?? (await billing.subscriptionById(tx, expected.id));
    if (!row || row.id !== expected.id) throw conflict('The subscription changed meanwhile: read it again', 'subscription_changed');
    const before = scheduled ? ({ ...row, pendingPlanSlug: scheduled.planSlug, pendingEffectiveAt: facts.currentPeriodEnd } as Subscription) : row;
    const fields = records.mirrored(tx.services.config, facts, before, row.planSlug, new Date(tx.services.now()));
    const { row: after, changed } = await records.updateMirrored(tx, row, fields);
    if (changed) await audit.record(tx, { brandId: null, entityType: 'subscription', entityId: row.id, event, metadata: { provider: PROVIDER, ...metadata } });
    return after;
  });
}

/** A first subscription: Stripe's Checkout for the plan's price. */
async function startCheckout(ctx: TenantCtx, plan: PlanConfig, successUrl: string, cancelUrl: string): Promise<UpgradeView> {
  const priceId = priceOf(plan);
  const customer = await ensureCustomer(ctx);
  const made = await records.providerCheckoutCount(ctx, PROVIDER);
  const session = await api(ctx).createCheckout(
    { customer, priceId, successUrl, cancelUrl, accountId: ctx.accountId, planSlug: plan.slug },
    keyOf('checkout', ctx.accountId, plan.slug, made),
  );
  return withTx(ctx, async (tx) => {
    const { checkout, created } = await records.recordProviderCheckout(tx, {
      id: newId(ID_PREFIX.checkout),
      provider: PROVIDER,
      providerRef: session.id,
      planSlug: plan.slug,
      memberId: sessionMemberId(tx),
      successUrl,
      cancelUrl,
      expiresAt: session.expiresAt,
    });
    if (created) {
      await audit.record(tx, { brandId: null, entityType: 'checkout', entityId: checkout.id, event: 'checkout.created', metadata: { plan: plan.slug, provider: PROVIDER } });
    }
    return { url: session.url, checkoutSessionId: session.id, expiresAt: session.expiresAt.toISOString() };
  });
}

/**
 * A plan change on the Stripe subscription, made at once: the plan it is on kept, a cheaper one
 * at the period's end, a dearer one now. Only a dearer plan is charged now (prorated); otherwise
 * the price is Stripe's from its next renewal.
 */
async function changePlan(ctx: TenantCtx, current: Subscription, plan: PlanConfig, successUrl: string): Promise<UpgradeView> {
  const from = billing.findPlan(ctx.services.config, current.planSlug);
  const move = plan.slug === current.planSlug ? 'keep' : from && plan.price < from.price ? 'schedule' : 'switch';
  const stripeNow = await api(ctx).subscription(current.providerRef!);
  if (!stripeNow) throw conflict('Stripe no longer knows this subscription: it is being ended', 'subscription_changed');
  const facts = await api(ctx).updateSubscription(
    current.providerRef!,
    { itemId: stripeNow.itemId ?? undefined, priceId: priceOf(plan), prorate: move === 'switch', cancelAtPeriodEnd: false },
    keyOf('plan', current.id, plan.slug, stamp(current)),
  );
  const row =
    move === 'schedule'
      ? await mirrorCurrent(ctx, current, facts, 'subscription.change_scheduled', { plan: plan.slug, effectiveAt: facts.currentPeriodEnd }, { planSlug: plan.slug })
      : await mirrorCurrent(ctx, current, facts, 'subscription.updated', move === 'keep' ? { plan: plan.slug, kept: true } : { plan: plan.slug, from: current.planSlug });
  return { url: successUrl, checkoutSessionId: null, expiresAt: null, subscription: view(ctx, row) };
}

async function upgrade(ctx: TenantCtx, input: Parameters<BillingProvider['upgrade']>[1], baseUrl: string): Promise<UpgradeView> {
  const plan = billing.requirePlan(ctx.services.config, input.planId ?? input.planRef, 'planId');
  const successUrl = dashboardUrl(ctx, input.successUrl, 'successUrl');
  const cancelUrl = dashboardUrl(ctx, input.cancelUrl, 'cancelUrl');
  if (input.couponCode) {
    throw badRequest(
      'Coupons are not taken with the stripe billing provider: use Stripe promotion codes',
      [{ field: 'couponCode', message: 'is not supported' }],
      'coupon_not_supported',
    );
  }
  const current = await billing.current(ctx);
  // A free plan is nobody's to pay: without a Stripe subscription, the local provider moves the account to it.
  if (!isStripe(current) && plan.price === 0) return localProvider.upgrade(ctx, input, baseUrl);
  const now = await billing.effectivePlan(ctx, current);
  if (current && now.slug === plan.slug && !current.pendingPlanSlug && !current.cancelAtPeriodEnd) {
    throw badRequest(`The account is already on the ${plan.name} plan`, [{ field: 'planId', message: 'is the current plan' }], 'already_on_plan');
  }
  if (isStripe(current) && plan.price === 0) throw cancelInstead(plan);
  if (plan.price < now.price) await billing.assertFits(ctx, plan);
  // A first subscription to Stripe (one the local provider made ends when the checkout completes).
  if (!isStripe(current)) return startCheckout(ctx, plan, successUrl, cancelUrl);
  return changePlan(ctx, current, plan, successUrl);
}

function cancelInstead(plan: PlanConfig) {
  return badRequest(`The ${plan.name} plan is free: cancel the subscription to return to it at the end of the period`, [{ field: 'planId', message: 'is free' }], 'cancel_instead');
}

/**
 * A paid checkout becomes the account's subscription, mirroring Stripe's (in the caller's
 * transaction). Once: a checkout completed before answers the subscription it made, so confirm
 * and Stripe's notification, whichever comes second, change nothing.
 */
async function completeCheckout(tx: TenantCtx, checkoutRef: string, facts: StripeSubscriptionFacts): Promise<{ subscription: Subscription; created: boolean }> {
  const current = await billing.current(tx);
  const checkout = await records.providerCheckout(tx, PROVIDER, checkoutRef);
  if (!checkout) throw notFound('Checkout session');
  if (checkout.completedAt && checkout.subscriptionId) {
    const made = await billing.subscriptionById(tx, checkout.subscriptionId);
    if (made) return { subscription: made, created: false };
  }
  const now = new Date(tx.services.now());
  const known = await records.subscriptionByRef(tx, PROVIDER, facts.id);
  if (known) {
    await records.markCheckoutCompleted(tx, checkout.id, known.id);
    return { subscription: known, created: false };
  }
  if (isStripe(current)) {
    throw conflict('The account has a Stripe subscription already: change its plan (upgrade) rather than subscribing twice', 'already_subscribed');
  }
  // A subscription the local provider made ends: Stripe's takes over from now.
  if (current) await records.updateMirrored(tx, current, { status: 'canceled', canceledAt: now, endedAt: now, pendingPlanSlug: null, pendingEffectiveAt: null });
  const subscription = await records.insertMirrored(tx, PROVIDER, facts, records.mirrored(tx.services.config, facts, null, checkout.planSlug, now));
  await records.markCheckoutCompleted(tx, checkout.id, subscription.id);
  await audit.record(tx, {
    brandId: null,
    entityType: 'subscription',
    entityId: subscription.id,
    event: 'subscription.created',
    metadata: { plan: subscription.planSlug, provider: PROVIDER },
  });
  return { subscription, created: true };
}

/** The Stripe subscription a complete checkout made; 400 while it is not paid. */
async function paidSubscription(ctx: BaseCtx, checkout: { status: string; subscription: string | null }): Promise<StripeSubscriptionFacts> {
  if (checkout.status !== 'complete' || !checkout.subscription) {
    throw badRequest('This checkout is not paid yet: finish it on Stripe, then confirm', undefined, 'checkout_not_complete');
  }
  const facts = await api(ctx).subscription(checkout.subscription);
  if (!facts) throw badRequest("Stripe does not know this checkout's subscription", undefined, 'checkout_not_complete');
  return facts;
}

async function confirm(ctx: TenantCtx, input: Parameters<BillingProvider['confirm']>[1]): Promise<{ subscription: SubscriptionView }> {
  if (!input.checkoutSessionId) {
    const plan = billing.requirePlan(ctx.services.config, input.planRef || undefined, 'planRef');
    if (plan.price === 0 && isStripe(await billing.current(ctx))) throw cancelInstead(plan);
    if (plan.price === 0) return localProvider.confirm(ctx, input);
    throw badRequest(
      `The ${plan.name} plan is paid through Stripe: start its checkout (POST /v1/auth/subscription/upgrade), then confirm with its checkoutSessionId`,
      [{ field: 'checkoutSessionId', message: 'is required with the stripe provider' }],
      'payment_required',
    );
  }
  const checkout = await records.providerCheckout(ctx, PROVIDER, input.checkoutSessionId);
  // A local checkout (chk_: a free plan's) is the local provider's to confirm.
  if (!checkout && input.checkoutSessionId.startsWith(`${ID_PREFIX.checkout}_`)) return localProvider.confirm(ctx, input);
  if (!checkout) throw notFound('Checkout session');
  if (input.planRef && input.planRef !== checkout.planSlug) {
    throw badRequest(`This checkout is for the plan ${checkout.planSlug}, not ${input.planRef}`, [{ field: 'planRef', message: "is not the checkout's plan" }], 'unknown_plan');
  }
  if (checkout.completedAt && checkout.subscriptionId) {
    const made = await billing.subscriptionById(ctx, checkout.subscriptionId);
    if (made) return { subscription: view(ctx, made) };
  }
  const session = await api(ctx).checkout(checkout.providerRef!);
  if (!session || session.accountId !== ctx.accountId) throw notFound('Checkout session');
  const facts = await paidSubscription(ctx, session);
  return withTx(ctx, async (tx) => ({ subscription: view(tx, (await completeCheckout(tx, checkout.providerRef!, facts)).subscription) }));
}

function endsAtView(s: Subscription, immediate: boolean): DoneView {
  const when = new Date((s.endedAt ?? s.currentPeriodEnd) as Date).toISOString();
  return { success: true, message: immediate ? 'The subscription has ended' : `The subscription is canceled and ends on ${when.slice(0, 10)}`, endsAt: when };
}

async function cancel(ctx: TenantCtx, input: Parameters<BillingProvider['cancel']>[1]): Promise<DoneView> {
  const current = await requireCurrent(ctx);
  if (!isStripe(current)) return localProvider.cancel(ctx, input);
  const immediate = input.immediate === true;
  if (!immediate && current.cancelAtPeriodEnd) {
    throw conflict(`The subscription is already canceled: it ends on ${new Date(current.currentPeriodEnd).toISOString()}`, 'already_canceled');
  }
  const key = keyOf('cancel', current.id, immediate ? 'now' : 'period-end', stamp(current));
  const facts = immediate
    ? await api(ctx).cancelSubscription(current.providerRef!, key)
    : await api(ctx).updateSubscription(current.providerRef!, { cancelAtPeriodEnd: true }, key);
  const row = await mirrorCurrent(ctx, current, facts, 'subscription.canceled', { immediate });
  return endsAtView(row, immediate);
}

async function reactivate(ctx: TenantCtx): Promise<DoneView> {
  const current = await requireCurrent(ctx);
  if (!isStripe(current)) return localProvider.reactivate(ctx);
  if (!current.cancelAtPeriodEnd) throw conflict('The subscription is not canceled: there is nothing to reactivate', 'not_canceled');
  const facts = await api(ctx).updateSubscription(current.providerRef!, { cancelAtPeriodEnd: false }, keyOf('reactivate', current.id, stamp(current)));
  await mirrorCurrent(ctx, current, facts, 'subscription.reactivated');
  return { success: true, message: 'The subscription goes on' };
}

async function cancelPendingChange(ctx: TenantCtx): Promise<DoneView> {
  const current = await requireCurrent(ctx);
  if (!isStripe(current)) return localProvider.cancelPendingChange(ctx);
  if (!current.pendingPlanSlug) throw notFound('Scheduled plan change');
  const plan = billing.requirePlan(ctx.services.config, current.planSlug, 'planRef');
  const stripeNow = await api(ctx).subscription(current.providerRef!);
  if (!stripeNow) throw conflict('Stripe no longer knows this subscription: it is being ended', 'subscription_changed');
  // Stripe's price goes back to the plan the account is on, so its next renewal bills that one.
  const facts = await api(ctx).updateSubscription(
    current.providerRef!,
    { itemId: stripeNow.itemId ?? undefined, priceId: priceOf(plan), prorate: false },
    keyOf('keep', current.id, stamp(current)),
  );
  await mirrorCurrent(ctx, current, facts, 'subscription.change_canceled', { plan: current.pendingPlanSlug });
  return { success: true, message: 'The scheduled plan change was canceled: the current plan stays' };
}

async function clientToken(ctx: TenantCtx) {
  const intent = await api(ctx).setupIntent(await ensureCustomer(ctx));
  return { provider: PROVIDER, token: intent.clientSecret, expiresAt: new Date(ctx.services.now() + SETUP_TOKEN_TTL_MS).toISOString() };
}

async function addPaymentMethod(ctx: TenantCtx) {
  const intent = await api(ctx).setupIntent(await ensureCustomer(ctx));
  return { provider: PROVIDER, embedToken: intent.clientSecret, setupIntentId: intent.id };
}

async function paymentMethods(ctx: TenantCtx) {
  const customer = await records.customerRef(ctx, PROVIDER);
  if (!customer) return [];
  const { methods, defaultId } = await api(ctx).paymentMethods(customer);
  return methods.map((m) => ({ id: m.id, brand: m.brand, last4: m.last4, expMonth: m.expMonth, expYear: m.expYear, isDefault: m.id === defaultId }));
}

/** The customer and one of its payment methods; 404 for a method that is not the account's. */
async function ownMethod(ctx: TenantCtx, id: string): Promise<string> {
  const customer = await records.customerRef(ctx, PROVIDER);
  const method = customer && /^pm_[A-Za-z0-9_]+$/.test(id) ? await api(ctx).paymentMethod(id) : null;
  if (!customer || !method || method.customer !== customer) throw notFound('Payment method');
  return customer;
}

async function auditPaymentMethod(ctx: TenantCtx, id: string, event: string): Promise<void> {
  await withTx(ctx, (tx) => audit.record(tx, { brandId: null, entityType: 'payment_method', entityId: id, event, metadata: { provider: PROVIDER } }));
}

async function setDefaultPaymentMethod(ctx: TenantCtx, id: string) {
  const customer = await ownMethod(ctx, id);
  await api(ctx).setDefaultPaymentMethod(customer, id);
  await auditPaymentMethod(ctx, id, 'payment_method.default_set');
  return { success: true as const };
}

async function removePaymentMethod(ctx: TenantCtx, id: string) {
  const customer = await ownMethod(ctx, id);
  const { methods, defaultId } = await api(ctx).paymentMethods(customer);
  const current = await billing.current(ctx);
  const paying = isStripe(current) && !current.cancelAtPeriodEnd;
  if (id === defaultId) {
    throw badRequest('This is the default payment method: make another one the default first', undefined, 'default_payment_method');
  }
  if (paying && methods.length <= 1) {
    throw badRequest('This is the only payment method of an active subscription: add another one first', undefined, 'last_payment_method');
  }
  await api(ctx).detachPaymentMethod(id);
  await auditPaymentMethod(ctx, id, 'payment_method.removed');
  return { success: true as const };
}

async function invoices(ctx: TenantCtx, limit: number): Promise<InvoiceListView> {
  const customer = await records.customerRef(ctx, PROVIDER);
  if (!customer) return { invoices: [], hasMore: false };
  const list = await api(ctx).invoices(customer, limit);
  return {
    invoices: list.invoices.map((i) => ({
      id: i.id,
      object: 'invoice' as const,
      number: i.number,
      status: i.status,
      planId: records.planOfPrice(ctx.services.config, i.priceId)?.slug ?? null,
      amountDue: i.amountDue,
      amountPaid: i.amountPaid,
      currency: i.currency,
      created: i.created.toISOString(),
      periodStart: i.periodStart.toISOString(),
      periodEnd: i.periodEnd.toISOString(),
      invoiceUrl: i.invoiceUrl,
      invoicePdf: i.invoicePdf,
    })),
    hasMore: list.hasMore,
  };
}

// ---------------------------------------------------------------------------------------------
// Stripe's notifications.

const ignored = { received: true as const, action: 'ignored' as const };
const duplicate = { received: true as const, action: 'duplicate' as const };
const applied = { received: true as const, action: 'applied' as const };

/** Records an event that changes nothing here, so its redelivery is a duplicate too. */
async function ignore(base: BaseCtx, event: Stripe.Event, why: string): Promise<ProviderNotificationView> {
  if (why) base.services.log.info({ event: event.id, type: event.type }, `stripe event ignored: ${why}`);
  return withTx(base, async (tx) => ((await records.firstDelivery(tx, PROVIDER, event.id, event.type)) ? ignored : duplicate));
}

/** Applies `fn` to the account in the transaction that records the event id; a redelivery changes nothing. */
async function applyOnce(base: BaseCtx, event: Stripe.Event, accountId: string, fn: (tx: TenantCtx) => Promise<boolean>): Promise<ProviderNotificationView> {
  return withTx({ ...base, actor: systemActor('stripe') }, async (btx) => {
    if (!(await records.firstDelivery(btx, PROVIDER, event.id, event.type))) return duplicate;
    return (await fn(tenantCtx(btx, accountId, true))) ? applied : ignored;
  });
}

/**
 * POST /v1/auth/checkout with Stripe: a Checkout Session in subscription mode for the address,
 * named by the signup checkout's id (client_reference_id and metadata); Stripe makes the customer
 * when it is paid. Its notification completes it (signupCompleted).
 */
export async function startSignupCheckout(base: BaseCtx, input: CreateCheckoutInput): Promise<CreateCheckoutView> {
  if (input.couponCode) {
    throw badRequest(
      'Coupons are not taken with the stripe billing provider: use Stripe promotion codes',
      [{ field: 'couponCode', message: 'is not supported' }],
      'coupon_not_supported',
    );
  }
  const prepared = await prepareSignup(base, input);
  const priceId = priceOf(prepared.plan);
  const id = newId(ID_PREFIX.signupCheckout);
  const session = await api(base).createSignupCheckout(
    { email: prepared.email, priceId, successUrl: prepared.successUrl, cancelUrl: prepared.cancelUrl, signupCheckoutId: id, planSlug: prepared.plan.slug },
    keyOf('signup-checkout', id),
  );
  await withTx(base, (tx) => signupCheckouts.recordProvider(tx, { ...inputOf(prepared), id, provider: PROVIDER, providerRef: session.id, expiresAt: session.expiresAt }));
  return { url: session.url, checkoutSessionId: session.id, expiresAt: session.expiresAt.toISOString() };
}

/**
 * A paid sign-up's checkout completed at Stripe: the account, its owner and sign-in mail, Stripe's
 * customer and the subscription mirroring Stripe's, once per checkout whatever the events. Refused
 * (the address got an account meanwhile): Stripe's subscription is canceled, so it charges no more.
 */
async function signupCompleted(base: BaseCtx, event: Stripe.Event, session: Stripe.Checkout.Session, checkout: SignupCheckout): Promise<ProviderNotificationView> {
  const customer = typeof session.customer === 'string' ? session.customer : (session.customer?.id ?? null);
  if (!customer || session.status !== 'complete') return ignore(base, event, 'a signup checkout not paid');
  const facts = await paidSubscription(base, {
    status: session.status,
    subscription: typeof session.subscription === 'string' ? session.subscription : (session.subscription?.id ?? null),
  });
  const completion = await withTx({ ...base, actor: systemActor('stripe') }, async (btx) => {
    if (!(await records.firstDelivery(btx, PROVIDER, event.id, event.type))) return null;
    const locked = (await signupCheckouts.byProviderRef(btx, PROVIDER, checkout.providerRef!))!;
    return completeSignup(btx, locked, systemActor('stripe'), async (tx) => {
      await records.saveCustomer(tx, PROVIDER, customer);
      return records.insertMirrored(tx, PROVIDER, facts, records.mirrored(tx.services.config, facts, null, locked.planSlug, new Date(tx.services.now())));
    });
  });
  if (!completion) return duplicate;
  if (completion.kind === 'refused' && completion.now) {
    await api(base)
      .cancelSubscription(facts.id, keyOf('signup-refused', checkout.id))
      .catch((err: Error) =>
        base.services.log.error(
          { signupCheckout: checkout.id, subscription: facts.id, err: err.message },
          'a refused signup checkout: its Stripe subscription could not be canceled',
        ),
      );
  }
  return completion.kind === 'completed' && completion.created ? applied : ignored;
}

async function checkoutCompleted(base: BaseCtx, event: Stripe.Event, session: Stripe.Checkout.Session): Promise<ProviderNotificationView> {
  const signup = await signupCheckouts.byProviderRef(base, PROVIDER, session.id);
  if (signup) return signupCompleted(base, event, session, signup);
  const accountId = session.client_reference_id;
  const customer = typeof session.customer === 'string' ? session.customer : (session.customer?.id ?? null);
  if (!accountId || !customer || (await records.accountOfCustomer(base, PROVIDER, customer)) !== accountId) return ignore(base, event, 'a checkout of no account here');
  const ctx = tenantCtx(base, accountId, true);
  if (!(await records.providerCheckout(ctx, PROVIDER, session.id))) return ignore(base, event, 'a checkout ticketd did not make');
  const facts = await paidSubscription(base, {
    status: session.status ?? 'open',
    subscription: typeof session.subscription === 'string' ? session.subscription : (session.subscription?.id ?? null),
  });
  return applyOnce(base, event, accountId, async (tx) => {
    try {
      await completeCheckout(tx, session.id, facts);
      return true;
    } catch (err) {
      // Refused before anything was written: a second Stripe subscription is not taken; retrying would not change that.
      if (!(err instanceof HttpError && err.code === 'already_subscribed')) throw err;
      base.services.log.warn({ event: event.id, account: accountId, subscription: facts.id }, 'stripe checkout completed while another Stripe subscription is current: not taken');
      return false;
    }
  });
}

/** A subscription event, or an invoice's: the local row of that Stripe subscription changed as `change` says. */
async function subscriptionChanged(
  base: BaseCtx,
  event: Stripe.Event,
  customer: string | null,
  subscriptionRef: string | null,
  change: (row: Subscription) => Partial<Subscription> | null,
  auditEvent: string,
): Promise<ProviderNotificationView> {
  const accountId = customer ? await records.accountOfCustomer(base, PROVIDER, customer) : null;
  if (!accountId || !subscriptionRef) return ignore(base, event, 'about no customer of ticketd');
  return applyOnce(base, event, accountId, async (tx) => {
    await billing.current(tx); // the account's lock, as every plan change takes it
    const row = await records.subscriptionByRef(tx, PROVIDER, subscriptionRef);
    const fields = row ? change(row) : null;
    if (!row || !fields) return false;
    const { changed } = await records.updateMirrored(tx, row, fields);
    if (changed)
      await audit.record(tx, { brandId: null, entityType: 'subscription', entityId: row.id, event: auditEvent, metadata: { provider: PROVIDER, stripeEvent: event.id } });
    return changed;
  });
}

async function receive(base: BaseCtx, raw: Buffer, headers: Record<string, string | string[] | undefined>): Promise<ProviderNotificationView> {
  const signature = headers['stripe-signature'];
  const event = api(base).verify(raw, typeof signature === 'string' ? signature : undefined, base.services.now());
  if (await records.eventSeen(base, PROVIDER, event.id)) return duplicate;
  const { config } = base.services;
  const now = () => new Date(base.services.now());
  switch (event.type) {
    case 'checkout.session.completed':
      return checkoutCompleted(base, event, event.data.object);
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted': {
      const facts = subscriptionFacts(event.data.object);
      return subscriptionChanged(
        base,
        event,
        facts.customer,
        facts.id,
        (row) => records.mirrored(config, facts, row, row.planSlug, now()),
        event.type === 'customer.subscription.deleted' ? 'subscription.ended' : 'subscription.updated',
      );
    }
    case 'invoice.paid':
    case 'invoice.payment_failed': {
      const invoice = event.data.object;
      const customer = typeof invoice.customer === 'string' ? invoice.customer : (invoice.customer?.id ?? null);
      const paid = event.type === 'invoice.paid';
      // Only a live subscription's standing changes: a canceled one stays so.
      const status = (row: Subscription) => (row.status === 'canceled' ? null : { status: paid ? ('active' as const) : ('past_due' as const) });
      return subscriptionChanged(base, event, customer, invoiceSubscription(invoice), status, paid ? 'subscription.payment_succeeded' : 'subscription.payment_failed');
    }
    default:
      return ignore(base, event, '');
  }
}

export const stripeProvider: BillingProvider = {
  name: PROVIDER,
  checkoutMode: 'redirect',
  upgrade,
  confirm,
  cancel,
  reactivate,
  cancelPendingChange,
  clientToken,
  addPaymentMethod,
  paymentMethods,
  setDefaultPaymentMethod,
  removePaymentMethod,
  invoices,
  receive,
};
