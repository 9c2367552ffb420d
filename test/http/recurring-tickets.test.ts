import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { DateTime } from 'luxon';
import t from 'tap';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { assertErrorShape, assertNotFound, client, emptyDir, makeBrand, mustCreate, ownerWithBrand, servicesOf, signup, testApp } from '../helpers/app.js';
import { SIGN_IN_TEST_ENV, teamOf } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

/** A brand's recurring tickets as the dashboard's Recurring page uses them: /v1/brands/{brandId}/recurring-tickets (and the /v1/workspaces twin). */

const configFile = path.join(emptyDir, `recurring-tickets-${process.pid}.json`);
const plan = (slug: string, extra: Record<string, unknown> = {}) => ({
  slug,
  name: slug[0]!.toUpperCase() + slug.slice(1),
  price: 0,
  currency: 'usd',
  interval: 'month',
  ticketsPerPeriod: null,
  brands: null,
  members: null,
  customDomain: true,
  ...extra,
});
// The default plan says nothing of recurring tickets (a config file written before them): it includes them.
writeFileSync(
  configFile,
  JSON.stringify({
    defaultPlan: 'self-hosted',
    plans: [plan('self-hosted'), plan('basic', { recurringTickets: false }), plan('limited', { ticketsPerPeriod: 0, recurringTickets: true })],
  }),
);
const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_CONFIG: configFile });
const services = servicesOf(db);
const quiet = { info: () => undefined, error: () => undefined };
const dispatcher = new Dispatcher(services, quiet, null);
const RECURRING_ID = /^rec_[0-9a-z]{26}$/;
const HOUR = 3_600_000;

/** What the dashboard sends for a weekly schedule (no month, no dayOfMonth). */
const weekly = { frequency: 'weekly', dayOfWeek: 1, timeOfDay: '09:00', timezone: 'Europe/Paris', skipWeekends: false };
const daily = (timeOfDay = '08:00', timezone = 'UTC') => ({ frequency: 'daily', timeOfDay, timezone });

/** Makes a recurring ticket due `ago` ms ago, as if that time had come (the dispatcher's next tick runs it). */
const makeDue = (id: string, ago = 60_000) =>
  db('recurringTickets')
    .where({ id })
    .update({ nextRunAt: new Date(testNow() - ago) });
const rowOf = (id: string) => db('recurringTickets').where({ id }).first();
const ticketsOf = (brandId: string) => db('tickets').where({ brandId }).orderBy('id');
/** The instant as the zone's clock reads it. */
const local = (iso: string, zone: string) => DateTime.fromISO(iso, { zone });

