import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { assertErrorShape, client, emptyDir, makeBrand, makeTicket, servicesOf, testApp } from '../helpers/app.js';
import { DASHBOARD, SIGN_IN_TEST_ENV, teamOfThree } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Plans and the local billing provider: GET /v1/auth/plans, /v1/billing/config, the subscription
// routes under /v1/auth (subscription, usage, upgrade, confirm, cancel, reactivate,
// cancel-pending-change, history, invoices, payment methods), the checkout page, renewal, and the
// brand and member limits of a plan.

const plan = (slug: string, name: string, price: number, limits: { tickets: number | null; brands: number | null; members: number | null }) => ({
  slug,
  name,
  price,
  currency: 'usd',
  interval: 'month',
  ticketsPerPeriod: limits.tickets,
  brands: limits.brands,
  members: limits.members,
  customDomain: price > 0,
});
const configFile = path.join(emptyDir, `billing-${process.pid}.json`);
writeFileSync(
  configFile,
  JSON.stringify({
    defaultPlan: 'free',
    plans: [
      plan('pro', 'Pro', 2900, { tickets: null, brands: 10, members: null }),
      plan('free', 'Free', 0, { tickets: 50, brands: 2, members: 3 }),
      plan('starter', 'Starter', 900, { tickets: 1000, brands: 3, members: 5 }),
    ],
  }),
);

const DAY = 86_400_000;
let ahead = 0;
const clock = () => testNow() + ahead;
const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_CONFIG: configFile }, { clock });
const services = servicesOf(db);
const anonymous = client(app);
const success = { successUrl: `${DASHBOARD}/billing?upgraded=true`, cancelUrl: `${DASHBOARD}/billing` };

/** A new organization (owner, admin, member, one brand: on the Free plan's limits of members). */
const team = () => teamOfThree(app, services);

async function renewalTick(): Promise<number> {
  const quiet = { info: () => undefined, error: () => undefined };
  const dispatcher = new Dispatcher(services, quiet, null, { now: clock });
  try {
    return (await dispatcher.tick()).renewedSubscriptions;
  } finally {
    await dispatcher.stop();
  }
}

/** Follows an upgrade's checkout page the way a browser does: open it, press Confirm. */
async function checkoutInBrowser(url: string) {
  const pathOnly = new URL(url).pathname;
  const page = await app.inject({ method: 'GET', url: pathOnly });
  const confirmed = await app.inject({ method: 'POST', url: pathOnly });
  return { page, confirmed };
}

t.test('plans and the billing configuration are public', async (t) => {
  const plans = await anonymous('GET', '/v1/auth/plans');
  t.equal(plans.status, 200);
  t.same(
    plans.body.plans.map((p: { id: string }) => p.id),
    ['free', 'starter', 'pro'],
    'cheapest first',
  );
  t.same(plans.body.plans[1], {
    id: 'starter',
    object: 'plan',
    slug: 'starter',
    name: 'Starter',
    price: 900,
    currency: 'usd',
    interval: 'month',
    entitlements: { tickets_per_period: 1000, brands_limit: 3, members_limit: 5, custom_domain: true, recurring_tickets: true },
  });
  t.equal(plans.body.plans[2].entitlements.tickets_per_period, -1, 'unlimited is -1');
  t.same((await anonymous('GET', '/v1/billing/config')).body, { provider: 'local', checkoutMode: 'redirect' });
  const stripeNotification = await app.inject({ method: 'POST', url: '/v1/billing/stripe-webhooks', payload: '{}', headers: { 'content-type': 'application/json' } });
  assertErrorShape(t, { status: stripeNotification.statusCode, body: stripeNotification.json(), headers: stripeNotification.headers }, 404, 'not_found');
});

