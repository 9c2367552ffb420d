import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { createServices } from '../../server/compose.js';
import { systemCtx } from '../../server/core/context.js';
import type { Db } from '../../server/core/db.js';
import { purgeExpired } from '../../server/domains/billing/signup-checkouts.js';
import { assertErrorShape, client, emptyDir, servicesOf, testApp, testConfig, type Reply } from '../helpers/app.js';
import { FAKE_STRIPE_KEY, FAKE_WEBHOOK_SECRET, fakeStripe } from '../helpers/fake-stripe.js';
import { addressOf, DASHBOARD, deliverMail, from, linkIn, mailsTo } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// POST /v1/auth/checkout: a paid sign-up before any account exists, on the local provider (its
// own checkout page) and on Stripe (a loopback server answering like Stripe's API, and its signed
// notification). Completing it makes the account, owner and subscription and mails one sign-in
// link, however often it is reported; everything a client can get wrong is refused first.

const plan = (slug: string, name: string, price: number) => ({
  slug,
  name,
  price,
  currency: 'usd',
  interval: 'month',
  ticketsPerPeriod: null,
  brands: null,
  members: null,
  customDomain: price > 0,
  ...(price > 0 ? { stripePriceId: `price_${slug}_${price}` } : {}),
});
const configFile = path.join(emptyDir, `checkout-${process.pid}.json`);
writeFileSync(
  configFile,
  JSON.stringify({
    defaultPlan: 'free',
    plans: [plan('free', 'Free', 0), plan('starter', 'Starter', 900), plan('pro', 'Pro', 2900)],
    coupons: [
      { code: 'HALF', percentOff: 50, maxRedemptions: null, plans: ['starter'] },
      { code: 'PROONLY', percentOff: 10, maxRedemptions: null, plans: ['pro'] },
      { code: 'GONE', percentOff: 10, maxRedemptions: 0 },
    ],
  }),
);

const PER_IP = 6;
const PER_EMAIL = 3;
let ahead = 0;
const clock = () => testNow() + ahead;
const stripe = await fakeStripe({ now: clock });
t.teardown(() => stripe.close());
const env = {
  TICKETD_CONFIG: configFile,
  TICKETD_DASHBOARD_ORIGINS: DASHBOARD,
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: String(PER_IP),
  TICKETD_AUTH_RATE_LIMIT_PER_EMAIL_PER_HOUR: String(PER_EMAIL),
};
const stripeEnv = {
  TICKETD_BILLING_PROVIDER: 'stripe',
  TICKETD_STRIPE_SECRET_KEY: FAKE_STRIPE_KEY,
  TICKETD_STRIPE_WEBHOOK_SECRET: FAKE_WEBHOOK_SECRET,
  TICKETD_STRIPE_API_URL: stripe.url,
};

const local = await testApp(t, env, { clock });
const { db, url } = local;
const services = servicesOf(db);

/** Another app on the same database, with another configuration (as another server would be). */
async function appOn(database: Db, extra: Record<string, string>) {
  const config = testConfig({ DATABASE_URL: url, ...env, ...extra });
  const own = createServices({ config, db: database, clock });
  const app = await buildApp({ config, db: database, services: own });
  t.teardown(async () => {
    await app.close();
    await own.close();
  });
  return app;
}
const stripeApp = await appOn(db, stripeEnv);

const urls = { successUrl: `${DASHBOARD}/welcome?paid=true`, cancelUrl: `${DASHBOARD}/pricing` };
let ips = 0;
/** A client address of its own, so budgets of one test never spend another's. */
const freshIp = () => `198.51.100.${++ips}`;

interface Provider {
  name: 'local' | 'stripe';
  app: Awaited<ReturnType<typeof appOn>>;
  /** The customer pays (Stripe) or confirms (local), and the completion is reported once. */
  complete(started: Reply): Promise<Reply>;
}

