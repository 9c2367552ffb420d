import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, client, emptyDir, servicesOf, signup, testApp } from '../helpers/app.js';
import { DASHBOARD, SIGN_IN_TEST_ENV, sessionToken, teamOfThree } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Coupons: GET and PATCH /v1/auth/coupons for the installation's administrators (instanceAdmins),
// couponCode on an upgrade, the discounted invoice, and the limit held under concurrent confirms.

const MINUTE = 60_000;
const plan = (slug: string, name: string, price: number, currency = 'usd') => ({
  slug,
  name,
  price,
  currency,
  interval: 'month',
  ticketsPerPeriod: null,
  brands: null,
  members: null,
  customDomain: price > 0,
});
const coupon = (code: string, terms: Record<string, unknown>) => ({ code, maxRedemptions: null, ...terms });
const OPS = `ops-${process.pid}@example.com`;
const configFile = path.join(emptyDir, `billing-coupons-${process.pid}.json`);
writeFileSync(
  configFile,
  JSON.stringify({
    defaultPlan: 'free',
    plans: [plan('free', 'Free', 0), plan('starter', 'Starter', 900), plan('pro', 'Pro', 2900), plan('euro', 'Euro', 1500, 'eur')],
    coupons: [
      coupon('HALF', { percentOff: 50 }),
      coupon('TENOFF', { amountOff: 1000, currency: 'usd', plans: ['pro'], maxRedemptions: 100 }),
      coupon('USD5', { amountOff: 500, currency: 'usd' }),
      coupon('OLD', { percentOff: 20, expiresAt: '2020-01-01T00:00:00Z' }),
      coupon('SOON', { percentOff: 20, expiresAt: new Date(testNow() + 30 * MINUTE).toISOString() }),
      coupon('GONE', { percentOff: 20, maxRedemptions: 0 }),
      coupon('LAST', { percentOff: 10, maxRedemptions: 1 }),
      coupon('RACE', { percentOff: 25, maxRedemptions: 2 }),
      coupon('PATCHME', { percentOff: 5, maxRedemptions: 5 }),
    ],
  }),
);

let ahead = 0;
const clock = () => testNow() + ahead;
// Matched in any case: the configuration may spell the address otherwise than the member's row.
const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_CONFIG: configFile, TICKETD_INSTANCE_ADMINS: `someone-else@example.com, ${OPS.toUpperCase()}` }, { clock });
const services = servicesOf(db);
const anonymous = client(app);
const success = { successUrl: `${DASHBOARD}/billing?upgraded=true`, cancelUrl: `${DASHBOARD}/billing` };

// The instance administrator is a plain member of an organization of their own: the role plays no part.
const opsOrg = await signup(app);
await members.add(tenantCtx(systemCtx(services), opsOrg.accountId, true), { email: OPS, name: 'Olive Ops', role: 'member' });
const ops = client(app, await sessionToken(app, services, opsOrg.accountId, OPS));

const team = () => teamOfThree(app, services);
const listed = async (code: string) => ((await ops('GET', '/v1/auth/coupons')).body.coupons as { code: string }[]).find((c) => c.code === code) as Record<string, unknown>;
const upgrade = (org: Awaited<ReturnType<typeof team>>, planId: string, couponCode?: string) =>
  org.asOwner('POST', '/v1/auth/subscription/upgrade', { planId, ...success, ...(couponCode === undefined ? {} : { couponCode }) });

/** What an account has of billing: compared before and after a refusal. */
async function billingOf(accountId: string) {
  const [subscriptions, invoices, checkouts, redemptions] = await Promise.all(
    ['subscriptions', 'invoices', 'checkout_sessions', 'coupon_redemptions'].map((table) => db(table).where({ account_id: accountId }).count({ n: '*' }).first()),
  );
  const completed = await db('checkout_sessions').where({ account_id: accountId }).whereNotNull('completed_at').count({ n: '*' }).first();
  const n = (row: { n?: string | number } | undefined) => Number(row?.n);
  return { subscriptions: n(subscriptions), invoices: n(invoices), checkouts: n(checkouts), completed: n(completed), redemptions: n(redemptions) };
}

