import type { BaseCtx, TenantCtx } from '../../core/context.js';
import type {
  CancelInput,
  ClientTokenView,
  ConfirmInput,
  DoneView,
  EmbedView,
  InvoiceListView,
  PaymentMethodView,
  ProviderNotificationView,
  SubscriptionView,
  UpgradeInput,
  UpgradeView,
} from './schemas.js';

/**
 * Who takes payments (config billingProvider): what the subscription routes ask of it. `local`
 * keeps no card data and confirms checkouts at once; `stripe` pays through Stripe's Checkout,
 * subscriptions, SetupIntents and invoices, and hears back from Stripe's signed notifications.
 */
export interface BillingProvider {
  readonly name: 'local' | 'stripe';
  readonly checkoutMode: 'redirect';
  upgrade(ctx: TenantCtx, input: UpgradeInput, baseUrl: string): Promise<UpgradeView>;
  confirm(ctx: TenantCtx, input: ConfirmInput): Promise<{ subscription: SubscriptionView }>;
  cancel(ctx: TenantCtx, input: CancelInput): Promise<DoneView>;
  reactivate(ctx: TenantCtx): Promise<DoneView>;
  cancelPendingChange(ctx: TenantCtx): Promise<DoneView>;
  clientToken(ctx: TenantCtx): Promise<ClientTokenView>;
  addPaymentMethod(ctx: TenantCtx): Promise<EmbedView>;
  paymentMethods(ctx: TenantCtx): Promise<PaymentMethodView[]>;
  setDefaultPaymentMethod(ctx: TenantCtx, id: string): Promise<{ success: true }>;
  removePaymentMethod(ctx: TenantCtx, id: string): Promise<{ success: true }>;
  invoices(ctx: TenantCtx, limit: number): Promise<InvoiceListView>;
  /** A provider's notification (its raw body and headers), verified, applied once; 404 when this provider takes none. */
  receive(base: BaseCtx, raw: Buffer, headers: Record<string, string | string[] | undefined>): Promise<ProviderNotificationView>;
}
