import { readdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import { CREDENTIAL_CHANNELS, credentialsChanged } from '../../server/core/credential-cache.js';
import { Listener } from '../../server/core/notify.js';
import * as outbox from '../../server/core/outbox/service.js';
import { distRoot } from '../../server/core/paths.js';
import { Member } from '../../server/domains/members/model.js';
import * as members from '../../server/domains/members/service.js';
import * as webhooks from '../../server/domains/webhooks/service.js';
import { createAccount } from '../../server/flows/accounts.js';
import { createBrand } from '../../server/flows/brands.js';
import { createTicket } from '../../server/flows/ticket-create.js';
import { updateTicket } from '../../server/flows/ticket-update.js';
import { servicesOf } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';
import { until } from '../helpers/wait.js';

/**
 * The NOTIFYs that wake the dispatchers (an outbox insert) and drop cached sessions (a session or
 * member change) come from the writing transaction, not from triggers: at its commit, never after
 * a rollback, once per transaction.
 */

const { db } = await freshDatabase(t);
const services = servicesOf(db);
const OUTBOX = outbox.OUTBOX_CHANNEL;
const SESSIONS = CREDENTIAL_CHANNELS.sessions;

const heard: { channel: string; payload: string }[] = [];
const listener = Listener.forServices(services, [OUTBOX, SESSIONS]).start();
listener.on('notification', (channel: string, payload: string) => heard.push({ channel, payload }));
t.teardown(() => listener.close());
await until('the LISTEN connection', () => listener.live);

/** What the listener heard since the last call, once every notification committed before has arrived. */
async function drained(): Promise<{ channel: string; payload: string }[]> {
  await listener.sync();
  return heard.splice(0);
}

async function setup(): Promise<{ ctx: TenantCtx; brandId: string; ownerId: string }> {
  const created = await createAccount(systemCtx(services), { email: `ntf-${Math.random().toString(36).slice(2)}@example.com` });
  const ctx: TenantCtx = { ...tenantCtx(systemCtx(services), created.account.id, true), actor: { type: 'api', id: 'key_test', name: 'CI key' } };
  const brand = await createBrand(ctx, { name: 'Notify' });
  await drained();
  return { ctx, brandId: brand.id, ownerId: created.owner.id };
}

const event = (brandId: string, n = 0) => ({ brandId, names: ['ticket.created'], ticketId: null, ticketFields: [], data: { n } });
const outboxWakes = (notes: { channel: string; payload: string }[]) => notes.filter((n) => n.channel === OUTBOX);

t.test('no trigger notifies any more: outbox and sessions have none, and the functions are gone', async (t) => {
  const triggers = (
    await db.raw(`select c.relname || '.' || g.tgname as name from pg_trigger g join pg_class c on c.oid = g.tgrelid
      where c.relname in ('outbox', 'sessions', 'members') and not g.tgisinternal order by 1`)
  ).rows.map((r: { name: string }) => r.name);
  t.same(
    triggers.filter((n: string) => !n.startsWith('members.tickets_follow')),
    [],
    'none on outbox or sessions, none but the ticket copy on members',
  );
  const functions = (await db.raw(`select proname from pg_proc where proname in ('outbox_notify', 'ticketd_notify_sessions')`)).rows;
  t.same(functions, []);
});

t.test('an outbox insert wakes the dispatchers at commit, once per transaction', async (t) => {
  const { ctx, brandId } = await setup();
  await webhooks.create(ctx, { allowPrivate: true }, brandId, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] as never });
  await drained();

  await withTx(ctx, async (tx) => {
    await outbox.enqueueEvents(tx, [event(brandId, 1)]);
    await outbox.enqueueEvents(tx, [event(brandId, 2), event(brandId, 3)]);
    await outbox.enqueue(tx, { kind: 'mail', brandId, event: 'mail.test', payload: {} });
    await listener.sync();
    t.same(heard, [], 'nothing is heard before the commit');
  });
  t.same(await drained(), [{ channel: OUTBOX, payload: 'new' }], 'one wake for the whole transaction, with the payload the trigger sent');

  const [message] = await db('outbox').where({ accountId: ctx.accountId, kind: 'webhook' }).orderBy('id').limit(1);
  const original = await withTx(ctx, (tx) => outbox.findForWebhook(tx, message.webhookId, message.id));
  await withTx(ctx, (tx) => outbox.redeliver(tx, original));
  t.same(outboxWakes(await drained()), [{ channel: OUTBOX, payload: 'new' }], 'a redelivery wakes them');
});