t.test('an instance administrator lists coupons and sets their limit; it is audited', async (t) => {
  const list = await ops('GET', '/v1/auth/coupons');
  t.equal(list.status, 200);
  t.same(
    list.body.coupons.map((c: { code: string }) => c.code),
    ['HALF', 'TENOFF', 'USD5', 'OLD', 'SOON', 'GONE', 'LAST', 'RACE', 'PATCHME'],
    "in the configuration's order",
  );
  t.same(await listed('TENOFF'), {
    code: 'TENOFF',
    object: 'coupon',
    percentOff: null,
    amountOff: 1000,
    currency: 'usd',
    maxRedemptions: 100,
    configuredMaxRedemptions: 100,
    timesRedeemed: 0,
    expiresAt: null,
    plans: ['pro'],
    valid: true,
  });
  t.match(await listed('OLD'), { percentOff: 20, expiresAt: '2020-01-01T00:00:00.000Z', valid: false });
  t.match(await listed('GONE'), { maxRedemptions: 0, valid: false });

  const set = await ops('PATCH', '/v1/auth/coupons/patchme', { maxRedemptions: 2 });
  t.equal(set.status, 200, 'the code in any case');
  t.match(set.body.coupon, { code: 'PATCHME', maxRedemptions: 2, configuredMaxRedemptions: 5, timesRedeemed: 0, valid: true });
  t.match(await listed('PATCHME'), { maxRedemptions: 2 }, 'kept');
  t.match((await ops('PATCH', '/v1/auth/coupons/PATCHME', { maxRedemptions: null })).body.coupon, { maxRedemptions: null, configuredMaxRedemptions: 5 }, 'null: unlimited');
  t.match((await ops('PATCH', '/v1/auth/coupons/GONE', { maxRedemptions: 3 })).body.coupon, { maxRedemptions: 3, valid: true }, 'a used-up coupon opened again');
  await ops('PATCH', '/v1/auth/coupons/GONE', { maxRedemptions: 0 });

  const logs = await db('audit_log').where({ account_id: opsOrg.accountId, entity_type: 'coupon' }).orderBy('id');
  t.match(logs, [
    { event: 'coupon.updated', entityId: 'PATCHME', brandId: null, performerType: 'user', changes: [{ field: 'maxRedemptions', from: 5, to: 2 }] },
    { event: 'coupon.updated', entityId: 'PATCHME', changes: [{ field: 'maxRedemptions', from: 2, to: null }] },
    { event: 'coupon.updated', entityId: 'GONE', changes: [{ field: 'maxRedemptions', from: 0, to: 3 }] },
    { event: 'coupon.updated', entityId: 'GONE', changes: [{ field: 'maxRedemptions', from: 3, to: 0 }] },
  ]);
  assertErrorShape(t, await ops('PATCH', '/v1/auth/coupons/NOPE', { maxRedemptions: 1 }), 404, 'not_found');
});

t.test('bad PATCH bodies are 400 and change nothing', async (t) => {
  await ops('PATCH', '/v1/auth/coupons/PATCHME', { maxRedemptions: 4 });
  const before = await db('audit_log').where({ account_id: opsOrg.accountId }).count({ n: '*' }).first();
  for (const body of [
    {},
    { maxRedemptions: -1 },
    { maxRedemptions: '3' },
    { maxRedemptions: 1.5 },
    { maxRedemptions: 3, code: 'OTHER' },
    { maxRedemptions: 2_000_000_000 },
    '{',
    '[]',
  ]) {
    const res = await ops('PATCH', '/v1/auth/coupons/PATCHME', body);
    t.equal(res.status, 400, `${JSON.stringify(body)}: 400`);
    t.equal(res.body?.statusCode, 400, 'the error shape');
  }
  t.match(await listed('PATCHME'), { maxRedemptions: 4 }, 'the limit is as it was');
  t.same(await db('audit_log').where({ account_id: opsOrg.accountId }).count({ n: '*' }).first(), before, 'nothing audited');
});