for (const prefix of ['/v1/brands', '/v1/workspaces']) {
  t.test(`${prefix}: create, list, get, as the dashboard sends and reads them`, async (t) => {
    const { owner, brand } = await ownerWithBrand(app);
    const base = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}/recurring-tickets`;
    t.same((await owner.live('GET', base)).body, { data: [], total: 0 }, 'none yet: an empty list and total 0');
    const category = await mustCreate(owner.live, `/v1/brands/${brand.id}/categories`, { name: 'Maintenance' });
    const members = (await owner.live('GET', '/v1/accounts/me/members')).body.data;
    const before = testNow();
    const created = await owner.live('POST', base, {
      title: ' Weekly backup check ',
      body: 'Check the backups ran.',
      priority: 'medium',
      assigneeId: members[0].id,
      categoryId: category.id,
      schedule: weekly,
    });
    t.equal(created.status, 201, JSON.stringify(created.body));
    const rec = created.body;
    t.match(rec.id, RECURRING_ID);
    t.match(rec, {
      object: 'recurring_ticket',
      brandId: brand.id,
      accountId: owner.accountId,
      title: 'Weekly backup check',
      body: 'Check the backups ran.',
      priority: 'medium',
      assigneeId: members[0].id,
      categoryId: category.id,
      tags: [],
      customFields: {},
      schedule: { frequency: 'weekly', dayOfWeek: 1, timeOfDay: '09:00', timezone: 'Europe/Paris', skipWeekends: false },
      cronExpr: null,
      timezone: 'Europe/Paris',
      enabled: true,
      lastRunAt: null,
      lastTicketId: null,
      runCount: 0,
      failCount: 0,
      lastError: null,
      createdAt: String,
      updatedAt: String,
    });
    t.notOk('dayOfMonth' in rec.schedule || 'month' in rec.schedule, 'only the day fields a weekly schedule uses');
    const next = local(rec.nextRunAt, 'Europe/Paris');
    t.ok(next.toMillis() > before && next.toMillis() <= before + 7 * 24 * HOUR, `the next Monday within a week (${rec.nextRunAt})`);
    t.match(next.toFormat('ccc HH:mm'), 'Mon 09:00', 'Monday 09:00 in Paris');
    t.match(rec.createdBy, /^key_/, 'created by the API key');

    t.same((await owner.live('GET', base)).body, { data: [rec], total: 1 }, 'the list: { data, total }');
    t.same((await owner.live('GET', `${base}/${rec.id}`)).body, rec);
    const audit = await db('auditLog').where({ entityId: rec.id }).first();
    t.match(audit, { event: 'recurring_ticket.created', brandId: brand.id, performerType: 'api' });
  });
}

t.test('a yearly schedule without a month takes the month it is in its zone; cron expressions keep no schedule', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const yearly = await mustCreate(owner.live, `${base}/recurring-tickets`, {
    title: 'Renew the certificate',
    schedule: { frequency: 'yearly', dayOfMonth: 1, timeOfDay: '10:00', timezone: 'Pacific/Kiritimati', dayOfWeek: 3 },
  });
  const month = DateTime.fromMillis(testNow()).setZone('Pacific/Kiritimati').month;
  t.same(
    yearly.schedule,
    { frequency: 'yearly', dayOfMonth: 1, month, timeOfDay: '10:00', timezone: 'Pacific/Kiritimati', skipWeekends: false },
    'the month recorded; dayOfWeek ignored',
  );
  t.match(local(yearly.nextRunAt, 'Pacific/Kiritimati').toFormat('MM-dd HH:mm'), `${String(month).padStart(2, '0')}-01 10:00`);

  const cron = await mustCreate(owner.live, `${base}/recurring-tickets`, { title: 'Standup notes', cronExpr: ' 30  9 * * 1-5 ', timezone: 'America/New_York' });
  t.match(cron, { schedule: null, cronExpr: '30 9 * * 1-5', timezone: 'America/New_York' });
  const at = local(cron.nextRunAt, 'America/New_York');
  t.ok(at.weekday <= 5 && at.toFormat('HH:mm') === '09:30' && at.toMillis() > testNow(), `a weekday at 09:30 in New York (${cron.nextRunAt})`);
});

t.test('bad input gets a clear 400 on its field and creates nothing', async (t) => {
  const team = await teamOf(app, services);
  const base = `/v1/brands/${team.second.id}/recurring-tickets`;
  const other = await mustCreate(team.owner.live, `/v1/brands/${team.first.id}/categories`, { name: 'Elsewhere' });
  const otherTag = await mustCreate(team.owner.live, `/v1/brands/${team.first.id}/tags`, { name: 'elsewhere' });
  const cases: [string, unknown, string, string?][] = [
    ['schedule and cronExpr', { schedule: daily(), cronExpr: '0 9 * * *', timezone: 'UTC' }, 'invalid_schedule', 'cronExpr'],
    ['neither', {}, 'invalid_schedule', 'schedule'],
    ['cronExpr without timezone', { cronExpr: '0 9 * * *' }, 'invalid_schedule', 'timezone'],
    ['a timezone beside the schedule that is not its own', { schedule: daily(), timezone: 'Europe/Paris' }, 'invalid_schedule', 'timezone'],
    ['an unknown zone', { schedule: daily('08:00', 'Mars/Olympus_Mons') }, 'invalid_timezone', 'schedule.timezone'],
    ['an unknown zone for cron', { cronExpr: '0 9 * * *', timezone: 'Europe/Pariss' }, 'invalid_timezone', 'timezone'],
    ['four cron fields', { cronExpr: '0 9 * *', timezone: 'UTC' }, 'invalid_cron', 'cronExpr'],
    ['six cron fields', { cronExpr: '0 0 9 * * *', timezone: 'UTC' }, 'invalid_cron', 'cronExpr'],
    ['a cron macro', { cronExpr: '@daily', timezone: 'UTC' }, 'invalid_cron', 'cronExpr'],
    ['a random cron value', { cronExpr: 'H 9 * * *', timezone: 'UTC' }, 'invalid_cron', 'cronExpr'],
    ['a cron value out of range', { cronExpr: '0 24 * * *', timezone: 'UTC' }, 'invalid_cron', 'cronExpr'],
    ['weekly without its day', { schedule: { ...weekly, dayOfWeek: undefined } }, 'invalid_schedule', 'schedule.dayOfWeek'],
    ['monthly without its day', { schedule: { ...daily(), frequency: 'monthly' } }, 'invalid_schedule', 'schedule.dayOfMonth'],
    ['yearly without its day', { schedule: { ...daily(), frequency: 'yearly', month: 2 } }, 'invalid_schedule', 'schedule.dayOfMonth'],
    ['an unknown member as assignee', { schedule: daily(), assigneeId: 'mem_nobody' }, 'invalid_assignee', 'assigneeId'],
    ['a member who may not see the brand', { schedule: daily(), assigneeId: team.member.id }, 'invalid_assignee', 'assigneeId'],
    ["another brand's category", { schedule: daily(), categoryId: other.id }, 'invalid_category', 'categoryId'],
    ["another brand's tag id", { schedule: daily(), tags: [otherTag.id] }, 'invalid_tags', 'tags'],
    ['timeOfDay 25:00', { schedule: daily('25:00') }, 'validation_failed', 'schedule.timeOfDay'],
    ['timeOfDay 9:00', { schedule: daily('9:00') }, 'validation_failed', 'schedule.timeOfDay'],
    ['an hourly frequency', { schedule: { ...daily(), frequency: 'hourly' } }, 'validation_failed', 'schedule.frequency'],
    ['dayOfWeek 7', { schedule: { ...weekly, dayOfWeek: 7 } }, 'validation_failed', 'schedule.dayOfWeek'],
    ['dayOfMonth 32', { schedule: { ...daily(), frequency: 'monthly', dayOfMonth: 32 } }, 'validation_failed', 'schedule.dayOfMonth'],
    ['a priority the badge does not know', { schedule: daily(), priority: 'critical' }, 'validation_failed', 'priority'],
    ['a field of its own in the schedule', { schedule: { ...daily(), every: 2 } }, 'validation_failed', 'schedule.every'],
  ];
  for (const [what, body, code, field] of cases) {
    const res = await team.owner.live('POST', base, { title: 'Check', ...(body as object) });
    assertErrorShape(t, res, 400, code);
    if (field) t.equal(res.body.errors?.[0]?.field, field, `${what}: names ${field}`);
  }
  for (const title of ['', '   ']) assertErrorShape(t, await team.owner.live('POST', base, { title, schedule: daily() }), 400, 'validation_failed');
  assertErrorShape(t, await team.owner.live('POST', base, { schedule: daily() }), 400, 'validation_failed');
  t.same((await team.owner.live('GET', base)).body, { data: [], total: 0 }, 'nothing half-created');
  for (const query of ['status=stopped', 'limit=0', 'limit=101', 'offset=-1', 'sortBy=priority', 'order=up']) {
    assertErrorShape(t, await team.owner.live('GET', `${base}?${query}`), 400, 'validation_failed');
  }
});

t.test('PATCH changes any subset; a new rule moves nextRunAt; each change is audited', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const url = `${base}/recurring-tickets`;
  const rec = await mustCreate(owner.live, url, { title: 'Report', body: 'Numbers', priority: 'high', tags: ['reports'], schedule: daily('08:00', 'UTC') });
  const renamed = await owner.live('PATCH', `${url}/${rec.id}`, {
    title: 'Monthly report',
    body: null,
    priority: null,
    tags: ['reports', 'finance'],
    customFields: { team: 'ops' },
  });
  t.equal(renamed.status, 200, JSON.stringify(renamed.body));
  t.match(renamed.body, { title: 'Monthly report', body: null, priority: null, tags: ['reports', 'finance'], customFields: { team: 'ops' }, nextRunAt: rec.nextRunAt });

  const monthly = (await owner.live('PATCH', `${url}/${rec.id}`, { schedule: { frequency: 'monthly', dayOfMonth: 31, timeOfDay: '17:30', timezone: 'Asia/Tokyo' } })).body;
  t.match(monthly, { schedule: { frequency: 'monthly', dayOfMonth: 31 }, timezone: 'Asia/Tokyo', cronExpr: null });
  const at = local(monthly.nextRunAt, 'Asia/Tokyo');
  t.ok(at.toFormat('HH:mm') === '17:30' && (at.day === 31 || at.day === at.daysInMonth), `the 31st or the month's last day, 17:30 Tokyo (${monthly.nextRunAt})`);

  const moved = (await owner.live('PATCH', `${url}/${rec.id}`, { timezone: 'America/Los_Angeles' })).body;
  t.match(moved, { schedule: { frequency: 'monthly', timezone: 'America/Los_Angeles' }, timezone: 'America/Los_Angeles' }, 'timezone alone moves the schedule');
  t.match(local(moved.nextRunAt, 'America/Los_Angeles').toFormat('HH:mm'), '17:30');

  const cron = (await owner.live('PATCH', `${url}/${rec.id}`, { cronExpr: '0 12 * * *' })).body;
  t.match(cron, { schedule: null, cronExpr: '0 12 * * *', timezone: 'America/Los_Angeles' }, 'a cron expression replaces the schedule, in the zone it had');
  t.match(local(cron.nextRunAt, 'America/Los_Angeles').toFormat('HH:mm'), '12:00');
  const back = (await owner.live('PATCH', `${url}/${rec.id}`, { schedule: daily('06:00', 'UTC') })).body;
  t.match(back, { schedule: { frequency: 'daily' }, cronExpr: null, timezone: 'UTC' });

  const same = await owner.live('PATCH', `${url}/${rec.id}`, { schedule: daily('06:00', 'UTC') });
  t.same(same.body, back, 'the same schedule again changes nothing');
  assertErrorShape(t, await owner.live('PATCH', `${url}/${rec.id}`, {}), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('PATCH', `${url}/${rec.id}`, { schedule: daily(), cronExpr: '0 1 * * *' }), 400, 'invalid_schedule');
  assertErrorShape(t, await owner.live('PATCH', `${url}/${rec.id}`, { timezone: 'Nowhere/Atall' }), 400, 'invalid_timezone');
  assertNotFound(t, await owner.live('PATCH', `${url}/rec_00000000000000000000000000`, { title: 'x' }), 'an unknown id');

  const entries = await db('auditLog').where({ entityId: rec.id }).orderBy('id').select('event', 'changes');
  t.same(
    entries.map((e: { event: string }) => e.event),
    ['recurring_ticket.created', ...Array(5).fill('recurring_ticket.updated')],
    'one entry a change; none for a change to nothing',
  );
  t.same(
    entries[1].changes.map((c: { field: string }) => c.field),
    ['title', 'body', 'priority', 'tags', 'customFields'],
  );
});

