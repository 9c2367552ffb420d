import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requestBaseUrl, type Config } from '../core/config.js';
import { notFound } from '../core/errors.js';
import { sendPage } from '../core/page.js';
import * as plans from '../flows/billing.js';
import { billingProvider } from '../flows/billing-provider.js';
import * as coupons from '../domains/billing/coupons.js';
import * as billing from '../domains/billing/service.js';
import { checkoutPage } from '../domains/billing/page.js';
import {
  BillingConfigOut,
  CancelBody,
  CheckoutParams,
  ClientTokenOut,
  ConfirmBody,
  CouponLimitBody,
  CouponList,
  CouponParams,
  CouponWrapper,
  Done,
  EmbedOut,
  InvoiceList,
  InvoiceListQuery,
  PaymentMethodList,
  PaymentMethodParams,
  PlanList,
  ProviderNotificationOut,
  SubscriptionHistory,
  Success,
  SubscriptionWrapper,
  UpgradeBody,
  UpgradeOut,
  UsageOut,
  type CancelInput,
  type ConfirmInput,
  type CouponLimitInput,
  type UpgradeInput,
} from '../domains/billing/schemas.js';

/** Stripe's notifications are small; a larger body is refused before it is read. */
const MAX_NOTIFICATION_BYTES = 512 * 1024;

/**
 * Plans (public) and the account's subscription, usage, invoices and payment methods (a member's
 * session: any member reads, owners and admins change). The checkout page is ticketd's own.
 */
