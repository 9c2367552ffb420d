import t from 'tap';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { announceOverdue } from '../../server/flows/ticket-overdue.js';
import { systemCtx } from '../../server/core/context.js';
import { assertErrorShape, makeTicket, mustCreate, secondInstance, servicesOf, testApp } from '../helpers/app.js';
import { teamOfThree } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

// Service levels: ticket.dueAt from the brand's slaByPriority / slaDefaultHours counted in its
// business hours (dashboard-client-facts sections 4 and 21), the rule for a dueAt set by hand, the
// clock paused while pending, ticket.overdue once per deadline, the dueAt list filters and sort,
// and SLA attainment in GET /v1/tickets/team-metrics.

const HOUR = 3_600_000;
/** The app's and dispatcher's clock: real time unless a test pins it. */
let pinned: number | null = null;
const clock = () => pinned ?? testNow();

const env = { TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true', TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' };
const { app, db, url } = await testApp(t, env, { clock });
const services = servicesOf(db);
const team = await teamOfThree(app, services);
const { owner, base } = team;

const SLA = {
  slaEnabled: true,
  slaDefaultHours: 8,
  slaByPriority: { urgent: 4, high: 24, normal: 72, low: 168 },
  slaNotifyOverdue: true,
  slaBusinessHoursOnly: false,
  slaBusinessHours: null,
  slaPauseOnPending: false,
};
const PARIS_HOURS = { start: '09:00', end: '17:00', days: [1, 2, 3, 4, 5], timezone: 'Europe/Paris', holidays: ['2026-12-25'] };

