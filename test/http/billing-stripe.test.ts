import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { assertErrorShape, client, emptyDir, makeBrand, servicesOf, testApp, testConfig } from '../helpers/app.js';
import { FAKE_STRIPE_KEY, FAKE_WEBHOOK_SECRET, fakeStripe } from '../helpers/fake-stripe.js';
import { DASHBOARD, SIGN_IN_TEST_ENV, teamOfThree } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// The stripe billing provider, driven through the real `stripe` client against a loopback server
// that answers like Stripe's API: checkout, confirm and the completion notification racing, plan
// changes on a Stripe subscription, cancel and reactivate, payment methods, invoices, and Stripe's
// signed notifications (forged, stale and replayed ones change nothing).

const plan = (slug: string, name: string, price: number, limits: { brands: number | null; members: number | null }) => ({
  slug,
  name,
  price,
  currency: 'usd',
  interval: 'month',
  ticketsPerPeriod: null,
  brands: limits.brands,
  members: limits.members,
  customDomain: price > 0,
  ...(price > 0 ? { stripePriceId: `price_${slug}_${price}` } : {}),
});
const PLANS = [
  plan('free', 'Free', 0, { brands: 1, members: 3 }),
  plan('starter', 'Starter', 900, { brands: 2, members: 5 }),
  plan('pro', 'Pro', 2900, { brands: null, members: null }),
];
const configFile = path.join(emptyDir, `billing-stripe-${process.pid}.json`);
writeFileSync(configFile, JSON.stringify({ defaultPlan: 'free', plans: PLANS }));

const clock = () => testNow();
const stripe = await fakeStripe({ now: clock });
t.teardown(() => stripe.close());
const env = {
  ...SIGN_IN_TEST_ENV,
  TICKETD_CONFIG: configFile,
  TICKETD_BILLING_PROVIDER: 'stripe',
  TICKETD_STRIPE_SECRET_KEY: FAKE_STRIPE_KEY,
  TICKETD_STRIPE_WEBHOOK_SECRET: FAKE_WEBHOOK_SECRET,
  TICKETD_STRIPE_API_URL: stripe.url,
};
const { app, db } = await testApp(t, env, { clock });
const services = servicesOf(db);
const anonymous = client(app);
const success = { successUrl: `${DASHBOARD}/billing?upgraded=true`, cancelUrl: `${DASHBOARD}/billing` };
const team = () => teamOfThree(app, services);

async function deliver(event: { body: string; headers: Record<string, string> }) {
  const res = await app.inject({ method: 'POST', url: '/v1/billing/stripe-webhooks', payload: event.body, headers: event.headers });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

const requestsTo = (method: string, pathPrefix: string) => stripe.requests.filter((r) => r.method === method && r.path.startsWith(pathPrefix));

/** A team subscribed to Starter through Stripe's checkout: the customer paid, then confirmed. */
async function subscribed(planId = 'starter') {
  const org = await team();
  const started = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId, ...success });
  stripe.completeCheckout(started.body.checkoutSessionId);
  const confirmed = await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: started.body.checkoutSessionId });
  const row = await db('subscriptions').where({ account_id: org.owner.accountId }).first();
  const customer = (await db('billing_customers').where({ account_id: org.owner.accountId }).first()).customerRef as string;
  return { org, checkoutSessionId: started.body.checkoutSessionId as string, subscription: confirmed.body.subscription, stripeId: row.providerRef as string, customer };
}

