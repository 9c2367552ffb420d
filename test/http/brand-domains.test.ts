import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { systemCtx } from '../../server/core/context.js';
import * as brandDomains from '../../server/domains/brand-domains/service.js';
import { assertErrorShape, assertNotFound, emptyDir, makeBrand, mustCreate, ownerWithBrand, servicesOf, signup, statementsDuring, testApp } from '../helpers/app.js';
import { dnsServer } from '../helpers/dns.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

/** A brand's own mail domains as the dashboard manages them: /v1/brands/{brandId}/domains (and the /v1/workspaces twin). */

const INBOUND = 'inbound.ticketd.localhost';
const dns = await dnsServer(t);
const configFile = path.join(emptyDir, `brand-domains-${process.pid}.json`);
const plan = (slug: string, customDomain: boolean) => ({
  slug,
  name: slug === 'basic' ? 'Basic' : 'Self-hosted',
  price: 0,
  currency: 'usd',
  interval: 'month',
  ticketsPerPeriod: null,
  brands: null,
  members: null,
  customDomain,
});
writeFileSync(configFile, JSON.stringify({ defaultPlan: 'self-hosted', plans: [plan('self-hosted', true), plan('basic', false)] }));
let ahead = 0;
const clock = () => testNow() + ahead;
const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_CONFIG: configFile, TICKETD_DNS_SERVERS: dns.address }, { clock });
const services = servicesOf(db);
const DOMAIN_ID = /^dom_[0-9a-z]{26}$/;
let seq = 0;
/** A domain name no other test of this file uses. */
const fresh = (label = 'mail') => `${label}-${process.pid}-${++seq}.example.com`;

type Rec = { type: string; name: string; value: string; priority?: number; purpose: string };
/** Publishes the records the API asked for (all, or those of the purposes named). */
function publishAll(records: Rec[], only?: string[]): void {
  for (const r of records.filter((x) => !only || only.includes(x.purpose))) {
    if (r.type === 'MX') dns.publish(r.name, { type: 'MX', value: r.value, priority: r.priority ?? 10 });
    else dns.publish(r.name, { type: r.type as 'TXT' | 'CNAME', value: r.value });
  }
}