async function settings(patch: Record<string, unknown>) {
  const res = await owner.live('PATCH', base, patch);
  if (res.status !== 200) throw new Error(`brand PATCH failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A ticket created at `when` (the clock pinned there for the create). */
async function createdAt(when: string, body: Record<string, unknown> = {}) {
  pinned = Date.parse(when);
  try {
    return await makeTicket(owner.live, base, { title: 'Printer on fire', ...body });
  } finally {
    pinned = null;
  }
}

const ms = (iso: string | null) => (iso === null ? null : Date.parse(iso));

t.test('the brand holds its SLA settings in the shape the dashboard reads and writes', async (t) => {
  const saved = await settings({ ...SLA, slaBusinessHoursOnly: true, slaBusinessHours: PARIS_HOURS, slaPauseOnPending: true });
  t.match(saved, { ...SLA, slaBusinessHoursOnly: true, slaBusinessHours: PARIS_HOURS, slaPauseOnPending: true });
  t.match((await owner.live('GET', base)).body, { slaBusinessHours: PARIS_HOURS, slaByPriority: SLA.slaByPriority }, 'read back');
  t.match((await owner.live('GET', base.replace('/brands/br_', '/workspaces/ws_'))).body, { slaDefaultHours: 8 }, 'under /workspaces too');
  await settings(SLA);
});

t.test('business hours that cannot be counted in are refused, field by field', async (t) => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['a time zone that does not exist', { ...PARIS_HOURS, timezone: 'Mars/Olympus' }, 'slaBusinessHours.timezone'],
    ['closing before opening', { ...PARIS_HOURS, start: '17:00', end: '09:00' }, 'slaBusinessHours.end'],
    ['a date that does not exist', { ...PARIS_HOURS, holidays: ['2026-02-30'] }, 'slaBusinessHours.holidays'],
  ];
  for (const [what, hours, field] of cases) {
    const res = await owner.live('PATCH', base, { slaBusinessHours: hours });
    assertErrorShape(t, res, 400, 'invalid_business_hours');
    t.equal(res.body.errors?.[0]?.field, field, what);
  }
  for (const hours of [
    { ...PARIS_HOURS, days: [] },
    { ...PARIS_HOURS, start: '9am' },
    { ...PARIS_HOURS, days: [7] },
    { ...PARIS_HOURS, holidays: ['25/12/2026'] },
  ]) {
    assertErrorShape(t, await owner.live('PATCH', base, { slaBusinessHours: hours }), 400, 'validation_failed');
  }
  assertErrorShape(t, await owner.live('POST', '/v1/brands', { name: 'Elsewhere', slaBusinessHours: { ...PARIS_HOURS, timezone: 'Nowhere/City' } }), 400, 'invalid_business_hours');
  t.match((await owner.live('GET', base)).body, { slaBusinessHours: null }, 'nothing was saved');
});

t.test('a 24/7 brand: dueAt is creation plus the hours of the priority, or the default', async (t) => {
  await settings(SLA);
  const at = '2026-03-28T12:00:00.000Z'; // the eve of Europe's spring change: hours are real hours
  const urgent = await createdAt(at, { priority: 'urgent' });
  t.equal(urgent.dueAt, '2026-03-28T16:00:00.000Z', 'urgent: 4 h');
  t.equal((await createdAt(at, { priority: 'high' })).dueAt, '2026-03-29T12:00:00.000Z', 'high: 24 h');
  t.equal((await createdAt(at)).dueAt, '2026-03-31T12:00:00.000Z', 'no priority counts as normal: 72 h');
  await settings({ slaByPriority: { urgent: 4 } });
  t.equal((await createdAt(at, { priority: 'low' })).dueAt, '2026-03-28T20:00:00.000Z', 'a priority without hours takes slaDefaultHours');
  await settings({ slaByPriority: SLA.slaByPriority });
  t.equal((await owner.live('GET', `${base}/tickets/${urgent.id}`)).body.dueAt, urgent.dueAt, 'stored as answered');
});

t.test('business hours: created outside them, across a holiday and a daylight-saving change', async (t) => {
  await settings({ ...SLA, slaBusinessHoursOnly: true, slaBusinessHours: PARIS_HOURS });
  // Friday 2026-01-16 20:00 Paris (after closing): urgent (4 working hours) is Monday 13:00 Paris.
  t.equal((await createdAt('2026-01-16T19:00:00Z', { priority: 'urgent' })).dueAt, '2026-01-19T12:00:00.000Z', 'outside hours: from the next opening');
  // Thursday 2026-12-24 16:00 Paris: 1 hour that day, Friday the 25th is a holiday, then Monday.
  t.equal((await createdAt('2026-12-24T15:00:00Z', { priority: 'urgent' })).dueAt, '2026-12-28T11:00:00.000Z', 'the holiday counts no time');
  // Friday 2026-03-27 16:00 CET; the clocks change on Sunday: Monday 12:00 CEST is 10:00Z, not 11:00Z.
  t.equal((await createdAt('2026-03-27T15:00:00Z', { priority: 'urgent' })).dueAt, '2026-03-30T10:00:00.000Z', 'local hours after the change');
  await settings(SLA);
});

t.test('no SLA, or no hours at all: no dueAt; a dueAt given at create wins', async (t) => {
  await settings({ slaEnabled: false });
  t.equal((await makeTicket(owner.live, base, { title: 'Off', priority: 'urgent' })).dueAt, null, 'SLA off');
  await settings({ slaEnabled: true, slaByPriority: null, slaDefaultHours: null });
  t.equal((await makeTicket(owner.live, base, { title: 'No hours', priority: 'urgent' })).dueAt, null, 'no hours configured');
  await settings(SLA);
  await settings({
    slaEnabled: true,
    slaDefaultHours: 87_600,
    slaByPriority: null,
    slaBusinessHoursOnly: true,
    slaBusinessHours: { ...PARIS_HOURS, start: '09:00', end: '09:01', days: [1] },
  });
  const tooFar = await owner.live('POST', `${base}/tickets`, { title: 'Centuries away' });
  t.equal(tooFar.status, 201, 'a deadline centuries of calendar away is no error');
  t.equal(tooFar.body.dueAt, null, 'and no dueAt');
  await settings(SLA);
  const given = '2030-01-01T00:00:00.000Z';
  t.equal((await makeTicket(owner.live, base, { title: 'Given', priority: 'urgent', dueAt: given })).dueAt, given, 'given by hand');
  const test = await owner.test('POST', '/v1/brands', { name: 'Test-mode brand', ...SLA });
  t.equal(test.status, 201);
  t.ok((await makeTicket(owner.test, `/v1/brands/${test.body.id}`, { title: 'Test mode', priority: 'urgent' })).dueAt, 'test mode has its own brands with their own SLA');
});

t.test('a dueAt set by hand wins until the priority changes again', async (t) => {
  await settings(SLA);
  const ticket = await makeTicket(owner.live, base, { title: 'Hand', priority: 'normal' });
  const created = ms(ticket.createdAt)!;
  const byHand = '2031-06-01T00:00:00.000Z';
  t.equal((await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { dueAt: byHand })).body.dueAt, byHand);
  t.equal((await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { title: 'Hand, renamed', status: 'pending' })).body.dueAt, byHand, 'other changes keep it');
  const urgent = await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { priority: 'urgent', status: 'open' });
  t.ok(Math.abs(ms(urgent.body.dueAt)! - (created + 4 * HOUR)) < 5000, 'a new priority: the SLA again, from the creation');
  const both = await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { priority: 'low', dueAt: byHand });
  t.equal(both.body.dueAt, byHand, 'a dueAt given with the new priority wins');
  const cleared = await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { dueAt: null });
  t.equal(cleared.body.dueAt, null, 'null clears it, and it stays cleared');
  t.equal((await owner.live('PATCH', `${base}/tickets/${ticket.id}`, { status: 'resolved' })).body.dueAt, null);

  const logs = (await owner.live('GET', `${base}/tickets/${ticket.id}/logs`)).body;
  const dueChanges = JSON.stringify(logs).match(/"field":"dueAt"/g) ?? [];
  t.ok(dueChanges.length >= 4, 'each dueAt change is in the ticket history');
});

t.test('with slaPauseOnPending, time waiting on the customer does not count', async (t) => {
  await settings({ ...SLA, slaPauseOnPending: true });
  const ticket = await makeTicket(owner.live, base, { title: 'Waiting', priority: 'urgent' });
  // The clock starts when the ticket is created; the test then moves the app's clock on.
  const start = ms(ticket.createdAt)!;
  const near = (iso: string | null, expected: number) => iso !== null && Math.abs(ms(iso)! - expected) < 5000;
  t.ok(near(ticket.dueAt, start + 4 * HOUR));
  const path = `${base}/tickets/${ticket.id}`;
  pinned = start + 1 * HOUR;
  const pending = await owner.live('PATCH', path, { status: 'pending' });
  t.equal(pending.body.dueAt, null, 'pending: the clock stops, no dueAt');
  pinned = start + 3 * HOUR; // two hours waiting on the customer
  const back = await owner.live('PATCH', path, { status: 'open' });
  t.ok(near(back.body.dueAt, start + 6 * HOUR), 'back: dueAt moved on by the two hours it waited');
  pinned = start + 4 * HOUR;
  const priority = await owner.live('PATCH', path, { priority: 'high' });
  t.ok(near(priority.body.dueAt, start + 26 * HOUR), 'a new priority keeps the paused time');

  // The other ways a status changes: a comment setting it, and a bulk action.
  pinned = start + 5 * HOUR;
  const viaComment = await owner.live('POST', `${path}/comments`, { body: 'Waiting on you', setStatus: 'pending' });
  t.equal(viaComment.status, 201);
  t.equal((await owner.live('GET', path)).body.dueAt, null, 'a comment setting pending pauses it');
  pinned = start + 7 * HOUR;
  const bulk = await owner.live('POST', `${base}/tickets/bulk`, { ticketIds: [ticket.id], action: 'resolve' });
  t.equal(bulk.status, 200, JSON.stringify(bulk.body));
  const resolved = (await owner.live('GET', path)).body.dueAt;
  t.ok(near(resolved, start + 28 * HOUR), 'a bulk resolve out of pending resumes it: resolved within the deadline');

  // A clock already past its deadline does not pause: the breach happened.
  pinned = start + 40 * HOUR;
  t.equal((await owner.live('PATCH', path, { status: 'pending' })).body.dueAt, resolved, 'overdue: pending does not pause');
  pinned = null;

  await settings({ slaPauseOnPending: false });
  const plain = await makeTicket(owner.live, base, { title: 'No pause', priority: 'urgent' });
  const kept = await owner.live('PATCH', `${base}/tickets/${plain.id}`, { status: 'pending' });
  t.equal(kept.body.dueAt, plain.dueAt, 'without the setting, pending changes nothing');
  await settings(SLA);
});

t.test('a service level changed in another process applies to the next create here', async (t) => {
  await settings(SLA);
  const first = await makeTicket(owner.live, base, { title: 'Before', priority: 'urgent' });
  t.ok(first.dueAt, 'this process read the level (and remembers it)');
  const other = await secondInstance(t, { app, db, url, config: services.config });
  const res = await other.app.inject({ method: 'PATCH', url: base, headers: { authorization: `Bearer ${owner.liveKey}` }, payload: { slaByPriority: { urgent: 1 } } });
  t.equal(res.statusCode, 200);
  const after = await makeTicket(owner.live, base, { title: 'After', priority: 'urgent' });
  t.ok(Math.abs(ms(after.dueAt)! - (ms(after.createdAt)! + 1 * HOUR)) < 5000, 'the new level, not the remembered one');
  await settings(SLA);
});

/** One dispatcher tick at the real clock plus `ahead`. */
async function tick(ahead = 0) {
  const quiet = { info: () => undefined, error: () => undefined };
  const dispatcher = new Dispatcher(services, quiet, null, { now: () => testNow() + ahead });
  try {
    return await dispatcher.tick();
  } finally {
    await dispatcher.stop();
  }
}

const overdueEntries = async (ticketId: string) => (await db('audit_log').where({ ticket_id: ticketId, event: 'ticket.overdue' })) as unknown[];
const overdueDeliveries = async (ticketId: string) =>
  (await db('outbox').where({ event: 'ticket.overdue' }).whereRaw("payload -> 'data' ->> 'id' = ?", [ticketId])) as { payload: { data: Record<string, unknown> } }[];
const overdueMails = async (ticketId: string) => (await db('mail_messages').where({ ticket_id: ticketId, kind: 'overdue' })) as { message: { to: { address: string }[] } }[];

t.test('a ticket past its dueAt unresolved: ticket.overdue once (audit, webhook), and mail to its assignee', async (t) => {
  await settings({ ...SLA, slaNotifyOverdue: true });
  await mustCreate(owner.live, `${base}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.overdue'] });
  const past = new Date(testNow() - 60_000).toISOString();
  const assigned = await makeTicket(owner.live, base, { title: 'Assigned', dueAt: past, assigneeId: team.member.id });
  const unassigned = await makeTicket(owner.live, base, { title: 'Nobody', dueAt: past });
  const resolved = await makeTicket(owner.live, base, { title: 'Done', dueAt: past, status: 'resolved' });
  const future = await makeTicket(owner.live, base, { title: 'Later', dueAt: new Date(testNow() + HOUR).toISOString() });

  const ticked = await tick();
  t.ok(ticked.overdueTickets >= 2, 'the tick announced them');
  t.equal((await overdueEntries(assigned.id)).length, 1, 'one audit entry');
  const [delivery] = await overdueDeliveries(assigned.id);
  t.match(delivery?.payload.data, { id: assigned.id, dueAt: past, assigneeId: team.member.id }, 'the webhook body names the ticket and its dueAt');
  t.same(
    (await overdueMails(assigned.id)).flatMap((m) => m.message.to.map((a) => a.address)),
    [team.member.email],
    'mailed to the assignee',
  );
  t.same(
    (await overdueMails(unassigned.id)).flatMap((m) => m.message.to.map((a) => a.address)).sort(),
    [team.ownerEmail, team.admin.email].sort(),
    'unassigned: mailed to the owners and admins',
  );
  t.equal((await overdueEntries(resolved.id)).length, 0, 'a resolved ticket is not overdue');
  t.equal((await overdueEntries(future.id)).length, 0, 'a future dueAt is not yet');

  await tick();
  t.equal((await overdueEntries(assigned.id)).length, 1, 'the next tick announces nothing again');
  t.equal((await overdueDeliveries(assigned.id)).length, 1);

  await tick(2 * HOUR);
  t.equal((await overdueEntries(future.id)).length, 1, 'the later one, once its time comes');

  // A new deadline is a new announcement; reopening keeps the old one announced.
  await owner.live('PATCH', `${base}/tickets/${assigned.id}`, { dueAt: new Date(testNow() - 1000).toISOString() });
  await tick();
  t.equal((await overdueEntries(assigned.id)).length, 2, 'a new dueAt that passes is announced again');
  t.equal((await overdueMails(assigned.id)).length, 2, 'and mailed again');
});