t.test('the configuration: stripe needs its keys and a price on every paid plan', async (t) => {
  t.same((await anonymous('GET', '/v1/billing/config')).body, { provider: 'stripe', checkoutMode: 'redirect' });
  const bare = path.join(emptyDir, `billing-stripe-bare-${process.pid}.json`);
  writeFileSync(bare, JSON.stringify({ defaultPlan: 'free', plans: PLANS.map(({ stripePriceId, ...p }) => (p.slug === 'pro' ? p : { ...p, stripePriceId })) }));
  t.throws(
    () => testConfig({ TICKETD_CONFIG: bare, TICKETD_BILLING_PROVIDER: 'stripe' }),
    /stripe\.secretKey.*required[\s\S]*stripe\.webhookSecret.*required[\s\S]*pro is paid and names no stripePriceId/,
  );
  t.throws(() => testConfig({ TICKETD_BILLING_PROVIDER: 'paypal' }), /billingProvider/);
});

t.test('every billing route of the interface is in the OpenAPI document', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
  const routes = [
    'get /v1/auth/plans',
    'get /v1/auth/coupons',
    'patch /v1/auth/coupons/{code}',
    'get /v1/auth/subscription',
    'get /v1/auth/usage',
    'post /v1/auth/subscription/upgrade',
    'post /v1/auth/subscription/cancel-pending-change',
    'post /v1/auth/subscription/cancel',
    'post /v1/auth/subscription/reactivate',
    'post /v1/auth/subscription/confirm',
    'get /v1/auth/invoices',
    'get /v1/auth/subscription/history',
    'get /v1/auth/payment-methods/client-token',
    'get /v1/auth/payment-methods',
    'post /v1/auth/payment-methods/add',
    'post /v1/auth/payment-methods/{id}/default',
    'delete /v1/auth/payment-methods/{id}',
    'get /v1/billing/config',
    'post /v1/billing/stripe-webhooks',
  ];
  t.same(
    routes.filter((r) => {
      const [method, url] = r.split(' ');
      return !doc.paths[url!]?.[method!];
    }),
    [],
  );
});

t.test('upgrade: a Stripe Checkout Session for the plan, with the customer made once', async (t) => {
  const org = await team();
  assertErrorShape(t, await org.asMember('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success }), 403, 'insufficient_role');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'gold', ...success }), 400, 'unknown_plan');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success, couponCode: 'X' }), 400, 'coupon_not_supported');
  const before = stripe.requests.length;
  assertErrorShape(
    t,
    await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', successUrl: 'https://evil.example/x', cancelUrl: success.cancelUrl }),
    400,
    'url_not_allowed',
  );
  t.equal(stripe.requests.length, before, 'refused before Stripe is asked anything');

  const started = await org.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  t.equal(started.status, 200);
  t.match(started.body, { url: /^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_/, checkoutSessionId: /^cs_test_/, expiresAt: String });
  const session = stripe.sessions.get(started.body.checkoutSessionId)!;
  t.match(session, {
    mode: 'subscription',
    client_reference_id: org.owner.accountId,
    metadata: { accountId: org.owner.accountId, plan: 'starter' },
    line_items: [{ price: 'price_starter_900', quantity: '1' }],
    success_url: success.successUrl,
    cancel_url: success.cancelUrl,
  });
  const again = await org.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success });
  t.not(again.body.checkoutSessionId, started.body.checkoutSessionId, 'another checkout');
  const customers = await db('billing_customers').where({ account_id: org.owner.accountId });
  t.equal(customers.length, 1, 'one Stripe customer per account');
  t.equal(stripe.sessions.get(again.body.checkoutSessionId)!.customer, customers[0].customerRef);
  t.equal(requestsTo('POST', '/v1/customers').length >= 1, true);
  t.ok(
    requestsTo('POST', '/v1/').every((r) => r.idempotencyKey),
    'every create carries an idempotency key',
  );
  t.same((await org.asOwner('GET', '/v1/auth/subscription')).body, { subscription: null }, 'nothing until the customer pays');

  const fresh = await team();
  // Made to overlap at Stripe: on a busy machine one upgrade could otherwise finish before the other starts.
  stripe.meetAt(2, 'POST', '/v1/checkout/sessions');
  const both = await Promise.all([
    fresh.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success }),
    fresh.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success }),
  ]);
  t.same(
    both.map((r) => r.status),
    [200, 200],
  );
  t.equal(both[0]!.body.checkoutSessionId, both[1]!.body.checkoutSessionId, 'two upgrades at once: one Stripe checkout');
  t.equal((await db('checkout_sessions').where({ account_id: fresh.owner.accountId })).length, 1, 'recorded once');
  t.equal((await db('audit_log').where({ account_id: fresh.owner.accountId, event: 'checkout.created' })).length, 1, 'audited once');
  t.equal((await db('billing_customers').where({ account_id: fresh.owner.accountId })).length, 1);
});

