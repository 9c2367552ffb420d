import { Type, type Static } from 'typebox';
import { EmailAddress, Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';

const Limit = (description: string) => Type.Integer({ description: `${description}; -1: unlimited` });

export const PlanOut = Type.Object({
  id: Type.String({ description: "The plan's slug: planId and planRef name plans by it" }),
  object: Type.Literal('plan'),
  slug: Type.String(),
  name: Type.String(),
  price: Type.Integer({ description: 'Per interval, in minor units (cents)' }),
  currency: Type.String(),
  interval: Type.Union([Type.Literal('month'), Type.Literal('year')]),
  entitlements: Type.Object({
    tickets_per_period: Limit('Tickets created per billing period'),
    brands_limit: Limit('Brands'),
    members_limit: Limit('Members, active and invited'),
    custom_domain: Type.Boolean(),
    recurring_tickets: Type.Boolean({ description: 'Recurring tickets: creating, running and resuming them, and their scheduled runs' }),
  }),
});
export type PlanView = Static<typeof PlanOut>;
export const PlanList = Type.Object({ plans: Type.Array(PlanOut) });

export const BillingConfigOut = Type.Object({
  provider: Type.String({
    description: "local: no card data, checkout confirms at once on a page ticketd serves; stripe: Stripe's Checkout (redirect), its subscriptions and invoices",
  }),
  checkoutMode: Type.Union([Type.Literal('redirect'), Type.Literal('embedded')]),
});

export const SubscriptionOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('subscription'),
  status: Type.Union([Type.Literal('active'), Type.Literal('past_due'), Type.Literal('canceled')], { description: 'past_due: the provider could not charge the last invoice' }),
  planId: Type.String(),
  planRef: Type.String({ description: 'The same as planId' }),
  planName: Type.String(),
  planPrice: Type.Integer(),
  planInterval: Type.String(),
  planCurrency: Type.String(),
  currentPeriodStart: Timestamp,
  currentPeriodEnd: Timestamp,
  cancelAtPeriodEnd: Type.Boolean(),
  pendingPlanId: Nullable(Type.String()),
  pendingPlanName: Nullable(Type.String()),
  pendingEffectiveAt: Nullable(Timestamp),
  canceledAt: Nullable(Timestamp),
  endedAt: Nullable(Timestamp),
  createdAt: Timestamp,
});
export type SubscriptionView = Static<typeof SubscriptionOut>;
export const SubscriptionWrapper = Type.Object({ subscription: Nullable(SubscriptionOut) });
export const SubscriptionHistory = Type.Object({ subscriptions: Type.Array(SubscriptionOut) });

export const UsageOut = Type.Object({
  ticketCount: Type.Integer({ description: 'Tickets created in the current billing period (live mode)' }),
  brandCount: Type.Integer({ description: 'Live brands' }),
  memberCount: Type.Integer({ description: 'Members, active and invited' }),
  billingPeriodStart: Timestamp,
  billingPeriodEnd: Timestamp,
  planId: Type.String(),
  planName: Type.String(),
  planLimit: Nullable(Type.Integer({ description: 'Tickets per period; null: unlimited' })),
  brandLimit: Nullable(Type.Integer({ description: 'null: unlimited' })),
  memberLimit: Nullable(Type.Integer({ description: 'null: unlimited' })),
  storageBytes: Type.Integer({ description: 'Bytes of files kept for the account, both modes: attachments, avatars and inbound raw mail' }),
});
export type UsageView = Static<typeof UsageOut>;

const SameSiteUrl = Type.String({ minLength: 1, maxLength: 2048, description: 'Absolute http(s) URL on a dashboard origin' });
export const UpgradeBody = Type.Object(
  {
    planId: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    planRef: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'The same as planId' })),
    successUrl: SameSiteUrl,
    cancelUrl: SameSiteUrl,
    couponCode: Type.Optional(Type.String({ maxLength: 100, description: 'A coupon (any case) discounting the invoice of the plan that starts when the checkout completes' })),
  },
  { additionalProperties: false },
);
export type UpgradeInput = Static<typeof UpgradeBody>;
export const UpgradeOut = Type.Object({
  url: Type.String({ description: "Send the browser here to confirm the plan (stripe: Stripe's Checkout; a change made at once: successUrl)" }),
  checkoutSessionId: Nullable(Type.String({ description: "What confirm takes (stripe: Stripe's cs_ id); null when the change was made at once" })),
  expiresAt: Nullable(Timestamp),
  subscription: Type.Optional(SubscriptionOut),
});
export type UpgradeView = Static<typeof UpgradeOut>;

