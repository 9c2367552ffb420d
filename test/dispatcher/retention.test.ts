import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { attachmentDeps } from '../../server/domains/attachments/service.js';
import { storageFromConfig } from '../../server/integrations/storage-from-config.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { assertErrorShape, makeBrand, makeTicket, servicesOf, signup, testApp } from '../helpers/app.js';
import { movableClock } from '../helpers/clock.js';
import { postInbound } from '../helpers/inbound.js';
import { teamOfThree } from '../helpers/sign-in.js';

/**
 * Retention per brand (flows/retention.ts): a brand's policy, applied by the dispatcher in
 * batches, deletes or anonymizes old closed tickets and removes old attachments and raw mail,
 * and never touches a ticket under legal hold.
 */

const SECRET = 'inbound-secret-for-tests-0123456789';
const DOMAIN = 'inbound.retention.example';
const DAY_MS = 86_400_000;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-retention-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db, config } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  TICKETD_DATA_DIR: dataDir,
  // A webhook to a closed loopback port: its deliveries are recorded, never made.
  TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true',
});
const services = servicesOf(db);
const storage = storageFromConfig(config);
const quietLog = { info() {}, error() {} };

/** A dispatcher whose clock is `days` ahead of the test's now. */
function dispatcherAt(days: number, options: { retentionBatchSize?: number } = {}) {
  const clock = movableClock();
  clock.advance(days * DAY_MS);
  return new Dispatcher(services, quietLog, attachmentDeps(config, db, clock), { now: clock, ...options });
}

let messages = 0;
/** A customer's message with an attachment, delivered to the brand: a ticket (or a reply) with raw mail and an attachment. */
async function deliver(brandId: string, inReplyTo?: string): Promise<{ ticketId?: string; commentId?: string; messageId: string }> {
  const messageId = `<ret-${process.pid}-${++messages}@customer.example>`;
  const raw = [
    'From: Jane Doe <jane.doe@customer.example>',
    `To: ${brandId}@${DOMAIN}`,
    'Subject: My printer at 5 Main Street',
    `Message-ID: ${messageId}`,
    ...(inReplyTo ? [`In-Reply-To: ${inReplyTo}`] : []),
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b1"',
    '',
    '--b1',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Call me on 555 0100 about it.',
    '',
    '--b1',
    'Content-Type: text/plain; name="receipt.txt"',
    'Content-Disposition: attachment; filename="receipt.txt"',
    'Content-Transfer-Encoding: base64',
    '',
    'cmVjZWlwdCAxMjM0Cg==',
    '',
    '--b1--',
    '',
  ].join('\r\n');
  return { ...(await postInbound(app, SECRET, raw)), messageId };
}

/** A ticket delivered by mail, with a customer reply on it (two raw mails, two attachments). */
async function customerTicket(brandId: string): Promise<string> {
  const first = await deliver(brandId);
  const reply = await deliver(brandId, first.messageId);
  if (!first.ticketId || !reply.commentId) throw new Error('the mails did not make a ticket and a reply');
  return first.ticketId;
}

const rowsOf = async (table: string, ticketId: string) => (await db(table).where({ ticketId }).select('id')).map((r: { id: string }) => r.id as string);

