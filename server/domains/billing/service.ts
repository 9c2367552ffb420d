import type { Knex } from 'knex';
import type { QueryBuilder } from 'objection';
import type { BaseCtx, TenantCtx } from '../../core/context.js';
import type { Config, CouponConfig, PlanConfig } from '../../core/config.js';
import { pgErrorCode, type SqlFragment } from '../../core/db.js';
import { badRequest, conflict, HttpError } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { accountIs, accountScope, sameAccount, tenantScope } from '../../core/model.js';
import { hashSecret, randomBase62, TOKEN_RANDOM_LENGTH } from '../../core/secrets.js';
import * as coupons from './coupons.js';
import { CheckoutSession, Invoice, Subscription } from './model.js';
import type { InvoiceView, PlanView, SubscriptionView, UsageView } from './schemas.js';

/**
 * Plans, subscriptions, checkouts and invoices of an account. Plans come from the configuration;
 * an account without a subscription is on its operator's override (accounts.plan_slug) or the
 * default plan. Times are services.now().
 */

const unlimited = (n: number | null) => (n === null ? -1 : n);

/** Whether the plan includes recurring tickets: a plan that does not say (a config file written before them) does. */
export const includesRecurringTickets = (plan: PlanConfig): boolean => plan.recurringTickets ?? true;

export function planView(plan: PlanConfig): PlanView {
  return {
    id: plan.slug,
    object: 'plan',
    slug: plan.slug,
    name: plan.name,
    price: plan.price,
    currency: plan.currency,
    interval: plan.interval,
    entitlements: {
      tickets_per_period: unlimited(plan.ticketsPerPeriod),
      brands_limit: unlimited(plan.brands),
      members_limit: unlimited(plan.members),
      custom_domain: plan.customDomain,
      recurring_tickets: includesRecurringTickets(plan),
    },
  };
}

export function findPlan(config: Pick<Config, 'plans'>, slug: string | null | undefined): PlanConfig | null {
  return config.plans.find((p) => p.slug === slug) ?? null;
}

/** The plan a request names; 400 when it names none or one that is not on sale. */
export function requirePlan(config: Pick<Config, 'plans'>, slug: string | undefined, field: string): PlanConfig {
  const plan = findPlan(config, slug);
  if (!plan) {
    const known = config.plans.map((p) => p.slug).join(', ');
    throw badRequest(
      slug ? `There is no plan ${slug}: plans are ${known}` : `Name the plan: ${field} is required (plans are ${known})`,
      [{ field, message: slug ? 'is not a plan' : 'is required' }],
      slug ? 'unknown_plan' : 'plan_required',
    );
  }
  return plan;
}

/** A plan that left the configuration still bills as it was sold; its slug stands for its name. */
function planOrStub(config: Pick<Config, 'plans' | 'defaultPlan'>, slug: string): PlanConfig {
  return findPlan(config, slug) ?? { ...findPlan(config, config.defaultPlan)!, slug, name: slug };
}

