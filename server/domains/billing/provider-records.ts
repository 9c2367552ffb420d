import type { BaseCtx, TenantCtx } from '../../core/context.js';
import type { Config, PlanConfig } from '../../core/config.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import type { StripeSubscriptionFacts } from '../../integrations/stripe-billing.js';
import { BillingCustomer, CheckoutSession, Subscription } from './model.js';

/**
 * What ticketd keeps of a payment provider's objects: the account's customer there, the
 * provider's checkouts and subscriptions by their ids, and the event ids already applied. The
 * provider holds the rest (cards, invoices); a subscription row mirrors the provider's.
 */

/** The account's customer at the provider; null before the first checkout or payment-method call. */
export async function customerRef(ctx: TenantCtx, provider: string): Promise<string | null> {
  return (await BillingCustomer.ofAccount(ctx).where('billingCustomers.provider', provider).first())?.customerRef ?? null;
}

/** Keeps the account's customer; the first one kept wins (two requests may have made one at once): it is answered. */
export async function saveCustomer(ctx: TenantCtx, provider: string, ref: string): Promise<string> {
  await BillingCustomer.query(ctx.db)
    .insert({ accountId: ctx.accountId, provider, customerRef: ref, createdAt: new Date(ctx.services.now()) })
    .onConflict(['accountId', 'provider'])
    .ignore();
  return (await customerRef(ctx, provider))!;
}

/** The account a provider's customer belongs to (a notification names the customer alone); null when none. */
export async function accountOfCustomer(base: BaseCtx, provider: string, ref: string): Promise<string | null> {
  const row = await BillingCustomer.query(base.db).where({ provider, customerRef: ref }).first();
  return row?.accountId ?? null;
}

/** How many checkouts the account made at the provider: a new one's idempotency key counts on from it. */
export async function providerCheckoutCount(ctx: TenantCtx, provider: string): Promise<number> {
  const row = (await CheckoutSession.ofAccount(ctx).where('checkoutSessions.provider', provider).count({ n: '*' }).first()) as unknown as { n: string | number };
  return Number(row.n);
}

/** Records a checkout made at the provider; the same provider id twice (a retried upgrade) is one row, the first (created false). */
export async function recordProviderCheckout(
  tx: TenantCtx,
  input: { id: string; provider: string; providerRef: string; planSlug: string; memberId: string | null; successUrl: string; cancelUrl: string; expiresAt: Date },
): Promise<{ checkout: CheckoutSession; created: boolean }> {
  const inserted = await tx
    .db('checkoutSessions')
    .insert({ accountId: tx.accountId, ...input, tokenHash: null, couponCode: null, createdAt: new Date(tx.services.now()) })
    .onConflict(tx.db.raw('(account_id, provider, provider_ref) where provider_ref is not null'))
    .ignore()
    .returning('id');
  return { checkout: (await providerCheckout(tx, input.provider, input.providerRef))!, created: (inserted as unknown[]).length === 1 };
}

/** One of the account's provider checkouts by the provider's id; locked in a transaction. */
export async function providerCheckout(ctx: TenantCtx, provider: string, ref: string): Promise<CheckoutSession | null> {
  const q = CheckoutSession.ofAccount(ctx).where({ 'checkoutSessions.provider': provider, 'checkoutSessions.providerRef': ref }).first();
  if (ctx.db.isTransaction) q.forUpdate();
  return (await q) ?? null;
}

export async function markCheckoutCompleted(tx: TenantCtx, checkoutId: string, subscriptionId: string): Promise<void> {
  await tx
    .db('checkoutSessions')
    .where({ accountId: tx.accountId, id: checkoutId })
    .update({ completedAt: new Date(tx.services.now()), subscriptionId });
}

/** One of the account's subscriptions by the provider's id, locked in a transaction. */
export async function subscriptionByRef(ctx: TenantCtx, provider: string, ref: string): Promise<Subscription | null> {
  const q = Subscription.ofAccount(ctx).where({ 'subscriptions.provider': provider, 'subscriptions.providerRef': ref }).first();
  if (ctx.db.isTransaction) q.forUpdate();
  return (await q) ?? null;
}