t.test("a brand's retention is set by PATCH: validated, kept whole, refused to a member", async (t) => {
  const team = await teamOfThree(app, services);
  const { base } = team;
  t.equal((await team.asOwner('GET', base)).body.retention, null, 'none by default: everything is kept');

  const set = await team.asAdmin('PATCH', base, { retention: { closedTicketsDays: 365, rawMailDays: 30 } });
  t.equal(set.status, 200);
  t.same(set.body.retention, { closedTicketsDays: 365, rawMailDays: 30, attachmentsDays: null, mode: 'anonymize' }, 'every kind named; anonymize unless delete is asked');
  t.same((await team.owner.live('GET', base)).body.retention, set.body.retention, 'an API key reads it too');

  for (const [retention, field] of [
    [{ closedTicketsDays: 0 }, 'closedTicketsDays'],
    [{ attachmentsDays: 36_501 }, 'attachmentsDays'],
    [{ rawMailDays: 1.5 }, 'rawMailDays'],
    [{ closedTicketsDays: 30, mode: 'shred' }, 'mode'],
    [{ closedTicketsDays: 30, keepForever: true }, 'keepForever'],
    ['30 days', 'retention'],
  ] as const) {
    const res = await team.asOwner('PATCH', base, { retention });
    assertErrorShape(t, res, 400, 'validation_failed');
    t.match(JSON.stringify(res.body.errors), field, `${JSON.stringify(retention)}: names ${field}`);
  }

  const refused = await team.asMember('PATCH', base, { retention: null });
  assertErrorShape(t, refused, 403, 'insufficient_role');
  t.equal((await team.asMember('PATCH', base, { name: 'Desk 2' })).status, 200, 'a member still edits the rest of the brand');

  const byKey = await team.owner.live('PATCH', base, { retention: { closedTicketsDays: 90, mode: 'delete' } });
  t.same(byKey.body.retention, { closedTicketsDays: 90, rawMailDays: null, attachmentsDays: null, mode: 'delete' }, 'a PATCH replaces the whole policy');
  t.equal((await team.asOwner('PATCH', base, { retention: {} })).body.retention, null, 'a policy that removes nothing is none');

  const outsider = await signup(app);
  t.equal((await outsider.live('PATCH', base, { retention: null })).status, 404, "another account's key finds no brand");
  const { body: logs } = await team.owner.live('GET', `${base}/logs?entityType=brand`);
  t.ok(
    logs.data.some((e: { event: string; changeList: { field: string }[] }) => e.event === 'brand.updated' && e.changeList.some((c) => c.field === 'retention')),
    'each change of the policy is in the audit log',
  );
});

t.test('legalHold: set and lifted by owners, admins and API keys; a member is refused', async (t) => {
  const team = await teamOfThree(app, services);
  const ticket = await makeTicket(team.asOwner, team.base);
  const url = `${team.base}/tickets/${ticket.id}`;
  t.equal(ticket.legalHold, false, 'no hold by default');

  const refused = await team.asMember('PATCH', url, { legalHold: true });
  assertErrorShape(t, refused, 403, 'insufficient_role');
  t.equal((await team.asMember('GET', url)).body.legalHold, false, 'the refused change left nothing');
  t.equal((await team.asMember('PATCH', url, { priority: 'high' })).status, 200, 'a member still updates the rest of the ticket');

  const held = await team.asAdmin('PATCH', url, { legalHold: true });
  t.equal(held.status, 200);
  t.equal(held.body.legalHold, true);
  t.equal((await team.owner.live('GET', url)).body.legalHold, true, "the SDK's shape shows it");
  t.equal((await team.asMember('GET', url)).body.legalHold, true, "the dashboard's shape shows it");
  t.equal((await team.owner.live('PATCH', url, { legalHold: false })).body.legalHold, false, 'an API key lifts it');

  const history = (await team.owner.live('GET', `${url}/logs`)).body as { event: string; source: string; changeList: { field: string; to: unknown }[] }[];
  const holds = history
    .filter((e) => e.event === 'ticket.updated' && e.changeList.some((c) => c.field === 'legalHold'))
    .map((e) => e.changeList.find((c) => c.field === 'legalHold')!.to);
  t.same(holds, [true, false], 'set and lift are in the ticket history');

  const outsider = await signup(app);
  t.equal((await outsider.live('PATCH', url, { legalHold: true })).status, 404, "another account's key finds no ticket");
});