t.test('on the default plan: no subscription; usage counts live tickets of the period, brands and members', async (t) => {
  const org = await team();
  t.same((await org.asMember('GET', '/v1/auth/subscription')).body, { subscription: null });
  await makeTicket(org.owner.live, org.base, { title: 'One' });
  const spam = await makeTicket(org.owner.live, org.base, { title: 'Two' });
  await org.owner.live('POST', `${org.base}/tickets/${spam.id}/spam`, { isSpam: true });
  const testBrand = await makeBrand(org.owner.test, 'Sandbox');
  await makeTicket(org.owner.test, `/v1/brands/${testBrand.id}`, { title: 'Test mode' });
  const usage = await org.asMember('GET', '/v1/auth/usage');
  t.equal(usage.status, 200);
  const monthStart = new Date(Date.UTC(new Date(testNow()).getUTCFullYear(), new Date(testNow()).getUTCMonth(), 1)).toISOString();
  t.same(usage.body, {
    ticketCount: 1,
    brandCount: 1,
    memberCount: 3,
    billingPeriodStart: monthStart,
    billingPeriodEnd: usage.body.billingPeriodEnd,
    planId: 'free',
    planName: 'Free',
    planLimit: 50,
    brandLimit: 2,
    memberLimit: 3,
    storageBytes: 0,
  });
  t.equal((await org.owner.live('GET', '/v1/auth/usage')).status, 401, 'session routes: an API key is not a session');
  t.equal((await anonymous('GET', '/v1/auth/subscription')).status, 401);
});

t.test("a plan's brand and member limits hold, also against concurrent creates; test mode is not counted", async (t) => {
  const org = await team();
  const brands = await Promise.all([1, 2, 3].map((n) => org.owner.live('POST', '/v1/brands', { name: `Extra ${n}` })));
  t.same(brands.map((b) => b.status).sort(), [201, 403, 403], 'one more brand fits the Free plan (2), whoever gets there first');
  const refused = brands.find((b) => b.status === 403)!;
  assertErrorShape(t, refused, 403, 'plan_limit_reached');
  t.match(refused.body.message, /Free plan allows 2 brands/);
  t.equal((await org.owner.live('GET', '/v1/brands')).body.length, 2, 'nothing of the refused ones was kept');
  t.equal((await org.owner.test('POST', '/v1/brands', { name: 'Sandbox' })).status, 201, 'test mode brands are free');

  const invite = await org.asOwner('POST', '/v1/auth/members/invite', { email: 'fourth@example.com', role: 'member' }, { origin: DASHBOARD });
  assertErrorShape(t, invite, 403, 'plan_limit_reached');
  t.match(invite.body.message, /Free plan allows 3 members/);
  t.equal((await org.asOwner('GET', '/v1/auth/members')).body.invites.length, 0, 'no invitation kept');
});

t.test('who may change billing: owners and admins; members read; bad requests change nothing', async (t) => {
  const org = await team();
  assertErrorShape(t, await org.asMember('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success }), 403, 'insufficient_role');
  assertErrorShape(t, await org.asMember('POST', '/v1/auth/subscription/confirm', { planRef: 'pro' }), 403, 'insufficient_role');
  assertErrorShape(t, await org.asMember('POST', '/v1/auth/subscription/cancel', {}), 403, 'insufficient_role');
  t.equal((await org.asMember('GET', '/v1/auth/invoices')).status, 200);
  assertErrorShape(t, await org.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'gold', ...success }), 400, 'unknown_plan');
  assertErrorShape(t, await org.asAdmin('POST', '/v1/auth/subscription/upgrade', { ...success }), 400, 'plan_required');
  assertErrorShape(
    t,
    await org.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', successUrl: 'https://evil.example/x', cancelUrl: success.cancelUrl }),
    400,
    'url_not_allowed',
  );
  assertErrorShape(t, await org.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success, couponCode: 'FREE100' }), 400, 'unknown_coupon');
  assertErrorShape(t, await org.asAdmin('POST', '/v1/auth/subscription/confirm', {}), 400, 'plan_required');
  assertErrorShape(t, await org.asAdmin('POST', '/v1/auth/subscription/confirm', { planRef: 'gold' }), 400, 'unknown_plan');
  assertErrorShape(t, await org.asAdmin('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: 'chk_nope' }), 404, 'not_found');
  t.same((await org.asAdmin('GET', '/v1/auth/subscription')).body, { subscription: null }, 'still no subscription');
  t.same((await db('checkout_sessions').where({ account_id: org.owner.accountId })).length, 0, 'no checkout kept');
});

