import Stripe from 'stripe';
import type { Config } from '../core/config.js';
import { badRequest, conflict, HttpError } from '../core/errors.js';
import { part } from '../core/services.js';

/**
 * Stripe's API as the stripe billing provider uses it: network calls only, answered as plain
 * facts (no database here). One client per Services (the part below), made on first use. Stripe's
 * own failures are 502 provider_error; an object Stripe does not know is null to the caller.
 */

export interface StripeSubscriptionFacts {
  id: string;
  customer: string;
  /** Stripe's status mapped to ticketd's: trialing is active; unpaid and incomplete are past_due. */
  status: 'active' | 'past_due' | 'canceled';
  itemId: string | null;
  priceId: string | null;
  currentPeriodStart: Date;
  currentPeriodEnd: Date;
  cancelAtPeriodEnd: boolean;
  canceledAt: Date | null;
  endedAt: Date | null;
}

export interface StripeCheckoutFacts {
  id: string;
  /** open, complete (paid) or expired. */
  status: string;
  accountId: string | null;
  customer: string | null;
  subscription: string | null;
}

export interface StripePaymentMethodFacts {
  id: string;
  customer: string | null;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

export interface StripeInvoiceFacts {
  id: string;
  number: string | null;
  status: string;
  priceId: string | null;
  amountDue: number;
  amountPaid: number;
  currency: string;
  created: Date;
  periodStart: Date;
  periodEnd: Date;
  invoiceUrl: string | null;
  invoicePdf: string | null;
}

/** Creates and updates carry an idempotency key: a retried request changes nothing twice. */
export interface StripeBilling {
  createCustomer(input: { accountId: string; name: string | null }, idempotencyKey: string): Promise<string>;
  createCheckout(
    input: { customer: string; priceId: string; successUrl: string; cancelUrl: string; accountId: string; planSlug: string },
    idempotencyKey: string,
  ): Promise<{ id: string; url: string; expiresAt: Date }>;
  /** A checkout before any account exists (a paid sign-up): Stripe makes the customer from `email` when it is paid. */
  createSignupCheckout(
    input: { email: string; priceId: string; successUrl: string; cancelUrl: string; signupCheckoutId: string; planSlug: string },
    idempotencyKey: string,
  ): Promise<{ id: string; url: string; expiresAt: Date }>;
  checkout(id: string): Promise<StripeCheckoutFacts | null>;
  subscription(id: string): Promise<StripeSubscriptionFacts | null>;
  updateSubscription(
    id: string,
    change: { itemId?: string; priceId?: string; prorate?: boolean; cancelAtPeriodEnd?: boolean },
    idempotencyKey: string,
  ): Promise<StripeSubscriptionFacts>;
  cancelSubscription(id: string, idempotencyKey: string): Promise<StripeSubscriptionFacts>;
  setupIntent(customer: string): Promise<{ id: string; clientSecret: string }>;
  paymentMethods(customer: string): Promise<{ methods: StripePaymentMethodFacts[]; defaultId: string | null }>;
  paymentMethod(id: string): Promise<StripePaymentMethodFacts | null>;
  setDefaultPaymentMethod(customer: string, paymentMethod: string): Promise<void>;
  detachPaymentMethod(id: string): Promise<void>;
  invoices(customer: string, limit: number): Promise<{ invoices: StripeInvoiceFacts[]; hasMore: boolean }>;
  /** The event a notification carries, its signature checked at `nowMs` (five minutes' tolerance); 400 invalid_signature otherwise. */
  verify(raw: Buffer, signature: string | undefined, nowMs: number): Stripe.Event;
}

export const stripeBilling = part('stripe billing', (services): StripeBilling => clientFor(services.config));

const seconds = (s: number) => new Date(s * 1000);
const idOf = (x: string | { id: string } | null | undefined): string | null => (x == null ? null : typeof x === 'string' ? x : x.id);

const STATUS: Readonly<Record<string, StripeSubscriptionFacts['status']>> = {
  active: 'active',
  trialing: 'active',
  past_due: 'past_due',
  unpaid: 'past_due',
  incomplete: 'past_due',
  paused: 'past_due',
  canceled: 'canceled',
  incomplete_expired: 'canceled',
};

/** A Stripe subscription as ticketd mirrors it (one item: the plan's price). */
export function subscriptionFacts(s: Stripe.Subscription): StripeSubscriptionFacts {
  const item = s.items.data[0];
  const start = item?.current_period_start ?? s.start_date;
  const end = item?.current_period_end ?? s.start_date;
  return {
    id: s.id,
    customer: idOf(s.customer)!,
    status: STATUS[s.status] ?? 'past_due',
    itemId: item?.id ?? null,
    priceId: item?.price.id ?? null,
    currentPeriodStart: seconds(start),
    currentPeriodEnd: seconds(end),
    cancelAtPeriodEnd: s.cancel_at_period_end,
    canceledAt: s.canceled_at ? seconds(s.canceled_at) : null,
    endedAt: s.ended_at ? seconds(s.ended_at) : null,
  };
}

/** The subscription an invoice bills, in either of the shapes Stripe's API versions give it. */
export function invoiceSubscription(invoice: Stripe.Invoice): string | null {
  const legacy = (invoice as unknown as { subscription?: string | { id: string } | null }).subscription;
  return idOf(invoice.parent?.subscription_details?.subscription) ?? idOf(legacy);
}

function invoiceFacts(i: Stripe.Invoice): StripeInvoiceFacts {
  const line = i.lines?.data[0] as (Stripe.InvoiceLineItem & { price?: { id: string } | null }) | undefined;
  return {
    id: i.id!,
    number: i.number ?? null,
    status: i.status ?? 'draft',
    priceId: idOf(line?.pricing?.price_details?.price) ?? line?.price?.id ?? null,
    amountDue: i.amount_due,
    amountPaid: i.amount_paid,
    currency: i.currency,
    created: seconds(i.created),
    periodStart: seconds(i.period_start),
    periodEnd: seconds(i.period_end),
    invoiceUrl: i.hosted_invoice_url ?? null,
    invoicePdf: i.invoice_pdf ?? null,
  };
}

function paymentMethodFacts(pm: Stripe.PaymentMethod): StripePaymentMethodFacts {
  return {
    id: pm.id,
    customer: idOf(pm.customer),
    brand: pm.card?.brand ?? pm.type,
    last4: pm.card?.last4 ?? '',
    expMonth: pm.card?.exp_month ?? 0,
    expYear: pm.card?.exp_year ?? 0,
  };
}

/** Stripe's answer to a bad card is the customer's to fix (400), a request still running there is a retry's (409); anything else of Stripe's is its failure (502). */
function providerError(err: unknown): HttpError {
  if (err instanceof Stripe.errors.StripeCardError) return badRequest(`The payment provider refused the card: ${err.message}`, undefined, 'payment_failed');
  if (err instanceof Stripe.errors.StripeIdempotencyError)
    return conflict(`The same change is still being made at the payment provider: try again (${err.message})`, 'provider_busy');
  const message = err instanceof Error ? err.message : String(err);
  return new HttpError(502, 'provider_error', `The payment provider failed: ${message}`);
}

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw providerError(err);
  }
}

