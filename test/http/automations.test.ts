import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { onCitusCluster } from '../helpers/db.js';
import { packageRoot } from '../../server/core/paths.js';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { candidateQuery } from '../../server/flows/automations.js';
import { compile } from '../../server/domains/rules/engine.js';
import { DURATION_FIELDS, type DurationField } from '../../server/domains/rules/schemas.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { makeBrand, makeTicket, mustCreate, ownerWithBrand, servicesOf, testApp } from '../helpers/app.js';
import { CLOSE_RESOLVED_AFTER_4_DAYS, ESCALATE_BEFORE_DUE, REMIND_THE_ASSIGNEE } from '../helpers/automation-examples.js';
import { bulkTickets } from '../helpers/bulk-tickets.js';
import { postInbound } from '../helpers/inbound.js';
import { movableClock, testNow } from '../helpers/clock.js';

/**
 * Automations: a brand's time rules (/v1/brands/{brandId}/automations), as the dispatcher runs
 * them. The app and the dispatchers run on a clock the test moves; a ticket's moments are
 * backdated in the database where a test needs hours to have passed.
 */

const SECRET = 'inbound-secret-for-automations-0123456789';
const DOMAIN = 'inbound.automations.example';
const clock = movableClock();
const { app, db } = await testApp(t, { TICKETD_INBOUND_SECRET: SECRET, TICKETD_INBOUND_DOMAIN: DOMAIN }, { clock });
const services = servicesOf(db);
const quiet = { info: () => undefined, error: () => undefined };
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

type Call = Awaited<ReturnType<typeof ownerWithBrand>>['owner']['live'];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const automation = (call: Call, base: string, body: Record<string, unknown>): Promise<any> => mustCreate(call, `${base}/automations`, body);
/** One sweep, by a dispatcher of its own (a dispatcher sweeps at its first tick of each minute). */
const sweep = async (options: ConstructorParameters<typeof Dispatcher>[3] = {}) => (await new Dispatcher(services, quiet, null, options).tick()).automations;
const ticketRow = (id: string) => db('tickets').where({ id }).first();
const setMoments = (ids: string | string[], columns: Record<string, Date | string>) =>
  db('tickets')
    .whereIn('id', ([] as string[]).concat(ids))
    .update(columns);
const ruleEntries = async (ticketId: string, ruleId?: string) =>
  (await db('auditLog')
    .where({ ticketId, source: 'automation', event: 'ticket.updated', ...(ruleId ? { performerId: ruleId } : {}) })
    .orderBy('id')) as {
    performerId: string;
    performerType: string;
    metadata: { rule: { id: string; kind: string } };
    changes: unknown[];
  }[];
const ruleMails = (ticketId: string) => db('mailMessages').where({ ticketId, kind: 'rule' }).orderBy('id');
const get = async (call: Call, url: string) => (await call('GET', url)).body;
const tagNames = (ticket: { tags: { name: string }[] }) => ticket.tags.map((g) => g.name).sort();
const ago = (ms: number) => new Date(clock() - ms);

t.test('the worked examples are the ones docs/api.md shows', async (t) => {
  const api = readFileSync(path.join(packageRoot, 'docs', 'api.md'), 'utf8');
  const section = api.slice(api.indexOf('## Automations'), api.indexOf('\n## ', api.indexOf('## Automations') + 1));
  const bodies = [...section.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]!) as unknown);
  t.same(bodies, [CLOSE_RESOLVED_AFTER_4_DAYS, REMIND_THE_ASSIGNEE, ESCALATE_BEFORE_DUE]);
});