t.test('upgrade through the checkout page: the plan at once, invoiced once, the browser sent back', async (t) => {
  const org = await team();
  const started = await org.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  t.equal(started.status, 200);
  t.match(started.body, { url: /\/billing\/checkout\/cs_\w+$/, checkoutSessionId: /^chk_/, expiresAt: String });
  t.notOk(JSON.stringify(await db('checkout_sessions').where({ account_id: org.owner.accountId })).includes(started.body.url.split('/').pop()), 'the page token is stored hashed');

  const { page, confirmed } = await checkoutInBrowser(started.body.url);
  t.equal(page.statusCode, 200);
  t.match(page.body, /Confirm the Starter plan/);
  t.match(page.headers['content-security-policy'], /default-src 'none'.*form-action 'self' https: http:/, 'no script; the form may lead back to the dashboard');
  t.match(page.body, /9\.00 USD a month/);
  t.equal(confirmed.statusCode, 303);
  t.equal(confirmed.headers.location, success.successUrl);
  const again = await app.inject({ method: 'POST', url: new URL(started.body.url).pathname });
  t.equal(again.statusCode, 303, 'a second confirm goes back too');

  const subscription = (await org.asMember('GET', '/v1/auth/subscription')).body.subscription;
  t.match(subscription, {
    status: 'active',
    planId: 'starter',
    planName: 'Starter',
    planPrice: 900,
    planInterval: 'month',
    planCurrency: 'usd',
    cancelAtPeriodEnd: false,
    pendingPlanId: null,
  });
  t.ok(Date.parse(subscription.currentPeriodEnd) - Date.parse(subscription.currentPeriodStart) >= 28 * DAY, 'a month');
  const invoices = (await org.asMember('GET', '/v1/auth/invoices?limit=10')).body;
  t.equal(invoices.invoices.length, 1, 'invoiced once');
  t.match(invoices.invoices[0], { number: '000001', status: 'paid', planId: 'starter', amountDue: 900, amountPaid: 900, currency: 'usd' });
  t.match((await org.asMember('GET', '/v1/auth/usage')).body, { planId: 'starter', brandLimit: 3, memberLimit: 5, billingPeriodStart: subscription.currentPeriodStart });
  const logs = await db('audit_log').where({ account_id: org.owner.accountId, entity_type: 'subscription' });
  t.match(logs, [{ event: 'subscription.created', performerType: 'user', brandId: null }]);

  assertErrorShape(t, await org.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success }), 400, 'already_on_plan');
  assertErrorShape(t, await anonymous('GET', `/billing/checkout/cs_${'0'.repeat(43)}`), 404, 'not_found');
});

t.test('confirm by the API; a cheaper plan waits for the period end and is refused below usage; renewal applies it', async (t) => {
  const org = await team();
  const pro = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success });
  const mismatched = await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: pro.body.checkoutSessionId, planRef: 'starter' });
  assertErrorShape(t, mismatched, 400, 'unknown_plan');
  const confirmed = await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: pro.body.checkoutSessionId, planRef: 'pro' });
  t.equal(confirmed.status, 200);
  t.match(confirmed.body.subscription, { planRef: 'pro', status: 'active' });
  const replay = await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: pro.body.checkoutSessionId });
  t.equal(replay.body.subscription.id, confirmed.body.subscription.id, 'a replayed confirm answers the same subscription');
  t.equal((await org.asOwner('GET', '/v1/auth/invoices')).body.invoices.length, 1, 'and invoices nothing more');

  await makeBrand(org.owner.live, 'Second');
  await makeBrand(org.owner.live, 'Third');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'free', ...success }), 400, 'plan_below_usage');
  const brands = (await org.owner.live('GET', '/v1/brands')).body as { id: string }[];
  await org.owner.live('DELETE', `/v1/brands/${brands[2]!.id}?confirm=true`);

  const down = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  const scheduled = (await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: down.body.checkoutSessionId })).body.subscription;
  t.match(scheduled, { planId: 'pro', pendingPlanId: 'starter', pendingPlanName: 'Starter', pendingEffectiveAt: scheduled.currentPeriodEnd }, 'still Pro until the period ends');
  t.equal((await org.asOwner('POST', '/v1/auth/subscription/cancel-pending-change')).status, 200);
  t.equal((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription.pendingPlanId, null);
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/cancel-pending-change'), 404, 'not_found');

  const again = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: again.body.checkoutSessionId });
  ahead = 32 * DAY;
  try {
    t.ok((await renewalTick()) >= 1, 'renewed');
  } finally {
    ahead = 0;
  }
  const renewed = (await org.asOwner('GET', '/v1/auth/subscription')).body.subscription;
  t.match(renewed, { planId: 'starter', pendingPlanId: null, currentPeriodStart: scheduled.currentPeriodEnd });
  const invoices = (await org.asOwner('GET', '/v1/auth/invoices?limit=1')).body;
  t.match(invoices, { invoices: [{ number: '000002', planId: 'starter', amountDue: 900 }], hasMore: true });
});