/** null for an object Stripe does not know (404 resource_missing). */
async function find<T>(fn: () => Promise<T>): Promise<T | null> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof Stripe.errors.StripeError && err.statusCode === 404) return null;
    throw providerError(err);
  }
}

export function clientFor(config: Pick<Config, 'stripe'>): StripeBilling {
  const { secretKey, webhookSecret, apiUrl } = config.stripe;
  const url = apiUrl ? new URL(apiUrl) : null;
  const stripe = new Stripe(secretKey ?? '', {
    maxNetworkRetries: 2,
    timeout: 20_000,
    telemetry: false,
    appInfo: { name: 'ticketd' },
    ...(url ? { host: url.hostname, port: url.port || (url.protocol === 'https:' ? 443 : 80), protocol: url.protocol === 'https:' ? 'https' : 'http' } : {}),
  });

  return {
    async createCustomer({ accountId, name }, idempotencyKey) {
      const customer = await call(() => stripe.customers.create({ ...(name ? { name } : {}), metadata: { accountId } }, { idempotencyKey }));
      return customer.id;
    },

    async createCheckout(input, idempotencyKey) {
      const session = await call(() =>
        stripe.checkout.sessions.create(
          {
            mode: 'subscription',
            customer: input.customer,
            line_items: [{ price: input.priceId, quantity: 1 }],
            success_url: input.successUrl,
            cancel_url: input.cancelUrl,
            client_reference_id: input.accountId,
            metadata: { accountId: input.accountId, plan: input.planSlug },
            subscription_data: { metadata: { accountId: input.accountId, plan: input.planSlug } },
          },
          { idempotencyKey },
        ),
      );
      if (!session.url) throw new HttpError(502, 'provider_error', 'The payment provider made a checkout without a URL');
      return { id: session.id, url: session.url, expiresAt: seconds(session.expires_at) };
    },

    async createSignupCheckout(input, idempotencyKey) {
      const metadata = { signupCheckoutId: input.signupCheckoutId, plan: input.planSlug };
      const session = await call(() =>
        stripe.checkout.sessions.create(
          {
            mode: 'subscription',
            customer_email: input.email,
            line_items: [{ price: input.priceId, quantity: 1 }],
            success_url: input.successUrl,
            cancel_url: input.cancelUrl,
            client_reference_id: input.signupCheckoutId,
            metadata,
            subscription_data: { metadata },
          },
          { idempotencyKey },
        ),
      );
      if (!session.url) throw new HttpError(502, 'provider_error', 'The payment provider made a checkout without a URL');
      return { id: session.id, url: session.url, expiresAt: seconds(session.expires_at) };
    },

    async checkout(id) {
      const s = await find(() => stripe.checkout.sessions.retrieve(id));
      if (!s) return null;
      return { id: s.id, status: s.status ?? 'open', accountId: s.client_reference_id ?? null, customer: idOf(s.customer), subscription: idOf(s.subscription) };
    },

    async subscription(id) {
      const s = await find(() => stripe.subscriptions.retrieve(id));
      return s ? subscriptionFacts(s) : null;
    },

    async updateSubscription(id, change, idempotencyKey) {
      const params: Stripe.SubscriptionUpdateParams = {};
      if (change.priceId) {
        params.items = [{ id: change.itemId, price: change.priceId }];
        // A dearer plan is charged now for the rest of the period; a cheaper one waits: Stripe's next renewal bills it.
        params.proration_behavior = change.prorate ? 'always_invoice' : 'none';
      }
      if (change.cancelAtPeriodEnd !== undefined) params.cancel_at_period_end = change.cancelAtPeriodEnd;
      return subscriptionFacts(await call(() => stripe.subscriptions.update(id, params, { idempotencyKey })));
    },

    async cancelSubscription(id, idempotencyKey) {
      return subscriptionFacts(await call(() => stripe.subscriptions.cancel(id, {}, { idempotencyKey })));
    },

    async setupIntent(customer) {
      const intent = await call(() => stripe.setupIntents.create({ customer, usage: 'off_session' }));
      return { id: intent.id, clientSecret: intent.client_secret ?? '' };
    },

    async paymentMethods(customer) {
      const [list, owner] = await Promise.all([call(() => stripe.paymentMethods.list({ customer, type: 'card', limit: 100 })), call(() => stripe.customers.retrieve(customer))]);
      const defaultId = owner.deleted ? null : idOf(owner.invoice_settings?.default_payment_method);
      return { methods: list.data.map(paymentMethodFacts), defaultId };
    },

    async paymentMethod(id) {
      const pm = await find(() => stripe.paymentMethods.retrieve(id));
      return pm ? paymentMethodFacts(pm) : null;
    },

    async setDefaultPaymentMethod(customer, paymentMethod) {
      await call(() => stripe.customers.update(customer, { invoice_settings: { default_payment_method: paymentMethod } }));
    },

    async detachPaymentMethod(id) {
      await call(() => stripe.paymentMethods.detach(id));
    },

    async invoices(customer, limit) {
      const list = await call(() => stripe.invoices.list({ customer, limit }));
      return { invoices: list.data.map(invoiceFacts), hasMore: list.has_more };
    },

    verify(raw, signature, nowMs) {
      if (!signature) throw badRequest('The notification carries no Stripe-Signature header', undefined, 'invalid_signature');
      try {
        return stripe.webhooks.constructEvent(raw, signature, webhookSecret ?? '', stripe.webhooks.DEFAULT_TOLERANCE, undefined, nowMs);
      } catch (err) {
        throw badRequest(`The notification's signature does not verify: ${(err as Error).message}`, undefined, 'invalid_signature');
      }
    },
  };
}