t.test('pause, resume and delete: pausing twice is fine; resuming counts from now; delete returns it', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const url = `${base}/recurring-tickets`;
  const rec = await mustCreate(owner.live, url, { title: 'Water the plants', schedule: daily('07:00', 'Europe/Berlin') });
  const paused = await owner.live('POST', `${url}/${rec.id}/pause`);
  t.equal(paused.status, 200);
  t.match(paused.body, { id: rec.id, enabled: false, nextRunAt: rec.nextRunAt });
  t.same((await owner.live('POST', `${url}/${rec.id}/pause`)).body, paused.body, 'pausing a paused one: the same, unchanged');

  // Paused for days: its next time passed meanwhile.
  await makeDue(rec.id, 5 * 24 * HOUR);
  await dispatcher.tick();
  t.equal((await ticketsOf(brand.id)).length, 0, 'a paused one does not run');
  const resumed = (await owner.live('POST', `${url}/${rec.id}/resume`)).body;
  t.match(resumed, { enabled: true });
  const next = Date.parse(resumed.nextRunAt);
  t.ok(next > testNow() && next <= testNow() + 24 * HOUR, `due next at its first time after now, the missed runs not made up (${resumed.nextRunAt})`);
  t.same((await owner.live('POST', `${url}/${rec.id}/resume`)).body, resumed, 'resuming an enabled one changes nothing');

  const listed = async (status: string) => (await owner.live('GET', `${url}?status=${status}`)).body;
  const other = await mustCreate(owner.live, url, { title: 'Another', schedule: daily() });
  await owner.live('POST', `${url}/${other.id}/pause`);
  t.match(await listed('active'), { data: [{ id: rec.id }], total: 1 });
  t.match(await listed('paused'), { data: [{ id: other.id }], total: 1 });
  t.equal((await listed('all')).total, 2);

  const deleted = await owner.live('DELETE', `${url}/${rec.id}`);
  t.equal(deleted.status, 200);
  t.match(deleted.body, { id: rec.id, title: 'Water the plants' });
  assertNotFound(t, await owner.live('GET', `${url}/${rec.id}`), 'a deleted one');
  assertNotFound(t, await owner.live('DELETE', `${url}/${rec.id}`), 'deleted twice');
  t.same(
    await db('auditLog').where({ entityId: rec.id }).orderBy('id').pluck('event'),
    ['recurring_ticket.created', 'recurring_ticket.paused', 'recurring_ticket.resumed', 'recurring_ticket.deleted'],
    'a repeated pause or resume is not audited',
  );
});

