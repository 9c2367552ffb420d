import t from 'tap';
import { buildApp } from '../../server/app.js';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, ownerWithBrand, signup, testApp, testConfig, servicesOf } from '../helpers/app.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { receiver } from '../helpers/receiver.js';
import { testNow } from '../helpers/clock.js';

// Loopback receivers need webhookAllowPrivate; a second app on the same database keeps the default (refuse).
const { app, db, url } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true' });
const strict = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url, TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' }), db });
t.teardown(() => strict.close());

const quietLog = { info: () => undefined, error: () => undefined };
const WH_ID = /^wh_[0-9a-z]{26}$/;
const PUBLIC_URL = 'https://93.184.215.14/hooks'; // an IP literal: no DNS needed, never called here

for (const prefix of ['/v1/brands', '/v1/workspaces']) {
  t.test(`${prefix}: create, list, get, update, delete`, async (t) => {
    const owner = await signup(app);
    const brand = await makeBrand(owner.live);
    const base = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}/webhooks`;

    const created = await owner.live('POST', base, { url: 'https://93.184.215.14/hook', events: ['ticket.created', 'comment.created', 'ticket.created'] });
    t.equal(created.status, 201, JSON.stringify(created.body));
    const wh = created.body;
    t.match(wh.id, WH_ID);
    t.match(wh.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'a generated secret, shown once');
    t.match(wh, {
      object: 'webhook',
      brandId: brand.id,
      brand_id: brand.id,
      url: 'https://93.184.215.14/hook',
      enabled: true,
      active: true,
      failureCount: 0,
      lastTriggered: null,
      lastFailure: null,
    });
    t.same(wh.events, ['ticket.created', 'comment.created'], 'events de-duplicated, in the given order');
    t.equal(wh.created_at, wh.createdAt, 'snake_case spelling too');
    t.equal(wh.updated_at, wh.updatedAt);

    const listed = await owner.live('GET', base);
    t.equal(listed.status, 200);
    t.ok(Array.isArray(listed.body), 'a bare array');
    t.same(
      listed.body.map((w: { id: string }) => w.id),
      [wh.id],
    );
    t.notOk('secret' in listed.body[0], 'the list never shows the secret');
    const got = await owner.live('GET', `${base}/${wh.id}`);
    t.equal(got.status, 200);
    t.notOk('secret' in got.body, 'neither does GET');

    const patched = await owner.live('PATCH', `${base}/${wh.id}`, { url: 'https://93.184.215.14/v2', events: ['ticket.updated'], active: false });
    t.equal(patched.status, 200, JSON.stringify(patched.body));
    t.match(patched.body, { url: 'https://93.184.215.14/v2', events: ['ticket.updated'], enabled: false, active: false });
    const enabled = await owner.live('PATCH', `${base}/${wh.id}`, { enabled: true });
    t.match(enabled.body, { enabled: true, active: true });
    assertErrorShape(t, await owner.live('PATCH', `${base}/${wh.id}`, { enabled: true, active: false }), 400, 'invalid_request');
    assertErrorShape(t, await owner.live('PATCH', `${base}/${wh.id}`, {}), 400, 'validation_failed');

    const deleted = await owner.live('DELETE', `${base}/${wh.id}`);
    t.equal(deleted.status, 200);
    t.equal(deleted.body.id, wh.id);
    t.notOk('secret' in deleted.body);
    assertNotFound(t, await owner.live('GET', `${base}/${wh.id}`), 'deleted webhook');
    t.same((await owner.live('GET', base)).body, []);
  });
}

t.test('a secret given at create is kept and returned once; too short is 400', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const created = await owner.live('POST', `${base}/webhooks`, { url: PUBLIC_URL, events: ['ticket.created'], secret: 'my-own-secret-0123456789' });
  t.equal(created.status, 201);
  t.equal(created.body.secret, 'my-own-secret-0123456789');
  const short = await owner.live('POST', `${base}/webhooks`, { url: PUBLIC_URL, events: ['ticket.created'], secret: 'short' });
  assertErrorShape(t, short, 400, 'validation_failed');
  t.match(short.body.errors, [{ field: 'secret' }]);
});

t.test('bad input is 400 with the error shape, and nothing is stored', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const cases: [string, unknown, string, string][] = [
    ['not http', { url: 'ftp://example.test/x', events: ['ticket.created'] }, 'invalid_webhook_url', 'url'],
    ['javascript:', { url: 'javascript:alert(1)', events: ['ticket.created'] }, 'invalid_webhook_url', 'url'],
    ['not absolute', { url: '/hooks', events: ['ticket.created'] }, 'invalid_webhook_url', 'url'],
    ['credentials', { url: 'https://user:pw@example.test/x', events: ['ticket.created'] }, 'invalid_webhook_url', 'url'],
    ['unknown event', { url: PUBLIC_URL, events: ['ticket.exploded'] }, 'validation_failed', 'events.0'],
    ['empty events', { url: PUBLIC_URL, events: [] }, 'validation_failed', 'events'],
    ['no events', { url: PUBLIC_URL }, 'validation_failed', 'events'],
    ['unknown field', { url: PUBLIC_URL, events: ['ticket.created'], colour: 'red' }, 'validation_failed', 'colour'],
    ['unresolvable host', { url: 'https://no-such-host.invalid/x', events: ['ticket.created'] }, 'webhook_url_unresolvable', 'url'],
  ];
  for (const [label, body, code, field] of cases) {
    const res = await owner.live('POST', `${base}/webhooks`, body);
    assertErrorShape(t, res, 400, code);
    t.match(res.body.errors, [{ field }], `${label}: names ${field}`);
  }
  t.same((await owner.live('GET', `${base}/webhooks`)).body, [], 'nothing was stored');
});

t.test('without webhookAllowPrivate, URLs reaching non-public addresses are refused at create and update', async (t) => {
  const owner = await signup(strict);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}/webhooks`;
  for (const host of [
    '127.0.0.1',
    '127.1.2.3',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '0.0.0.0',
    '100.64.0.1',
    '224.0.0.1',
    '[::1]',
    '[::]',
    '[fe80::1]',
    '[fc00::1]',
    '[::ffff:127.0.0.1]',
    '[::ffff:10.0.0.1]',
    '[64:ff9b::a00:1]',
    'localhost',
  ]) {
    const res = await owner.live('POST', base, { url: `http://${host}:8080/hook`, events: ['ticket.created'] });
    assertErrorShape(t, res, 400, 'webhook_url_not_public');
  }
  const ok = await owner.live('POST', base, { url: PUBLIC_URL, events: ['ticket.created'] });
  t.equal(ok.status, 201, 'a public address is fine');
  assertErrorShape(t, await owner.live('PATCH', `${base}/${ok.body.id}`, { url: 'http://10.0.0.5/x' }), 400, 'webhook_url_not_public');
  t.equal((await owner.live('GET', `${base}/${ok.body.id}`)).body.url, PUBLIC_URL, 'unchanged');
});

