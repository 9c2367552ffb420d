import t from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import { claim, purgeExpired, requestFingerprint } from '../../server/core/idempotency.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { aStatementWaitsForALock, freshDatabase } from '../helpers/db.js';
import { createAccount } from '../../server/flows/accounts.js';
import { servicesOf } from '../helpers/app.js';
import { until } from '../helpers/wait.js';
import { testNow } from '../helpers/clock.js';

const { db } = await freshDatabase(t);
const quietLog = { info() {}, error() {} };

async function tenant(livemode = true): Promise<TenantCtx> {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `idem-${Math.random().toString(36).slice(2)}@example.com` });
  return tenantCtx(systemCtx(servicesOf(db)), created.account.id, livemode);
}

/** Rows as a client's requests would leave them: `hoursLeft` < 0 means expired. */
async function seed(ctx: TenantCtx, keys: Record<string, number>): Promise<void> {
  for (const [key, hoursLeft] of Object.entries(keys)) {
    await db('idempotency_keys').insert({
      accountId: ctx.accountId,
      livemode: ctx.livemode,
      key,
      fingerprint: requestFingerprint('POST', '/x', { key }),
      resourceId: `res_${key}`,
      createdAt: db.raw("now() - interval '25 hours'"),
      expiresAt: db.raw(`now() + make_interval(secs => ?)`, [hoursLeft * 3600]),
    });
  }
}

async function keysOf(ctx: TenantCtx): Promise<string[]> {
  const rows = await db('idempotency_keys').where({ accountId: ctx.accountId, livemode: ctx.livemode }).orderBy('key').select('key');
  return rows.map((r: { key: string }) => r.key);
}

t.test('the fingerprint covers method, route and the body in canonical form', async (t) => {
  const a = requestFingerprint('POST', '/brands/br_1/tickets', { title: 'x', metadata: { a: 1, b: [1, { c: 2, d: 3 }] } });
  t.equal(a, requestFingerprint('POST', '/brands/br_1/tickets', { metadata: { b: [1, { d: 3, c: 2 }], a: 1 }, title: 'x' }), 'key order does not matter');
  t.equal(a, requestFingerprint('POST', '/brands/br_1/tickets', { title: 'x', metadata: { a: 1, b: [1, { c: 2, d: 3 }] }, gone: undefined }), 'undefined keys are absent');
  t.not(a, requestFingerprint('POST', '/brands/br_1/tickets/tkt_1/comments', { title: 'x', metadata: { a: 1, b: [1, { c: 2, d: 3 }] } }), 'another route');
  t.not(a, requestFingerprint('PUT', '/brands/br_1/tickets', { title: 'x', metadata: { a: 1, b: [1, { c: 2, d: 3 }] } }), 'another method');
  t.not(a, requestFingerprint('POST', '/brands/br_1/tickets', { title: 'x', metadata: { a: 1, b: [{ c: 2, d: 3 }, 1] } }), 'array order matters');
});

t.test('claim: first wins, the same request gets the first resource, another request is a 409', async (t) => {
  const ctx = await tenant();
  await t.rejects(claim(ctx, 'k', 'f', 'res_1'), /inside the transaction/, 'a claim outside a transaction is refused');
  t.same(await withTx(ctx, (tx) => claim(tx, 'k', 'f1', 'res_1')), { claimed: true });
  t.same(await withTx(ctx, (tx) => claim(tx, 'k', 'f1', 'res_2')), { claimed: false, resourceId: 'res_1' });
  await t.rejects(
    withTx(ctx, (tx) => claim(tx, 'k', 'f2', 'res_3', 'comment')),
    { statusCode: 409, code: 'idempotency_key_reused', message: /new comment/ },
  );
  await t.rejects(
    withTx(ctx, async (tx) => {
      t.same(await claim(tx, 'rolled-back', 'f', 'res_4'), { claimed: true });
      throw new Error('the create failed');
    }),
    /create failed/,
  );
  t.same(await withTx(ctx, (tx) => claim(tx, 'rolled-back', 'other', 'res_5')), { claimed: true }, 'a failed request released its key');
  const testMode = tenantCtx(systemCtx(servicesOf(db)), ctx.accountId, false);
  t.same(await withTx(testMode, (tx) => claim(tx, 'k', 'f2', 'res_6')), { claimed: true }, 'the other mode has its own keys');
});