/** Whether an event id was applied already (a read before the provider is asked anything). */
export async function eventSeen(base: BaseCtx, provider: string, eventId: string): Promise<boolean> {
  return Boolean(await base.db('billingEvents').where({ provider, eventId }).first('eventId'));
}

/** Records an event id as applied (in the applying transaction); false when it was applied before. */
export async function firstDelivery(tx: BaseCtx, provider: string, eventId: string, type: string): Promise<boolean> {
  const inserted = await tx.db('billingEvents').insert({ provider, eventId, type }).onConflict(['provider', 'eventId']).ignore().returning('eventId');
  return (inserted as unknown[]).length === 1;
}

export function planOfPrice(config: Pick<Config, 'plans'>, priceId: string | null): PlanConfig | null {
  return (priceId && config.plans.find((p) => p.stripePriceId === priceId)) || null;
}

type Mirrored = Pick<
  Subscription,
  'planSlug' | 'status' | 'currentPeriodStart' | 'currentPeriodEnd' | 'cancelAtPeriodEnd' | 'canceledAt' | 'endedAt' | 'pendingPlanSlug' | 'pendingEffectiveAt'
>;

/**
 * The local row as the provider's subscription says. A cheaper plan is already the provider's
 * price (its next renewal bills it) while the account keeps the dearer plan it paid for: the
 * row's scheduled change holds until the provider's period that starts at its date.
 */
export function mirrored(config: Pick<Config, 'plans'>, facts: StripeSubscriptionFacts, row: Subscription | null, fallbackPlan: string, now: Date): Mirrored {
  const priced = planOfPrice(config, facts.priceId)?.slug ?? row?.planSlug ?? fallbackPlan;
  const waiting = row?.pendingPlanSlug === priced && row.pendingEffectiveAt !== null && facts.currentPeriodStart.getTime() < new Date(row.pendingEffectiveAt).getTime();
  return {
    planSlug: waiting ? row.planSlug : priced,
    status: facts.status,
    currentPeriodStart: facts.currentPeriodStart,
    currentPeriodEnd: facts.currentPeriodEnd,
    cancelAtPeriodEnd: facts.cancelAtPeriodEnd,
    canceledAt: facts.canceledAt,
    endedAt: facts.status === 'canceled' ? (facts.endedAt ?? now) : null,
    pendingPlanSlug: waiting ? row.pendingPlanSlug : null,
    pendingEffectiveAt: waiting ? row.pendingEffectiveAt : null,
  };
}

/** A new subscription row mirroring the provider's. */
export async function insertMirrored(tx: TenantCtx, provider: string, facts: StripeSubscriptionFacts, fields: Mirrored): Promise<Subscription> {
  const now = new Date(tx.services.now());
  return Subscription.query(tx.db)
    .insert({
      accountId: tx.accountId,
      id: newId(ID_PREFIX.subscription),
      provider,
      providerRef: facts.id,
      ...fields,
      createdAt: now,
      updatedAt: now,
    })
    .returning('*');
}

/** The row changed to `fields`; the row as it was when nothing differs (a replay changes nothing). */
export async function updateMirrored(tx: TenantCtx, row: Subscription, fields: Partial<Subscription>): Promise<{ row: Subscription; changed: boolean }> {
  const differs = (Object.keys(fields) as (keyof Subscription)[]).some((k) => String(valueOf(row[k])) !== String(valueOf(fields[k])));
  if (!differs) return { row, changed: false };
  const [updated] = (await Subscription.ofAccount(tx)
    .where('subscriptions.id', row.id)
    .patch({ ...fields, updatedAt: new Date(tx.services.now()) } as never)
    .returning('*')) as unknown as Subscription[];
  return { row: updated!, changed: true };
}

const valueOf = (v: unknown) => (v instanceof Date ? v.getTime() : v === undefined ? null : v);