t.test('confirm: refused until paid and for another account; the notification and confirm racing make one subscription', async (t) => {
  const org = await team();
  const other = await team();
  const started = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  const id = started.body.checkoutSessionId as string;
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: id }), 400, 'checkout_not_complete');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/confirm', { planRef: 'starter' }), 400, 'payment_required');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/confirm', { planRef: 'gold' }), 400, 'unknown_plan');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/confirm', {}), 400, 'plan_required');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: id, planRef: 'pro' }), 400, 'unknown_plan');
  assertErrorShape(t, await org.asMember('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: id }), 403, 'insufficient_role');

  const stripeSub = stripe.completeCheckout(id);
  assertErrorShape(t, await other.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: id }), 404, 'not_found');
  t.same((await other.asOwner('GET', '/v1/auth/subscription')).body, { subscription: null }, "another account's checkout is not its own");

  const event = stripe.event('checkout.session.completed', stripe.sessions.get(id)!);
  const [confirmed, notified, confirmedAgain] = await Promise.all([
    org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: id }),
    deliver(event),
    org.asAdmin('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: id, planRef: 'starter' }),
  ]);
  t.equal(confirmed.status, 200);
  t.equal(confirmedAgain.status, 200);
  t.same(notified.body, { received: true, action: 'applied' });
  const rows = await db('subscriptions').where({ account_id: org.owner.accountId });
  t.equal(rows.length, 1, 'one subscription');
  t.match(rows[0], { provider: 'stripe', providerRef: stripeSub.id, planSlug: 'starter', status: 'active' });
  t.equal(confirmed.body.subscription.id, rows[0].id);
  t.equal(confirmedAgain.body.subscription.id, rows[0].id);
  t.match((await org.asMember('GET', '/v1/auth/subscription')).body.subscription, {
    planId: 'starter',
    planPrice: 900,
    status: 'active',
    cancelAtPeriodEnd: false,
    currentPeriodStart: new Date(stripeSub.items.data[0].current_period_start * 1000).toISOString(),
    currentPeriodEnd: new Date(stripeSub.items.data[0].current_period_end * 1000).toISOString(),
  });
  t.match((await org.asOwner('GET', '/v1/auth/usage')).body, { planId: 'starter', brandLimit: 2 });
  t.same((await deliver(event)).body, { received: true, action: 'duplicate' }, 'a replayed event changes nothing');
  const created = await db('audit_log').where({ account_id: org.owner.accountId, event: 'subscription.created' });
  t.equal(created.length, 1, 'created once');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success }), 400, 'already_on_plan');
});

t.test('the completion notification alone subscribes the account, as the system', async (t) => {
  const org = await team();
  const started = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success });
  stripe.completeCheckout(started.body.checkoutSessionId);
  t.same((await deliver(stripe.event('checkout.session.completed', stripe.sessions.get(started.body.checkoutSessionId)!))).body, { received: true, action: 'applied' });
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, { planId: 'pro', status: 'active' });
  t.match(await db('audit_log').where({ account_id: org.owner.accountId, event: 'subscription.created' }), [{ performerType: 'system', performerName: 'stripe', brandId: null }]);
  const confirmed = await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: started.body.checkoutSessionId });
  t.equal(confirmed.status, 200, 'a later confirm answers the same subscription');
  t.equal((await db('subscriptions').where({ account_id: org.owner.accountId })).length, 1);
});