t.test('401 without a valid key; another account, the other mode and other brands read 404', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const wh = (await owner.live('POST', `${base}/webhooks`, { url: PUBLIC_URL, events: ['ticket.created'] })).body;
  for (const [method, path, body] of [
    ['GET', `${base}/webhooks`, undefined],
    ['POST', `${base}/webhooks`, { url: PUBLIC_URL, events: ['ticket.created'] }],
    ['GET', `${base}/webhooks/${wh.id}/deliveries`, undefined],
  ] as const) {
    assertErrorShape(t, await client(app)(method, path, body), 401, 'missing_credentials');
    assertErrorShape(t, await client(app, 'sk_live_nope')(method, path, body), 401, 'invalid_api_key');
  }
  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  assertNotFound(t, await stranger.live('GET', `${base}/webhooks`), 'another account, list');
  assertNotFound(t, await stranger.live('GET', `/v1/brands/${strangerBrand.id}/webhooks/${wh.id}`), 'another account, own brand');
  assertNotFound(t, await stranger.live('PATCH', `/v1/brands/${strangerBrand.id}/webhooks/${wh.id}`, { enabled: false }), 'another account, PATCH');
  assertNotFound(t, await owner.test('GET', `${base}/webhooks/${wh.id}`), 'test mode, live brand');
  const testBrand = await makeBrand(owner.test);
  assertNotFound(t, await owner.test('DELETE', `/v1/brands/${testBrand.id}/webhooks/${wh.id}`), 'test mode, own test brand');
  const otherBrand = await makeBrand(owner.live);
  assertNotFound(t, await owner.live('POST', `/v1/brands/${otherBrand.id}/webhooks/${wh.id}/rotate-secret`), 'another brand of the account');
  t.equal((await owner.live('GET', `${base}/webhooks/${wh.id}`)).body.enabled, true, 'nothing changed');
  t.equal((await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=false`)).body.webhookCount, 1, 'the brand delete preview counts webhooks');
});

t.test('deliveries, redeliver and rotate over HTTP; the audit log records changes but never the secret', async (t) => {
  const hook = await receiver(t);
  const { owner, brand, base } = await ownerWithBrand(app);
  const wh = (await owner.live('POST', `${base}/webhooks`, { url: `${hook.url}/in`, events: ['ticket.created', 'ticket.updated'] })).body;
  const ticket = await makeTicket(owner.live, base, { title: 'Printer on fire', customerEmail: 'ann@example.com', customerName: 'Ann' });
  await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { priority: 'high', title: 'Printer on fire!' });

  const pending = await owner.live('GET', `${base}/webhooks/${wh.id}/deliveries`);
  t.equal(pending.status, 200);
  t.same(
    pending.body.map((d: { event: string }) => d.event),
    ['ticket.updated', 'ticket.created'],
    'newest first',
  );
  t.match(pending.body[1], { object: 'webhook_delivery', webhookId: wh.id, status: 'PENDING', state: 'pending', attempts: 0, lastAttempt: null, responseCode: null });
  t.match(pending.body[1].payload, {
    event: 'ticket.created',
    brand_id: brand.id,
    data: { id: ticket.id, ticketNumber: ticket.ticketNumber, title: 'Printer on fire', customerEmail: 'ann@example.com', customerName: 'Ann' },
  });
  t.same(pending.body[0].payload.data.changes, ['title', 'priority']);

  const dispatcher = new Dispatcher(servicesOf(db), quietLog, null, { webhooks: { allowPrivate: true, timeoutMs: 5000 } });
  t.teardown(() => dispatcher.stop());
  t.match(await dispatcher.deliverDue(), { success: 2 });
  t.equal(hook.received.length, 2);
  const delivered = (await owner.live('GET', `${base}/webhooks/${wh.id}/deliveries?limit=1`)).body;
  t.equal(delivered.length, 1, 'limit');
  t.match(delivered[0], { status: 'SUCCESS', state: 'success', attempts: 1, responseCode: 200, responseBody: 'ok', error: null });
  t.ok(delivered[0].lastAttempt && delivered[0].deliveredAt);
  const after = (await owner.live('GET', `${base}/webhooks/${wh.id}`)).body;
  t.ok(after.lastTriggered, 'lastTriggered set');

  const again = await owner.live('POST', `${base}/webhooks/${wh.id}/deliveries/${delivered[0].id}/redeliver`);
  t.equal(again.status, 201);
  t.not(again.body.id, delivered[0].id, 'a new delivery');
  t.same(again.body.payload, delivered[0].payload, 'of the same body');
  t.equal(again.body.status, 'PENDING');
  await dispatcher.deliverDue();
  t.equal(hook.received.length, 3);
  const first = hook.received.find((r) => r.headers['webhook-id'] === delivered[0].id)!;
  t.equal(hook.received[2]!.body, first.body, 'the same bytes again');
  t.equal(hook.received[2]!.headers['webhook-id'], again.body.id, 'under its own webhook-id');
  assertNotFound(t, await owner.live('POST', `${base}/webhooks/${wh.id}/deliveries/dlv_00000000000000000000000000/redeliver`), 'unknown delivery');

  const rotated = await owner.live('POST', `${base}/webhooks/${wh.id}/rotate-secret`, { graceMinutes: 5 });
  t.equal(rotated.status, 200);
  t.match(rotated.body.secret, /^whsec_/);
  t.not(rotated.body.secret, wh.secret);
  t.equal((await owner.live('POST', `${base}/webhooks/${wh.id}/rotate-secret`)).status, 200, 'no body is fine');
  assertErrorShape(t, await owner.live('POST', `${base}/webhooks/${wh.id}/rotate-secret`, { graceMinutes: -1 }), 400, 'validation_failed');

  await owner.live('PATCH', `${base}/webhooks/${wh.id}`, { enabled: false });
  assertErrorShape(t, await owner.live('POST', `${base}/webhooks/${wh.id}/deliveries/${delivered[0].id}/redeliver`), 409, 'webhook_disabled');

  const entries = await db('auditLog').where({ entityType: 'webhook', entityId: wh.id }).orderBy('id').select('event', 'changes', 'metadata');
  t.same(
    entries.map((e: { event: string }) => e.event),
    ['webhook.created', 'webhook.redelivered', 'webhook.secret_rotated', 'webhook.secret_rotated', 'webhook.updated'],
  );
  const text = JSON.stringify(entries);
  t.notOk(text.includes(wh.secret) || text.includes(rotated.body.secret), 'no secret in the audit log');
});