t.test('without slaNotifyOverdue: the event and webhook, no mail', async (t) => {
  await settings({ ...SLA, slaNotifyOverdue: false });
  const ticket = await makeTicket(owner.live, base, { title: 'Quiet', dueAt: new Date(testNow() - 1000).toISOString() });
  await tick();
  t.equal((await overdueEntries(ticket.id)).length, 1);
  t.equal((await overdueMails(ticket.id)).length, 0);
});

t.test('dispatchers racing over the same overdue tickets announce each exactly once', async (t) => {
  const past = new Date(testNow() - 1000).toISOString();
  const made = await Promise.all(Array.from({ length: 30 }, (_, i) => makeTicket(owner.live, base, { title: `Race ${i}`, dueAt: past })));
  const others = [await secondInstance(t, { app, db, url, config: services.config }), await secondInstance(t, { app, db, url, config: services.config })];
  const counts = await Promise.all([
    announceOverdue(systemCtx(services), new Date(testNow())),
    ...others.map((o) => announceOverdue(systemCtx(servicesOf(o.db, services.config)), new Date(testNow()))),
  ]);
  t.ok(counts.reduce((a, b) => a + b, 0) >= made.length, 'between them every ticket was announced');
  for (const ticket of made) t.equal((await overdueEntries(ticket.id)).length, 1, `${ticket.title}: once`);
});