/** One interval later (a month from the 31st ends on the month's last day). */
export function addInterval(from: Date, interval: 'month' | 'year'): Date {
  const months = interval === 'year' ? 12 : 1;
  const to = new Date(from);
  const day = to.getUTCDate();
  to.setUTCDate(1);
  to.setUTCMonth(to.getUTCMonth() + months);
  const last = new Date(Date.UTC(to.getUTCFullYear(), to.getUTCMonth() + 1, 0)).getUTCDate();
  to.setUTCDate(Math.min(day, last));
  return to;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export function subscriptionView(config: Pick<Config, 'plans' | 'defaultPlan'>, s: Subscription): SubscriptionView {
  const plan = planOrStub(config, s.planSlug);
  const pending = s.pendingPlanSlug ? planOrStub(config, s.pendingPlanSlug) : null;
  return {
    id: s.id,
    object: 'subscription',
    status: s.status,
    planId: plan.slug,
    planRef: plan.slug,
    planName: plan.name,
    planPrice: plan.price,
    planInterval: plan.interval,
    planCurrency: plan.currency,
    currentPeriodStart: iso(s.currentPeriodStart)!,
    currentPeriodEnd: iso(s.currentPeriodEnd)!,
    cancelAtPeriodEnd: s.cancelAtPeriodEnd,
    pendingPlanId: pending?.slug ?? null,
    pendingPlanName: pending?.name ?? null,
    pendingEffectiveAt: iso(s.pendingEffectiveAt),
    canceledAt: iso(s.canceledAt),
    endedAt: iso(s.endedAt),
    createdAt: iso(s.createdAt)!,
  };
}

/**
 * The account's current subscription (not ended); null without one. In a transaction the account
 * row is locked first (FOR NO KEY UPDATE: rows pointing at the account still insert), so plan
 * changes, and brands and members counted against the plan, take turns even while the account
 * has no subscription row to lock.
 */
export async function current(ctx: TenantCtx): Promise<Subscription | null> {
  if (ctx.db.isTransaction) await ctx.db('accounts').where({ id: ctx.accountId }).forNoKeyUpdate().first('id');
  const q = Subscription.ofAccount(ctx).whereNull('subscriptions.endedAt').first();
  if (ctx.db.isTransaction) q.forUpdate();
  return (await q) ?? null;
}

/** One of the account's subscriptions, current or past; null when it has none of that id. */
export async function subscriptionById(ctx: TenantCtx, id: string): Promise<Subscription | null> {
  return (await Subscription.ofAccount(ctx).where('subscriptions.id', id).first()) ?? null;
}

export async function history(ctx: TenantCtx): Promise<Subscription[]> {
  return Subscription.ofAccount(ctx).orderBy('subscriptions.id', 'desc');
}

/** The plan the account is on now: the operator's override, else its subscription's, else the default. */
export async function effectivePlan(ctx: TenantCtx, subscription: Subscription | null): Promise<PlanConfig> {
  const { config } = ctx.services;
  const account = (await ctx.db('accounts').where({ id: ctx.accountId }).first('planSlug')) as { planSlug: string | null } | undefined;
  const overridden = findPlan(config, account?.planSlug);
  if (overridden) return overridden;
  if (subscription) return planOrStub(config, subscription.planSlug);
  return findPlan(config, config.defaultPlan)!;
}

/** The billing period now: the subscription's, else the calendar month (UTC). */
export function periodOf(subscription: Subscription | null, now: Date): { start: Date; end: Date } {
  if (subscription) return { start: new Date(subscription.currentPeriodStart), end: new Date(subscription.currentPeriodEnd) };
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return { start, end: addInterval(start, 'month') };
}

/**
 * Whether ticket creates are counted against allowances (ticket_usage): while some plan has one.
 * Without, nothing is counted at create, and usage counts the period's tickets when asked.
 */
export function ticketsMetered(config: Pick<Config, 'plans'>): boolean {
  return config.plans.some((p) => p.ticketsPerPeriod !== null);
}

/**
 * The account's plan (plan_name), its ticket allowance (null: unlimited) and the billing period's
 * start, as one row of SQL: effectivePlan and periodOf, for a statement to read where it runs (the
 * ticket create statement). A subscription to a plan that left the configuration counts as the default.
 */
export function allowanceSql(ctx: TenantCtx): SqlFragment {
  const { now, plans, defaultPlan } = allowanceValues(ctx);
  return { sql: allowanceText({ now: '?', account: '?', plans: '?', defaultPlan: '?' }), bindings: [now, ctx.accountId, plans, defaultPlan, ctx.accountId] };
}

/** allowanceSql's values beside the account: the instant (ISO), the configured plans (JSON) and the default plan's slug. */
export function allowanceValues(ctx: TenantCtx): { now: string; plans: string; defaultPlan: string } {
  const { config } = ctx.services;
  const plans = config.plans.map((p) => ({ slug: p.slug, name: p.name, allowance: p.ticketsPerPeriod }));
  return { now: new Date(ctx.services.now()).toISOString(), plans: JSON.stringify(plans), defaultPlan: config.defaultPlan };
}

/** allowanceSql's text, with SQL expressions for its values (allowanceValues) and the account (the account's first). */
export function allowanceText(given: { now: string; account: string; plans: string; defaultPlan: string }): string {
  return `select pl.name as plan_name, pl.allowance,
        coalesce(s.current_period_start, date_trunc('month', ${given.now}::timestamptz at time zone 'UTC') at time zone 'UTC') as period_start
      from accounts a
      left join subscriptions s on ${accountIs('s', given.account)} and s.ended_at is null
      cross join lateral (
        select p.name, p.allowance from jsonb_to_recordset(${given.plans}::jsonb) as p(slug text, name text, allowance int)
        where p.slug in (a.plan_slug, s.plan_slug, ${given.defaultPlan})
        order by case p.slug when a.plan_slug then 0 when s.plan_slug then 1 else 2 end limit 1
      ) pl
      where a.id = ${given.account}`;
}

/** Tickets created in the period: the count kept at create when metered (see ticketsMetered), else counted now. */
function ticketsInPeriodSql(ctx: TenantCtx, start: Date): SqlFragment {
  // The plan pays for live mode, whichever mode the caller is in.
  const counted = { sql: '(select count(*) from tickets t where ? and t.created_at >= ? and not t.is_spam)', bindings: [tenantScope({ ...ctx, livemode: true }, 't'), start] };
  if (!ticketsMetered(ctx.services.config)) return counted;
  return {
    sql: `coalesce((select u.adjustment + (select coalesce(sum(b.used), 0) from ticket_usage_brands b where ? and ${sameAccount('b', 'u')} and b.period_start = u.period_start)
      from ticket_usage u where ? and u.period_start = ?), ${counted.sql})`,
    bindings: [accountScope(ctx, 'b'), accountScope(ctx, 'u'), start, ...counted.bindings],
  };
}

/**
 * What the account uses of its plan: tickets created in the period (live mode, spam at creation
 * left out), live brands, members; and the bytes of the files it keeps (both modes).
 */
export async function usage(ctx: TenantCtx): Promise<UsageView> {
  const subscription = await current(ctx);
  const plan = await effectivePlan(ctx, subscription);
  const period = periodOf(subscription, new Date(ctx.services.now()));
  const tickets = ticketsInPeriodSql(ctx, period.start);
  const { rows } = (await ctx.db.raw(
    `select
       ${tickets.sql}::int as tickets,
       (select count(*) from brands b where ?)::int as brands,
       (select count(*) from members m where ?)::int as members,
       ((select coalesce(sum(a.size), 0) from attachments a where ?) + (select coalesce(sum(v.size), 0) from avatars v where ?)
         + (select coalesce(sum(r.size), 0) from raw_mails r where ?))::float8 as storage`,
    [
      ...tickets.bindings,
      tenantScope({ ...ctx, livemode: true }, 'b'),
      accountScope(ctx, 'm'),
      accountScope(ctx, 'a'),
      accountScope(ctx, 'v'),
      accountScope(ctx, 'r'),
    ] as Knex.RawBinding[],
  )) as { rows: { tickets: number; brands: number; members: number; storage: number }[] };
  const counted = rows[0]!;
  return {
    ticketCount: counted.tickets,
    brandCount: counted.brands,
    memberCount: counted.members,
    billingPeriodStart: period.start.toISOString(),
    billingPeriodEnd: period.end.toISOString(),
    planId: plan.slug,
    planName: plan.name,
    planLimit: plan.ticketsPerPeriod,
    brandLimit: plan.brands,
    memberLimit: plan.members,
    storageBytes: counted.storage,
  };
}

/** The code of a plan's limit refusing a change (a brand, a member, a ticket over the allowance). */
export const LIMIT_REACHED = 'plan_limit_reached';

export function isLimitReached(err: unknown): boolean {
  return err instanceof HttpError && err.code === LIMIT_REACHED;
}

/** A plan's limit reached: 403 plan_limit_reached, naming the plan and the limit. */
export function limitReached(planName: string, what: string, limit: number, have: number): HttpError {
  return new HttpError(403, LIMIT_REACHED, `The ${planName} plan allows ${limit} ${what}, and this account has ${have}: upgrade the plan (GET /v1/auth/plans) to add more`);
}

/** What the ticket create statement raises (SQLSTATE TQ001, see the migration) when a count went over the allowance. */
const OVER_ALLOWANCE = 'TQ001';

/** What the ticket create statement raises (SQLSTATE TQ002, see the migration) when, counting the usual way, a brand has no room in its budget. */
const OUTSIDE_BRAND_BUDGET = 'TQ002';

/** A create statement refused for a brand without room in its budget of the allowance (or no budget yet): its creates go again, the exact way. */
export function isOutsideBrandBudget(err: unknown): boolean {
  return pgErrorCode(err) === OUTSIDE_BRAND_BUDGET;
}

/** The 403 for a create the allowance refused (its DETAIL names the plan); null for any other error. */
export function allowanceRefusal(err: unknown): HttpError | null {
  if (pgErrorCode(err) !== OVER_ALLOWANCE) return null;
  const e = err as { nativeError?: { detail?: string }; detail?: string };
  const { plan, allowance, had } = JSON.parse(e.nativeError?.detail ?? e.detail ?? '{}') as { plan: string; allowance: number; had: number };
  return limitReached(plan, 'tickets per billing period', allowance, had);
}

/** How many more tickets the account may create this period (live mode); null: no limit. */
export async function ticketRoom(ctx: TenantCtx): Promise<number | null> {
  const allowance = allowanceSql(ctx);
  const { rows } = (await ctx.db.raw(`with al as (${allowance.sql}) select al.allowance, al.period_start from al`, allowance.bindings as Knex.RawBinding[])) as {
    rows: { allowance: number | null; period_start: Date }[];
  };
  const row = rows[0];
  if (!row || row.allowance === null) return null;
  const used = ticketsInPeriodSql(ctx, row.period_start);
  const counted = (await ctx.db.raw(`select ${used.sql}::int as n`, used.bindings as Knex.RawBinding[])) as { rows: { n: number }[] };
  return Math.max(0, row.allowance - counted.rows[0]!.n);
}

/**
 * Refuses a brand (live mode) or a member just added beyond the plan: 403 plan_limit_reached, and
 * the caller's transaction rolls back. Called after the insert: the account row's lock (current)
 * makes concurrent adds count one after the other, each seeing the ones committed before it.
 */
export async function assertWithinPlan(tx: TenantCtx, what: 'brands' | 'members'): Promise<void> {
  const plan = await effectivePlan(tx, await current(tx));
  const limit = what === 'brands' ? plan.brands : plan.members;
  if (limit === null) return;
  const live = { ...tx, livemode: true };
  const { rows } = (await tx.db.raw(what === 'brands' ? 'select count(*)::int as n from brands b where ?' : 'select count(*)::int as n from members m where ?', [
    what === 'brands' ? tenantScope(live, 'b') : accountScope(tx, 'm'),
  ])) as { rows: { n: number }[] };
  const have = rows[0]!.n;
  if (have > limit) throw limitReached(plan.name, what, limit, have - 1);
}

/** Whether the account's usage fits a plan it moves to: brands and members (tickets start afresh each period). */
export async function assertFits(ctx: TenantCtx, plan: PlanConfig): Promise<void> {
  const used = await usage(ctx);
  if (plan.brands !== null && used.brandCount > plan.brands) {
    throw badRequest(`The ${plan.name} plan allows ${plan.brands} brands and this account has ${used.brandCount}: delete brands first`, undefined, 'plan_below_usage');
  }
  if (plan.members !== null && used.memberCount > plan.members) {
    throw badRequest(`The ${plan.name} plan allows ${plan.members} members and this account has ${used.memberCount}: remove members first`, undefined, 'plan_below_usage');
  }
}

// ---------------------------------------------------------------------------------------------
// Checkout.

const CHECKOUT_PREFIX = 'cs_';
const CHECKOUT_FORMAT = new RegExp(`^${CHECKOUT_PREFIX}[0-9A-Za-z]{${TOKEN_RANDOM_LENGTH}}$`);
export const CHECKOUT_TTL_MS = 60 * 60_000;

/** A checkout for a plan (in a transaction); its page's token is returned here only. */
export async function createCheckout(
  tx: TenantCtx,
  input: { planSlug: string; memberId: string | null; successUrl: string; cancelUrl: string; couponCode: string | null },
): Promise<{ session: CheckoutSession; token: string }> {
  const token = `${CHECKOUT_PREFIX}${randomBase62()}`;
  const now = new Date(tx.services.now());
  const session = await CheckoutSession.query(tx.db)
    .insert({
      accountId: tx.accountId,
      id: newId(ID_PREFIX.checkout),
      tokenHash: hashSecret(token),
      ...input,
      createdAt: now,
      expiresAt: new Date(now.getTime() + CHECKOUT_TTL_MS),
    })
    .returning('*');
  return { session, token };
}

/**
 * A checkout by its page's token, in any account; null when unknown. Not locked: it is read before
 * the transaction that completes it (on Citus the token lookup asks every shard), and checkoutById
 * locks and reads it again there, in its account.
 */
export async function checkoutByToken(ctx: BaseCtx, token: string): Promise<CheckoutSession | null> {
  if (!CHECKOUT_FORMAT.test(token)) return null;
  return (await CheckoutSession.query(ctx.db).where('checkoutSessions.tokenHash', hashSecret(token)).first()) ?? null;
}

/** A checkout of the account by its id, locked (it is in a transaction); null when unknown. */
export async function checkoutById(tx: TenantCtx, id: string): Promise<CheckoutSession | null> {
  return (await CheckoutSession.ofAccount(tx).where('checkoutSessions.id', id).forUpdate().first()) ?? null;
}

// ---------------------------------------------------------------------------------------------
// Subscription changes (the caller holds the current subscription's lock).

/** The period's invoice (none for a free plan); a coupon discounts it and is redeemed with it. */
async function invoice(tx: TenantCtx, subscription: Subscription, plan: PlanConfig, start: Date, end: Date, coupon: CouponConfig | null = null): Promise<void> {
  if (plan.price === 0) return;
  const off = coupon ? coupons.amountOff(coupon, plan) : 0;
  // Numbered per account; the caller holds the subscription's lock, so numbers never race.
  const last = (await tx.db('invoices').where({ accountId: tx.accountId }).max({ n: 'number' }).first()) as { n: number | null };
  const row = await Invoice.query(tx.db)
    .insert({
      accountId: tx.accountId,
      id: newId(ID_PREFIX.invoice),
      subscriptionId: subscription.id,
      number: (last.n ?? 0) + 1,
      status: 'paid',
      planSlug: plan.slug,
      amountDue: plan.price - off,
      amountPaid: plan.price - off,
      currency: plan.currency,
      periodStart: start,
      periodEnd: end,
      createdAt: new Date(tx.services.now()),
    })
    .returning('*');
  if (coupon) await coupons.redeem(tx, coupon, { id: row.id, subscriptionId: subscription.id, planSlug: plan.slug, amountOff: off, currency: plan.currency });
}

/** A new subscription to `plan` from now, and its first invoice (discounted by a coupon). */
export async function start(tx: TenantCtx, plan: PlanConfig, provider: string, coupon: CouponConfig | null = null): Promise<Subscription> {
  const now = new Date(tx.services.now());
  const end = addInterval(now, plan.interval);
  const row = await Subscription.query(tx.db)
    .insert({
      accountId: tx.accountId,
      id: newId(ID_PREFIX.subscription),
      planSlug: plan.slug,
      status: 'active',
      provider,
      currentPeriodStart: now,
      currentPeriodEnd: end,
      cancelAtPeriodEnd: false,
      createdAt: now,
      updatedAt: now,
    })
    .returning('*');
  await invoice(tx, row, plan, now, end, coupon);
  return row;
}

async function patch(tx: TenantCtx, s: Subscription, changes: Partial<Subscription>): Promise<Subscription> {
  const [row] = (await Subscription.ofAccount(tx)
    .where('subscriptions.id', s.id)
    .patch({ ...changes, updatedAt: new Date(tx.services.now()) } as never)
    .returning('*')) as unknown as Subscription[];
  return row!;
}

/** An upgrade takes effect now: a new period on the new plan, invoiced (discounted by a coupon); a scheduled change or cancellation is dropped. */
export async function switchNow(tx: TenantCtx, s: Subscription, plan: PlanConfig, coupon: CouponConfig | null = null): Promise<Subscription> {
  const now = new Date(tx.services.now());
  const end = addInterval(now, plan.interval);
  const row = await patch(tx, s, {
    planSlug: plan.slug,
    currentPeriodStart: now,
    currentPeriodEnd: end,
    cancelAtPeriodEnd: false,
    canceledAt: null,
    pendingPlanSlug: null,
    pendingEffectiveAt: null,
  });
  await invoice(tx, row, plan, now, end, coupon);
  return row;
}

/** A downgrade waits for the end of the period. */
export function schedule(tx: TenantCtx, s: Subscription, plan: PlanConfig): Promise<Subscription> {
  return patch(tx, s, { pendingPlanSlug: plan.slug, pendingEffectiveAt: s.currentPeriodEnd, cancelAtPeriodEnd: false, canceledAt: null });
}

export async function cancel(tx: TenantCtx, s: Subscription, immediate: boolean): Promise<Subscription> {
  const now = new Date(tx.services.now());
  if (immediate) return patch(tx, s, { status: 'canceled', canceledAt: now, endedAt: now, pendingPlanSlug: null, pendingEffectiveAt: null });
  if (s.cancelAtPeriodEnd) throw conflict(`The subscription is already canceled: it ends on ${iso(s.currentPeriodEnd)}`, 'already_canceled');
  return patch(tx, s, { cancelAtPeriodEnd: true, canceledAt: now, pendingPlanSlug: null, pendingEffectiveAt: null });
}

export function reactivate(tx: TenantCtx, s: Subscription): Promise<Subscription> {
  if (!s.cancelAtPeriodEnd) throw conflict('The subscription is not canceled: there is nothing to reactivate', 'not_canceled');
  return patch(tx, s, { cancelAtPeriodEnd: false, canceledAt: null });
}

/** The current plan, kept: no scheduled change, no cancellation. */
export function keep(tx: TenantCtx, s: Subscription): Promise<Subscription> {
  return patch(tx, s, { pendingPlanSlug: null, pendingEffectiveAt: null, cancelAtPeriodEnd: false, canceledAt: null });
}

export function dropPendingChange(tx: TenantCtx, s: Subscription): Promise<Subscription> {
  return patch(tx, s, { pendingPlanSlug: null, pendingEffectiveAt: null });
}

/** The subscription is renewed at the end of its period: the scheduled plan applied, or ended when canceled. */
export async function renew(tx: TenantCtx, s: Subscription): Promise<Subscription> {
  if (s.cancelAtPeriodEnd) return patch(tx, s, { status: 'canceled', endedAt: s.currentPeriodEnd });
  const plan = planOrStub(tx.services.config, s.pendingPlanSlug ?? s.planSlug);
  const startAt = new Date(s.currentPeriodEnd);
  const end = addInterval(startAt, plan.interval);
  const row = await patch(tx, s, { planSlug: plan.slug, currentPeriodStart: startAt, currentPeriodEnd: end, pendingPlanSlug: null, pendingEffectiveAt: null });
  await invoice(tx, row, plan, startAt, end);
  return row;
}

/**
 * Up to `limit` current local subscriptions whose period ended by `now`, of every account, locked
 * (SKIP LOCKED); a provider renews its own. A look-out reads them without a lock, then each
 * account's are locked by a statement that names the account (a locking read across accounts is
 * refused on a cluster distributed by account), testing the condition again.
 */
export async function dueForRenewal(tx: BaseCtx, now: Date, limit: number): Promise<Subscription[]> {
  const due = (q: QueryBuilder<Subscription, Subscription[]>) => q.where('provider', 'local').whereNull('endedAt').where('currentPeriodEnd', '<=', now);
  const seen = await due(Subscription.query(tx.db)).orderBy(['currentPeriodEnd', 'accountId']).limit(limit).select('accountId');
  const accounts = [...new Set(seen.map((s) => s.accountId))];
  const locked: Subscription[] = [];
  for (const accountId of accounts)
    locked.push(
      ...(await due(Subscription.ofAccount({ db: tx.db, accountId }))
        .forUpdate()
        .skipLocked()),
    );
  return locked.sort((a, b) => new Date(a.currentPeriodEnd).getTime() - new Date(b.currentPeriodEnd).getTime()).slice(0, limit);
}

export async function invoices(ctx: TenantCtx, limit: number): Promise<{ invoices: InvoiceView[]; hasMore: boolean }> {
  const rows = await Invoice.ofAccount(ctx)
    .orderBy('invoices.number', 'desc')
    .limit(limit + 1);
  return {
    invoices: rows.slice(0, limit).map((i) => ({
      id: i.id,
      object: 'invoice',
      number: `${String(i.number).padStart(6, '0')}`,
      status: i.status,
      planId: i.planSlug,
      amountDue: Number(i.amountDue),
      amountPaid: Number(i.amountPaid),
      currency: i.currency,
      created: iso(i.createdAt)!,
      periodStart: iso(i.periodStart)!,
      periodEnd: iso(i.periodEnd)!,
      invoiceUrl: null,
      invoicePdf: null,
    })),
    hasMore: rows.length > limit,
  };
}

/** The operator's override of an account's plan (`ticketd accounts plan`), over any subscription; null removes it. False when the account does not exist. */
export async function setAccountPlan(ctx: BaseCtx, accountId: string, planSlug: string | null): Promise<boolean> {
  return (
    (await ctx
      .db('accounts')
      .where({ id: accountId })
      .update({ planSlug, updatedAt: new Date(ctx.services.now()) })) === 1
  );
}