t.test('the list: status, limit, offset, sortBy and order; total counts the status whatever the page', async (t) => {
  const { owner, base } = await ownerWithBrand(app);
  const url = `${base}/recurring-tickets`;
  const made = [];
  for (const [title, time] of [
    ['beta', '10:00'],
    ['Alpha', '12:00'],
    ['gamma', '11:00'],
  ] as const) {
    made.push(await mustCreate(owner.live, url, { title, cronExpr: `0 ${time.slice(0, 2)} * * *`, timezone: 'UTC' }));
  }
  const titles = async (query: string) => (await owner.live('GET', `${url}?${query}`)).body.data.map((r: { title: string }) => r.title);
  const byNext = [...made].sort((a, b) => a.nextRunAt.localeCompare(b.nextRunAt)).map((r) => r.title);
  t.same(await titles(''), byNext, 'the next due first by default');
  t.same(await titles('order=desc'), [...byNext].reverse());
  t.same(await titles('sortBy=title'), ['Alpha', 'beta', 'gamma'], 'titles in any case');
  t.same(await titles('sortBy=createdAt&order=desc'), ['gamma', 'Alpha', 'beta']);
  const page = (await owner.live('GET', `${url}?sortBy=title&limit=1&offset=1`)).body;
  t.match(page, { data: [{ title: 'beta' }], total: 3 });
  t.same((await owner.live('GET', `${url}?offset=10`)).body, { data: [], total: 3 });
});