t.test('mode delete: old closed tickets go with everything in them; recent, open and held ones stay', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const old = await customerTicket(brand.id);
  const held = await customerTicket(brand.id);
  const open = await customerTicket(brand.id);
  for (const id of [old, held]) t.equal((await owner.live('PATCH', `${base}/tickets/${id}`, { status: 'closed' })).status, 200);
  t.equal((await owner.live('PATCH', `${base}/tickets/${held}`, { legalHold: true })).status, 200);
  const oldAttachments = await rowsOf('attachments', old);
  const oldRawMails = await rowsOf('rawMails', old);
  t.equal(oldAttachments.length, 2);
  t.equal(oldRawMails.length, 2);
  const heldAttachments = await rowsOf('attachments', held);

  // The same kind of ticket in an account without a policy.
  const other = await signup(app);
  const otherBrand = await makeBrand(other.live);
  const elsewhere = await customerTicket(otherBrand.id);
  await other.live('PATCH', `/v1/brands/${otherBrand.id}/tickets/${elsewhere}`, { status: 'closed' });

  t.equal((await owner.live('POST', `${base}/webhooks`, { url: 'http://127.0.0.1:9/in', events: ['ticket.deleted'] })).status, 201);
  t.equal((await owner.live('PATCH', base, { retention: { closedTicketsDays: 30, mode: 'delete' } })).status, 200);
  await dispatcherAt(29).tick();
  t.equal((await owner.live('GET', `${base}/tickets/${old}`)).status, 200, 'closed 29 days ago: kept');

  const tick = await dispatcherAt(31).tick();
  t.ok(tick.retention.ticketsDeleted >= 1);
  t.equal((await owner.live('GET', `${base}/tickets/${old}`)).status, 404, 'closed 31 days ago: gone');
  t.same(await db('tickets').where({ id: old }).select('id'), [], 'its row, not only a soft delete');
  t.same(await db('comments').where({ ticketId: old }).select('id'), [], 'its comments');
  t.same(await rowsOf('attachments', old), [], 'its attachments');
  t.same(await rowsOf('rawMails', old), [], 'its raw mail');
  for (const id of [...oldAttachments, ...oldRawMails]) t.notOk(await storage.exists(id), `the file of ${id} removed`);
  const { body: entries } = await owner.live('GET', `${base}/logs?entityId=${old}&event=ticket.deleted`);
  t.match(
    entries.data,
    [{ source: 'retention', performedBy: { type: 'system', name: 'retention' }, metadata: { reason: 'retention' } }],
    "the brand's log says retention deleted it",
  );
  const announced = (await db('outbox').where({ brandId: brand.id, event: 'ticket.deleted' }).select('payload')) as { payload: unknown }[];
  t.equal(announced.filter((m) => JSON.stringify(m.payload).includes(old)).length, 1, 'ticket.deleted went to the webhook');

  const kept = (await owner.live('GET', `${base}/tickets/${held}`)).body;
  t.match(kept, { legalHold: true, status: 'closed', attachmentCount: 2, customer: { email: 'jane.doe@customer.example' } }, 'under legal hold: kept whole');
  t.same(await rowsOf('attachments', held), heldAttachments, 'with its attachments');
  t.equal((await rowsOf('rawMails', held)).length, 2, 'and its raw mail');
  for (const id of heldAttachments) t.ok(await storage.exists(id), 'and their files');
  t.equal((await owner.live('GET', `${base}/tickets/${open}`)).body.status, 'open', 'an open ticket is kept');
  t.equal((await other.live('GET', `/v1/brands/${otherBrand.id}/tickets/${elsewhere}`)).status, 200, "another account's old closed ticket is kept");

  const before = await db('auditLog').where({ brandId: brand.id }).count({ n: '*' });
  await dispatcherAt(32).tick();
  t.same(await db('auditLog').where({ brandId: brand.id }).count({ n: '*' }), before, 'a second run finds nothing more to do');
  t.equal((await owner.live('GET', `${base}/tickets/${held}`)).status, 200);
});