t.test('a rolled-back enqueue wakes nobody', async (t) => {
  const { ctx, brandId } = await setup();
  await webhooks.create(ctx, { allowPrivate: true }, brandId, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] as never });
  await drained();
  await t.rejects(
    withTx(ctx, async (tx) => {
      await outbox.enqueueEvents(tx, [event(brandId)]);
      throw new Error('changed my mind');
    }),
  );
  t.same(await drained(), []);
  t.equal((await db('outbox').where({ accountId: ctx.accountId }).count({ n: '*' }))[0]!.n, '0', 'and nothing was written');
});

t.test('an event nobody subscribes to inserts nothing and wakes nobody', async (t) => {
  const { ctx, brandId } = await setup();
  await withTx(ctx, (tx) => outbox.enqueueEvents(tx, [event(brandId)]));
  const ticket = await createTicket(ctx, brandId, { title: 'Unheard' });
  await updateTicket(ctx, brandId, ticket.ticket.id, { title: 'Still unheard' });
  t.same(outboxWakes(await drained()), []);
});

t.test("ticket create's one statement and ticket update wake the dispatchers when a webhook subscribes", async (t) => {
  const { ctx, brandId } = await setup();
  await webhooks.create(ctx, { allowPrivate: true }, brandId, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created', 'ticket.updated'] as never });
  await drained();
  const created = await createTicket(ctx, brandId, { title: 'Heard' });
  t.same(outboxWakes(await drained()), [{ channel: OUTBOX, payload: 'new' }], 'the create');
  t.equal((await db('outbox').where({ accountId: ctx.accountId, event: 'ticket.created' }).count({ n: '*' }))[0]!.n, '1');
  await updateTicket(ctx, brandId, created.ticket.id, { title: 'Heard again' });
  t.same(outboxWakes(await drained()), [{ channel: OUTBOX, payload: 'new' }], 'the update');
});

t.test('member changes drop cached sessions at commit, not after a rollback', async (t) => {
  const { ctx, ownerId } = await setup();
  const owner = (await Member.query(db).where({ accountId: ctx.accountId, id: ownerId }).first())!;
  await withTx(ctx, (tx) => members.applyProviderUser(tx, owner, { provider: 'idp', userId: 'u1', email: null, name: 'Renamed by the provider' }));
  t.same(await drained(), [{ channel: SESSIONS, payload: ownerId }], 'a rename by the identity provider');

  await t.rejects(
    withTx(ctx, async (tx) => {
      await credentialsChanged(tx, 'sessions', [ownerId]);
      throw new Error('rolled back');
    }),
  );
  t.same(await drained(), [], 'a rolled-back change says nothing');

  await withTx(ctx, async (tx) => {
    await credentialsChanged(tx, 'sessions', [ownerId]);
    await credentialsChanged(tx, 'sessions', [ownerId, 'ses_other']);
  });
  t.same((await drained()).map((n) => n.payload).sort(), [ownerId, 'ses_other'], 'each tag once per transaction');
});

t.test('the migration goes down to the triggers and up again', async (t) => {
  const name = readdirSync(path.join(distRoot, 'migrations')).find((f) => f.startsWith('20261128060000') && f.endsWith('.js'))!;
  const count = async () =>
    Number(
      (
        await db.raw(
          `select count(*) as n from pg_trigger where tgname in ('outbox_notify', 'members_notify_sessions', 'sessions_notify_sessions', 'attachments_queue_file_deletion', 'avatars_queue_file_deletion') and not tgisinternal`,
        )
      ).rows[0].n,
    );
  await db.migrate.down({ name });
  t.equal(await count(), 5, 'down restores the five triggers');
  const { ctx, brandId } = await setup();
  await webhooks.create(ctx, { allowPrivate: true }, brandId, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] as never });
  await drained();
  await db.transaction((trx) =>
    trx.raw(`insert into outbox (id, account_id, livemode, brand_id, kind, event, payload) values ('dlv_trigger', ?, true, ?, 'mail', 'x', '{}')`, [ctx.accountId, brandId]),
  );
  t.same(await drained(), [{ channel: OUTBOX, payload: 'new' }], 'and they notify as before');
  await db.raw(`delete from outbox where account_id = ? and id = 'dlv_trigger'`, [ctx.accountId]);
  const file = `att_trigger_${Date.now()}`;
  await db('attachments').insert({
    id: file,
    accountId: ctx.accountId,
    livemode: true,
    brandId,
    filename: 'a',
    contentType: 'text/plain',
    size: 1,
    status: 'PENDING',
    metadata: {},
  });
  await db('attachments').where({ accountId: ctx.accountId, id: file }).delete();
  t.ok(await db('attachmentFileDeletions').where({ accountId: ctx.accountId, attachmentId: file }).first(), 'and queue files as before');
  await db.migrate.up({ name });
  t.equal(await count(), 0, 'up drops them again');
});