t.test('purge: a key a request takes over while the purge runs stays (the delete tests the expiry again)', async (t) => {
  const a = await tenant();
  await seed(a, { racing: -1 });
  let commit = () => undefined as void;
  const committing = new Promise<void>((resolve) => (commit = resolve));
  let claimed = () => undefined as void;
  const tookOver = new Promise<void>((resolve) => (claimed = resolve));
  const request = withTx(a, async (tx) => {
    const result = await claim(tx, 'racing', 'a new request', 'res_racing_new');
    claimed();
    await committing;
    return result;
  });
  await tookOver;
  const purge = purgeExpired(systemCtx(servicesOf(db)));
  await until('the purge waiting for the request', () => aStatementWaitsForALock(db));
  commit();
  t.same(await request, { claimed: true });
  t.equal(await purge, 0, 'nothing purged');
  t.match(await db('idempotency_keys').where({ accountId: a.accountId, key: 'racing' }).first(), { resourceId: 'res_racing_new' }, 'the key taken over stays');
});

t.test('purge: expired keys go in batches, live ones stay, an expired key can be used again', async (t) => {
  const a = await tenant();
  const b = await tenant(false);
  await seed(a, { 'old-1': -1, 'old-2': -30, 'old-3': -0.01, 'live-1': 1, 'live-2': 23.9 });
  await seed(b, { 'old-4': -2, 'old-5': -5, 'live-3': 0.5 });

  const first = await purgeExpired(systemCtx(servicesOf(db)), { batchSize: 2, maxBatches: 1 });
  t.equal(first, 2, 'one batch of 2 when told to stop there');
  const rest = await purgeExpired(systemCtx(servicesOf(db)), { batchSize: 2 });
  t.ok(rest >= 3, `the next run takes the rest, batch after batch (${rest})`);
  t.same(await keysOf(a), ['live-1', 'live-2'], 'account a keeps its live keys');
  t.same(await keysOf(b), ['live-3'], 'account b keeps its live key');
  t.equal(await purgeExpired(systemCtx(servicesOf(db))), 0, 'nothing left to purge');

  t.same(await withTx(a, (tx) => claim(tx, 'old-1', 'new request', 'res_new')), { claimed: true }, 'a purged key is free again');
  t.same(
    await withTx(a, (tx) => claim(tx, 'live-1', requestFingerprint('POST', '/x', { key: 'live-1' }), 'res_other')),
    { claimed: false, resourceId: 'res_live-1' },
    'a live key still replays',
  );
  await seed(a, { 'expired-unpurged': -1 });
  t.same(await withTx(a, (tx) => claim(tx, 'expired-unpurged', 'another body', 'res_taken')), { claimed: true }, 'an expired key not yet purged is taken over');
  const row = await db('idempotency_keys').where({ accountId: a.accountId, key: 'expired-unpurged' }).first();
  t.equal(row.resourceId, 'res_taken');
  t.ok(row.expiresAt > new Date(testNow()), 'with a new expiry');
});

t.test('the dispatcher tick purges expired keys', async (t) => {
  const a = await tenant();
  await seed(a, { 'tick-old': -1, 'tick-live': 2 });
  const result = await new Dispatcher(servicesOf(db), quietLog).tick();
  t.ok(result.purgedIdempotencyKeys >= 1, `purged (${result.purgedIdempotencyKeys})`);
  t.same(await keysOf(a), ['tick-live']);
  t.equal((await new Dispatcher(servicesOf(db), quietLog).tick()).purgedIdempotencyKeys, 0, 'a second tick has nothing to do');
});