t.test('mode anonymize: old closed tickets stay, counted, without their personal data; a held one keeps it', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const old = await customerTicket(brand.id);
  const held = await customerTicket(brand.id);
  await owner.live('POST', `${base}/tickets/${old}/comments`, { body: 'Replacement sent to 5 Main Street' });
  for (const id of [old, held]) await owner.live('PATCH', `${base}/tickets/${id}`, { status: 'resolved' });
  await owner.live('PATCH', `${base}/tickets/${held}`, { legalHold: true });
  const attachments = await rowsOf('attachments', old);
  const before = (await owner.live('GET', `${base}/tickets/${old}`)).body;
  t.match(before, { customer: { email: 'jane.doe@customer.example' }, attachmentCount: 2 });

  t.equal((await owner.live('PATCH', base, { retention: { closedTicketsDays: 30, mode: 'anonymize' } })).status, 200);
  await dispatcherAt(31).tick();

  const after = (await owner.live('GET', `${base}/tickets/${old}`)).body;
  t.match(after, {
    id: old,
    status: 'resolved',
    title: before.title,
    customerId: null,
    customer: null,
    body: null,
    createdBy: null,
    attachmentCount: 0,
    commentCount: before.commentCount,
  });
  const comments = (await owner.live('GET', `${base}/tickets/${old}/comments`)).body as { body: string; authorName: string | null; authorType: string }[];
  t.ok(comments.length >= 2);
  t.ok(
    comments.every((c) => c.body === '[removed by retention]'),
    'every comment body removed',
  );
  t.notOk(JSON.stringify(comments).includes('jane.doe'), "nothing of the customer's address is left in the comments");
  t.same(await rowsOf('attachments', old), [], 'its attachments removed');
  t.same(await rowsOf('rawMails', old), [], 'its raw mail removed');
  for (const id of attachments) t.notOk(await storage.exists(id), 'with their files');
  const search = (await owner.live('GET', `${base}/tickets?search=jane.doe@customer.example&status=all`)).body.data.map((x: { id: string }) => x.id);
  t.notOk(search.includes(old), "the customer's address no longer finds it");
  t.ok(search.includes(held), 'but still finds the held one');

  const heldNow = (await owner.live('GET', `${base}/tickets/${held}`)).body;
  t.match(heldNow, { legalHold: true, customer: { email: 'jane.doe@customer.example' }, attachmentCount: 2 }, 'under legal hold: untouched');
  t.equal((await rowsOf('rawMails', held)).length, 2);

  await dispatcherAt(40).tick();
  const entries = (await owner.live('GET', `${base}/tickets/${old}/logs`)).body as { event: string; source: string }[];
  t.equal(entries.filter((e) => e.event === 'ticket.anonymized' && e.source === 'retention').length, 1, 'anonymized once, however many runs');
  t.same((await owner.live('GET', `${base}/tickets/${old}`)).body.updatedAt, after.updatedAt, 'the second run changed nothing');

  t.equal((await owner.live('PATCH', base, { retention: { closedTicketsDays: 30, mode: 'delete' } })).status, 200);
  await dispatcherAt(61).tick();
  t.equal((await owner.live('GET', `${base}/tickets/${old}`)).status, 404, 'a policy moved to delete deletes what it anonymized before');
  t.equal((await owner.live('GET', `${base}/tickets/${held}`)).status, 200, 'but not the held one');
});

t.test('attachmentsDays and rawMailDays: old ones removed, the comment told; a held ticket keeps its own', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const ticket = await customerTicket(brand.id);
  const held = await customerTicket(brand.id);
  await owner.live('PATCH', `${base}/tickets/${held}`, { legalHold: true });
  const attachments = await rowsOf('attachments', ticket);

  t.equal((await owner.live('PATCH', base, { retention: { attachmentsDays: 10, rawMailDays: 5 } })).status, 200);
  await dispatcherAt(6).tick();
  t.same(await rowsOf('rawMails', ticket), [], 'raw mail older than 5 days removed');
  t.equal((await rowsOf('attachments', ticket)).length, 2, 'attachments younger than 10 days kept');

  await dispatcherAt(11).tick();
  const now = (await owner.live('GET', `${base}/tickets/${ticket}`)).body;
  t.match(now, { status: 'open', attachmentCount: 0, customer: { email: 'jane.doe@customer.example' } }, 'the ticket stays, without its attachments');
  t.same(await rowsOf('attachments', ticket), []);
  for (const id of attachments) t.notOk(await storage.exists(id), 'their files removed');
  const comments = (await owner.live('GET', `${base}/tickets/${ticket}/comments`)).body as { metadata: Record<string, unknown> }[];
  t.ok(
    comments.some((c) => c.metadata.attachmentsRemovedByRetention === 1),
    'the reply notes its attachment was removed by retention',
  );
  const entries = (await owner.live('GET', `${base}/tickets/${ticket}/logs`)).body as { event: string; metadata: { reason?: string } }[];
  t.equal(entries.filter((e) => e.event === 'attachment.deleted' && e.metadata.reason === 'retention').length, 2);

  t.equal((await rowsOf('attachments', held)).length, 2, 'a held ticket keeps its attachments');
  t.equal((await rowsOf('rawMails', held)).length, 2, 'and its raw mail');
  // The instance's own raw mail retention (rawMailRetentionDays, 30 by default) keeps a held ticket's too.
  await dispatcherAt(31).tick();
  t.equal((await rowsOf('rawMails', held)).length, 2, 'past rawMailRetentionDays as well');
});