t.test('documented example: close resolved tickets after four quiet days; the triggers run on that change', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const rule = await automation(owner.live, base, CLOSE_RESOLVED_AFTER_4_DAYS);
  t.match(rule, { object: 'automation', enabled: true, firedCount: 0 });
  await mustCreate(owner.live, `${base}/triggers`, {
    name: 'Say it was closed by time',
    on: ['ticket.updated'],
    conditions: { all: [{ field: 'status', operator: 'changed_to', value: 'closed' }] },
    actions: [{ type: 'add_tags', value: ['auto-closed'] }],
  });
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'https://93.184.215.14/automations', events: ['ticket.updated'] });
  const quiet4 = await makeTicket(owner.live, base, { title: 'Thanks, all good', status: 'resolved' });
  const recent = await makeTicket(owner.live, base, { title: 'Fixed yesterday', status: 'resolved' });
  const open = await makeTicket(owner.live, base, { title: 'Still open' });
  await setMoments(quiet4.id, { resolvedAt: ago(97 * HOUR) });
  await setMoments(recent.id, { resolvedAt: ago(30 * HOUR) });
  await setMoments(open.id, { createdAt: ago(200 * HOUR), updatedAt: ago(200 * HOUR) });

  const stats = await sweep();
  t.match(stats, { fired: 1, failed: 0 });
  const closed = await get(owner.live, `${base}/tickets/${quiet4.id}`);
  t.equal(closed.status, 'closed', 'resolved 97 hours ago: closed');
  t.same(tagNames(closed), ['auto-closed'], 'the brand’s triggers ran on the automation’s change');
  t.equal((await get(owner.live, `${base}/tickets/${recent.id}`)).status, 'resolved', 'resolved 30 hours ago: left');
  t.equal((await get(owner.live, `${base}/tickets/${open.id}`)).status, 'open', 'an open ticket: left');

  const entries = await ruleEntries(quiet4.id);
  t.equal(entries.length, 2, 'one entry for the automation, one for the trigger');
  t.match(entries[0], { performerType: 'system', performerId: rule.id, metadata: { rule: { id: rule.id, kind: 'automation' } } });
  t.match(entries[0]!.changes, [{ field: 'status', from: 'resolved', to: 'closed' }]);
  t.match(entries[1], { metadata: { rule: { kind: 'trigger' } } });
  const counted = await get(owner.live, `${base}/automations/${rule.id}`);
  t.match(counted, { firedCount: 1 });
  t.ok(counted.lastFiredAt, 'lastFiredAt set');
  const event = await db('outbox').where({ event: 'ticket.updated' }).whereRaw("payload -> 'data' ->> 'id' = ?", [quiet4.id]).first();
  t.match(event?.payload, { source: 'automation' }, 'its webhook event says automation');
});

t.test('documented example: remind the assignee of an untouched ticket, once, again after the ticket changed', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const memberEmail = (await get(owner.live, '/v1/accounts/me/members')).data.find((m: { id: string }) => m.id === owner.ownerId).email;
  const rule = await automation(owner.live, base, REMIND_THE_ASSIGNEE);
  const stale = await makeTicket(owner.live, base, { title: 'Printer jam', assigneeId: owner.ownerId });
  const unassigned = await makeTicket(owner.live, base, { title: 'Nobody’s' });
  const fresh = await makeTicket(owner.live, base, { title: 'Just now', assigneeId: owner.ownerId });
  const untouchedSince = ago(25 * HOUR);
  await setMoments([stale.id, unassigned.id], { updatedAt: untouchedSince });

  t.match(await sweep(), { fired: 1 });
  const mails = await ruleMails(stale.id);
  t.equal(mails.length, 1, 'one reminder');
  t.match(mails[0].message, { subject: 'Waiting on you: Printer jam', to: [{ address: memberEmail }], headers: { 'Auto-Submitted': 'auto-generated' } });
  t.same(await ruleMails(unassigned.id), [], 'no assignee, no reminder');
  t.same(await ruleMails(fresh.id), [], 'touched lately, no reminder');
  t.equal((await ticketRow(stale.id)).updatedAt.getTime(), untouchedSince.getTime(), 'a mail is no change of the ticket');

  clock.advance(HOUR);
  t.match(await sweep(), { fired: 0 }, 'once per ticket: an hour later, nothing');
  t.equal((await ruleMails(stale.id)).length, 1);

  const res = await owner.live('PATCH', `${base}/tickets/${stale.id}`, { priority: 'high' });
  t.equal(res.status, 200);
  t.match(await sweep(), { fired: 0 }, 'just changed: not untouched for a day');
  await setMoments(stale.id, { updatedAt: ago(26 * HOUR) });
  t.match(await sweep(), { fired: 1 }, 'a day after that change: reminded again');
  t.equal((await ruleMails(stale.id)).length, 2);
  t.match(await get(owner.live, `${base}/automations/${rule.id}`), { firedCount: 2 });
  clock.reset();
});

