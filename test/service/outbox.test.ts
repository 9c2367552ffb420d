import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import t, { type Test } from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import { Listener } from '../../server/core/notify.js';
import * as comments from '../../server/domains/comments/service.js';
import * as ticketActions from '../../server/flows/ticket-actions.js';
import * as webhooks from '../../server/domains/webhooks/service.js';
import { MAX_ATTEMPTS, scheduledDelayMs } from '../../server/worker/backoff.js';
import { Dispatcher, lendingReserve, type OutboxOptions } from '../../server/worker/dispatcher.js';
import * as events from '../../server/core/outbox/events.js';
import * as outbox from '../../server/core/outbox/service.js';
import { adminQuery, freshDatabase } from '../helpers/db.js';
import { receiver, type Answer, type Received } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';
import { createBrand } from '../../server/flows/brands.js';
import { createAccount } from '../../server/flows/accounts.js';
import { servicesOf, statementsDuring, testConfig } from '../helpers/app.js';
import { createServices } from '../../server/compose.js';
import { createDb } from '../../server/core/db.js';
import { metricsPart } from '../../server/core/metrics.js';
import { attachmentDepsOf } from '../../server/domains/attachments/service.js';
import { updateTicket } from '../../server/flows/ticket-update.js';
import { createTicket } from '../../server/flows/ticket-create.js';
import { createComment } from '../../server/flows/comment-create.js';
import { onTestDay, testNow } from '../helpers/clock.js';

const { db, name, url } = await freshDatabase(t);
const quietLog = { info: () => undefined, error: () => undefined };
const LOOPBACK = { allowPrivate: true };

async function setup(): Promise<{ ctx: TenantCtx; brandId: string }> {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `evt-${Math.random().toString(36).slice(2)}@example.com` });
  const ctx: TenantCtx = { ...tenantCtx(systemCtx(servicesOf(db)), created.account.id, true), actor: { type: 'api', id: 'key_test', name: 'CI key' } };
  const brand = await createBrand(ctx, { name: 'Events' });
  return { ctx, brandId: brand.id };
}

/** A brand with one webhook to a fresh loopback receiver. */
async function withHook(t: Test, subscribed: string[] = ['ticket.created'], answer?: (req: Received) => Answer, secret?: string) {
  const { ctx, brandId } = await setup();
  const hook = await receiver(t, answer);
  const webhook = await webhooks.create(ctx, LOOPBACK, brandId, { url: `${hook.url}/hook`, events: subscribed as never, ...(secret ? { secret } : {}) });
  return { ctx, brandId, hook, webhook };
}

/** A clock tests move by hand, starting a second ahead so rows just committed are due. */
function clock() {
  let now = testNow() + 1000;
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
    set: (ms: number) => {
      now = ms;
    },
  };
}

function dispatcher(t: Test, options: OutboxOptions = {}): Dispatcher {
  const d = new Dispatcher(servicesOf(db), quietLog, null, { webhooks: { allowPrivate: true, timeoutMs: 3000 }, random: () => 0.5, concurrency: 4, ...options });
  t.teardown(() => d.stop());
  return d;
}

const rowsOf = (webhookId: string) => db('outbox').where({ webhookId }).orderBy('id');
const webhookRow = (id: string) => db('webhooks').where({ id }).first();

/** `n` events in one transaction (bodies say which), as the services enqueue them. */
async function enqueue(ctx: TenantCtx, brandId: string, n: number, name = 'ticket.created'): Promise<void> {
  await withTx(ctx, (tx) =>
    outbox.enqueueEvents(
      tx,
      Array.from({ length: n }, (_, i) => ({ brandId, names: [name], ticketId: null, ticketFields: [], data: { n: i } })),
    ),
  );
}

// Tests share the database: messages a test leaves due must not reach the next test's dispatchers.
t.afterEach(async () => {
  await db('outbox').whereIn('status', ['pending', 'retrying']).delete();
});

