import type { Config } from '../core/config.js';
import type { BillingProvider } from '../domains/billing/provider.js';
import { localProvider } from './billing.js';
import { stripeProvider } from './billing-stripe.js';

/** The configured billing provider (config billingProvider). */
export function billingProvider(config: Pick<Config, 'billingProvider'>): BillingProvider {
  return config.billingProvider === 'stripe' ? stripeProvider : localProvider;
}