t.test('documented example: escalate the priority of a ticket close to its due time', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  await automation(owner.live, base, ESCALATE_BEFORE_DUE);
  const soon = await makeTicket(owner.live, base, { title: 'Due soon', priority: 'normal', dueAt: new Date(clock() + 90 * 60_000).toISOString() });
  const late = await makeTicket(owner.live, base, { title: 'Past due', dueAt: new Date(clock() - HOUR).toISOString() });
  const later = await makeTicket(owner.live, base, { title: 'Due tomorrow', priority: 'normal', dueAt: new Date(clock() + DAY).toISOString() });
  const none = await makeTicket(owner.live, base, { title: 'No deadline' });
  t.match(await sweep(), { fired: 2 });
  t.equal((await get(owner.live, `${base}/tickets/${soon.id}`)).priority, 'urgent', 'due in 90 minutes: urgent');
  t.equal((await get(owner.live, `${base}/tickets/${late.id}`)).priority, 'urgent', 'past due: urgent');
  t.equal((await get(owner.live, `${base}/tickets/${later.id}`)).priority, 'normal', 'due in a day: left');
  t.equal((await get(owner.live, `${base}/tickets/${none.id}`)).priority, null, 'no deadline: left');
  t.match(await sweep(), { fired: 0 }, 'urgent now: the condition no longer holds');
});

/** Business hours of the brand in the next test: weekdays 09:00 to 17:00 UTC. */
const WEEKDAYS = { start: '09:00', end: '17:00', days: [1, 2, 3, 4, 5], timezone: 'UTC' };
/** A Friday 16:00 UTC a week or more ahead: the app's clock moves there, never reading the real date. */
function friday4pm(): number {
  const d = new Date(testNow() + 7 * DAY);
  d.setUTCHours(16, 0, 0, 0);
  while (d.getUTCDay() !== 5) d.setTime(d.getTime() + DAY);
  return d.getTime();
}
const MOMENT_COLUMN: Record<DurationField, string> = {
  hoursSinceCreated: 'createdAt',
  hoursSinceUpdated: 'updatedAt',
  hoursSinceStatusChanged: 'statusChangedAt',
  hoursSinceResolved: 'resolvedAt',
  hoursSinceCustomerMessage: 'lastCustomerMessageAt',
  hoursSinceAgentReply: 'lastAgentReplyAt',
  hoursUntilDue: 'dueAt',
};