t.test('run: the ticket now, as POST /tickets answers it; the schedule stays; it counts as a run', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const category = await mustCreate(owner.live, `${base}/categories`, { name: 'Ops' });
  const tag = await mustCreate(owner.live, `${base}/tags`, { name: 'routine' });
  const memberId = (await owner.live('GET', '/v1/accounts/me/members')).body.data[0].id;
  const webhook = await mustCreate(owner.live, `${base}/webhooks`, { url: 'https://93.184.215.14/recurring', events: ['ticket.created'] });
  const rec = await mustCreate(owner.live, `${base}/recurring-tickets`, {
    title: 'Rotate the keys',
    body: 'Every quarter.',
    priority: 'urgent',
    assigneeId: memberId,
    categoryId: category.id,
    tags: [tag.id, 'security'],
    schedule: { frequency: 'monthly', dayOfMonth: 1, timeOfDay: '09:00', timezone: 'UTC' },
  });
  await owner.live('POST', `${base}/recurring-tickets/${rec.id}/pause`);
  const run = await owner.live('POST', `${base}/recurring-tickets/${rec.id}/run`);
  t.equal(run.status, 201, JSON.stringify(run.body));
  const ticket = run.body;
  t.same(ticket, (await owner.live('GET', `${base}/tickets/${ticket.id}`)).body, 'the ticket as GET /tickets/{id} shows it');
  t.match(ticket, {
    object: 'ticket',
    brandId: brand.id,
    ticketNumber: Number,
    title: 'Rotate the keys',
    body: 'Every quarter.',
    status: 'open',
    priority: 'urgent',
    assigneeId: memberId,
    categoryId: category.id,
    category: { id: category.id, name: 'Ops' },
    createdBy: `recurring:${rec.id}`,
    source: 'api',
    sourceId: rec.id,
    sourceData: { recurringTicketId: rec.id, scheduledFor: null },
  });
  t.same(ticket.tags.map((x: { name: string }) => x.name).sort(), ['routine', 'security'], 'tag ids and names; a new name makes a tag');
  const after = (await owner.live('GET', `${base}/recurring-tickets/${rec.id}`)).body;
  t.match(after, { enabled: false, nextRunAt: rec.nextRunAt, runCount: 1, lastTicketId: ticket.id, lastRunAt: String }, 'a paused one runs by hand; its schedule stays');
  const events = await db('outbox').where({ webhookId: webhook.id, event: 'ticket.created' }).select('payload');
  t.equal(events.length, 1, 'ticket.created goes out as for any ticket');
  t.equal(events[0].payload.data.id, ticket.id);
  await db('outbox').where({ webhookId: webhook.id }).delete(); // nobody at that address: no dispatcher here should try
  t.match(await db('auditLog').where({ entityId: ticket.id, event: 'ticket.created' }).first(), { performerType: 'api' }, 'by the caller');

  await owner.live('DELETE', `${base}/categories/${category.id}`);
  assertErrorShape(t, await owner.live('POST', `${base}/recurring-tickets/${rec.id}/run`), 400, 'invalid_category');
  t.match(await rowOf(rec.id), { runCount: 1, failCount: 0, lastError: null }, 'a refused run by hand is the caller’s answer, not a failed run');
  t.equal((await ticketsOf(brand.id)).length, 1);
});