t.test('plan changes on a Stripe subscription: dearer now (prorated), cheaper at the period end, concurrent upgrades once', async (t) => {
  const { org, stripeId } = await subscribed('starter');
  // Both upgrades reach Stripe before either is answered: concurrent however busy the machine.
  stripe.meetAt(2, 'POST', `/v1/subscriptions/${stripeId}`);
  const [a, b] = await Promise.all([
    org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success }),
    org.asAdmin('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success }),
  ]);
  t.same([a.status, b.status], [200, 200]);
  t.match(a.body, { url: success.successUrl, checkoutSessionId: null, expiresAt: null, subscription: { planId: 'pro', pendingPlanId: null } });
  const sub = stripe.subscriptions.get(stripeId)!;
  t.equal(sub.items.data[0].price.id, 'price_pro_2900', "Stripe's price is Pro's");
  const updates = requestsTo('POST', `/v1/subscriptions/${stripeId}`);
  t.equal(new Set(updates.map((u) => u.idempotencyKey)).size, 1, 'the two upgrades asked Stripe with one idempotency key');
  t.match(updates[0]!.params, { proration_behavior: 'always_invoice', items: [{ price: 'price_pro_2900' }] });
  t.equal((await db('audit_log').where({ account_id: org.owner.accountId, event: 'subscription.updated' })).length, 1, 'one plan change recorded');
  const invoices = (await org.asMember('GET', '/v1/auth/invoices?limit=10')).body;
  t.equal(invoices.invoices.length, 2, "Stripe's invoices: the first period and the proration");
  t.match(invoices.invoices[0], {
    object: 'invoice',
    status: 'paid',
    planId: 'pro',
    amountPaid: 2900,
    currency: 'usd',
    invoiceUrl: /^https:\/\/invoice\.stripe\.test\//,
    invoicePdf: /\/pdf$/,
  });
  t.match((await org.asMember('GET', '/v1/auth/invoices?limit=1')).body, { invoices: [{}], hasMore: true });

  // Cheaper: refused below usage, else Stripe's next renewal bills it while the account keeps Pro.
  await makeBrand(org.owner.live, 'Second');
  await makeBrand(org.owner.live, 'Third');
  const before = stripe.requests.length;
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success }), 400, 'plan_below_usage');
  t.equal(stripe.requests.length, before, 'Stripe is not asked');
  const brands = (await org.owner.live('GET', '/v1/brands')).body as { id: string }[];
  await org.owner.live('DELETE', `/v1/brands/${brands[2]!.id}?confirm=true`);
  const down = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  t.equal(down.status, 200);
  t.match(down.body.subscription, { planId: 'pro', pendingPlanId: 'starter', pendingEffectiveAt: down.body.subscription.currentPeriodEnd });
  t.equal(sub.items.data[0].price.id, 'price_starter_900');
  t.match(requestsTo('POST', `/v1/subscriptions/${stripeId}`).at(-1)!.params, { proration_behavior: 'none' });
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'free', ...success }), 400, 'cancel_instead');

  t.equal((await org.asOwner('POST', '/v1/auth/subscription/cancel-pending-change')).status, 200);
  t.equal(sub.items.data[0].price.id, 'price_pro_2900', "Stripe's price back to Pro");
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, { planId: 'pro', pendingPlanId: null });
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/cancel-pending-change'), 404, 'not_found');

  // Scheduled again; Stripe renews the period and says so: the account is on Starter from then.
  await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  const updated = stripe.event('customer.subscription.updated', sub);
  t.same((await deliver(updated)).body, { received: true, action: 'ignored' }, 'the same period: nothing changes');
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, { planId: 'pro', pendingPlanId: 'starter' });
  stripe.renew(stripeId);
  t.same((await deliver(stripe.event('customer.subscription.updated', sub))).body, { received: true, action: 'applied' });
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, {
    planId: 'starter',
    pendingPlanId: null,
    currentPeriodStart: new Date(sub.items.data[0].current_period_start * 1000).toISOString(),
  });
});