t.test('every duration in calendar and in business hours: a weekend counts in the one, not in the other', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  t.equal((await owner.live('PATCH', base, { slaBusinessHours: WEEKDAYS })).status, 200);
  const friday = friday4pm();
  const saturdayNoon = friday + 20 * HOUR;
  const monday1030 = friday + 66.5 * HOUR;
  const tickets: Record<string, string> = {};
  for (const field of DURATION_FIELDS) {
    const until = field === 'hoursUntilDue';
    for (const kind of ['cal', 'biz'] as const) {
      const tag = `${kind}-${field}`;
      // Since Friday 16:00: Saturday noon is 20 calendar hours on and 1 business hour; Monday 10:30, 2.5.
      // Until Monday 11:00: from Saturday noon 47 calendar hours, 2 business hours; from Monday 10:30, half an hour.
      const condition = kind === 'cal' ? { field, operator: until ? 'lte' : 'gte', value: 10 } : { field, operator: until ? 'lte' : 'gte', value: 2, businessHours: true };
      await automation(owner.live, base, {
        name: `${tag}`,
        conditions: { all: [condition, { field: 'tags', operator: 'includes', value: tag }] },
        actions: [{ type: 'add_tags', value: ['fired'] }],
      });
      const ticket = await makeTicket(owner.live, base, { title: tag, tags: [tag], ...(field === 'hoursSinceResolved' ? { status: 'resolved' } : {}) });
      tickets[tag] = ticket.id;
      await setMoments(ticket.id, { [MOMENT_COLUMN[field]]: new Date(until ? friday + 67 * HOUR : friday) });
    }
  }
  const fired = async () => {
    const rows = (await db('ticketTags as tt')
      .join('tags as g', (j) => j.on('g.accountId', 'tt.accountId').andOn('g.id', 'tt.tagId'))
      .whereIn('tt.ticketId', Object.values(tickets))
      .where('g.name', 'fired')
      .select('tt.ticketId')) as {
      ticketId: string;
    }[];
    return new Set(rows.map((r) => r.ticketId));
  };
  t.teardown(() => clock.reset());
  clock.setTo(saturdayNoon);
  await sweep();
  const onSaturday = await fired();
  for (const field of DURATION_FIELDS) {
    const until = field === 'hoursUntilDue';
    t.equal(onSaturday.has(tickets[`cal-${field}`]!), !until, `${field}, calendar hours, on Saturday: ${until ? 'not yet' : 'fired'}`);
    t.equal(onSaturday.has(tickets[`biz-${field}`]!), until, `${field}, business hours, on Saturday: ${until ? 'fired' : 'not yet'}`);
  }
  clock.setTo(monday1030);
  await sweep();
  const onMonday = await fired();
  for (const field of DURATION_FIELDS) {
    for (const kind of ['cal', 'biz']) t.ok(onMonday.has(tickets[`${kind}-${field}`]!), `${field}, ${kind}, by Monday 10:30: fired`);
  }
});

t.test('exactly once with two dispatchers sweeping at the same time', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const n = 30;
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await makeTicket(owner.live, base, { title: `Ticket ${i}`, assigneeId: owner.ownerId })).id);
  await setMoments(ids, { createdAt: ago(2 * HOUR) });
  const tagging = await automation(owner.live, base, {
    name: 'Tag after an hour',
    conditions: { all: [{ field: 'hoursSinceCreated', operator: 'gte', value: 1 }] },
    actions: [{ type: 'add_tags', value: ['swept'] }],
  });
  const mailing = await automation(owner.live, base, {
    name: 'Mail after an hour',
    conditions: { all: [{ field: 'hoursSinceCreated', operator: 'gte', value: 1 }] },
    actions: [{ type: 'mail_members', value: { subject: 'An hour: {{ ticket.title }}', body: 'Look at it.' } }],
  });
  const two = () => [0, 1].map(() => new Dispatcher(services, quiet, null, { automationBatchSize: 4 }));
  const [a, b] = two();
  const [first, second] = await Promise.all([a!.tick(), b!.tick()]);
  t.equal(first.automations.fired + second.automations.fired, 2 * n, 'every ticket once for each automation, between them');
  for (const id of ids) {
    const entries = await ruleEntries(id);
    t.same(entries.map((e) => e.performerId).sort(), [tagging.id, mailing.id].sort(), 'one entry per automation');
    t.equal((await ruleMails(id)).length, 1, 'one mail');
  }
  t.match(await get(owner.live, `${base}/automations/${tagging.id}`), { firedCount: n });
  t.match(await get(owner.live, `${base}/automations/${mailing.id}`), { firedCount: n });
  const [c, d] = two();
  const again = await Promise.all([c!.tick(), d!.tick()]);
  t.equal(again[0].automations.fired + again[1].automations.fired, 0, 'the next minute, nothing: each fired once and the tickets did not change since');
});