t.test('who may: members read and run within their brands; owners and admins set them up; other tenants get 404', async (t) => {
  const team = await teamOf(app, services);
  const base = `/v1/brands/${team.first.id}/recurring-tickets`;
  const rec = await mustCreate(team.owner.live, base, { title: 'Inventory', schedule: daily() });
  t.equal((await team.asMember('GET', base)).status, 200, 'a member of the brand reads the list');
  t.equal((await team.asMember('GET', `${base}/${rec.id}`)).status, 200);
  t.equal((await team.asMember('POST', `${base}/${rec.id}/run`)).status, 201, 'and opens its ticket now');
  for (const [method, url, body] of [
    ['POST', base, { title: 'Mine', schedule: daily() }],
    ['PATCH', `${base}/${rec.id}`, { title: 'Renamed' }],
    ['DELETE', `${base}/${rec.id}`, undefined],
    ['POST', `${base}/${rec.id}/pause`, undefined],
    ['POST', `${base}/${rec.id}/resume`, undefined],
  ] as const) {
    assertErrorShape(t, await team.asMember(method, url, body), 403, 'insufficient_role');
  }
  const byAdmin = await team.asAdmin('POST', base, { title: 'By the admin', schedule: daily(), assigneeId: team.member.id });
  t.equal(byAdmin.status, 201, 'an admin sets one up, for a member who sees the brand');
  t.equal(byAdmin.body.createdBy, team.admin.id, 'created by the admin');
  t.equal((await team.asAdmin('PATCH', `${base}/${rec.id}`, { title: 'Stock' })).status, 200);

  const stranger = await signup(app);
  const strangerBrand = await makeBrand(stranger.live);
  assertNotFound(t, await stranger.live('GET', `${base}/${rec.id}`), "another account's brand");
  assertNotFound(t, await stranger.live('POST', `/v1/brands/${strangerBrand.id}/recurring-tickets/${rec.id}/run`), "another account's id in one's own brand");
  assertNotFound(t, await stranger.live('DELETE', `/v1/brands/${strangerBrand.id}/recurring-tickets/${rec.id}`), 'nor deletes it');
  assertNotFound(t, await team.owner.live('GET', `/v1/brands/${team.second.id}/recurring-tickets/${rec.id}`), 'under another brand of the account');
  assertNotFound(t, await team.owner.test('GET', `${base}/${rec.id}`), 'the other mode');
  assertNotFound(t, await team.asMember('GET', `/v1/brands/${team.second.id}/recurring-tickets`), "a brand outside the member's assignments");
  t.equal((await rowOf(rec.id)).title, 'Stock', 'untouched by the others');
});

