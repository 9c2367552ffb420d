import type { BaseCtx } from '../core/context.js';
import type { Config } from '../core/config.js';
import type { BillingProvider } from '../domains/billing/provider.js';
import type { CreateCheckoutInput, CreateCheckoutView } from '../domains/billing/schemas.js';
import { localProvider } from './billing.js';
import { startSignupCheckout, stripeProvider } from './billing-stripe.js';
import { startLocal } from './signup-checkout.js';

/** The configured billing provider (config billingProvider). */
export function billingProvider(config: Pick<Config, 'billingProvider'>): BillingProvider {
  return config.billingProvider === 'stripe' ? stripeProvider : localProvider;
}

/** POST /v1/auth/checkout at the configured provider: a checkout before any account exists. */
export function signupCheckout(config: Pick<Config, 'billingProvider'>): (base: BaseCtx, input: CreateCheckoutInput, baseUrl: string) => Promise<CreateCheckoutView> {
  return config.billingProvider === 'stripe' ? (base, input) => startSignupCheckout(base, input) : startLocal;
}