t.test('a backlog larger than a run takes goes over the next ticks; /metrics counts what went', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const ids: string[] = [];
  for (let i = 0; i < 9; i++) ids.push((await makeTicket(owner.live, base, { title: `Old ${i}`, status: 'closed' })).id);
  const live = await makeTicket(owner.live, base, { title: 'Still open' });
  t.equal((await owner.live('PATCH', base, { retention: { closedTicketsDays: 1, mode: 'delete' } })).status, 200);
  const left = async () => Number((await db('tickets').whereIn('id', ids).count({ n: '*' }))[0]!.n);

  // Two tickets a batch, four batches a run: the ninth waits for the next tick.
  const dispatcher = dispatcherAt(2, { retentionBatchSize: 2 });
  const first = await dispatcher.tick();
  t.ok(first.retention.ticketsDeleted >= 8);
  t.equal(await left(), 1, 'the first run took four full batches');
  await dispatcher.tick();
  t.equal(await left(), 0, 'the next tick took the rest');
  await dispatcher.tick();
  t.equal((await owner.live('GET', `${base}/tickets/${live.id}`)).status, 200, 'the open ticket stays');

  const metrics = await app.inject({ method: 'GET', url: '/metrics' });
  const deleted = /^ticketd_dispatcher_retention_total\{kind="tickets_deleted"\} (\d+)$/m.exec(metrics.body);
  t.ok(deleted && Number(deleted[1]) >= 9, `tickets deleted counted: ${deleted?.[1]}`);
  t.match(metrics.body, /^ticketd_dispatcher_retention_total\{kind="attachments_deleted"\} \d+$/m);
  t.match(metrics.body, /^ticketd_dispatcher_job_duration_seconds_count\{job="apply_retention"\} \d+$/m, 'the job is timed like the others');
});

t.test('a ticket someone is changing (its row locked) is left for the next run', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const busy = await makeTicket(owner.live, base, { title: 'Being edited', status: 'closed' });
  const idle = await makeTicket(owner.live, base, { title: 'Nobody here', status: 'closed' });
  t.equal((await owner.live('PATCH', base, { retention: { closedTicketsDays: 1, mode: 'delete' } })).status, 200);
  const trx = await db.transaction();
  try {
    // By its account too: on Citus a row is locked only by a statement routed to its shard.
    await trx('tickets').where({ account_id: owner.accountId, id: busy.id }).forUpdate().select('id');
    await dispatcherAt(2).tick();
    t.equal((await owner.live('GET', `${base}/tickets/${idle.id}`)).status, 404, 'the run did not wait for the locked row');
    t.equal((await owner.live('GET', `${base}/tickets/${busy.id}`)).status, 200, 'the locked one is passed over');
  } finally {
    await trx.commit();
  }
  await dispatcherAt(2).tick();
  t.equal((await owner.live('GET', `${base}/tickets/${busy.id}`)).status, 404, 'and deleted by the next run');
});

t.test('a test-mode brand and a live one are apart', async (t) => {
  const owner = await signup(app);
  const liveBrand = await makeBrand(owner.live);
  const testBrand = await makeBrand(owner.test);
  const closed = { title: 'Done', status: 'closed' };
  const inLive = await makeTicket(owner.live, `/v1/brands/${liveBrand.id}`, closed);
  const inTest = await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, closed);
  t.equal((await owner.test('PATCH', `/v1/brands/${testBrand.id}`, { retention: { closedTicketsDays: 1, mode: 'delete' } })).status, 200);
  await dispatcherAt(2).tick();
  t.equal((await owner.test('GET', `/v1/brands/${testBrand.id}/tickets/${inTest.id}`)).status, 404, "the test brand's policy deleted its ticket");
  t.equal((await owner.live('GET', `/v1/brands/${liveBrand.id}/tickets/${inLive.id}`)).status, 200, 'and no other brand’s');
});