t.test('a plan entitlement: without it create, run and resume are 403; reading, pausing and editing work; its schedules wait', async (t) => {
  const anonymous = client(app);
  const plans = (await anonymous('GET', '/v1/auth/plans')).body.plans;
  t.same(
    Object.fromEntries(plans.map((p: { id: string; entitlements: { recurring_tickets: boolean } }) => [p.id, p.entitlements.recurring_tickets])),
    { 'self-hosted': true, basic: false, limited: true },
    'GET /v1/auth/plans says which plans include them (a plan that does not say does)',
  );
  const { owner, brand, base } = await ownerWithBrand(app);
  const url = `${base}/recurring-tickets`;
  const rec = await mustCreate(owner.live, url, { title: 'Before the downgrade', schedule: daily() });
  await db('accounts').where({ id: owner.accountId }).update({ planSlug: 'basic' });
  const refused = await owner.live('POST', url, { title: 'After', schedule: daily() });
  assertErrorShape(t, refused, 403, 'plan_feature_unavailable');
  t.match(refused.body.message, /Basic plan does not include recurring tickets/);
  assertErrorShape(t, await owner.live('POST', `${url}/${rec.id}/run`), 403, 'plan_feature_unavailable');
  t.equal((await owner.live('GET', url)).body.total, 1, 'the list still answers');
  t.equal((await owner.live('PATCH', `${url}/${rec.id}`, { title: 'Renamed' })).status, 200);
  t.equal((await owner.live('POST', `${url}/${rec.id}/pause`)).status, 200);
  assertErrorShape(t, await owner.live('POST', `${url}/${rec.id}/resume`), 403, 'plan_feature_unavailable');
  assertErrorShape(t, await owner.live('PATCH', `${url}/${rec.id}`, { enabled: true }), 403, 'plan_feature_unavailable');
  await db('recurringTickets').where({ id: rec.id }).update({ enabled: true });

  // Due while the plan lacks it: the dispatcher leaves it, due, and runs others.
  const entitled = await ownerWithBrand(app);
  const runs = await mustCreate(entitled.owner.live, `${entitled.base}/recurring-tickets`, { title: 'Elsewhere', schedule: daily() });
  await makeDue(rec.id);
  await makeDue(runs.id);
  const due = (await rowOf(rec.id)).nextRunAt;
  await dispatcher.tick();
  t.equal((await ticketsOf(entitled.brand.id)).length, 1, "an entitled account's schedule runs");
  t.equal((await ticketsOf(brand.id)).length, 0, 'not this one');
  t.same((await rowOf(rec.id)).nextRunAt, due, 'still due, unchanged');

  await db('accounts').where({ id: owner.accountId }).update({ planSlug: null });
  await dispatcher.tick();
  t.equal((await ticketsOf(brand.id)).length, 1, 'the upgrade restores it: it runs once');
  t.ok((await rowOf(rec.id)).nextRunAt > new Date(testNow()), 'and moves on');
});

t.test('the dispatcher runs a due one once, as the schedule, and moves nextRunAt on', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const rec = await mustCreate(owner.live, `${base}/recurring-tickets`, { title: 'Daily standup', priority: 'low', schedule: daily('08:00', 'UTC') });
  await dispatcher.tick();
  t.equal((await ticketsOf(brand.id)).length, 0, 'not before its time');
  await makeDue(rec.id);
  const scheduledFor = (await rowOf(rec.id)).nextRunAt.toISOString();
  const stats = await dispatcher.tick();
  t.ok(stats.recurringTickets.created >= 1, 'the tick counts it');
  const [ticket, ...more] = await ticketsOf(brand.id);
  t.equal(more.length, 0, 'one ticket');
  t.match(ticket, { title: 'Daily standup', priority: 'low', createdBy: `recurring:${rec.id}`, sourceId: rec.id, sourceData: { recurringTicketId: rec.id, scheduledFor } });
  const row = await rowOf(rec.id);
  t.match(row, { runCount: 1, failCount: 0, lastTicketId: ticket.id, enabled: true });
  t.ok(row.nextRunAt > new Date(testNow()) && row.nextRunAt <= new Date(testNow() + 24 * HOUR), 'due next at its next 08:00 UTC');
  t.equal(row.nextRunAt.toISOString().slice(11, 16), '08:00');
  t.match(
    await db('auditLog').where({ entityId: ticket.id, event: 'ticket.created' }).first(),
    { performerType: 'system', performerId: rec.id, source: 'automation' },
    'opened by the schedule',
  );
  await dispatcher.tick();
  t.equal((await ticketsOf(brand.id)).length, 1, 'the next tick runs nothing more');
});

t.test('missed several times (the dispatcher was down): one ticket, then the first future time', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const rec = await mustCreate(owner.live, `${base}/recurring-tickets`, { title: 'Hourly check', cronExpr: '0 * * * *', timezone: 'UTC' });
  await makeDue(rec.id, 3 * 24 * HOUR + 30 * 60_000);
  await dispatcher.tick();
  t.equal((await ticketsOf(brand.id)).length, 1, '72 missed runs make one ticket');
  const row = await rowOf(rec.id);
  t.ok(row.nextRunAt > new Date(testNow()) && row.nextRunAt <= new Date(testNow() + HOUR), 'due next at the coming full hour');
  t.equal(row.runCount, 1);
});