t.test('enqueue refuses to run outside a transaction', async (t) => {
  const { ctx, brandId } = await setup();
  await t.rejects(outbox.enqueue(ctx, { kind: 'webhook', brandId, event: 'ticket.created', payload: {} }), /inside the change's transaction/);
  await t.rejects(events.ticketsDeleted(ctx, brandId, ['tkt_x']), /inside the change's transaction/);
});

t.test('a rolled-back change leaves no outbox row and no audit row; the committed one leaves both', async (t) => {
  const { ctx, brandId, webhook } = await withHook(t, ['ticket.updated']);
  const ticket = (await createTicket(ctx, brandId, { title: 'Before' })).ticket;
  const count = async () => ({
    outbox: Number((await db('outbox').where({ webhookId: webhook.id }).count({ n: '*' }))[0]!.n),
    audit: Number((await db('auditLog').where({ entityId: ticket.id, event: 'ticket.updated' }).count({ n: '*' }))[0]!.n),
  });
  await t.rejects(
    withTx(ctx, async (tx) => {
      await updateTicket(tx, brandId, ticket.id, { title: 'Rolled back' });
      t.same(
        await withTx(tx, async () => ({
          outbox: Number((await tx.db('outbox').where({ webhookId: webhook.id }).count({ n: '*' }))[0]!.n),
        })),
        { outbox: 1 },
        'inside the transaction the row exists',
      );
      throw new Error('boom');
    }),
    /boom/,
  );
  t.same(await count(), { outbox: 0, audit: 0 }, 'nothing after the rollback');
  await updateTicket(ctx, brandId, ticket.id, { title: 'Committed' });
  t.same(await count(), { outbox: 1, audit: 1 });
});

t.test('fan-out: one row per subscribed, enabled webhook of the brand and mode, in one statement', async (t) => {
  const { ctx, brandId } = await setup();
  const url = 'http://127.0.0.1:9/x';
  const a = await webhooks.create(ctx, LOOPBACK, brandId, { url, events: ['ticket.created', 'ticket.updated'] });
  const b = await webhooks.create(ctx, LOOPBACK, brandId, { url, events: ['ticket.updated'] });
  const off = await webhooks.create(ctx, LOOPBACK, brandId, { url, events: ['ticket.created'], enabled: false });
  const otherBrand = await createBrand(ctx, { name: 'Other' });
  const elsewhere = await webhooks.create(ctx, LOOPBACK, otherBrand.id, { url, events: ['ticket.created'] });
  const testCtx = { ...ctx, livemode: false };
  const testBrand = await createBrand(testCtx, { name: 'Test mode' });
  const testHook = await webhooks.create(testCtx, LOOPBACK, testBrand.id, { url, events: ['ticket.created'] });

  const ticket = (await createTicket(ctx, brandId, { title: 'Fan out' })).ticket;
  t.same(
    (await rowsOf(a.id)).map((r) => r.event),
    ['ticket.created'],
  );
  for (const w of [b, off, elsewhere, testHook]) t.same(await rowsOf(w.id), [], 'no row for a webhook not subscribed, disabled, of another brand or mode');

  const statements: string[] = [];
  const spy = (q: { sql: string }) => statements.push(q.sql);
  await withTx(ctx, async (tx) => {
    db.on('query', spy);
    try {
      await outbox.enqueueEvents(tx, [
        events.commentCreatedEvent(brandId, {
          id: 'cmt_x',
          ticketId: ticket.id,
          body: 'x',
          authorId: null,
          authorName: null,
          authorType: 'AGENT',
          parentId: null,
          isInternal: false,
          createdAt: new Date(testNow()),
          updatedAt: new Date(testNow()),
          deletedAt: null,
        }),
      ]);
      await events.ticketsUpdated(tx, brandId, [{ ticketId: ticket.id, changes: ['title'] }]);
    } finally {
      db.off('query', spy);
    }
  });
  t.equal(statements.length, 2, 'one statement per enqueue, with or without subscribers');
  t.same((await db('outbox').whereIn('webhookId', [a.id, b.id]).where('event', 'ticket.updated').count({ n: '*' }))[0]!.n, '2', 'one row per subscriber');
  t.same((await db('outbox').where('event', 'like', '%comment%').whereIn('webhookId', [a.id, b.id]).count({ n: '*' }))[0]!.n, '0', 'nothing for an event nobody subscribes to');
});

t.test('bodies follow the contract; each subscriber gets the event under the name it chose', async (t) => {
  const { ctx, brandId } = await setup();
  const url = 'http://127.0.0.1:9/x';
  const ticketHook = await webhooks.create(ctx, LOOPBACK, brandId, { url, events: ['ticket.created', 'ticket.updated', 'ticket.deleted'] });
  const short = await webhooks.create(ctx, LOOPBACK, brandId, { url, events: ['comment.created', 'comment.updated', 'comment.deleted'] });
  const long = await webhooks.create(ctx, LOOPBACK, brandId, { url, events: ['ticket.comment.created'] });

  const ticket = (await createTicket(ctx, brandId, { title: 'Refund', customerEmail: 'zoe@example.com', customerName: 'Zoë', priority: 'high' })).ticket;
  await updateTicket(ctx, brandId, ticket.id, { status: 'pending', assigneeId: null, title: 'Refund please' });
  const comment = (await createComment(ctx, brandId, ticket.id, { body: 'On it', authorId: 'mem_1' })).comment;
  await comments.update(ctx, brandId, comment.id, { body: 'On it now' });
  await comments.remove(ctx, brandId, comment.id);
  await ticketActions.bulk(ctx, brandId, { action: 'delete', ticketIds: [ticket.id] } as Parameters<typeof ticketActions.bulk>[2]);

  const bodies = async (id: string) =>
    (await rowsOf(id)).map((r) => r.payload as { id: string; event: string; brand_id: string; data: Record<string, unknown>; timestamp: string });
  const [created, updated, deleted] = await bodies(ticketHook.id);
  const customer = { customerId: ticket.customerId, customerEmail: 'zoe@example.com', customerName: 'Zoë' };
  t.same(Object.keys(created!).sort(), ['brand_id', 'data', 'event', 'id', 'source', 'timestamp']);
  t.match(created!, { event: 'ticket.created', brand_id: brandId, id: /^evt_/, source: 'api' }, 'source: where the change came from, as its audit entry says');
  t.same(created!.data, {
    id: ticket.id,
    ticketNumber: ticket.ticketNumber,
    title: 'Refund',
    status: 'open',
    priority: 'high',
    source: 'api',
    createdAt: ticket.createdAt,
    ...customer,
  });
  t.match(updated!.data, {
    id: ticket.id,
    ticketNumber: ticket.ticketNumber,
    title: 'Refund please',
    status: 'pending',
    priority: 'high',
    assigneeId: null,
    changes: ['title', 'status'],
    ...customer,
  });
  t.same(Object.keys(updated!.data).sort(), [
    'assigneeId',
    'changes',
    'customerEmail',
    'customerId',
    'customerName',
    'id',
    'priority',
    'status',
    'ticketNumber',
    'title',
    'updatedAt',
  ]);
  t.match(deleted!, { event: 'ticket.deleted', data: { id: ticket.id, deletedAt: String } }, 'bulk delete announces ticket.deleted');

  const [shortCreated, shortUpdated, shortDeleted] = await bodies(short.id);
  const [longCreated] = await bodies(long.id);
  t.equal(shortCreated!.event, 'comment.created');
  t.equal(longCreated!.event, 'ticket.comment.created', 'the name the webhook subscribed to');
  t.equal(shortCreated!.id, longCreated!.id, 'one event, one id');
  t.same(shortCreated!.data, longCreated!.data);
  t.match(longCreated!.data, {
    ticketId: ticket.id,
    ticketNumber: ticket.ticketNumber,
    comment: { id: comment.id, body: 'On it', authorId: 'mem_1', authorType: 'AGENT', createdAt: comment.createdAt },
    ...customer,
  });
  t.match(shortUpdated!.data, { comment: { body: 'On it now' }, changes: ['body'] });
  t.match(shortDeleted!, { event: 'comment.deleted', data: { comment: { id: comment.id, deletedAt: String } } });
});

t.test('a delivery is one signed POST that independent verifiers accept', async (t) => {
  const { ctx, brandId, hook, webhook } = await withHook(t);
  const own = await webhooks.create(ctx, LOOPBACK, brandId, { url: `${hook.url}/own`, events: ['ticket.created'], secret: 'plain-ascii-secret-42' });
  await createTicket(ctx, brandId, { title: 'Signed' });
  const d = dispatcher(t); // the real clock: Standard Webhooks rejects timestamps 5 minutes off
  t.match(await d.deliverDue(), { claimed: 2, success: 2 });

  const got = hook.received.find((r) => r.path === '/hook')!;
  const [row] = await rowsOf(webhook.id);
  t.equal(got.headers['content-type'], 'application/json');
  t.equal(got.headers['user-agent'], 'ticketd');
  t.equal(got.headers['webhook-id'], row.id, 'webhook-id is the delivery id');
  t.ok(Math.abs(Number(got.headers['webhook-timestamp']) - testNow() / 1000) < 60, 'webhook-timestamp is now, in seconds');
  t.same(JSON.parse(got.body), row.payload, 'the stored body');

  // Standard Webhooks, by the reference library, with the secret as given.
  t.same(
    onTestDay(() => new StandardWebhook(webhook.secret).verify(got.body, got.headers as Record<string, string>)),
    row.payload,
    'standardwebhooks verifies',
  );
  t.throws(() => onTestDay(() => new StandardWebhook(webhook.secret).verify(`${got.body} `, got.headers as Record<string, string>)), 'a changed body does not verify');
  // X-Dispatch-Signature, from its description: sha256=<hex HMAC-SHA256 of the raw body, keyed by the secret>.
  const expected = Buffer.from(`sha256=${createHmac('sha256', webhook.secret).update(got.body).digest('hex')}`);
  const sent = Buffer.from(String(got.headers['x-dispatch-signature']));
  t.ok(sent.length === expected.length && timingSafeEqual(sent, expected), 'X-Dispatch-Signature verifies');

  const ownGot = hook.received.find((r) => r.path === '/own')!;
  t.ok(
    onTestDay(() => new StandardWebhook('plain-ascii-secret-42', { format: 'raw' }).verify(ownGot.body, ownGot.headers as Record<string, string>)),
    "a secret of the client's own verifies in raw format",
  );
  t.equal(ownGot.headers['x-dispatch-signature'], `sha256=${createHmac('sha256', own.secret).update(ownGot.body).digest('hex')}`);
  t.match(await webhookRow(webhook.id), { failureCount: 0, lastTriggeredAt: Date });
});

t.test('a delivered webhook settles in one statement, its webhook touched in it; a failure settles in a transaction', async (t) => {
  let failing = false;
  const { ctx, brandId, hook, webhook } = await withHook(t, ['ticket.created'], () => ({ status: failing ? 500 : 200 }));
  await enqueue(ctx, brandId, 1);
  const d = dispatcher(t);
  const statements = await statementsDuring(db, () => d.deliverDue());
  t.equal(hook.received.length, 1);
  const writes = statements.filter((s) => /update|insert|delete|begin|commit/i.test(s.split('\n')[0]!) && !/lease_owner = \?, lease_expires_at = \?, available_at/.test(s));
  t.equal(writes.length, 1, `one write after the claim:\n${writes.join('\n')}`);
  t.match(writes[0], /^with settled as \(update "outbox"/, 'the settle');
  t.match(writes[0], /webhook_succeeded as \(update webhooks/, 'and the webhook, in it');
  t.notOk(statements.includes('BEGIN;'), 'no transaction');
  t.match(await webhookRow(webhook.id), { failureCount: 0, lastTriggeredAt: Date });

  failing = true;
  await enqueue(ctx, brandId, 1);
  t.ok((await statementsDuring(db, () => d.deliverDue())).includes('BEGIN;'), 'a failure: the settle and the count in a transaction');
  t.match(await webhookRow(webhook.id), { failureCount: 1, lastFailure: 'HTTP 500' });
});

t.test('a delivery reads its webhook with its claim, not in a statement of its own; a change to the webhook before the claim is seen', async (t) => {
  const { ctx, brandId, hook, webhook } = await withHook(t);
  await enqueue(ctx, brandId, 1);
  const d = dispatcher(t);
  const statements = await statementsDuring(db, () => d.deliverDue());
  t.equal(hook.received.length, 1);
  const claims = statements.filter((s) => /^with picked as[\s\S]*update outbox o set lease_owner/.test(s.trim()));
  t.equal(claims.length, 1, 'one claim');
  t.match(
    claims[0],
    /join webhooks w\s+on w\.account_id = \S+ and w\.account_id = picked\.account_id and w\.livemode = picked\.livemode and w\.id = picked\.webhook_id/,
    'which reads the webhook, in its tenant',
  );
  const reads = statements.filter((s) => /^select[\s\S]*from "?webhooks"?/.test(s.trim()));
  t.same(reads, [], 'no read of the webhook of its own');

  await webhooks.update(ctx, LOOPBACK, brandId, webhook.id, { url: `${hook.url}/moved` });
  await enqueue(ctx, brandId, 1);
  await d.deliverDue();
  t.equal(hook.received.at(-1)!.path, '/moved', 'the URL as it is at the claim');
  await enqueue(ctx, brandId, 1);
  await webhooks.update(ctx, LOOPBACK, brandId, webhook.id, { enabled: false });
  t.match(await d.deliverDue(), { claimed: 1, failed: 1 }, 'disabled after the event, before the claim: not sent');
  t.equal(hook.received.length, 2);
});

t.test("the claim and the settle commit without waiting for the disk; the connection's next transactions still wait", async (t) => {
  const oneConnection = createDb(url, { poolMax: 1, poolMin: 0 });
  t.teardown(() => oneConnection.destroy());
  // The suite's own cluster may not wait for the disk at all: the connection starts waiting here.
  await oneConnection.raw("select set_config('synchronous_commit', 'on', false)");
  const { ctx, brandId, hook } = await withHook(t);
  await enqueue(ctx, brandId, 1);
  const statements = await statementsDuring(oneConnection, async () => {
    const d = new Dispatcher(createServices({ clock: testNow, config: testConfig({}), db: oneConnection }), quietLog, null, { webhooks: { allowPrivate: true, timeoutMs: 3000 } });
    t.teardown(() => d.stop());
    t.match(await d.deliverDue(), { claimed: 1, success: 1 });
  });
  t.equal(hook.received.length, 1);
  const bookkeeping = statements.filter((s) => /^with (picked|settled) as/.test(s.trim()));
  t.equal(bookkeeping.length, 2, `the claim and the settle, of:\n${statements.join('\n')}`);
  t.ok(
    bookkeeping.every((s) => s.includes("set_config('synchronous_commit', 'off', true)")),
    'each commits without waiting for its WAL to reach the disk',
  );
  const after = (await oneConnection.raw('show synchronous_commit')) as { rows: { synchronous_commit: string }[] };
  t.not(after.rows[0]!.synchronous_commit, 'off', 'local to their own transactions: the same connection waits again');
});

t.test('two dispatchers on one database deliver 1,000 events exactly once each', async (t) => {
  const { ctx, brandId, hook, webhook } = await withHook(t);
  await enqueue(ctx, brandId, 1000);
  const a = dispatcher(t, { concurrency: 8, instanceId: 'a' });
  const b = dispatcher(t, { concurrency: 8, instanceId: 'b' });
  const [sa, sb] = await Promise.all([a.deliverDue(), b.deliverDue()]);
  t.equal(sa.success + sb.success, 1000, `a delivered ${sa.success}, b ${sb.success}`);
  t.equal(sa.lost + sb.lost, 0, 'no settle lost its lease');
  const perId = new Map<string, number>();
  for (const r of hook.received) perId.set(String(r.headers['webhook-id']), (perId.get(String(r.headers['webhook-id'])) ?? 0) + 1);
  t.equal(perId.size, 1000, '1,000 distinct deliveries');
  t.ok(
    [...perId.values()].every((n) => n === 1),
    'each exactly once',
  );
  t.same(new Set(hook.received.map((r) => (JSON.parse(r.body) as { data: { n: number } }).data.n)).size, 1000, 'every event');
  t.same(await db('outbox').where({ webhookId: webhook.id }).whereNot('status', 'success').count({ n: '*' }).first(), { n: '0' });
});

t.test('a dispatcher that claimed a batch and died loses nothing: its leases expire and another delivers', async (t) => {
  const { ctx, brandId, hook, webhook } = await withHook(t);
  await enqueue(ctx, brandId, 5);
  const time = clock();
  const leaseMs = 60_000;
  const dead = await outbox.claim(systemCtx(servicesOf(db)), 'killed-dispatcher', new Date(time.now()), new Date(time.now() + leaseMs), 10);
  t.equal(dead.length, 5, 'the doomed dispatcher claimed the batch');
  const survivor = dispatcher(t, { now: time.now, leaseMs });
  t.match(await survivor.deliverDue(), { claimed: 0 }, 'leased rows are not due');
  time.advance(leaseMs + 1);
  t.match(await survivor.deliverDue(), { claimed: 5, success: 5 }, 'after the lease expired');
  t.equal(hook.received.length, 5);
  t.same(
    (await rowsOf(webhook.id)).map((r) => [r.status, r.attempts, r.leaseOwner]),
    Array(5).fill(['success', 2, null]),
    'the lost claim counted as an attempt',
  );
  const lateSuccess = { status: 'success' as const, availableAt: null, error: null, responseCode: 200, responseBody: 'ok', attemptedAt: new Date(time.now() + 3_600_000) };
  const triggered = (await webhookRow(webhook.id)).lastTriggeredAt;
  t.equal(
    await outbox.settle(systemCtx(servicesOf(db)), dead[0]!, lateSuccess, [webhooks.successPart(ctx, webhook.id, lateSuccess.attemptedAt, outbox.SETTLED)]),
    false,
    'a late settle by the old owner changes nothing',
  );
  t.same((await webhookRow(webhook.id)).lastTriggeredAt, triggered, "nor does its kind's part, gated on the settled row");
  t.equal(
    await withTx(systemCtx(servicesOf(db)), (tx) =>
      outbox.settle(tx, dead[0]!, { status: 'failed', availableAt: null, error: 'late', responseCode: null, responseBody: null, attemptedAt: new Date(testNow()) }),
    ),
    false,
    'in a transaction neither',
  );
  t.equal((await rowsOf(webhook.id))[0].status, 'success');
});

/** A promise the test resolves when it wants a hanging receiver to answer. */
function gate(): { opened: Promise<void>; open(): void } {
  let open = () => undefined as void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

t.test('leases are 30 s and renewed while the attempt runs; a renewal fails once another dispatcher took the message', async (t) => {
  const hanging = gate();
  const { ctx, brandId, hook, webhook } = await withHook(t, ['ticket.created'], () => ({ until: hanging.opened }));
  await enqueue(ctx, brandId, 1);
  const time = clock();
  const slow = dispatcher(t, { now: time.now, webhooks: { allowPrivate: true, timeoutMs: 120_000 } });
  const run = slow.deliverDue();
  await until('the request', () => hook.received.length === 1);
  const leaseEnd = async () => new Date((await rowsOf(webhook.id))[0].leaseExpiresAt).getTime();
  t.equal((await leaseEnd()) - time.now(), 30_000, 'a 30-second lease');
  time.advance(20_000);
  t.equal(await slow.renewLeases(), 1, 'renewed while the receiver takes its time');
  t.equal(await leaseEnd(), time.now() + 30_000);
  time.advance(20_000);
  t.match(await dispatcher(t, { now: time.now }).deliverDue(), { claimed: 0 }, 'past the first lease, the message is still not due for anyone else');
  hanging.open();
  t.match(await run, { claimed: 1, success: 1, lost: 0 });
  t.equal(hook.received.length, 1, 'sent once');

  const stalled = gate();
  hook.setAnswer(() => ({ until: stalled.opened }));
  await enqueue(ctx, brandId, 1);
  const stuck = dispatcher(t, { now: time.now, webhooks: { allowPrivate: true, timeoutMs: 120_000 } });
  const stuckRun = stuck.deliverDue();
  await until('the second request', () => hook.received.length === 2);
  time.advance(30_001); // the process stalled past its lease without renewing
  const taken = await outbox.claim(systemCtx(servicesOf(db)), 'another-dispatcher', new Date(time.now()), new Date(time.now() + 30_000), 10);
  t.equal(taken.length, 1, 'another dispatcher claimed the expired lease');
  t.equal(await stuck.renewLeases(), 0, 'the renewal is refused: the lease is no longer ours');
  t.equal((await rowsOf(webhook.id))[1].leaseOwner, 'another-dispatcher');
  stalled.open();
  t.match(await stuckRun, { claimed: 1, success: 0, lost: 1 }, 'and its settle changes nothing');
});

t.test('the messages of a dispatcher that is gone are due at once; those of one alive (its owner lock held) wait', async (t) => {
  const gone = await withHook(t);
  const alive = await withHook(t);
  await enqueue(gone.ctx, gone.brandId, 3);
  const time = clock();
  const leaseNow = () => [new Date(time.now()), new Date(time.now() + 30_000)] as const;
  t.equal((await outbox.claim(systemCtx(servicesOf(db)), 'killed-dispatcher', ...leaseNow(), 10)).length, 3, 'claimed by a process that then died');
  // A live dispatcher holds its owner lock on its listening connection.
  const lock = Listener.forServices(servicesOf(db), [], [outbox.ownerLock('live-dispatcher')]);
  const up = new Promise((resolve) => lock.once('up', resolve));
  lock.start();
  t.teardown(() => lock.close());
  await up;
  await enqueue(alive.ctx, alive.brandId, 2);
  t.equal((await outbox.claim(systemCtx(servicesOf(db)), 'live-dispatcher', ...leaseNow(), 10)).length, 2, 'claimed by a process that lives');

  const survivor = dispatcher(t, { now: time.now });
  const tick = await survivor.tick();
  t.equal(tick.reclaimed, 3, "the dead process's messages are due again without waiting for their leases");
  t.match(tick.delivery, { claimed: 3, success: 3 });
  t.equal(gone.hook.received.length, 3);
  t.same(
    (await rowsOf(alive.webhook.id)).map((r) => [r.status, r.leaseOwner]),
    [
      ['pending', 'live-dispatcher'],
      ['pending', 'live-dispatcher'],
    ],
    "the live process's claims are left alone",
  );

  await lock.close(); // that process dies too: PostgreSQL frees its lock with its session
  await until('its messages', async () => (await survivor.tick()).reclaimed === 2);
  t.equal(alive.hook.received.length, 2);
});

t.test('start(): a dispatcher that starts after another died delivers its messages at once, not after their leases', async (t) => {
  const { ctx, brandId, hook } = await withHook(t);
  await enqueue(ctx, brandId, 2);
  const claimed = await outbox.claim(systemCtx(servicesOf(db)), 'killed-dispatcher', new Date(testNow()), new Date(testNow() + 30_000), 10);
  t.equal(claimed.length, 2);
  dispatcher(t).start();
  await until('the deliveries', () => hook.received.length === 2);
  t.same(hook.received.map((r) => r.headers['webhook-id']).sort(), claimed.map((r) => r.id).sort());
});

t.test('a settle that fails while the database is away is retried when it returns: the message is not sent again', async (t) => {
  const hanging = gate();
  const { ctx, brandId, hook, webhook } = await withHook(t, ['ticket.created'], () => ({ until: hanging.opened }));
  await enqueue(ctx, brandId, 1);
  const lines: string[] = [];
  const log = { info: (_: object, m: string) => lines.push(m), error: (_: object, m: string) => lines.push(m) };
  const time = clock();
  const d = new Dispatcher(servicesOf(db), log, null, { now: time.now, webhooks: { allowPrivate: true, timeoutMs: 120_000 } });
  t.teardown(() => d.stop());
  const run = d.deliverDue();
  await until('the request', () => hook.received.length === 1);
  // The database goes away while the receiver is answering.
  const allowConnections = (allow: boolean) => adminQuery(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS ${allow}`);
  t.teardown(() => allowConnections(true));
  await allowConnections(false);
  await adminQuery('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
  hanging.open();
  await until('a failed settle', () => lines.some((m) => m.startsWith('could not settle')));
  await allowConnections(true);
  t.match(await run, { claimed: 1, success: 1, lost: 0 }, 'settled once the database answered again');
  t.match((await rowsOf(webhook.id))[0], { status: 'success', attempts: 1, leaseOwner: null });
  time.advance(10 * 60_000);
  t.match(await d.deliverDue(), { claimed: 0 }, 'nothing left to send');
  t.equal(hook.received.length, 1, 'the receiver got it once');
});

t.test(
  "fairness: one account's hanging receiver holds its share while another account's events are due; alone it borrows the free slots but the reserve, which a third account's events then flow through",
  async (t) => {
    const hanging = gate();
    const slow = await withHook(t, ['ticket.created'], () => ({ until: hanging.opened }));
    const slowOpenAsFastArrived: number[] = [];
    const fast = await withHook(t, ['ticket.created'], () => {
      slowOpenAsFastArrived.push(slow.hook.received.length);
      return {};
    });
    await enqueue(slow.ctx, slow.brandId, 10); // first in line
    await enqueue(fast.ctx, fast.brandId, 5);
    const d = dispatcher(t, { concurrency: 4, accountConcurrency: 2, webhooks: { allowPrivate: true, timeoutMs: 120_000 } });
    t.equal(lendingReserve(4), 1);
    const run = d.deliverDue();
    await until("the other account's events", () => fast.hook.received.length === 5);
    t.ok(
      slowOpenAsFastArrived.every((n) => n <= 2),
      `the hanging receiver had at most two requests open while the other account's events went out (${slowOpenAsFastArrived.join(', ')})`,
    );
    await until('the slots the other account left, borrowed but one', () => slow.hook.received.length === 3);
    t.equal(
      Number((await db('outbox').where({ webhookId: slow.webhook.id }).whereNotNull('leaseOwner').where('status', 'pending').count({ n: '*' }).first())!.n),
      3,
      'three claimed, no more',
    );

    const third = await withHook(t);
    await enqueue(third.ctx, third.brandId, 3);
    const again = d.deliverDue();
    await until("a third account's events, through the reserve", () => third.hook.received.length === 3);
    t.equal(slow.hook.received.length, 3, 'the hanging receiver still has three open');
    hanging.open();
    t.match(await run, { claimed: 18, success: 18 }, 'the rest follow once it answers');
    await again;
    t.equal(slow.hook.received.length, 10);
  },
);

t.test('a delivery that ends while a claim runs frees its share for the next claim: the run does not end with messages due', async (t) => {
  // One connection, handed out in turn: the settle waits for it before the claim does, so the claim
  // reads the share as still full and runs after the delivery has ended.
  const oneConnection = createDb(url, { poolMax: 1, poolMin: 0 });
  t.teardown(() => oneConnection.destroy());
  const pool = (oneConnection.client as { pool: { numPendingAcquires(): number } }).pool;
  const answered = gate();
  const delivered: string[] = [];
  const handler = {
    deliver: async (_ctx: unknown, message: outbox.Claimed) => {
      delivered.push(message.id);
      if (delivered.length === 1) await answered.opened;
      return { outcome: 'success' as const, error: null, responseCode: 200, responseBody: null };
    },
  };
  const { ctx, brandId } = await withHook(t);
  await enqueue(ctx, brandId, 2);
  const d = new Dispatcher(createServices({ clock: testNow, config: testConfig({}), db: oneConnection }), quietLog, null, {
    concurrency: 2,
    accountConcurrency: 1,
    handlers: { webhook: handler },
  });
  t.teardown(() => d.stop());
  const run = d.deliverDue();
  await until('the first delivery', () => delivered.length === 1);
  const holding = gate();
  const held = gate();
  const holder = oneConnection.transaction(async (trx) => {
    await trx.raw('select 1');
    held.open();
    await holding.opened;
  });
  await held.opened; // the run's claim at the account's share came first and is over
  answered.open();
  await until('the settle waiting for the connection', () => pool.numPendingAcquires() === 1);
  const again = d.deliverDue(); // a claim while the account is still at its share
  await until('the claim waiting behind it', () => pool.numPendingAcquires() === 2);
  holding.open();
  await holder;
  t.match(await run, { claimed: 2, success: 2 }, 'the run under way claims the second message once the first ended');
  await again;
  t.equal(delivered.length, 2);
});

t.test('the claim skips accounts at their share and serves the least busy account first', async (t) => {
  const a = await withHook(t);
  const b = await withHook(t);
  await enqueue(a.ctx, a.brandId, 6);
  await enqueue(b.ctx, b.brandId, 3);
  const ctx = systemCtx(servicesOf(db));
  const time = clock();
  const claim = (limit: number, held: [string, number][]) =>
    outbox.claim(ctx, 'fair', new Date(time.now()), new Date(time.now() + 30_000), limit, { perAccount: 2, held: new Map(held) });
  const accountOf = (rows: outbox.Claimed[]) => rows.map((r) => (r.accountId === a.ctx.accountId ? 'a' : 'b'));
  t.same(accountOf(await claim(10, [[a.ctx.accountId, 1]])), ['b', 'a', 'b'], 'a holds one already: one more of a, two of b, b first');
  t.same(accountOf(await claim(10, [[a.ctx.accountId, 2]])), ['b'], 'a at its share gets none');
  t.same(accountOf(await claim(10, [])), ['a', 'a'], 'an account holding nothing gets its whole share');
});

t.test('the slots no other account waits for are lent to the accounts at their share, the least busy first, but the reserve', async (t) => {
  const a = await withHook(t);
  const b = await withHook(t);
  await enqueue(a.ctx, a.brandId, 8); // first in line
  await enqueue(b.ctx, b.brandId, 3);
  const ctx = systemCtx(servicesOf(db));
  const time = clock();
  const claim = (limit: number, held: [string, number][], reserve?: number) =>
    outbox.claim(ctx, 'lend', new Date(time.now()), new Date(time.now() + 30_000), limit, { perAccount: 2, held: new Map(held), ...(reserve === undefined ? {} : { reserve }) });
  const accountOf = (rows: outbox.Claimed[]) => rows.map((r) => (r.accountId === a.ctx.accountId ? 'a' : 'b'));
  t.same(accountOf(await claim(6, [[a.ctx.accountId, 2]])), ['b', 'b'], 'without a reserve nothing is lent: b its share, a none');
  t.same(
    accountOf(
      await claim(
        6,
        [
          [a.ctx.accountId, 2],
          [b.ctx.accountId, 2],
        ],
        2,
      ),
    ),
    ['a', 'b', 'a'],
    'both at their share, nobody else due: four slots lent in turn, a two, b the one it has left',
  );
  t.same(accountOf(await claim(6, [[a.ctx.accountId, 4]], 2)), ['a', 'a', 'a', 'a'], 'alone: every free slot but the reserve of two');
  t.same(accountOf(await claim(2, [[a.ctx.accountId, 8]], 2)), [], 'the reserve is never lent (a has two more due)');
  t.same(accountOf(await claim(3, [[a.ctx.accountId, 8]], 2)), ['a'], 'one slot past the reserve: one more');
});

t.test("fairness: an account with 1,000 due messages delays another account's single one by no more than one claim", async (t) => {
  const busy = await withHook(t);
  const quiet = await withHook(t);
  await enqueue(busy.ctx, busy.brandId, 1000); // all ahead in line
  await enqueue(quiet.ctx, quiet.brandId, 1);
  const ctx = systemCtx(servicesOf(db));
  const time = clock();
  const claim = (limit: number, held: [string, number][]) =>
    outbox.claim(ctx, 'fair', new Date(time.now()), new Date(time.now() + 30_000), limit, { perAccount: 8, held: new Map(held) });
  const first = await claim(16, []);
  t.same(
    first.map((r) => r.accountId),
    Array(8).fill(busy.ctx.accountId),
    'the first claim takes the busy account up to its share',
  );
  const second = await claim(8, [[busy.ctx.accountId, 8]]);
  t.same(
    second.map((r) => r.accountId),
    [quiet.ctx.accountId],
    'the next claim looks past it and finds the other account',
  );

  // Through a dispatcher: the quiet account's message starts among the first deliveries.
  await db('outbox').where({ leaseOwner: 'fair' }).update({ leaseOwner: null, leaseExpiresAt: null, availableAt: db.fn.now() });
  const started: string[] = [];
  const handler = {
    deliver: async (_ctx: unknown, message: outbox.Claimed) => {
      started.push(message.accountId);
      return { outcome: 'success' as const, error: null, responseCode: 200, responseBody: null };
    },
  };
  const d = dispatcher(t, { concurrency: 16, accountConcurrency: 8, handlers: { webhook: handler } });
  t.match(await d.deliverDue(), { claimed: 1001, success: 1001 });
  t.ok(started.indexOf(quiet.ctx.accountId) < 16, `the single message started ${started.indexOf(quiet.ctx.accountId) + 1}th of 1,001`);
});

t.test('finished messages past the retention are purged by the periodic jobs; pending ones and recent ones stay', async (t) => {
  const { ctx, brandId, webhook } = await withHook(t);
  await enqueue(ctx, brandId, 5);
  const rows = await rowsOf(webhook.id);
  const time = clock();
  const day = 86_400_000;
  const setRow = (i: number, status: string, ageDays: number, availableInDays = 0) =>
    db('outbox')
      .where({ id: rows[i].id })
      .update({ status, createdAt: new Date(time.now() - ageDays * day), availableAt: new Date(time.now() + availableInDays * day) });
  await setRow(0, 'success', 31);
  await setRow(1, 'failed', 31);
  await setRow(2, 'dead', 31);
  await setRow(3, 'retrying', 31, 1); // still to deliver, however old
  await setRow(4, 'success', 29);
  const tick = await dispatcher(t, { now: time.now }).tick();
  t.equal(tick.purgedOutbox, 3, 'the default retention is 30 days');
  t.same(
    (await rowsOf(webhook.id)).map((r) => r.id),
    [rows[3].id, rows[4].id],
  );
  t.equal((await dispatcher(t, { now: time.now, retentionDays: 7 }).tick()).purgedOutbox, 1, 'a shorter retention');
  t.same(
    (await rowsOf(webhook.id)).map((r) => r.status),
    ['retrying'],
  );
});

t.test('retries follow the schedule on 5xx; a success resets the failure count', async (t) => {
  let status = 500;
  const { ctx, brandId, hook, webhook } = await withHook(t, ['ticket.created'], () => ({ status, body: 'down' }));
  await createTicket(ctx, brandId, { title: 'Retry me' });
  const time = clock();
  const d = dispatcher(t, { now: time.now });
  const start = time.now();
  t.match(await d.deliverDue(), { retrying: 1 });
  let [row] = await rowsOf(webhook.id);
  t.match(row, { status: 'retrying', attempts: 1, lastError: 'HTTP 500', responseCode: 500, responseBody: 'down', leaseOwner: null });
  t.equal(new Date(row.availableAt).getTime(), start + scheduledDelayMs(1), 'next attempt after 1 minute');
  time.advance(scheduledDelayMs(1) - 1000);
  t.match(await d.deliverDue(), { claimed: 0 }, 'not before');
  time.advance(1000);
  t.match(await d.deliverDue(), { retrying: 1 });
  [row] = await rowsOf(webhook.id);
  t.equal(new Date(row.availableAt).getTime(), time.now() + scheduledDelayMs(2), 'then after 2 minutes');
  t.match(await webhookRow(webhook.id), { failureCount: 2, lastFailure: 'HTTP 500', enabled: true });
  status = 200;
  time.set(new Date(row.availableAt).getTime());
  t.match(await d.deliverDue(), { success: 1 });
  t.match((await rowsOf(webhook.id))[0], { status: 'success', attempts: 3, lastError: null, responseCode: 200 });
  t.match(await webhookRow(webhook.id), { failureCount: 0, lastFailure: 'HTTP 500' }, 'lastFailure stays for the record');
  t.equal(hook.received.length, 3);
});

t.test('429 and 503 honour Retry-After, in seconds or as a date, capped at 12 hours', async (t) => {
  const time = clock();
  time.set(Math.ceil(time.now() / 1000) * 1000); // HTTP dates have whole seconds
  const answers: Answer[] = [
    { status: 429, headers: { 'retry-after': '3600' } },
    { status: 503, headers: { 'retry-after': new Date(time.now() + 7200_000).toUTCString() } },
    { status: 429, headers: { 'retry-after': String(10 * 24 * 3600) } },
    { status: 429, headers: { 'retry-after': '1' } },
  ];
  let i = 0;
  const { ctx, brandId, webhook } = await withHook(t, ['ticket.created'], () => answers[i++]!);
  const d = dispatcher(t, { now: time.now, concurrency: 1 });
  const expected = [3600_000, 7200_000, 12 * 3600_000, scheduledDelayMs(1)];
  for (const [n, delay] of expected.entries()) {
    await createTicket(ctx, brandId, { title: `Busy ${n}` });
    await d.deliverDue();
    const row = await db('outbox').where({ webhookId: webhook.id }).orderBy('id', 'desc').first();
    t.equal(new Date(row.availableAt).getTime() - time.now(), delay, `${answers[n]!.status} Retry-After ${answers[n]!.headers!['retry-after']}`);
  }
});

t.test('other 4xx fail at once; 410 Gone also disables the webhook', async (t) => {
  const bad = await withHook(t, ['ticket.created'], () => ({ status: 400, body: 'nope' }));
  await createTicket(bad.ctx, bad.brandId, { title: 'Bad' });
  const time = clock();
  const d = dispatcher(t, { now: time.now });
  t.match(await d.deliverDue(), { failed: 1 });
  t.match((await rowsOf(bad.webhook.id))[0], { status: 'failed', attempts: 1, lastError: 'HTTP 400', responseBody: 'nope' });
  time.advance(30 * 24 * 3600_000);
  t.match(await d.deliverDue(), { claimed: 0 }, 'never retried');
  t.match(await webhookRow(bad.webhook.id), { enabled: true, failureCount: 1, lastFailure: 'HTTP 400' });

  const gone = await withHook(t, ['ticket.created', 'ticket.updated'], () => ({ status: 410 }));
  const ticket = (await createTicket(gone.ctx, gone.brandId, { title: 'Gone' })).ticket;
  t.match(await d.deliverDue(), { failed: 1 });
  t.match(await webhookRow(gone.webhook.id), { enabled: false, disabledReason: 'the receiver answered 410 Gone' });
  const [entry] = await db('auditLog').where({ entityId: gone.webhook.id, event: 'webhook.disabled' });
  t.match(entry, { performerType: 'system', performerName: 'dispatcher', metadata: { reason: 'the receiver answered 410 Gone' } }, 'audited');
  await updateTicket(gone.ctx, gone.brandId, ticket.id, { title: 'Still gone' });
  t.equal((await rowsOf(gone.webhook.id)).length, 1, 'a disabled webhook gets no new deliveries');
  t.equal(gone.hook.received.length, 1);
});

t.test('exhausted attempts dead-letter the message and disable the webhook', async (t) => {
  const { ctx, brandId, hook, webhook } = await withHook(t, ['ticket.created'], () => ({ status: 502 }));
  await createTicket(ctx, brandId, { title: 'Never' });
  const time = clock();
  const first = time.now();
  const d = dispatcher(t, { now: time.now });
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    t.equal((await d.deliverDue()).claimed, 1, `attempt ${attempt}`);
    time.set(new Date((await rowsOf(webhook.id))[0].availableAt).getTime());
  }
  const [row] = await rowsOf(webhook.id);
  t.match(row, { status: 'dead', attempts: MAX_ATTEMPTS, lastError: 'HTTP 502' });
  const days = (new Date(row.lastAttemptAt).getTime() - first) / 86_400_000;
  t.ok(days > 2.5 && days < 4, `the attempts spanned ${days.toFixed(2)} days`);
  t.equal(hook.received.length, MAX_ATTEMPTS);
  t.match(await webhookRow(webhook.id), { enabled: false, failureCount: MAX_ATTEMPTS, disabledReason: /every delivery attempt failed/ });
  const [view] = await webhooks.deliveries(ctx, brandId, webhook.id);
  t.match(view, { status: 'FAILED', state: 'dead', attempts: MAX_ATTEMPTS, nextAttempt: null });
  time.advance(30 * 24 * 3600_000);
  t.match(await d.deliverDue(), { claimed: 0 }, 'dead stays dead');
});

t.test('redirects are not followed; slow receivers time out; stored answers are capped', async (t) => {
  const redirect = await withHook(t, ['ticket.created'], (r) => (r.path === '/hook' ? { status: 302, headers: { location: '/elsewhere' } } : {}));
  await createTicket(redirect.ctx, redirect.brandId, { title: 'Moved' });
  const slow = await withHook(t, ['ticket.created'], () => ({ delayMs: 5000 }));
  await createTicket(slow.ctx, slow.brandId, { title: 'Slow' });
  const big = await withHook(t, ['ticket.created'], () => ({ body: 'x'.repeat(100_000) }));
  await createTicket(big.ctx, big.brandId, { title: 'Chatty' });

  const d = dispatcher(t, { webhooks: { allowPrivate: true, timeoutMs: 300 } });
  await d.deliverDue();
  t.match((await rowsOf(redirect.webhook.id))[0], { status: 'failed', responseCode: 302, lastError: /redirect \(HTTP 302\) not followed/ });
  t.same(
    redirect.hook.received.map((r) => r.path),
    ['/hook'],
    'the Location was not visited',
  );
  t.match((await rowsOf(slow.webhook.id))[0], { status: 'retrying', lastError: 'timeout after 300 ms', responseCode: null });
  const chatty = (await rowsOf(big.webhook.id))[0];
  t.match(chatty, { status: 'success', responseCode: 200 });
  t.equal(chatty.responseBody.length, 4096, 'the first 4 KiB are kept');
});

t.test('without webhookAllowPrivate, non-public addresses are refused again at delivery', async (t) => {
  const { ctx, brandId, hook, webhook } = await withHook(t);
  const port = new URL(hook.url).port;
  const byName = await webhooks.create(ctx, LOOPBACK, brandId, { url: `http://localhost:${port}/by-name`, events: ['ticket.created'] });
  await createTicket(ctx, brandId, { title: 'Rebound' });
  const d = dispatcher(t, { webhooks: { allowPrivate: false, timeoutMs: 3000 } });
  t.match(await d.deliverDue(), { failed: 2 });
  t.match((await rowsOf(webhook.id))[0], { status: 'failed', lastError: /^refused: 127\.0\.0\.1 is or resolves to a non-public address/ });
  t.match((await rowsOf(byName.id))[0], { status: 'failed', lastError: /^refused: localhost resolves to a non-public address/ }, 'checked on the address connected to');
  t.equal(hook.received.length, 0, 'nothing reached the receiver');
});

t.test('redeliver sends the same body again under a new id; rotation signs with both secrets during the grace', async (t) => {
  const { ctx, brandId, hook, webhook } = await withHook(t);
  await createTicket(ctx, brandId, { title: 'Again' });
  const d = dispatcher(t);
  await d.deliverDue();
  const [original] = await webhooks.deliveries(ctx, brandId, webhook.id);
  const rotated = await webhooks.rotateSecret(ctx, brandId, webhook.id, { graceMinutes: 10 });
  const copy = await webhooks.redeliver(ctx, brandId, webhook.id, original!.id);
  t.match(copy, { status: 'PENDING', attempts: 0, event: 'ticket.created' });
  t.match(await d.deliverDue(), { success: 1 });
  const [first, second] = hook.received;
  t.equal(second!.body, first!.body, 'the same bytes');
  t.equal(second!.headers['webhook-id'], copy.id);
  t.equal(String(second!.headers['webhook-signature']).split(' ').length, 2, 'two signatures during the grace period');
  t.ok(
    onTestDay(() => new StandardWebhook(rotated.secret).verify(second!.body, second!.headers as Record<string, string>)),
    'the new secret verifies',
  );
  t.ok(
    onTestDay(() => new StandardWebhook(webhook.secret).verify(second!.body, second!.headers as Record<string, string>)),
    'the old one still does',
  );
  t.equal(second!.headers['x-dispatch-signature'], `sha256=${createHmac('sha256', rotated.secret).update(second!.body).digest('hex')}`, 'X-Dispatch-Signature uses the new secret');
  const views = await webhooks.deliveries(ctx, brandId, webhook.id);
  t.same(
    views.map((v) => v.status),
    ['SUCCESS', 'SUCCESS'],
    'the original keeps its own log',
  );

  await webhooks.rotateSecret(ctx, brandId, webhook.id);
  await webhooks.redeliver(ctx, brandId, webhook.id, original!.id);
  await d.deliverDue();
  t.equal(String(hook.received[2]!.headers['webhook-signature']).split(' ').length, 1, 'without grace, one signature');
});

t.test('stop() interrupts deliveries in flight and gives them back', async (t) => {
  const { ctx, brandId, hook, webhook } = await withHook(t, ['ticket.created'], () => ({ delayMs: 5000 }));
  await createTicket(ctx, brandId, { title: 'Interrupted' });
  const d = new Dispatcher(servicesOf(db), quietLog, null, { webhooks: { allowPrivate: true, timeoutMs: 10_000 } });
  const run = d.deliverDue();
  await until('the request', () => hook.received.length === 1);
  await d.stop(50);
  t.match(await run, { claimed: 1, released: 1, success: 0 });
  t.match((await rowsOf(webhook.id))[0], { status: 'pending', leaseOwner: null, leaseExpiresAt: null, attempts: 1 });
  t.ok(new Date((await rowsOf(webhook.id))[0].availableAt).getTime() <= testNow(), 'due at once for any dispatcher');
});

t.test('start(): a commit wakes the dispatcher through LISTEN/NOTIFY', async (t) => {
  const { ctx, brandId, hook } = await withHook(t);
  const d = dispatcher(t);
  d.start();
  await createTicket(ctx, brandId, { title: 'Wake up' });
  await until('the delivery', () => hook.received.length === 1);
  t.equal(JSON.parse(hook.received[0]!.body).data.title, 'Wake up');
});

t.test('delivery reads its webhook through the tenant of the message: another account or mode finds nothing', async (t) => {
  const { ctx, webhook } = await withHook(t);
  const now = new Date(testNow());
  t.ok(await webhooks.deliveryTarget(ctx, webhook.id, now), 'its own tenant finds it');
  const other = await setup();
  t.equal(await webhooks.deliveryTarget(other.ctx, webhook.id, now), null, 'another account does not');
  t.equal(await webhooks.deliveryTarget({ ...ctx, livemode: false }, webhook.id, now), null, 'the other mode does not');
});

t.test("the dispatcher's metrics: deliveries by kind and outcome, their time, claims, jobs and ticks, its LISTEN connection", async (t) => {
  // Its own services: a registry of its own, whatever the other tests counted.
  const services = createServices({ clock: testNow, config: testConfig({}), db });
  t.teardown(() => services.close());
  const answers = [200, 500, 400, 502];
  const { ctx, brandId, webhook } = await withHook(t, ['ticket.created'], (r) => ({ status: answers[JSON.parse(r.body).data.n]! }));
  await enqueue(ctx, brandId, 4);
  // The event answered 502; ids made in one statement need not follow the events' order.
  const last = (await rowsOf(webhook.id)).find((r) => (r.payload as { data: { n: number } }).data.n === 3);
  await db('outbox')
    .where({ id: last.id })
    .update({ attempts: MAX_ATTEMPTS - 1 }); // its next failure is its last
  await withTx(ctx, (tx) => outbox.enqueue(tx, { kind: 'mail', brandId, event: 'mail.sent', payload: {} }));
  const sent = { deliver: async () => ({ outcome: 'success' as const, responseCode: 250, responseBody: 'queued' }) };
  const d = new Dispatcher(services, quietLog, attachmentDepsOf(services), { webhooks: { allowPrivate: true, timeoutMs: 3000 }, concurrency: 8, handlers: { mail: sent } });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : d.stop()));
  t.match(await d.tick(), { delivery: { claimed: 5, success: 2, retrying: 1, failed: 1, dead: 1 } });

  const read = async (name: string) => (await services.get(metricsPart).registry.getSingleMetric(name)!.get()).values;
  const value = (values: Awaited<ReturnType<typeof read>>, labels: Record<string, string>, metricName?: string) =>
    values.find((v) => (!metricName || (v as { metricName?: string }).metricName === metricName) && Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;

  const deliveries = await read('ticketd_dispatcher_deliveries_total');
  t.same(
    Object.fromEntries(deliveries.filter((v) => v.value > 0).map((v) => [`${v.labels.kind} ${v.labels.outcome}`, v.value])),
    { 'webhook delivered': 1, 'webhook retry': 1, 'webhook failed': 1, 'webhook dead': 1, 'mail delivered': 1 },
    'each settled message counted once, under its kind and outcome',
  );
  t.equal(deliveries.length, 14, 'every kind and outcome has a series from the start');
  const durations = await read('ticketd_dispatcher_delivery_duration_seconds');
  t.equal(value(durations, { kind: 'webhook', outcome: 'retry' }, 'ticketd_dispatcher_delivery_duration_seconds_count'), 1, 'each attempt timed');
  t.ok(value(durations, { kind: 'webhook', outcome: 'delivered' }, 'ticketd_dispatcher_delivery_duration_seconds_sum')! > 0);
  t.equal(value(await read('ticketd_dispatcher_claim_batch_size'), {}, 'ticketd_dispatcher_claim_batch_size_sum'), 5, 'one claim of five');
  t.equal(value(await read('ticketd_dispatcher_deliveries_in_flight'), {}), 0, 'none held once settled');
  t.equal(value(await read('ticketd_dispatcher_concurrency'), {}), 8);

  t.equal(value(await read('ticketd_dispatcher_ticks_total'), { outcome: 'ok' }), 1);
  const runs = await read('ticketd_dispatcher_job_runs_total');
  t.same(runs.map((v) => v.labels.job).sort(), [
    'analyze_new_tables',
    'announce_overdue_tickets',
    'apply_retention',
    'purge_attachments',
    'purge_idempotency_keys',
    'purge_outbox',
    'purge_raw_mails',
    'purge_signup_checkouts',
    'rating_requests',
    'receive_held_mail',
    'recheck_domains',
    'reclaim_outbox',
    'renew_subscriptions',
    'revoke_api_keys',
    'roll_up_rule_firings',
    'roll_up_ticket_counts',
    'run_automations',
    'run_recurring_tickets',
    'sync_commerce_stores',
    'sync_mailboxes',
  ]);
  t.ok(
    runs.every((v) => v.labels.outcome === 'ok' && v.value === 1),
    'every job ran once',
  );
  t.equal(value(await read('ticketd_dispatcher_job_duration_seconds'), { job: 'purge_outbox' }, 'ticketd_dispatcher_job_duration_seconds_count'), 1);
  t.equal(value(await read('ticketd_dispatcher_job_items_total'), { job: 'reclaim_outbox' }), 0, 'and what it handled');

  t.notOk(d.isRunning(), 'driven by hand: not running');
  d.start();
  await until('the LISTEN connection', () => d.isListening());
  t.ok(d.isRunning());
  t.equal(value(await read('ticketd_dispatcher_listener_up'), {}), 1);
  await d.stop();
  stopped = true;
  t.notOk(d.isRunning() || d.isListening(), 'stopped');
  t.equal(value(await read('ticketd_dispatcher_listener_up'), {}), 0);
});
