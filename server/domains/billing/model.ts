import objection from 'objection';
import type { TenantCtx } from '../../core/context.js';

/** Billing belongs to the account, not to a mode: one subscription pays for both. */

export class Subscription extends objection.Model {
  static override tableName = 'subscriptions';

  declare accountId: string;
  declare id: string;
  declare planSlug: string;
  declare status: 'active' | 'past_due' | 'canceled';
  declare provider: string;
  declare providerRef: string | null;
  declare currentPeriodStart: Date;
  declare currentPeriodEnd: Date;
  declare cancelAtPeriodEnd: boolean;
  /** A change scheduled for the end of the period (a downgrade). */
  declare pendingPlanSlug: string | null;
  declare pendingEffectiveAt: Date | null;
  declare canceledAt: Date | null;
  /** Set when it is over; the current subscription has none. */
  declare endedAt: Date | null;
  declare createdAt: Date;
  declare updatedAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('subscriptions.accountId', ctx.accountId);
  }
}

export class CheckoutSession extends objection.Model {
  static override tableName = 'checkoutSessions';

  declare accountId: string;
  declare id: string;
  /** The local provider's checkout page token (SHA-256); null for a checkout made at the provider. */
  declare tokenHash: string | null;
  declare provider: string;
  /** The provider's checkout id (Stripe's cs_ id). */
  declare providerRef: string | null;
  declare planSlug: string;
  declare memberId: string | null;
  declare successUrl: string;
  declare cancelUrl: string;
  declare subscriptionId: string | null;
  /** The coupon the upgrade named (as configured), redeemed when the checkout completes. */
  declare couponCode: string | null;
  declare createdAt: Date;
  declare expiresAt: Date;
  declare completedAt: Date | null;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('checkoutSessions.accountId', ctx.accountId);
  }
}

export class Invoice extends objection.Model {
  static override tableName = 'invoices';

  declare accountId: string;
  declare id: string;
  declare subscriptionId: string;
  declare number: number;
  declare status: 'paid';
  declare planSlug: string;
  declare amountDue: number | string;
  declare amountPaid: number | string;
  declare currency: string;
  declare periodStart: Date;
  declare periodEnd: Date;
  declare createdAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('invoices.accountId', ctx.accountId);
  }
}

/** The provider's customer of an account (Stripe's cus_ id), made once. */
export class BillingCustomer extends objection.Model {
  static override tableName = 'billingCustomers';
  static override idColumn = ['accountId', 'provider'];

  declare accountId: string;
  declare provider: string;
  declare customerRef: string;
  declare createdAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('billingCustomers.accountId', ctx.accountId);
  }
}

/** What the installation's coupons have used up, and a limit an instance administrator set (no tenant). */
export class CouponUsage extends objection.Model {
  static override tableName = 'coupons';
  static override idColumn = 'code';

  declare code: string;
  declare timesRedeemed: number;
  /** Whether maxRedemptions was set here: it then wins over the configured limit (null: unlimited). */
  declare limitSet: boolean;
  declare maxRedemptions: number | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}

export class CouponRedemption extends objection.Model {
  static override tableName = 'couponRedemptions';

  declare accountId: string;
  declare id: string;
  declare couponCode: string;
  declare subscriptionId: string;
  declare invoiceId: string;
  declare amountOff: number | string;
  declare currency: string;
  declare createdAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('couponRedemptions.accountId', ctx.accountId);
  }
}

/** A paid sign-up under way, before its account exists (no tenant): completed once, into the account it made. */
export class SignupCheckout extends objection.Model {
  static override tableName = 'signupCheckouts';

  declare id: string;
  declare provider: string;
  /** The local provider's checkout page token (SHA-256); null for a checkout made at the provider. */
  declare tokenHash: string | null;
  /** The provider's checkout id (Stripe's cs_ id). */
  declare providerRef: string | null;
  /** As sign-up normalizes it. */
  declare email: string;
  declare accountName: string | null;
  declare planSlug: string;
  declare couponCode: string | null;
  declare successUrl: string;
  declare cancelUrl: string;
  declare createdAt: Date;
  declare expiresAt: Date;
  declare completedAt: Date | null;
  declare completedAccountId: string | null;
  declare failedAt: Date | null;
  /** Why a completion was refused (email_exists). */
  declare failure: string | null;
}