t.test('cancel and reactivate through Stripe: twice is 409, without a subscription 404', async (t) => {
  const { org, stripeId } = await subscribed('starter');
  const sub = stripe.subscriptions.get(stripeId)!;
  assertErrorShape(t, await org.asMember('POST', '/v1/auth/subscription/cancel', {}), 403, 'insufficient_role');
  const canceled = await org.asOwner('POST', '/v1/auth/subscription/cancel', {});
  t.equal(canceled.status, 200);
  t.match(canceled.body, { success: true, message: /ends on/, endsAt: new Date(sub.items.data[0].current_period_end * 1000).toISOString() });
  t.equal(sub.cancel_at_period_end, true);
  const calls = stripe.requests.length;
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/cancel', {}), 409, 'already_canceled');
  t.equal(stripe.requests.length, calls, 'the second cancel asks Stripe nothing');
  t.equal((await org.asOwner('POST', '/v1/auth/subscription/reactivate')).status, 200);
  t.equal(sub.cancel_at_period_end, false);
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/reactivate'), 409, 'not_canceled');

  const now = await org.asOwner('POST', '/v1/auth/subscription/cancel', { immediate: true });
  t.match(now.body, { success: true, message: 'The subscription has ended' });
  t.equal(sub.status, 'canceled');
  t.same((await org.asOwner('GET', '/v1/auth/subscription')).body, { subscription: null });
  t.match((await org.asOwner('GET', '/v1/auth/subscription/history')).body.subscriptions, [{ status: 'canceled', planId: 'starter', endedAt: String }]);
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/cancel', {}), 404, 'not_found');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/reactivate'), 404, 'not_found');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/cancel-pending-change'), 404, 'not_found');
});

t.test("payment methods: Stripe's cards of the customer; the default and the last one stay", async (t) => {
  const fresh = await team();
  t.same((await fresh.asMember('GET', '/v1/auth/payment-methods')).body, { paymentMethods: [] }, 'no customer yet: none');
  t.same((await fresh.asMember('GET', '/v1/auth/invoices')).body, { invoices: [], hasMore: false });
  assertErrorShape(t, await fresh.asMember('GET', '/v1/auth/payment-methods/client-token'), 403, 'insufficient_role');
  assertErrorShape(t, await fresh.asMember('POST', '/v1/auth/payment-methods/add'), 403, 'insufficient_role');

  const { org, customer } = await subscribed('starter');
  const token = await org.asOwner('GET', '/v1/auth/payment-methods/client-token');
  t.match(token.body, { provider: 'stripe', token: /^seti_\w+_secret_\w+$/, expiresAt: String });
  const added = await org.asAdmin('POST', '/v1/auth/payment-methods/add');
  t.match(added.body, { provider: 'stripe', embedToken: /^seti_\w+_secret_\w+$/, setupIntentId: /^seti_/ });

  const listed = (await org.asMember('GET', '/v1/auth/payment-methods')).body.paymentMethods;
  t.match(listed, [{ id: /^pm_/, brand: 'visa', last4: '4242', expMonth: 12, expYear: 2030, isDefault: true }], 'the card paid with at checkout');
  const first = listed[0].id as string;
  const second = stripe.attachCard(customer, { brand: 'mastercard', last4: '4444' }, false);
  const foreign = stripe.attachCard((await subscribed('starter')).customer);

  assertErrorShape(t, await org.asOwner('POST', `/v1/auth/payment-methods/${foreign.id}/default`), 404, 'not_found');
  assertErrorShape(t, await org.asOwner('DELETE', `/v1/auth/payment-methods/${foreign.id}`), 404, 'not_found');
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/payment-methods/pm_unknown/default'), 404, 'not_found');
  assertErrorShape(t, await org.asMember('POST', `/v1/auth/payment-methods/${second.id}/default`), 403, 'insufficient_role');
  assertErrorShape(t, await org.asOwner('DELETE', `/v1/auth/payment-methods/${first}`), 400, 'default_payment_method');

  t.same((await org.asOwner('POST', `/v1/auth/payment-methods/${second.id}/default`)).body, { success: true });
  t.equal(stripe.customers.get(customer)!.invoice_settings.default_payment_method, second.id);
  t.same((await org.asOwner('DELETE', `/v1/auth/payment-methods/${first}`)).body, { success: true });
  t.match((await org.asOwner('GET', '/v1/auth/payment-methods')).body.paymentMethods, [{ id: second.id, isDefault: true }]);
  t.equal(stripe.paymentMethods.get(foreign.id)!.customer !== null, true, "another account's card untouched");

  stripe.customers.get(customer)!.invoice_settings.default_payment_method = null;
  assertErrorShape(t, await org.asOwner('DELETE', `/v1/auth/payment-methods/${second.id}`), 400, 'last_payment_method');
  t.equal(stripe.paymentMethods.get(second.id)!.customer, customer, 'still attached');
  t.match(await db('audit_log').where({ account_id: org.owner.accountId, entity_type: 'payment_method' }).orderBy('id'), [
    { event: 'payment_method.default_set', entityId: second.id },
    { event: 'payment_method.removed', entityId: first },
  ]);
});