export async function billingRoutes(app: FastifyInstance, { config }: { config: Config }): Promise<void> {
  const tags = ['Billing'];
  const open = { auth: 'none', permission: 'plans:read' } as const;
  const read = { auth: 'session', permission: 'billing:read' } as const;
  const manage = { auth: 'session', permission: 'billing:manage' } as const;
  const provider = billingProvider(config);

  app.get('/v1/auth/plans', { config: open, schema: { tags, summary: 'The plans on sale, cheapest first ({ plans })', response: { 200: PlanList } } }, async () => ({
    plans: [...config.plans].sort((a, b) => a.price - b.price).map(billing.planView),
  }));

  app.get('/v1/billing/config', { config: open, schema: { tags, summary: 'Who takes payments and how checkout works', response: { 200: BillingConfigOut } } }, async () => ({
    provider: provider.name,
    checkoutMode: provider.checkoutMode,
  }));

  app.get(
    '/v1/auth/subscription',
    { config: read, schema: { tags, summary: 'The current subscription ({ subscription }, null on the default plan)', response: { 200: SubscriptionWrapper } } },
    async (req) => {
      const current = await billing.current(req.ctx);
      return { subscription: current ? billing.subscriptionView(config, current) : null };
    },
  );

  app.get(
    '/v1/auth/usage',
    { config: read, schema: { tags, summary: "The current billing period: tickets created, brands, members, and the plan's limits", response: { 200: UsageOut } } },
    async (req) => billing.usage(req.ctx),
  );

  app.get(
    '/v1/auth/subscription/history',
    { config: read, schema: { tags, summary: 'Every subscription of the account, newest first', response: { 200: SubscriptionHistory } } },
    async (req) => ({
      subscriptions: (await billing.history(req.ctx)).map((s) => billing.subscriptionView(config, s)),
    }),
  );

  app.get<{ Querystring: { limit?: number } }>(
    '/v1/auth/invoices',
    { config: read, schema: { tags, summary: 'Invoices, newest first ({ invoices, hasMore })', querystring: InvoiceListQuery, response: { 200: InvoiceList } } },
    async (req) => provider.invoices(req.ctx, req.query.limit ?? 20),
  );

  app.post<{ Body: UpgradeInput }>(
    '/v1/auth/subscription/upgrade',
    {
      config: manage,
      schema: {
        tags,
        summary:
          "Start a plan change: a checkout page to send the browser to ({ url }; stripe: Stripe's Checkout). A cheaper plan is scheduled for the end of the period once confirmed. stripe, with a subscription: the change is made at once (a dearer plan prorated now) and url is successUrl",
        body: UpgradeBody,
        response: { 200: UpgradeOut },
      },
    },
    async (req) => provider.upgrade(req.ctx, req.body, requestBaseUrl(config.publicUrl, req.protocol, req.host)),
  );

  app.post<{ Body: ConfirmInput }>(
    '/v1/auth/subscription/confirm',
    {
      config: manage,
      schema: {
        tags,
        summary:
          "Confirm a checkout (checkoutSessionId), or move straight to the plan planRef names (stripe: a paid plan needs its paid checkout, 400 payment_required; another account's checkout 404)",
        body: ConfirmBody,
        response: { 200: SubscriptionWrapper },
      },
    },
    async (req) => provider.confirm(req.ctx, req.body ?? {}),
  );

  app.post<{ Body: CancelInput }>(
    '/v1/auth/subscription/cancel',
    { config: manage, schema: { tags, summary: 'Cancel at the end of the period, or now with immediate; 404 without a subscription', body: CancelBody, response: { 200: Done } } },
    async (req) => provider.cancel(req.ctx, req.body ?? {}),
  );

  app.post(
    '/v1/auth/subscription/reactivate',
    { config: manage, schema: { tags, summary: 'Undo a cancellation before the period ends; 404 without a subscription', response: { 200: Done } } },
    async (req) => provider.reactivate(req.ctx),
  );

  app.post(
    '/v1/auth/subscription/cancel-pending-change',
    { config: manage, schema: { tags, summary: 'Drop the plan change scheduled for the end of the period; 404 without one', response: { 200: Done } } },
    async (req) => provider.cancelPendingChange(req.ctx),
  );

  app.get(
    '/v1/auth/payment-methods',
    { config: read, schema: { tags, summary: "Payment methods on file (stripe: the customer's cards; none with the local provider)", response: { 200: PaymentMethodList } } },
    async (req) => ({ paymentMethods: await provider.paymentMethods(req.ctx) }),
  );
  app.get(
    '/v1/auth/payment-methods/client-token',
    {
      config: manage,
      schema: {
        tags,
        summary: "A token for the provider's payment-methods component (stripe: a SetupIntent's client secret); token null with the local provider, which has none",
        response: { 200: ClientTokenOut },
      },
    },
    async (req) => provider.clientToken(req.ctx),
  );
  app.post(
    '/v1/auth/payment-methods/add',
    {
      config: manage,
      schema: {
        tags,
        summary: "Start vaulting a card: stripe answers a SetupIntent's client secret as embedToken (400 not_supported with the local provider)",
        response: { 200: EmbedOut },
      },
    },
    async (req) => provider.addPaymentMethod(req.ctx),
  );
  app.post<{ Params: { id: string } }>(
    '/v1/auth/payment-methods/:id/default',
    { config: manage, schema: { tags, summary: "Make a payment method the default (404: not one of the account's)", params: PaymentMethodParams, response: { 200: Success } } },
    async (req) => provider.setDefaultPaymentMethod(req.ctx, req.params.id),
  );
  app.delete<{ Params: { id: string } }>(
    '/v1/auth/payment-methods/:id',
    {
      config: manage,
      schema: {
        tags,
        summary: "Remove a payment method (400 for the default, or the only one of an active subscription; 404: not one of the account's)",
        params: PaymentMethodParams,
        response: { 200: Success },
      },
    },
    async (req) => provider.removePaymentMethod(req.ctx, req.params.id),
  );

  // Stripe's notifications: the signature covers the exact bytes, so this scope keeps the body as they came.
  await app.register(async (scope) => {
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: MAX_NOTIFICATION_BYTES }, (_req, body, done) => done(null, body));
    scope.post(
      '/v1/billing/stripe-webhooks',
      {
        // Stripe retries what fails; its deliveries are not one client's to budget.
        config: { auth: 'none', permission: 'billing:notify', rateLimit: false },
        bodyLimit: MAX_NOTIFICATION_BYTES,
        schema: {
          tags,
          summary:
            "A Stripe notification (Stripe-Signature checked with stripe.webhookSecret, five minutes' tolerance), applied once per event id: checkout.session.completed, customer.subscription.updated and deleted, invoice.paid and invoice.payment_failed. Bad signature 400; 404 unless billingProvider is stripe",
          response: { 200: ProviderNotificationOut },
        },
      },
      async (req) => {
        if (provider.name !== 'stripe') throw notFound('Stripe notifications (billingProvider is not stripe)');
        return provider.receive(req.baseCtx, Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0), req.headers);
      },
    );
  });

  // Coupons: the installation's, so its administrators' (instanceAdmins), whatever their role in their organization.
  app.get(
    '/v1/auth/coupons',
    {
      config: { auth: 'session', permission: 'coupons:read' },
      schema: { tags, summary: 'Every configured coupon, with its redemptions and the limit in force (instance administrators)', response: { 200: CouponList } },
    },
    async (req) => ({ coupons: await coupons.list(req.ctx) }),
  );

  app.patch<{ Params: { code: string }; Body: CouponLimitInput }>(
    '/v1/auth/coupons/:code',
    {
      config: { auth: 'session', permission: 'coupons:manage' },
      schema: {
        tags,
        summary: "Set a coupon's usage limit ({ maxRedemptions }, null: unlimited) over the configured one (instance administrators); 404 for a code not configured",
        params: CouponParams,
        body: CouponLimitBody,
        response: { 200: CouponWrapper },
      },
    },
    async (req) => ({ coupon: await coupons.setLimit(req.ctx, req.params.code, req.body.maxRedemptions) }),
  );

  // The checkout page: opened by the browser the upgrade sent here, without the member's session (its token is the key).
  app.get<{ Params: { token: string } }>(
    '/billing/checkout/:token',
    { config: { auth: 'none', permission: 'billing:checkout' }, schema: { hide: true, params: CheckoutParams } },
    async (req, reply) => {
      const page = await plans.checkoutPage(req.baseCtx, req.params.token);
      return sendPage(reply, checkoutPage(page, `/billing/checkout/${encodeURIComponent(req.params.token)}`), { formRedirectsAway: true });
    },
  );

  app.post<{ Params: { token: string } }>(
    '/billing/checkout/:token',
    { config: { auth: 'none', permission: 'billing:checkout' }, schema: { hide: true, params: CheckoutParams } },
    async (req: FastifyRequest<{ Params: { token: string } }>, reply) => reply.redirect(await plans.confirmCheckoutPage(req.baseCtx, req.params.token), 303),
  );
}