t.test('cancel and reactivate: at the period end or now; twice is 409; without a subscription 404', async (t) => {
  const org = await team();
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/cancel', {}), 404, 'not_found');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/reactivate'), 404, 'not_found');
  await org.asOwner('POST', '/v1/auth/subscription/confirm', { planRef: 'starter' });
  const canceled = await org.asOwner('POST', '/v1/auth/subscription/cancel', {});
  t.equal(canceled.status, 200);
  t.match(canceled.body, { success: true, message: /ends on/, endsAt: String });
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/cancel', {}), 409, 'already_canceled');
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, { status: 'active', cancelAtPeriodEnd: true });
  t.equal((await org.asOwner('POST', '/v1/auth/subscription/reactivate')).status, 200);
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/reactivate'), 409, 'not_canceled');

  const now = await org.asOwner('POST', '/v1/auth/subscription/cancel', { immediate: true });
  t.match(now.body, { success: true, message: 'The subscription has ended' });
  t.same((await org.asOwner('GET', '/v1/auth/subscription')).body, { subscription: null }, 'back on the default plan');
  t.match((await org.asOwner('GET', '/v1/auth/usage')).body, { planId: 'free' });
  const history = (await org.asOwner('GET', '/v1/auth/subscription/history')).body.subscriptions;
  t.match(history, [{ status: 'canceled', planId: 'starter', endedAt: String }]);
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/cancel', {}), 404, 'not_found');

  // Canceled at the period end: renewal ends it.
  await org.asOwner('POST', '/v1/auth/subscription/confirm', { planRef: 'pro' });
  await org.asOwner('POST', '/v1/auth/subscription/cancel', {});
  ahead = 32 * DAY;
  try {
    await renewalTick();
  } finally {
    ahead = 0;
  }
  t.same((await org.asOwner('GET', '/v1/auth/subscription')).body, { subscription: null }, 'ended at the period end');
  t.match((await org.asOwner('GET', '/v1/auth/subscription/history')).body.subscriptions[0], { planId: 'pro', status: 'canceled', endedAt: String });
});

t.test('two confirms at once make one subscription', async (t) => {
  const org = await team();
  const answers = await Promise.all([
    org.asOwner('POST', '/v1/auth/subscription/confirm', { planRef: 'starter' }),
    org.asAdmin('POST', '/v1/auth/subscription/confirm', { planRef: 'starter' }),
  ]);
  t.same(
    answers.map((a) => a.status),
    [200, 200],
  );
  t.equal((await db('subscriptions').where({ account_id: org.owner.accountId })).length, 1, 'one subscription');
  t.equal(answers[0]!.body.subscription.id, answers[1]!.body.subscription.id);
});

t.test('payment methods: none with the local provider', async (t) => {
  const org = await team();
  t.same((await org.asOwner('GET', '/v1/auth/payment-methods')).body, { paymentMethods: [] });
  t.same((await org.asOwner('GET', '/v1/auth/payment-methods/client-token')).body, { provider: 'local', token: null, expiresAt: null });
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/payment-methods/add'), 400, 'not_supported');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/payment-methods/pm_1/default'), 404, 'not_found');
  assertErrorShape(t, await org.asOwner('DELETE', '/v1/auth/payment-methods/pm_1'), 404, 'not_found');
  assertErrorShape(t, await org.asMember('POST', '/v1/auth/payment-methods/add'), 403, 'insufficient_role');
});