async function deliver(event: { body: string; headers: Record<string, string> }): Promise<Reply> {
  const res = await stripeApp.inject({ method: 'POST', url: '/v1/billing/stripe-webhooks', payload: event.body, headers: event.headers });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

/** Confirms the local checkout page the way a browser does. */
async function confirmPage(pageUrl: string): Promise<Reply> {
  const res = await local.app.inject({ method: 'POST', url: new URL(pageUrl).pathname });
  return { status: res.statusCode, body: res.body ? (String(res.headers['content-type']).includes('json') ? res.json() : res.body) : undefined, headers: res.headers };
}

const completedEvent = (sessionId: string) => stripe.event('checkout.session.completed', stripe.sessions.get(sessionId)!);

const providers: Provider[] = [
  { name: 'local', app: local.app, complete: (started) => confirmPage(started.body.url) },
  {
    name: 'stripe',
    app: stripeApp,
    async complete(started) {
      if (stripe.sessions.get(started.body.checkoutSessionId)!.status !== 'complete') stripe.completeCheckout(started.body.checkoutSessionId);
      return deliver(completedEvent(started.body.checkoutSessionId));
    },
  },
];

const start = (p: Provider, body: Record<string, unknown>, ip = freshIp(), headers: Record<string, string> = {}) =>
  from(p.app, ip)('POST', '/v1/auth/checkout', body, { origin: DASHBOARD, ...headers });

const membersOf = async (email: string) => db('members').where({ email });

/** The owner follows the newest mailed link: a session, as the dashboard would open it. */
async function signInFromMail(email: string) {
  await deliverMail(services);
  const mails = await mailsTo(services, email);
  const verified = await client(local.app)('POST', '/v1/auth/verify', { token: linkIn(mails.at(-1)!).searchParams.get('token') });
  return { mails, verified, session: client(local.app, verified.body.sessionToken as string) };
}

for (const p of providers) {
  t.test(`${p.name}: a paid sign-up makes the organization, its owner and subscription, and mails the owner a sign-in link`, async (t) => {
    const email = addressOf(`buyer-${p.name}`);
    const started = await start(p, { email: `  ${email.toUpperCase()} `, planId: 'starter', accountName: 'Initech', ...urls });
    t.equal(started.status, 200, JSON.stringify(started.body));
    const expiresIn = Date.parse(started.body.expiresAt) - clock();
    t.ok(Math.abs(expiresIn - 86_400_000) < 60_000, 'valid 24 hours');
    if (p.name === 'local') {
      t.match(started.body, { url: /\/billing\/signup\/su_[0-9A-Za-z]{43}$/, checkoutSessionId: /^suc_/ });
      const page = await local.app.inject({ method: 'GET', url: new URL(started.body.url).pathname });
      t.equal(page.statusCode, 200);
      t.match(page.body, email, 'the page names the address');
      t.match(page.body, /9\.00 USD a month/);
    } else {
      t.match(started.body, { url: /^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_/, checkoutSessionId: /^cs_test_/ });
      const session = stripe.sessions.get(started.body.checkoutSessionId)!;
      t.match(session, {
        mode: 'subscription',
        customer: null,
        customer_email: email,
        line_items: [{ price: 'price_starter_900' }],
        metadata: { plan: 'starter' },
        success_url: urls.successUrl,
        cancel_url: urls.cancelUrl,
      });
      t.match(session.client_reference_id, /^suc_/);
      t.equal(session.metadata.signupCheckoutId, session.client_reference_id);
    }
    t.same(await membersOf(email), [], 'no account before it is paid');

    const done = await p.complete(started);
    if (p.name === 'local') {
      t.equal(done.status, 303);
      t.equal(done.headers.location, urls.successUrl, 'the browser goes back to the dashboard');
    } else t.same(done.body, { received: true, action: 'applied' });

    const [owner, ...more] = await membersOf(email);
    t.equal(more.length, 0);
    t.equal(owner.role, 'owner');
    const { mails, verified, session } = await signInFromMail(email);
    t.equal(mails.length, 1, 'one sign-in mail');
    t.equal(linkIn(mails[0]!).origin, DASHBOARD, 'the link points at the dashboard the checkout came from');
    t.equal(verified.status, 200);
    t.equal(verified.body.organizationId, owner.accountId);
    t.equal(verified.body.orgRole, 'owner');
    t.equal((await session('GET', '/v1/auth/organization')).body.name, 'Initech');
    const subscription = (await session('GET', '/v1/auth/subscription')).body.subscription;
    t.match(subscription, { planId: 'starter', status: 'active', planPrice: 900 });
    const row = await db('subscriptions').where({ account_id: owner.accountId }).first();
    t.equal(row.provider, p.name);
    if (p.name === 'stripe') {
      const sessionObj = stripe.sessions.get(started.body.checkoutSessionId)!;
      t.equal(row.providerRef, sessionObj.subscription, "bound to Stripe's subscription");
      t.equal((await db('billing_customers').where({ account_id: owner.accountId }).first()).customerRef, sessionObj.customer, "and Stripe's customer");
    } else {
      const invoices = (await session('GET', '/v1/auth/invoices?limit=5')).body.invoices;
      t.match(invoices, [{ planId: 'starter', amountPaid: 900 }], 'the first period invoiced');
    }
    const logged = await db('audit_log').where({ account_id: owner.accountId }).pluck('event');
    t.ok(logged.includes('subscription.created') && logged.includes('checkout.completed'), 'audited in the new account');
    const checkout = await db('signup_checkouts').where({ email }).first();
    t.equal(checkout.completedAccountId, owner.accountId);
  });

  t.test(`${p.name}: completion reported again, and twice at once: one account, one mail`, async (t) => {
    const email = addressOf(`twice-${p.name}`);
    const started = await start(p, { email, planRef: 'pro', ...urls });
    t.equal(started.status, 200);
    if (p.name === 'local') {
      const [a, b] = await Promise.all([p.complete(started), p.complete(started)]);
      t.same([a.status, b.status], [303, 303], 'both confirmations go back to the dashboard');
      const again = await p.complete(started);
      t.equal(again.status, 303, 'a reloaded confirmation too');
      const page = await local.app.inject({ method: 'GET', url: new URL(started.body.url).pathname });
      t.match(page.body, /Done/, 'the page says it is done');
    } else {
      stripe.completeCheckout(started.body.checkoutSessionId);
      const event = completedEvent(started.body.checkoutSessionId);
      const other = completedEvent(started.body.checkoutSessionId);
      const answers = await Promise.all([deliver(event), deliver(event), deliver(other)]);
      t.same(
        answers.map((a) => a.status),
        [200, 200, 200],
      );
      t.same(
        answers.map((a) => a.body.action).sort(),
        ['applied', 'duplicate', 'ignored'],
        'one applied; the same event again a duplicate; another event of the same checkout changes nothing',
      );
      t.equal((await deliver(event)).body.action, 'duplicate', 'Stripe re-sending it later');
    }
    const rows = await membersOf(email);
    t.equal(rows.length, 1, 'one account');
    t.equal((await db('subscriptions').where({ account_id: rows[0].accountId })).length, 1, 'one subscription');
    await deliverMail(services);
    t.equal((await mailsTo(services, email)).length, 1, 'one mail');
  });

  t.test(`${p.name}: an address with an account is refused (sign in and upgrade), also when it got one meanwhile`, async (t) => {
    const email = addressOf(`taken-${p.name}`);
    const signedUp = await from(p.app, freshIp())('POST', '/v1/auth/signup', { email }, { origin: DASHBOARD });
    t.equal(signedUp.status, 200);
    const requestsBefore = stripe.requests.length;
    assertErrorShape(t, await start(p, { email: email.toUpperCase(), planId: 'starter', ...urls }), 400, 'email_exists');
    t.equal(stripe.requests.length, requestsBefore, 'Stripe is asked nothing');

    const late = addressOf(`late-${p.name}`);
    const started = await start(p, { email: late, planId: 'starter', ...urls });
    t.equal(started.status, 200);
    t.equal((await from(p.app, freshIp())('POST', '/v1/auth/signup', { email: late }, { origin: DASHBOARD })).status, 200, 'signed up for free meanwhile');
    const done = await p.complete(started);
    if (p.name === 'local') assertErrorShape(t, done, 400, 'email_exists');
    else {
      t.same(done.body, { received: true, action: 'ignored' });
      const sub = stripe.subscriptions.get(stripe.sessions.get(started.body.checkoutSessionId)!.subscription)!;
      t.equal(sub.status, 'canceled', 'the paid Stripe subscription is canceled: it charges no more');
    }
    t.equal((await membersOf(late)).length, 1, 'no second organization');
    const checkout = await db('signup_checkouts').where({ email: late }).first();
    t.match(checkout, { failure: 'email_exists', completedAccountId: null });
    t.ok(checkout.failedAt);
    if (p.name === 'local') assertErrorShape(t, await p.complete(started), 400, 'email_exists');
    else t.equal((await deliver(completedEvent(started.body.checkoutSessionId))).body.action, 'ignored', 'reported again: still refused');
    await deliverMail(services);
    t.equal((await mailsTo(services, late)).length, 1, "only the free sign-up's mail");
  });

  t.test(`${p.name}: URLs and origins off the dashboard are refused before anything is made`, async (t) => {
    const email = addressOf(`origin-${p.name}`);
    const before = stripe.requests.length;
    assertErrorShape(t, await start(p, { email, planId: 'starter', ...urls, successUrl: 'https://evil.example/welcome' }), 400, 'url_not_allowed');
    assertErrorShape(t, await start(p, { email, planId: 'starter', ...urls, cancelUrl: 'javascript:alert(1)' }), 400, 'url_not_allowed');
    assertErrorShape(t, await start(p, { email, planId: 'starter', ...urls }, freshIp(), { origin: 'https://evil.example' }), 400, 'origin_not_allowed');
    t.equal(stripe.requests.length, before, 'Stripe is asked nothing');
    t.equal((await db('signup_checkouts').where({ email })).length, 0);
    const noOrigin = await from(p.app, freshIp())('POST', '/v1/auth/checkout', { email, planId: 'starter', ...urls });
    t.equal(noOrigin.status, 200, 'a caller that sends no Origin (a server) is taken');
  });

  t.test(`${p.name}: bad input is 400 validation_failed; unknown, missing and free plans are refused`, async (t) => {
    const email = addressOf(`input-${p.name}`);
    for (const body of [
      { planId: 'starter', ...urls },
      { email: 'not an address', planId: 'starter', ...urls },
      { email, planId: 'starter', successUrl: urls.successUrl },
      { email, planId: 'starter', ...urls, surprise: true },
      { email, planId: 'starter', ...urls, accountName: '   ' },
    ]) {
      assertErrorShape(t, await start(p, body), 400, 'validation_failed');
    }
    assertErrorShape(t, await start(p, { email, planId: 'gold', ...urls }), 400, 'unknown_plan');
    assertErrorShape(t, await start(p, { email, ...urls }), 400, 'plan_required');
    assertErrorShape(t, await start(p, { email, planId: 'free', ...urls }), 400, 'free_plan');
    t.equal((await db('signup_checkouts').where({ email })).length, 0);
  });

  t.test(`${p.name}: rate-limited per client address and per email address`, async (t) => {
    const ip = freshIp();
    for (let i = 0; i < PER_IP; i++) assertErrorShape(t, await start(p, { email: addressOf('flood'), planId: 'gold', ...urls }, ip), 400, 'unknown_plan');
    const over = await start(p, { email: addressOf('flood'), planId: 'starter', ...urls }, ip);
    assertErrorShape(t, over, 429, 'rate_limited');
    t.ok(Number(over.headers['retry-after']) > 0, 'Retry-After');

    const email = addressOf(`hammered-${p.name}`);
    for (let i = 0; i < PER_EMAIL; i++) assertErrorShape(t, await start(p, { email, planId: 'gold', ...urls }), 400, 'unknown_plan');
    assertErrorShape(t, await start(p, { email: email.toUpperCase(), planId: 'starter', ...urls }), 429, 'rate_limited');
    t.equal((await db('signup_checkouts').where({ email })).length, 0);
  });
}

t.test('local: a coupon discounts the first invoice; one that does not apply is refused up front', async (t) => {
  const [p] = providers as [Provider, Provider];
  const email = addressOf('coupon');
  assertErrorShape(t, await start(p, { email: addressOf('coupon'), planId: 'starter', ...urls, couponCode: 'NOPE' }), 400, 'unknown_coupon');
  assertErrorShape(t, await start(p, { email: addressOf('coupon'), planId: 'starter', ...urls, couponCode: 'PROONLY' }), 400, 'coupon_not_applicable');
  assertErrorShape(t, await start(p, { email: addressOf('coupon'), planId: 'starter', ...urls, couponCode: 'gone' }), 400, 'coupon_exhausted');
  const started = await start(p, { email, planId: 'starter', ...urls, couponCode: 'half' });
  t.equal(started.status, 200);
  const page = await local.app.inject({ method: 'GET', url: new URL(started.body.url).pathname });
  t.match(page.body, /with the coupon HALF, 4\.50 USD for the first month/);
  t.equal((await p.complete(started)).status, 303);
  const { session } = await signInFromMail(email);
  t.match((await session('GET', '/v1/auth/invoices?limit=5')).body.invoices, [{ amountDue: 450, amountPaid: 450 }]);
  const accountId = (await membersOf(email))[0].accountId;
  t.equal((await db('coupon_redemptions').where({ account_id: accountId, coupon_code: 'HALF' })).length, 1, 'redeemed by the new account');
});

t.test('stripe: coupons are not taken (Stripe promotion codes are)', async (t) => {
  const [, p] = providers as [Provider, Provider];
  assertErrorShape(t, await start(p, { email: addressOf('stripe-coupon'), planId: 'starter', ...urls, couponCode: 'HALF' }), 400, 'coupon_not_supported');
});

t.test('local: an expired checkout is refused and makes nothing', async (t) => {
  const [p] = providers as [Provider, Provider];
  const email = addressOf('expired');
  const started = await start(p, { email, planId: 'starter', ...urls });
  ahead = 86_400_000 + 60_000;
  try {
    assertErrorShape(t, await p.complete(started), 400, 'checkout_expired');
  } finally {
    ahead = 0;
  }
  t.equal((await membersOf(email)).length, 0);
  const unknown = await local.app.inject({ method: 'POST', url: `/billing/signup/su_${'0'.repeat(43)}` });
  t.equal(unknown.statusCode, 404, 'an unknown token is 404');
});

t.test('stripe: a checkout that expired unpaid at Stripe makes nothing', async (t) => {
  const [, p] = providers as [Provider, Provider];
  const email = addressOf('stripe-expired');
  const started = await start(p, { email, planId: 'starter', ...urls });
  t.equal(started.body.expiresAt, new Date(stripe.sessions.get(started.body.checkoutSessionId)!.expires_at * 1000).toISOString(), "Stripe's expiry");
  Object.assign(stripe.sessions.get(started.body.checkoutSessionId)!, { status: 'expired' });
  const expired = await deliver(stripe.event('checkout.session.expired', stripe.sessions.get(started.body.checkoutSessionId)!));
  t.equal(expired.body.action, 'ignored');
  const odd = await deliver(completedEvent(started.body.checkoutSessionId));
  t.equal(odd.body.action, 'ignored', 'a completion of an unpaid checkout is not taken');
  t.equal((await membersOf(email)).length, 0);
});

t.test('stripe: a forged notification changes nothing', async (t) => {
  const [, p] = providers as [Provider, Provider];
  const email = addressOf('forged');
  const started = await start(p, { email, planId: 'starter', ...urls });
  stripe.completeCheckout(started.body.checkoutSessionId);
  const forged = stripe.event('checkout.session.completed', stripe.sessions.get(started.body.checkoutSessionId)!, { secret: 'whsec_wrong' });
  assertErrorShape(t, await deliver(forged), 400, 'invalid_signature');
  t.equal((await membersOf(email)).length, 0);
});

t.test('sign-up closed on the server: 403 signup_closed on both providers, nothing made', async (t) => {
  for (const extra of [{}, stripeEnv]) {
    const closed = await appOn(db, { ...extra, TICKETD_SIGNUP: 'closed' });
    const email = addressOf('closed');
    const before = stripe.requests.length;
    assertErrorShape(t, await from(closed, freshIp())('POST', '/v1/auth/checkout', { email, planId: 'starter', ...urls }, { origin: DASHBOARD }), 403, 'signup_closed');
    t.equal(stripe.requests.length, before);
    t.equal((await db('signup_checkouts').where({ email })).length, 0);
  }
});

t.test('checkouts are deleted 30 days after they expired, completed or not, and not before', async (t) => {
  const now = testNow();
  const day = 24 * 3_600_000;
  const row = (id: string, expiredDaysAgo: number, completed: boolean) => ({
    id,
    provider: 'local',
    tokenHash: `hash-${id}`,
    email: `${id}@example.com`,
    planSlug: 'starter',
    successUrl: urls.successUrl,
    cancelUrl: urls.cancelUrl,
    expiresAt: new Date(now - expiredDaysAgo * day),
    ...(completed ? { completedAt: new Date(now - (expiredDaysAgo + 1) * day), completedAccountId: 'acct_gone' } : {}),
  });
  await db('signupCheckouts').insert([row('suc_old_open', 31, false), row('suc_old_done', 31, true), row('suc_recent', 29, false)]);
  t.equal(await purgeExpired(systemCtx(services), now), 2, 'the two expired over 30 days ago');
  t.same((await db('signupCheckouts').whereIn('id', ['suc_old_open', 'suc_old_done', 'suc_recent']).pluck('id')).sort(), ['suc_recent']);
  t.equal(await purgeExpired(systemCtx(services), now), 0, 'nothing more');
  await db('signupCheckouts').where({ id: 'suc_recent' }).delete();
});