t.test("Stripe's notifications: forged, stale and replayed ones change nothing; payment failures mark past_due", async (t) => {
  const { org, stripeId, customer } = await subscribed('starter');
  const invoice = [...stripe.invoices.values()].find((i) => i.customer === customer)!;
  const failed = stripe.event('invoice.payment_failed', { ...invoice, status: 'open', amount_paid: 0 });

  const forged = stripe.event('invoice.payment_failed', invoice, { secret: 'whsec_not_the_right_one_at_all' });
  assertErrorShape(t, await deliver(forged), 400, 'invalid_signature');
  const unsigned = await app.inject({ method: 'POST', url: '/v1/billing/stripe-webhooks', payload: failed.body, headers: { 'content-type': 'application/json' } });
  t.equal(unsigned.statusCode, 400);
  t.equal(unsigned.json().code, 'invalid_signature');
  const stale = stripe.event('invoice.payment_failed', invoice, { timestamp: Math.floor(clock() / 1000) - 600 });
  assertErrorShape(t, await deliver(stale), 400, 'invalid_signature');
  const tampered = await app.inject({
    method: 'POST',
    url: '/v1/billing/stripe-webhooks',
    payload: failed.body.replace('invoice.payment_failed', 'invoice.paid'),
    headers: failed.headers,
  });
  t.equal(tampered.statusCode, 400, 'a body changed after signing');
  t.equal((await db('billing_events').whereIn('event_id', [forged.id, stale.id, failed.id])).length, 0, 'refused events are not recorded');
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, { status: 'active' }, 'nothing changed');

  t.same((await deliver(failed)).body, { received: true, action: 'applied' });
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, { status: 'past_due' });
  t.same((await deliver(failed)).body, { received: true, action: 'duplicate' });
  t.same((await deliver(stripe.event('invoice.paid', invoice))).body, { received: true, action: 'applied' });
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, { status: 'active' });
  t.match(
    await db('audit_log')
      .where({ account_id: org.owner.accountId, entity_type: 'subscription' })
      .whereIn('event', ['subscription.payment_failed', 'subscription.payment_succeeded'])
      .orderBy('id'),
    [
      { event: 'subscription.payment_failed', performerType: 'system' },
      { event: 'subscription.payment_succeeded', performerType: 'system' },
    ],
  );

  t.same((await deliver(stripe.event('customer.created', { id: 'cus_x', object: 'customer' }))).body, { received: true, action: 'ignored' });
  const strangers = stripe.event('invoice.payment_failed', { ...invoice, customer: 'cus_nobody' });
  t.same((await deliver(strangers)).body, { received: true, action: 'ignored' }, 'a customer of no account here');

  const sub = stripe.subscriptions.get(stripeId)!;
  Object.assign(sub, { status: 'canceled', ended_at: Math.floor(clock() / 1000) });
  t.same((await deliver(stripe.event('customer.subscription.deleted', sub))).body, { received: true, action: 'applied' });
  t.same((await org.asOwner('GET', '/v1/auth/subscription')).body, { subscription: null }, 'ended at Stripe: ended here');
  t.match((await org.asOwner('GET', '/v1/auth/subscription/history')).body.subscriptions, [{ status: 'canceled', endedAt: String }]);
});