export const CreateCheckoutBody = Type.Object(
  {
    email: EmailAddress("The owner's address: the new organization's sign-in link is mailed there"),
    planId: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'A paid plan (a free one: sign up with POST /v1/auth/signup)' })),
    planRef: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'The same as planId' })),
    successUrl: SameSiteUrl,
    cancelUrl: SameSiteUrl,
    accountName: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: PATTERNS.notBlank, description: "The organization's name; defaults to the email" })),
    couponCode: Type.Optional(Type.String({ maxLength: 100, description: "A coupon (any case) discounting the plan's first invoice (local provider only)" })),
  },
  { additionalProperties: false },
);
export type CreateCheckoutInput = Static<typeof CreateCheckoutBody>;
export const CreateCheckoutOut = Type.Object({
  url: Type.String({ description: "Send the browser here to pay (stripe: Stripe's Checkout; local: ticketd's own checkout page)" }),
  checkoutSessionId: Type.String({ description: "The checkout's id (stripe: Stripe's cs_ id)" }),
  expiresAt: Timestamp,
});
export type CreateCheckoutView = Static<typeof CreateCheckoutOut>;

export const ConfirmBody = Type.Object(
  {
    checkoutSessionId: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    planRef: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
);
export type ConfirmInput = Static<typeof ConfirmBody>;

export const CancelBody = Type.Object(
  { immediate: Type.Optional(Type.Boolean({ description: 'End it now rather than at the end of the period' })), reason: Type.Optional(Type.String({ maxLength: 1000 })) },
  { additionalProperties: false },
);
export type CancelInput = Static<typeof CancelBody>;
export const Done = Type.Object({ success: Type.Literal(true), message: Type.String(), endsAt: Type.Optional(Nullable(Timestamp)) });
export type DoneView = Static<typeof Done>;

export const InvoiceListQuery = Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })) });
export const InvoiceOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('invoice'),
  number: Nullable(Type.String()),
  status: Type.String(),
  planId: Nullable(Type.String({ description: "The plan billed; null when the provider's invoice names no configured plan" })),
  amountDue: Type.Integer(),
  amountPaid: Type.Integer(),
  currency: Type.String(),
  created: Timestamp,
  periodStart: Timestamp,
  periodEnd: Timestamp,
  invoiceUrl: Nullable(Type.String()),
  invoicePdf: Nullable(Type.String()),
});
export type InvoiceView = Static<typeof InvoiceOut>;
export const InvoiceList = Type.Object({ invoices: Type.Array(InvoiceOut), hasMore: Type.Boolean() });
export type InvoiceListView = Static<typeof InvoiceList>;

export const PaymentMethodOut = Type.Object({
  id: Type.String(),
  brand: Type.String(),
  last4: Type.String(),
  expMonth: Type.Integer(),
  expYear: Type.Integer(),
  isDefault: Type.Boolean(),
});
export type PaymentMethodView = Static<typeof PaymentMethodOut>;
export const PaymentMethodList = Type.Object({ paymentMethods: Type.Array(PaymentMethodOut) });
export const ClientTokenOut = Type.Object({
  provider: Type.String(),
  token: Nullable(Type.String({ description: "stripe: a SetupIntent's client secret, for Stripe.js" })),
  expiresAt: Nullable(Timestamp),
});
export type ClientTokenView = Static<typeof ClientTokenOut>;
export const EmbedOut = Type.Object({
  provider: Type.String(),
  embedToken: Type.String({ description: "A SetupIntent's client secret: Stripe.js collects the card with it and Stripe vaults it" }),
  setupIntentId: Type.String(),
});
export type EmbedView = Static<typeof EmbedOut>;
export const Success = Type.Object({ success: Type.Literal(true) });
export const ProviderNotificationOut = Type.Object({
  received: Type.Literal(true),
  action: Type.Union([Type.Literal('applied'), Type.Literal('duplicate'), Type.Literal('ignored')], {
    description: 'duplicate: the event id was applied before; ignored: not an event ticketd follows, or about no subscription of its own',
  }),
});
export type ProviderNotificationView = Static<typeof ProviderNotificationOut>;
export const PaymentMethodParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
export const CheckoutParams = Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) });

export const CouponOut = Type.Object({
  code: Type.String({ description: 'As configured; a customer may type it in any case' }),
  object: Type.Literal('coupon'),
  percentOff: Nullable(Type.Integer()),
  amountOff: Nullable(Type.Integer({ description: 'In minor units (cents) of currency' })),
  currency: Nullable(Type.String()),
  maxRedemptions: Nullable(Type.Integer({ description: 'The limit in force over every account; null: unlimited' })),
  configuredMaxRedemptions: Nullable(Type.Integer({ description: "The configuration's limit, which a PATCH overrides" })),
  timesRedeemed: Type.Integer(),
  expiresAt: Nullable(Timestamp),
  plans: Nullable(Type.Array(Type.String(), { description: 'Slugs of the plans it applies to; null: every plan' })),
  valid: Type.Boolean({ description: 'Neither expired nor used up' }),
});
export type CouponView = Static<typeof CouponOut>;
export const CouponList = Type.Object({ coupons: Type.Array(CouponOut) });
export const CouponWrapper = Type.Object({ coupon: CouponOut });
export const CouponParams = Type.Object({ code: Type.String({ minLength: 1, maxLength: 100 }) });
export const CouponLimitBody = Type.Object(
  { maxRedemptions: Nullable(Type.Integer({ minimum: 0, maximum: 1_000_000_000, description: 'Redemptions allowed over every account; null: unlimited' })) },
  { additionalProperties: false },
);
export type CouponLimitInput = Static<typeof CouponLimitBody>;