for (const prefix of ['/v1/brands', '/v1/workspaces']) {
  t.test(`${prefix}: create, list, get, update, delete; the first OUTBOUND domain is primary`, async (t) => {
    const { owner, brand } = await ownerWithBrand(app);
    const base = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}/domains`;
    t.same((await owner.live('GET', base)).body, [], 'a brand without domains: a bare empty array');

    const name = fresh();
    // What the dashboard sends: { domain, type: 'OUTBOUND' }.
    const created = await owner.live('POST', base, { domain: ` ${name.toUpperCase()}. `, type: 'OUTBOUND' });
    t.equal(created.status, 201, JSON.stringify(created.body));
    const first = created.body;
    t.match(first.id, DOMAIN_ID);
    t.match(first, {
      object: 'brand_domain',
      brandId: brand.id,
      domain: name,
      type: 'OUTBOUND',
      verified: false,
      verifiedAt: null,
      resendDomainId: null,
      fromName: null,
      fromEmail: null,
      replyMode: 'SINGLE',
      isPrimary: true,
    });
    t.same(
      first.records.map((r: Rec) => [r.purpose, r.type, r.name]),
      [
        ['dkim', 'TXT', `${first.records[0].name.split('.')[0]}._domainkey.${name}`],
        ['spf', 'TXT', name],
        ['return_path', 'CNAME', `bounces.${name}`],
        ['dmarc', 'TXT', `_dmarc.${name}`],
      ],
      'DKIM, SPF, the return path and a suggested DMARC record',
    );
    t.match(first.records[0].value, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]{300,}={0,2}$/, 'an RSA 2048 public key');
    t.equal(first.records[1].value, `v=spf1 include:${INBOUND} ~all`);
    t.equal(first.records[2].value, INBOUND);
    t.ok(
      first.records.every((r: { status: string }) => r.status === 'pending'),
      'nothing checked yet',
    );
    t.same(
      first.records.map((r: { required: boolean }) => r.required),
      [true, true, true, false],
    );

    const second = await mustCreate(owner.live, base, { domain: fresh() });
    t.match(second, { type: 'OUTBOUND', isPrimary: false }, 'OUTBOUND by default; one primary per brand');
    t.same(
      (await owner.live('GET', base)).body.map((d: { id: string }) => d.id),
      [first.id, second.id],
      'listed oldest first',
    );
    t.same((await owner.live('GET', `${base}/${first.id}`)).body, first);

    const patched = await owner.live('PATCH', `${base}/${first.id}`, { fromName: ' Acme Support ', fromEmail: `Help@${name.toUpperCase()}`, replyMode: 'MATCH' });
    t.equal(patched.status, 200, JSON.stringify(patched.body));
    t.match(patched.body, { fromName: 'Acme Support', fromEmail: `help@${name}`, replyMode: 'MATCH' });
    assertErrorShape(t, await owner.live('PATCH', `${base}/${first.id}`, { fromEmail: `help@other-${name}` }), 400, 'from_email_outside_domain');
    assertErrorShape(t, await owner.live('PATCH', `${base}/${first.id}`, { fromEmail: `help@sub.${name}` }), 400, 'from_email_outside_domain');

    t.match((await owner.live('PATCH', `${base}/${second.id}`, { isPrimary: true })).body, { isPrimary: true });
    t.match((await owner.live('GET', `${base}/${first.id}`)).body, { isPrimary: false }, 'the former primary is primary no more');

    const deleted = await owner.live('DELETE', `${base}/${second.id}`);
    t.equal(deleted.status, 200);
    t.match((await owner.live('GET', `${base}/${first.id}`)).body, { isPrimary: true }, 'deleting the primary makes the next OUTBOUND domain primary');
    assertNotFound(t, await owner.live('GET', `${base}/${second.id}`), 'a deleted domain');
    assertErrorShape(t, await owner.live('POST', base, { domain: name }), 409, 'domain_exists');
  });
}

t.test('verify: missing records are named; published ones verify the domain, record by record', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const name = fresh();
  const domain = await mustCreate(owner.live, `${base}/domains`, { domain: name });

  const none = await owner.live('POST', `${base}/domains/${domain.id}/verify`);
  t.equal(none.status, 200);
  t.equal(none.body.verified, false);
  t.match(none.body.error, new RegExp(`${domain.records[0].name}.*dkim.*${name}.*spf.*bounces\\.${name}.*return path`));
  t.notMatch(none.body.error, /dmarc/, 'DMARC is suggested, not required');
  t.same(
    (await owner.live('GET', `${base}/domains/${domain.id}`)).body.records.map((r: { status: string }) => r.status),
    ['failed', 'failed', 'failed', 'failed'],
  );

  // The DKIM key of another domain, and an SPF record that does not include the server: still not verified.
  const other = await mustCreate(owner.live, `${base}/domains`, { domain: fresh() });
  dns.publish(domain.records[0].name, { type: 'TXT', value: other.records[0].value });
  dns.publish(name, { type: 'TXT', value: 'v=spf1 include:_spf.google.com ~all' });
  publishAll(domain.records, ['return_path']);
  const wrong = await owner.live('POST', `${base}/domains/${domain.id}/verify`);
  t.match(wrong.body, { verified: false, error: /dkim.*spf/ });
  t.notMatch(wrong.body.error, /return path/, 'the return path was found');

  dns.unpublish(domain.records[0].name);
  dns.unpublish(name);
  publishAll(domain.records, ['dkim', 'spf']);
  t.same((await owner.live('POST', `${base}/domains/${domain.id}/verify`)).body, { verified: true });
  const verified = (await owner.live('GET', `${base}/domains/${domain.id}`)).body;
  t.match(verified, { verified: true, verifiedAt: String });
  t.same(
    verified.records.map((r: { status: string }) => r.status),
    ['verified', 'verified', 'verified', 'failed'],
    'DMARC unpublished: the domain is verified all the same',
  );
  const audit = await db('auditLog').where({ entityId: domain.id }).orderBy('id').pluck('event');
  t.same(audit, ['brand_domain.created', 'brand_domain.verified'], 'becoming verified is audited, failed checks are not');
});

t.test('an INBOUND domain asks for its MX and a proof of ownership, and verifies by both', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const name = fresh('support');
  const domain = await mustCreate(owner.live, `${base}/domains`, { domain: name, type: 'INBOUND' });
  t.match(domain, { type: 'INBOUND', isPrimary: false });
  const ownership = { type: 'TXT', name: `_ticketd.${name}`, value: `ticketd-domain=${domain.id}`, status: 'pending', purpose: 'ownership', required: true };
  t.same(domain.records, [{ type: 'MX', name, value: INBOUND, priority: 10, status: 'pending', purpose: 'mx', required: true }, ownership]);
  t.match((await owner.live('POST', `${base}/domains/${domain.id}/verify`)).body, { verified: false, error: /MX/ });
  dns.publish(name, { type: 'MX', value: `${INBOUND}.`, priority: 5 });
  // Every customer's MX points at ticketd: on its own it proves nothing.
  t.match((await owner.live('POST', `${base}/domains/${domain.id}/verify`)).body, { verified: false, error: /_ticketd.*ownership/ });
  // Another brand's claim on the same name: its own id, not this one's, is what it must publish.
  const rival = await ownerWithBrand(app);
  const claim = await mustCreate(rival.owner.live, `${rival.base}/domains`, { domain: name, type: 'INBOUND' });
  dns.publish(`_ticketd.${name}`, { type: 'TXT', value: ownership.value });
  t.same((await owner.live('POST', `${base}/domains/${domain.id}/verify`)).body, { verified: true });
  t.match((await rival.owner.live('POST', `${rival.base}/domains/${claim.id}/verify`)).body, { verified: false, error: /ownership/ }, 'the rival is not verified by it');
  assertErrorShape(t, await owner.live('PATCH', `${base}/domains/${domain.id}`, { isPrimary: true }), 400, 'inbound_domain');
  t.match(await mustCreate(owner.live, `${base}/domains`, { domain: name }), { type: 'OUTBOUND', isPrimary: true }, 'the same name may also send');
});

t.test('the scheduled check: a verified domain whose records went away stops being verified a day later', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const name = fresh();
  const domain = await mustCreate(owner.live, `${base}/domains`, { domain: name });
  publishAll(domain.records);
  t.same((await owner.live('POST', `${base}/domains/${domain.id}/verify`)).body, { verified: true });
  dns.unpublish(domain.records[0].name);
  const ctx = systemCtx(services);
  await brandDomains.recheckDue(ctx, 1000);
  t.match((await owner.live('GET', `${base}/domains/${domain.id}`)).body, { verified: true }, 'not checked again within the day');
  ahead += brandDomains.RECHECK_AFTER_MS + 60_000;
  t.teardown(() => {
    ahead = 0;
  });
  await brandDomains.recheckDue(ctx, 1000);
  const after = (await owner.live('GET', `${base}/domains/${domain.id}`)).body;
  t.match(after, { verified: false, verifiedAt: null });
  t.equal(after.records[0].status, 'failed');
  t.same(await db('auditLog').where({ entityId: domain.id }).orderBy('id').pluck('event'), ['brand_domain.created', 'brand_domain.verified', 'brand_domain.unverified']);
});

t.test('DNS that does not answer: verify says so and changes nothing', async (t) => {
  const deaf = await testApp(t, { TICKETD_DNS_SERVERS: '127.0.0.1:9' });
  const { owner, base } = await ownerWithBrand(deaf.app);
  const domain = await mustCreate(owner.live, `${base}/domains`, { domain: fresh() });
  const res = await owner.live('POST', `${base}/domains/${domain.id}/verify`);
  t.equal(res.status, 200);
  t.match(res.body, { verified: false, error: /DNS could not answer/ });
  t.match((await owner.live('GET', `${base}/domains/${domain.id}`)).body, { checkedAt: null, records: [{ status: 'pending' }] });
});

t.test('bad input gets a clear 400 and creates nothing', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  for (const domain of [
    'not a domain',
    '203.0.113.7',
    'https://example.com',
    'help@example.com',
    'example.com/path',
    'localhost',
    '-bad.example.com',
    'example.123',
    `${'a'.repeat(64)}.com`,
    INBOUND,
  ]) {
    assertErrorShape(t, await owner.live('POST', `${base}/domains`, { domain }), 400, 'invalid_domain');
  }
  for (const body of [{}, { domain: '' }, { domain: 'example.com', type: 'SIDEWAYS' }, { domain: 'example.com', extra: 1 }, { domain: 42 }]) {
    assertErrorShape(t, await owner.live('POST', `${base}/domains`, body), 400, 'validation_failed');
  }
  t.same((await owner.live('GET', `${base}/domains`)).body, [], 'nothing half-created');
  const domain = await mustCreate(owner.live, `${base}/domains`, { domain: fresh() });
  for (const body of [{}, { replyMode: 'ALL' }, { fromEmail: 'not an address' }, { isPrimary: 'yes' }]) {
    assertErrorShape(t, await owner.live('PATCH', `${base}/domains/${domain.id}`, body), 400, 'validation_failed');
  }
});

t.test('custom domains are a plan entitlement: 403 plan_feature_unavailable without it', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await db('accounts').where({ id: owner.accountId }).update({ planSlug: 'basic' });
  const res = await owner.live('POST', `${base}/domains`, { domain: fresh() });
  assertErrorShape(t, res, 403, 'plan_feature_unavailable');
  t.match(res.body.message, /Basic plan/);
  t.same((await owner.live('GET', `${base}/domains`)).body, [], 'listing still works');
});

t.test('the DKIM private key is stored sealed and never shown', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const domain = await mustCreate(owner.live, `${base}/domains`, { domain: fresh() });
  const row = await db('brandDomains').where({ id: domain.id }).first();
  t.match(row.dkimPrivateKey, /^v1:[0-9a-f]{16}:/);
  t.notMatch(row.dkimPrivateKey, /PRIVATE KEY/);
  const key = await brandDomains.dkimPrivateKey(systemCtx(services), row);
  t.match(key, /^-----BEGIN PRIVATE KEY-----/, 'the dispatcher opens it to sign');
  t.notMatch(JSON.stringify((await owner.live('GET', `${base}/domains/${domain.id}`)).body), /PRIVATE|dkimPrivateKey/);
  await t.rejects(brandDomains.dkimPrivateKey(systemCtx(services), { ...row, accountId: 'acct_someone_else' }), /does not open/, 'sealed for its account only');
});

t.test("the dashboard's list, polled on every page: one indexed read, also for a brand without domains", async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await owner.live('GET', `${base}/domains`); // the brand's home and the key are cached from here on
  const statements = await statementsDuring(db, () => owner.live('GET', `${base}/domains`));
  t.equal(statements.length, 1, statements.join('\n'));
  t.match(statements[0], /from "brand_domains" where .*"account_id" = .*"livemode" = .*"brand_id" = /);
});

t.test("who may: any member within their brands, like the brand's other settings; other accounts and brands get 404", async (t) => {
  const team = await teamOf(app, services);
  const base = `/v1/brands/${team.first.id}/domains`;
  const domain = await mustCreate(team.owner.live, base, { domain: fresh() });
  t.equal((await team.asMember('GET', base)).status, 200, 'a member reads the list (the dashboard polls it)');
  t.equal((await team.asMember('POST', base, { domain: fresh() })).status, 201, 'a member of the brand adds one');
  t.equal((await team.asMember('POST', `${base}/${domain.id}/verify`)).status, 200);
  t.equal((await team.asAdmin('PATCH', `${base}/${domain.id}`, { fromName: 'Desk' })).status, 200);

  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  assertNotFound(t, await stranger.live('GET', `${base}/${domain.id}`), "another account's brand");
  assertNotFound(t, await stranger.live('GET', `/v1/brands/${strangerBrand.id}/domains/${domain.id}`), "another account's domain id in one's own brand");
  assertNotFound(t, await team.owner.live('GET', `/v1/brands/${team.second.id}/domains/${domain.id}`), 'the domain under another brand of the account');
  assertNotFound(t, await team.owner.test('GET', `${base}/${domain.id}`), 'the other mode');
  assertNotFound(t, await team.asMember('GET', `/v1/brands/${team.second.id}/domains`), "a brand outside the member's assignments");
});