t.test('anyone else is refused: 403 for a session of any role, 401 without one or with an API key', async (t) => {
  const org = await team();
  for (const as of [org.asOwner, org.asAdmin, org.asMember]) {
    assertErrorShape(t, await as('GET', '/v1/auth/coupons'), 403, 'instance_admin_required');
    assertErrorShape(t, await as('PATCH', '/v1/auth/coupons/PATCHME', { maxRedemptions: 99 }), 403, 'instance_admin_required');
  }
  assertErrorShape(t, await anonymous('GET', '/v1/auth/coupons'), 401, 'missing_credentials');
  assertErrorShape(t, await anonymous('PATCH', '/v1/auth/coupons/PATCHME', { maxRedemptions: 99 }), 401, 'missing_credentials');
  assertErrorShape(t, await org.owner.live('GET', '/v1/auth/coupons'), 401, 'session_required');
  assertErrorShape(t, await org.owner.live('PATCH', '/v1/auth/coupons/PATCHME', { maxRedemptions: 99 }), 401, 'session_required');
  const opsKey = client(app, opsOrg.liveKey);
  assertErrorShape(t, await opsKey('PATCH', '/v1/auth/coupons/PATCHME', { maxRedemptions: 99 }), 401, 'session_required');
  t.match(await listed('PATCHME'), { maxRedemptions: 4 }, 'the limit is as it was');
  t.equal((await db('audit_log').where({ account_id: org.owner.accountId, entity_type: 'coupon' })).length, 0, 'nothing audited');
});

t.test('a coupon discounts the invoice of the plan that starts now, once per account', async (t) => {
  const org = await team();
  const started = await upgrade(org, 'starter', 'half');
  t.equal(started.status, 200);
  t.match(await db('checkout_sessions').where({ account_id: org.owner.accountId, id: started.body.checkoutSessionId }).first(), { couponCode: 'HALF' }, 'as configured');
  const pathOnly = new URL(started.body.url).pathname;
  const page = await app.inject({ method: 'GET', url: pathOnly });
  t.match(page.body, /9\.00 USD a month; with the coupon HALF, 4\.50 USD for the first month/);
  const confirmed = await app.inject({ method: 'POST', url: pathOnly });
  t.equal(confirmed.statusCode, 303);
  t.equal((await app.inject({ method: 'POST', url: pathOnly })).statusCode, 303, 'a second confirm goes back too');

  const invoices = (await org.asMember('GET', '/v1/auth/invoices')).body.invoices;
  t.equal(invoices.length, 1, 'invoiced once');
  t.match(invoices[0], { planId: 'starter', amountDue: 450, amountPaid: 450, currency: 'usd' });
  t.match(await listed('HALF'), { timesRedeemed: 1, valid: true }, 'redeemed once');
  const redeemed = await db('audit_log').where({ account_id: org.owner.accountId, entity_type: 'coupon' });
  t.match(redeemed, [
    { event: 'coupon.redeemed', entityId: 'HALF', brandId: null, performerType: 'user', metadata: { plan: 'starter', invoiceId: invoices[0].id, amountOff: 450 } },
  ]);

  assertErrorShape(t, await upgrade(org, 'pro', 'HALF'), 400, 'coupon_already_redeemed');
  const pro = await upgrade(org, 'pro', 'TenOff');
  t.equal(pro.status, 200, 'another coupon, for the plan it names');
  const switched = await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: pro.body.checkoutSessionId });
  t.equal(switched.status, 200);
  t.match(switched.body.subscription, { planId: 'pro' });
  t.match((await org.asOwner('GET', '/v1/auth/invoices?limit=1')).body.invoices[0], { planId: 'pro', amountDue: 1900, amountPaid: 1900 }, 'an amount off');
  t.match(await listed('TENOFF'), { timesRedeemed: 1 });
  t.same(await billingOf(org.owner.accountId), { subscriptions: 1, invoices: 2, checkouts: 2, completed: 2, redemptions: 2 });
});

t.test('unknown, expired, used-up and wrong-plan coupons are refused, and nothing changes', async (t) => {
  const org = await team();
  const before = await billingOf(org.owner.accountId);
  const refusals: [string, string | undefined, string][] = [
    ['starter', 'NOPE', 'unknown_coupon'],
    ['starter', 'OLD', 'coupon_expired'],
    ['starter', 'GONE', 'coupon_exhausted'],
    ['starter', 'TENOFF', 'coupon_not_applicable'],
    ['euro', 'USD5', 'coupon_not_applicable'],
    ['free', 'HALF', 'coupon_not_applicable'],
  ];
  for (const [planId, code, error] of refusals) {
    const res = await upgrade(org, planId, code);
    assertErrorShape(t, res, 400, error);
    t.match(res.body.errors, [{ field: 'couponCode' }], `${code} on ${planId}: the field is named`);
  }
  t.same(await billingOf(org.owner.accountId), before, 'no checkout, subscription, invoice or redemption');

  // A cheaper plan waits for the end of the period: no invoice now, so nothing for a coupon to discount.
  await org.asOwner('POST', '/v1/auth/subscription/confirm', { planRef: 'pro' });
  assertErrorShape(t, await upgrade(org, 'starter', 'HALF'), 400, 'coupon_not_applicable');
  t.match(await listed('HALF'), { timesRedeemed: 1 }, 'the count is as before');
});