t.test('lists: sort=dueAt, overdue, dueBefore and dueAfter, on the brand list and the cross-brand list', async (t) => {
  const { owner: o, base: b } = await teamOfThree(app, services);
  const now = testNow();
  const make = (title: string, dueAt: number | null, extra: Record<string, unknown> = {}) =>
    makeTicket(o.live, b, { title, ...(dueAt === null ? {} : { dueAt: new Date(dueAt).toISOString() }), ...extra });
  const late = await make('late', now - 2 * HOUR);
  const later = await make('later', now - HOUR);
  const doneLate = await make('done late', now - 3 * HOUR, { status: 'resolved' });
  const soon = await make('soon', now + HOUR);
  const far = await make('far', now + 48 * HOUR);
  const none = await make('none', null);
  const titles = (res: { body: { data: { title: string }[] } }) => res.body.data.map((x) => x.title);

  for (const list of [`${b}/tickets`, '/v1/tickets']) {
    const q = (query: string) => o.live('GET', `${list}?status=all&${query}`);
    t.same(titles(await q('sort=dueAt&order=asc')), ['done late', 'late', 'later', 'soon', 'far', 'none'], `${list}: sort=dueAt asc, none last`);
    t.same(titles(await q('sort=dueAt&order=desc')), ['none', 'far', 'soon', 'later', 'late', 'done late'], `${list}: desc, none first`);
    t.same(titles(await q('overdue=true&sort=dueAt&order=asc')), ['late', 'later'], `${list}: overdue leaves out the resolved and the future`);
    t.same(titles(await q('overdue=true&sort=dueAt&order=desc')), ['later', 'late'], `${list}: in either order`);
    t.same(titles(await q('overdue=false&sort=dueAt&order=asc')), ['done late', 'soon', 'far', 'none'], `${list}: overdue=false is the rest`);
    const before = new Date(now).toISOString();
    const after = new Date(now + 2 * HOUR).toISOString();
    t.same(titles(await q(`dueBefore=${before}&sort=dueAt&order=asc`)), ['done late', 'late', 'later'], `${list}: dueBefore`);
    t.same(titles(await q(`dueAfter=${after}&sort=dueAt&order=asc`)), ['far'], `${list}: dueAfter leaves out tickets without one`);
    t.same(titles(await q(`dueAfter=${before}&dueBefore=${after}`)), ['soon'], `${list}: a window`);
    // Pages: a cursor walks the dueAt order to the end.
    const first = await q('sort=dueAt&order=asc&limit=4');
    const second = await o.live('GET', `${list}?status=all&sort=dueAt&order=asc&limit=4&cursor=${encodeURIComponent(first.body.pagination.nextCursor)}`);
    t.same([...titles(first), ...titles(second)], ['done late', 'late', 'later', 'soon', 'far', 'none'], `${list}: paged`);
    assertErrorShape(t, await q('overdue=maybe'), 400, 'validation_failed');
    assertErrorShape(t, await q('dueBefore=yesterday'), 400, 'validation_failed');
  }
  t.ok([late, later, doneLate, soon, far, none].every((x) => x.id));
  const other = await teamOfThree(app, services);
  t.same((await other.owner.live('GET', '/v1/tickets?status=all&overdue=true')).body.data, [], "another account's overdue tickets are not listed");
});