t.test('a failing run opens nothing, records why, and moves on; the next good run forgets it', async (t) => {
  const team = await teamOf(app, services);
  const base = `/v1/brands/${team.first.id}`;
  const category = await mustCreate(team.owner.live, `${base}/categories`, { name: 'Temporary' });
  const byCategory = await mustCreate(team.owner.live, `${base}/recurring-tickets`, { title: 'Categorized', categoryId: category.id, schedule: daily() });
  const byAssignee = await mustCreate(team.owner.live, `${base}/recurring-tickets`, { title: 'Assigned', assigneeId: team.admin.id, schedule: daily() });
  await team.owner.live('DELETE', `${base}/categories/${category.id}`);
  t.equal((await team.asOwner('DELETE', `/v1/auth/members/${team.admin.id}`)).status, 200, 'the assignee leaves');
  await makeDue(byCategory.id);
  await makeDue(byAssignee.id);
  const stats = await dispatcher.tick();
  t.ok(stats.recurringTickets.failed >= 2, 'the tick counts the failures');
  t.equal((await ticketsOf(team.first.id)).length, 0, 'no ticket, nothing half-made');
  for (const [rec, why] of [
    [byCategory, /categoryId cat_\w+ is not a category of this brand/],
    [byAssignee, /assigneeId mem_\w+ is not an active member who may see this brand/],
  ] as const) {
    const row = await rowOf(rec.id);
    t.match(row, { failCount: 1, lastError: why, runCount: 0, enabled: true }, rec.title);
    t.ok(row.nextRunAt > new Date(testNow()), `${rec.title}: moved on to its next time`);
  }
  const shown = (await team.owner.live('GET', `${base}/recurring-tickets/${byCategory.id}`)).body;
  t.match(shown, { failCount: 1, lastError: /not a category/ }, 'the dashboard shows why');

  // The plan's ticket allowance is spent: a failure too, and a good run afterwards clears it.
  await team.owner.live('PATCH', `${base}/recurring-tickets/${byCategory.id}`, { categoryId: null });
  await db('accounts').where({ id: team.owner.accountId }).update({ planSlug: 'limited' });
  await makeDue(byCategory.id);
  await dispatcher.tick();
  t.match(await rowOf(byCategory.id), { failCount: 2, lastError: /Limited plan allows 0 tickets per billing period/ });
  await db('accounts').where({ id: team.owner.accountId }).update({ planSlug: null });
  await makeDue(byCategory.id);
  await dispatcher.tick();
  t.match(await rowOf(byCategory.id), { failCount: 0, lastError: null, runCount: 1 });
  t.equal((await ticketsOf(team.first.id)).length, 1);
});

t.test('two dispatchers ticking at once: exactly one ticket per due schedule', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const second = await makeBrand(owner.live, 'Second desk');
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const brandBase = i % 2 ? `/v1/brands/${second.id}` : base;
    ids.push((await mustCreate(owner.live, `${brandBase}/recurring-tickets`, { title: `Due ${i}`, schedule: daily() })).id);
  }
  await db('recurringTickets')
    .whereIn('id', ids)
    .update({ nextRunAt: new Date(testNow() - 60_000) });
  const other = new Dispatcher(services, quiet, null);
  await Promise.all([dispatcher.tick(), other.tick(), dispatcher.tick()]);
  const made = await db('tickets').whereIn('brandId', [brand.id, second.id]).select('sourceId');
  t.equal(made.length, ids.length, 'as many tickets as schedules');
  t.same(new Set(made.map((r: { sourceId: string }) => r.sourceId)), new Set(ids), 'one each');
  const counts = (await db('recurringTickets').whereIn('id', ids).select('runCount')) as { runCount: number }[];
  t.same([...new Set(counts.map((r) => r.runCount))], [1], 'each ran once');
});

t.test('a run by hand while the dispatcher runs the same ones: both open their tickets, neither fails', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push((await mustCreate(owner.live, `${base}/recurring-tickets`, { title: `Both ${i}`, schedule: daily() })).id);
  await db('recurringTickets')
    .whereIn('id', ids)
    .update({ nextRunAt: new Date(testNow() - 60_000) });
  const [, ...byHand] = await Promise.all([dispatcher.tick(), ...ids.map((id) => owner.live('POST', `${base}/recurring-tickets/${id}/run`))]);
  t.same(
    byHand.map((r) => r.status),
    ids.map(() => 201),
    'every run by hand answers its ticket',
  );
  // One the dispatcher found held by a run by hand it skipped: the next tick runs it.
  await dispatcher.tick();
  t.equal((await ticketsOf(brand.id)).length, 2 * ids.length, 'and every scheduled run opened one too');
  const rows = (await db('recurringTickets').whereIn('id', ids).select('runCount', 'failCount')) as { runCount: number; failCount: number }[];
  t.same(
    rows.map((r) => [r.runCount, r.failCount]),
    ids.map(() => [2, 0]),
  );
});