t.test('an automation stays inside its brand and its account', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const sibling = await makeBrand(owner.live, 'Sibling');
  const testBrand = await makeBrand(owner.test, 'Test mode');
  const stranger = await ownerWithBrand(app);
  const mine = await makeTicket(owner.live, base, { title: 'mine' });
  const theirs = [
    await makeTicket(owner.live, `/v1/brands/${sibling.id}`, { title: 'sibling' }),
    await makeTicket(owner.test, `/v1/brands/${testBrand.id}`, { title: 'test mode' }),
    await makeTicket(stranger.owner.live, stranger.base, { title: 'stranger' }),
  ];
  await setMoments([mine.id, ...theirs.map((x) => x.id)], { createdAt: ago(5 * HOUR) });
  await automation(owner.live, base, {
    name: 'Tag old tickets',
    conditions: { all: [{ field: 'hoursSinceCreated', operator: 'gte', value: 1 }] },
    actions: [{ type: 'add_tags', value: ['old'] }],
  });
  await sweep();
  t.same(tagNames(await get(owner.live, `${base}/tickets/${mine.id}`)), ['old']);
  t.same(tagNames(await get(owner.live, `/v1/brands/${sibling.id}/tickets/${theirs[0].id}`)), [], 'another brand of the account: left');
  t.same(tagNames(await get(owner.test, `/v1/brands/${testBrand.id}/tickets/${theirs[1].id}`)), [], 'the test mode: left');
  t.same(tagNames(await get(stranger.owner.live, `${stranger.base}/tickets/${theirs[2].id}`)), [], 'another account: left');
});

t.test('an automation naming a status since deleted is disabled, saying why; its tickets are left', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const waiting = await mustCreate(owner.live, `${base}/statuses`, { key: 'waiting', name: 'Waiting', color: '#336699' });
  const rule = await automation(owner.live, base, {
    name: 'Park old open tickets',
    conditions: {
      all: [
        { field: 'status', operator: 'is', value: 'open' },
        { field: 'hoursSinceCreated', operator: 'gte', value: 1 },
      ],
    },
    actions: [{ type: 'set_status', value: 'waiting' }],
  });
  const ticket = await makeTicket(owner.live, base, { title: 'old' });
  await setMoments(ticket.id, { createdAt: ago(3 * HOUR) });
  t.equal((await owner.live('DELETE', `${base}/statuses/${waiting.id}`)).status, 200);
  t.match(await sweep(), { fired: 0, failed: 0 });
  t.equal((await get(owner.live, `${base}/tickets/${ticket.id}`)).status, 'open');
  t.match(await get(owner.live, `${base}/automations/${rule.id}`), { enabled: false, disabledReason: /^actions\[0\]\.value: waiting is not a status of this brand/ });
  t.equal((await db('auditLog').where({ entityId: rule.id, event: 'rule.disabled' })).length, 1, 'the log says so');
});

t.test('the moments automations count from are kept by the writes that change them', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const ticket = await makeTicket(owner.live, base, { title: 'moments' });
  const created = await ticketRow(ticket.id);
  t.ok(created.statusChangedAt, 'a new ticket has entered its status');
  t.equal(created.lastCustomerMessageAt, null, 'opened by an agent’s key: no customer message');
  t.equal(created.lastAgentReplyAt, null);
  const comment = (body: Record<string, unknown>) => mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, body);
  await comment({ body: 'note to self', metadata: { isInternal: true } });
  t.match(await ticketRow(ticket.id), { lastCustomerMessageAt: null, lastAgentReplyAt: null }, 'an internal note is neither');
  await comment({ body: 'it broke again', authorType: 'CUSTOMER' });
  const afterCustomer = await ticketRow(ticket.id);
  t.ok(afterCustomer.lastCustomerMessageAt, 'a customer’s message');
  t.equal(afterCustomer.lastAgentReplyAt, null);
  await comment({ body: 'on it' });
  t.ok((await ticketRow(ticket.id)).lastAgentReplyAt, 'an agent’s reply');

  const mail = [
    'From: Jane <jane@customer.example>',
    `To: ${brand.id}@${DOMAIN}`,
    'Subject: Help',
    'Message-ID: <m-1@customer.example>',
    'Content-Type: text/plain',
    '',
    'It broke.',
  ];
  const byMail = await postInbound(app, SECRET, mail.join('\r\n'));
  t.equal(byMail.action, 'ticket_created');
  t.ok((await ticketRow(byMail.ticketId!)).lastCustomerMessageAt, 'opened by the customer: their message');

  const entered = ago(10 * HOUR);
  await setMoments(ticket.id, { statusChangedAt: entered });
  await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { priority: 'high' });
  t.equal((await ticketRow(ticket.id)).statusChangedAt.getTime(), entered.getTime(), 'another field changed: the status did not');
  await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'pending' });
  t.ok((await ticketRow(ticket.id)).statusChangedAt.getTime() > ago(HOUR).getTime(), 'a new status: now');
});