t.test('two checkouts paid: the second is not taken (409 to confirm; the notification is answered, so Stripe stops retrying)', async (t) => {
  const org = await team();
  const other = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'pro', ...success });
  const third = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  stripe.completeCheckout(other.body.checkoutSessionId);
  stripe.completeCheckout(third.body.checkoutSessionId);
  t.equal((await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: other.body.checkoutSessionId })).status, 200);
  assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: third.body.checkoutSessionId }), 409, 'already_subscribed');
  t.same((await deliver(stripe.event('checkout.session.completed', stripe.sessions.get(third.body.checkoutSessionId)!))).body, { received: true, action: 'ignored' });
  t.match((await org.asOwner('GET', '/v1/auth/subscription')).body.subscription, { planId: 'pro' });
  t.equal((await db('subscriptions').where({ account_id: org.owner.accountId })).length, 1);
});

t.test("ticketd's renewal job leaves Stripe's subscriptions to Stripe", async (t) => {
  const { org } = await subscribed('starter');
  const before = await db('subscriptions').where({ account_id: org.owner.accountId }).first();
  const quiet = { info: () => undefined, error: () => undefined };
  const dispatcher = new Dispatcher(services, quiet, null, { now: () => testNow() + 40 * 86_400_000 });
  try {
    await dispatcher.tick();
  } finally {
    await dispatcher.stop();
  }
  t.same(await db('subscriptions').where({ account_id: org.owner.accountId }).first(), before, 'not renewed here');
  t.equal((await db('invoices').where({ account_id: org.owner.accountId })).length, 0, 'no local invoice');
});

t.test('Stripe failing is 502 provider_error, and nothing is kept', async (t) => {
  const org = await team();
  stripe.failNext(100);
  try {
    assertErrorShape(t, await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success }), 502, 'provider_error');
  } finally {
    stripe.failNext(0);
  }
  t.equal((await db('checkout_sessions').where({ account_id: org.owner.accountId })).length, 0);
  t.equal((await db('billing_customers').where({ account_id: org.owner.accountId })).length, 0);
});

t.test('a free plan needs no payment: the local provider moves the account to it', async (t) => {
  const org = await team();
  const confirmed = await org.asOwner('POST', '/v1/auth/subscription/confirm', { planRef: 'free' });
  t.equal(confirmed.status, 200);
  t.match(confirmed.body.subscription, { planId: 'free' });
  t.equal((await db('subscriptions').where({ account_id: org.owner.accountId }).first()).provider, 'local');
  // Then paying for Starter through Stripe ends the local subscription.
  const started = await org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId: 'starter', ...success });
  t.match(started.body, { checkoutSessionId: /^cs_test_/ });
  stripe.completeCheckout(started.body.checkoutSessionId);
  const paid = await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: started.body.checkoutSessionId });
  t.match(paid.body.subscription, { planId: 'starter' });
  t.match(await db('subscriptions').where({ account_id: org.owner.accountId }).orderBy('id'), [
    { provider: 'local', status: 'canceled', endedAt: Date },
    { provider: 'stripe', status: 'active', endedAt: null },
  ]);
});