t.test('team metrics: SLA attainment per member and for the team', async (t) => {
  const { owner: o, base: b, member, admin } = await teamOfThree(app, services);
  const now = testNow();
  const resolve = async (dueAt: number, assigneeId: string | null) => {
    const ticket = await makeTicket(o.live, b, { title: 'Metric', dueAt: new Date(dueAt).toISOString(), ...(assigneeId ? { assigneeId } : {}) });
    await o.live('PATCH', `${b}/tickets/${ticket.id}`, { status: 'resolved' });
  };
  await resolve(now + HOUR, member.id); // met
  await resolve(now + HOUR, member.id); // met
  await resolve(now - HOUR, member.id); // missed
  await resolve(now - HOUR, admin.id); // missed
  await resolve(now + HOUR, null); // met, unassigned
  const noDue = await makeTicket(o.live, b, { title: 'No due', assigneeId: admin.id });
  await o.live('PATCH', `${b}/tickets/${noDue.id}`, { status: 'closed' });

  const res = await o.live('GET', '/v1/tickets/team-metrics');
  t.equal(res.status, 200);
  const byId = new Map((res.body.members as { memberId: string; memberEmail: string }[]).map((m) => [m.memberId, m]));
  t.match(byId.get(member.id), { ticketsResolved: 3, slaTracked: 3, slaMet: 2, slaAttainment: 67 });
  t.match(byId.get(admin.id), { ticketsResolved: 1, ticketsClosed: 1, slaTracked: 1, slaMet: 0, slaAttainment: 0 }, 'a resolution without a dueAt is not tracked');
  const ownerRow = [...byId.values()].find((m) => m.memberEmail !== member.email && m.memberEmail !== admin.email);
  t.match(ownerRow, { slaTracked: 0, slaMet: 0, slaAttainment: null }, 'nothing tracked: attainment null');
  t.same(res.body.sla, { slaTracked: 5, slaMet: 3, slaAttainment: 60 }, 'the team, unassigned tickets included');
});