// On Citus a worker plans each shard's statement: the coordinator's EXPLAIN is not the one to read.
const distributedPlans = onCitusCluster && 'on a Citus cluster the plan of a shard is its worker’s';
t.test('each candidate query reads one range of an index, never the whole table', { skip: distributedPlans }, async (t) => {
  const { owner, brand } = await ownerWithBrand(app);
  // A brand of 4,000 tickets over a year, a quarter in each system status, so the planner weighs its choices.
  const hoursAgo = (prime: number) => `now() - ((i * ${prime}) % 8760) * interval '1 hour'`;
  const bulk = bulkTickets({ accountId: owner.accountId, livemode: true, brandId: brand.id }, 4000, {
    status: "(array['open', 'pending', 'resolved', 'closed'])[1 + i % 4]",
    created_at: hoursAgo(7919),
    updated_at: hoursAgo(6761),
    status_changed_at: hoursAgo(5849),
    resolved_at: `case when i % 4 >= 2 then ${hoursAgo(4967)} end`,
    last_customer_message_at: hoursAgo(3989),
    last_agent_reply_at: hoursAgo(2999),
    due_at: "now() + ((i * 104729) % 8760) * interval '1 hour'",
  });
  await db.raw(bulk.sql, bulk.bindings as never[]);
  await db.raw('analyze tickets');
  const ctx = tenantCtx(systemCtx(services), owner.accountId, true);
  const expected: Record<DurationField, RegExp> = {
    hoursSinceCreated: /tickets_automation_created_idx/,
    hoursSinceUpdated: /tickets_automation_updated_idx/,
    hoursSinceStatusChanged: /tickets_automation_status_changed_idx/,
    hoursSinceResolved: /tickets_automation_resolved_idx/,
    hoursSinceCustomerMessage: /tickets_automation_customer_message_idx/,
    hoursSinceAgentReply: /tickets_automation_agent_reply_idx/,
    hoursUntilDue: /tickets_automation_due_idx/,
  };
  for (const field of DURATION_FIELDS) {
    // Since at least 8,300 hours (about one ticket in twenty), or due within two days.
    const [operator, value] = field === 'hoursUntilDue' ? ['lte', 48] : ['gte', 8300];
    const rule = compile({ id: 'rule_x', name: field, position: 0, conditions: { all: [{ field, operator: operator as never, value }] }, actions: [] });
    const query = candidateQuery(ctx, brand.id, rule, ['open', 'pending', 'resolved', 'closed'], clock())!;
    const plan = await db.transaction(async (trx) => {
      // Here the brand is most of the table, which reads fastest whole; among a million tickets it is not.
      await trx.raw('set local enable_seqscan = off');
      return ((await trx.raw(`explain ${query.toQuery()}`)).rows as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']).join('\n');
    });
    t.notMatch(plan, /Seq Scan on tickets/, `${field}: no scan of tickets`);
    t.match(plan, expected[field], `${field}: ${expected[field].source}`);
  }
});