t.test('a coupon that expires before the checkout is confirmed fails the confirm, which changes nothing', async (t) => {
  const org = await team();
  const started = await upgrade(org, 'starter', 'SOON');
  t.equal(started.status, 200);
  ahead = 40 * MINUTE;
  try {
    const res = await org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: started.body.checkoutSessionId });
    assertErrorShape(t, res, 400, 'coupon_expired');
  } finally {
    ahead = 0;
  }
  t.same(await billingOf(org.owner.accountId), { subscriptions: 0, invoices: 0, checkouts: 1, completed: 0, redemptions: 0 });
  t.match(await listed('SOON'), { timesRedeemed: 0 });
});

t.test('the last redemption beyond the limit fails its confirm with 409, changing nothing', async (t) => {
  const [first, second] = [await team(), await team()];
  const a = await upgrade(first, 'starter', 'LAST');
  const b = await upgrade(second, 'starter', 'LAST');
  t.same([a.status, b.status], [200, 200], 'both checkouts open while one redemption is left');
  t.equal((await first.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: a.body.checkoutSessionId })).status, 200);
  const late = await second.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: b.body.checkoutSessionId });
  assertErrorShape(t, late, 409, 'coupon_exhausted');
  t.same(await billingOf(second.owner.accountId), { subscriptions: 0, invoices: 0, checkouts: 1, completed: 0, redemptions: 0 });
  t.same((await second.asOwner('GET', '/v1/auth/subscription')).body, { subscription: null });
  t.match(await listed('LAST'), { timesRedeemed: 1, valid: false });
  assertErrorShape(t, await upgrade(second, 'starter', 'LAST'), 400, 'coupon_exhausted');
});

t.test('concurrent confirms at the limit never redeem past it; a raised limit lets one more through', async (t) => {
  const orgs = [];
  for (let n = 0; n < 5; n++) orgs.push(await team());
  const checkouts = await Promise.all(orgs.map((org) => upgrade(org, 'pro', 'RACE')));
  t.same(
    checkouts.map((c) => c.status),
    [200, 200, 200, 200, 200],
  );
  const answers = await Promise.all(orgs.map((org, i) => org.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: checkouts[i]!.body.checkoutSessionId })));
  t.same(answers.map((a) => a.status).sort(), [200, 200, 409, 409, 409], 'two redemptions, whoever gets there first');
  for (const refused of answers.filter((a) => a.status === 409)) t.equal(refused.body.code, 'coupon_exhausted');
  t.match(await listed('RACE'), { timesRedeemed: 2, maxRedemptions: 2, valid: false });
  t.equal((await db('coupon_redemptions').where({ coupon_code: 'RACE' })).length, 2);
  const billed = await Promise.all(orgs.map((org) => billingOf(org.owner.accountId)));
  t.equal(billed.filter((b) => b.subscriptions === 1 && b.invoices === 1 && b.redemptions === 1).length, 2, 'the two redeemed are subscribed and invoiced');
  t.equal(billed.filter((b) => b.subscriptions === 0 && b.invoices === 0 && b.redemptions === 0 && b.completed === 0).length, 3, 'the others have nothing');
  const invoices = await db('invoices').whereIn(
    'account_id',
    orgs.map((o) => o.owner.accountId),
  );
  t.same(
    invoices.map((i: { amountDue: string }) => Number(i.amountDue)),
    [2175, 2175],
    'each a quarter off',
  );

  t.equal((await ops('PATCH', '/v1/auth/coupons/RACE', { maxRedemptions: 3 })).status, 200);
  const i = answers.findIndex((a) => a.status === 409);
  const retried = await orgs[i]!.asOwner('POST', '/v1/auth/subscription/confirm', { checkoutSessionId: checkouts[i]!.body.checkoutSessionId });
  t.equal(retried.status, 200, 'the same checkout confirms once the limit is raised');
  t.match(await listed('RACE'), { timesRedeemed: 3, maxRedemptions: 3, valid: false });
});
