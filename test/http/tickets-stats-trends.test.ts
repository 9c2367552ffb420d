import t, { type Test } from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { updateTickets } from '../../server/core/ticket-writes.js';
import { rollUp } from '../../server/domains/tickets/counts.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
import { testNow } from '../helpers/clock.js';

// GET /v1/tickets/stats and /v1/tickets/trends read the counts kept as tickets change (ticket_counts
// plus the changes not rolled up yet). Every check compares each answer, whole, with a direct count
// of the tickets (the statements these routes ran before the counts were kept), before the
// roll-up moves the changes and after.
const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const system = systemCtx(servicesOf(db));

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

const DAY = 86_400_000;
const today = Math.floor(testNow() / DAY) * DAY;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

const owner = await signup(app);
const [A, B] = [(await makeBrand(owner.live, 'Alpha')).id as string, (await makeBrand(owner.live, 'Beta')).id as string];
const testBrand = (await makeBrand(owner.test, 'Test mode')).id as string;
const base = (brandId: string) => `/v1/brands/${brandId}`;
await mustCreate(owner.live, `${base(A)}/statuses`, { key: 'waiting_on_vendor', name: 'Waiting on vendor', color: '#112233' });

/** The account's brands in a mode, or those named: what the routes read when none is named. */
async function brandsIn(livemode: boolean, named?: string[]): Promise<{ id: string; name: string; ticketPrefix: string | null }[]> {
  const q = db('brands').where({ accountId: owner.accountId, livemode }).orderBy('id').select('id', 'name', 'ticketPrefix');
  if (named) q.whereIn('id', named);
  return q;
}

const COUNTED = 't.account_id = ? and t.livemode = ? and t.brand_id = any(?::text[]) and t.deleted_at is null and not t.is_spam';

/** GET /v1/tickets/stats counted from the tickets themselves. */
async function directStats(livemode: boolean, named?: string[], days?: number): Promise<Any> {
  const brands = await brandsIn(livemode, named);
  const scope = [owner.accountId, livemode, brands.map((b) => b.id)];
  const since = days !== undefined ? [new Date(today - (days - 1) * DAY).toISOString()] : [];
  const byStatus = await db.raw(
    `select t.brand_id, t.status, count(*)::int as n from tickets t where ${COUNTED}${since.length ? ' and t.created_at >= ?' : ''} group by t.brand_id, t.status`,
    [...scope, ...since],
  );
  const resolution = await db.raw(
    `select count(*)::int as n, round(avg(extract(epoch from t.resolved_at - t.created_at)) / 60)::int as minutes
     from tickets t where ${COUNTED} and t.resolved_at is not null${since.length ? ' and t.resolved_at >= ?' : ''}`,
    [...scope, ...since],
  );
  const view: Any = {
    total: 0,
    open: 0,
    pending: 0,
    resolved: 0,
    closed: 0,
    byStatus: {},
    byBrand: Object.fromEntries(brands.map((b) => [b.id, { name: b.name, prefix: b.ticketPrefix, total: 0, open: 0, pending: 0, resolved: 0, closed: 0 }])),
    responseMetrics: { avgFirstResponseMinutes: null, avgResolutionMinutes: resolution.rows[0].minutes, ticketsWithResponse: 0, ticketsResolved: resolution.rows[0].n },
  };
  for (const row of byStatus.rows) {
    view.total += row.n;
    view.byBrand[row.brand_id].total += row.n;
    view.byStatus[row.status] = (view.byStatus[row.status] ?? 0) + row.n;
    if (['open', 'pending', 'resolved', 'closed'].includes(row.status)) {
      view[row.status] += row.n;
      view.byBrand[row.brand_id][row.status] += row.n;
    }
  }
  return view;
}

/** GET /v1/tickets/trends over `period` counted from the tickets themselves. */
async function directTrends(livemode: boolean, named: string[] | undefined, period: { start: string; end: string }): Promise<Any> {
  const scope = [owner.accountId, livemode, (await brandsIn(livemode, named)).map((b) => b.id)];
  const bounds = [`${period.start}T00:00:00Z`, new Date(Date.parse(`${period.end}T00:00:00Z`) + DAY).toISOString()];
  const { rows } = await db.raw(
    `with created as (
       select (t.created_at at time zone 'UTC')::date as day, count(*)::int as n from tickets t
       where ${COUNTED} and t.created_at >= ? and t.created_at < ? group by 1),
     resolved as (
       select (t.resolved_at at time zone 'UTC')::date as day, count(*)::int as n from tickets t
       where ${COUNTED} and t.resolved_at >= ? and t.resolved_at < ? group by 1)
     select to_char(d.day, 'YYYY-MM-DD') as date, coalesce(c.n, 0) as created, coalesce(r.n, 0) as resolved
     from generate_series(?::date, ?::date, interval '1 day') as g (ts)
     cross join lateral (select g.ts::date as day) as d
     left join created c on c.day = d.day left join resolved r on r.day = d.day
     order by d.day`,
    [...scope, ...bounds, ...scope, ...bounds, period.start, period.end],
  );
  return { data: rows, period };
}

interface Read {
  url: string;
  livemode: boolean;
  named?: string[];
  days?: number;
}
const READS: Read[] = [
  { url: '/v1/tickets/stats', livemode: true },
  { url: '/v1/tickets/stats?days=1', livemode: true, days: 1 },
  { url: '/v1/tickets/stats?days=3', livemode: true, days: 3 },
  { url: '/v1/tickets/stats?days=366', livemode: true, days: 366 },
  { url: `/v1/tickets/stats?brandIds=${A}`, livemode: true, named: [A] },
  { url: `/v1/tickets/stats?brandIds=${B},${A}&days=2`, livemode: true, named: [A, B], days: 2 },
  { url: '/v1/tickets/stats', livemode: false },
  { url: '/v1/tickets/trends', livemode: true },
  { url: '/v1/tickets/trends?days=7', livemode: true },
  { url: '/v1/tickets/trends?days=366', livemode: true },
  { url: `/v1/tickets/trends?startDate=${dayOf(today - 6 * DAY)}&endDate=${dayOf(today - DAY)}&brandIds=${B}`, livemode: true, named: [B] },
  { url: '/v1/tickets/trends?days=5', livemode: false },
];

/** Every read, whole, against a direct count of the tickets. */
async function compare(t: Test, when: string): Promise<void> {
  for (const read of READS) {
    const res = await (read.livemode ? owner.live : owner.test)('GET', read.url);
    t.equal(res.status, 200, `${when}: ${read.url} answers`);
    const expected = read.url.includes('/stats') ? await directStats(read.livemode, read.named, read.days) : await directTrends(read.livemode, read.named, res.body.period);
    t.strictSame(res.body, expected, `${when}: ${read.url} equals a direct count`);
  }
}

const pending = async () => Number((await db('ticket_count_changes').count({ n: '*' }))[0]!.n);
const rolledUp = () => db('ticket_counts').orderBy(['accountId', 'livemode', 'brandId', 'day', 'status']).select();

/** The reads equal a direct count with the changes pending, then after the roll-up moved them all. */
async function check(t: Test, when: string): Promise<void> {
  t.ok((await pending()) > 0, `${when}: the change is pending`);
  await compare(t, `${when}, before the roll-up`);
  t.ok((await rollUp(system)) > 0, `${when}: the roll-up moves the changes`);
  t.equal(await pending(), 0, `${when}: nothing is left to move`);
  await compare(t, `${when}, after the roll-up`);
  t.equal(await everyDayDisagreements(), 0, `${when}: each brand and status's every-day row sums its day rows`);
}

/** Every-day rows (day -infinity) that differ from the sum of their brand and status's day rows, and sums without one. */
async function everyDayDisagreements(): Promise<number> {
  const { rows } = await db.raw(`
    with every_day as (
      select account_id, livemode, brand_id, status, created, resolved, resolution_seconds from ticket_counts where day = '-infinity'),
    summed as (
      select account_id, livemode, brand_id, status, sum(created)::int as created, sum(resolved)::int as resolved, sum(resolution_seconds) as resolution_seconds
      from ticket_counts where day > '-infinity' group by 1, 2, 3, 4
      having sum(created) <> 0 or sum(resolved) <> 0 or sum(resolution_seconds) <> 0)
    select count(*)::int as n from ((select * from every_day except select * from summed) union all (select * from summed except select * from every_day)) as d`);
  return rows[0].n;
}

const ticketsOf = (brandId: string) => db('tickets').where({ brandId, deletedAt: null }).orderBy('id').pluck('id');
const patch = (brandId: string, id: string, body: object) => owner.live('PATCH', `${base(brandId)}/tickets/${id}`, body);

t.test('creates, in both modes, some already resolved', async (t) => {
  for (let i = 0; i < 6; i++) {
    await makeTicket(owner.live, base(A), { title: `a${i}`, ...(i % 3 === 2 ? { status: 'resolved' } : {}) });
    await makeTicket(owner.live, base(B), { title: `b${i}`, ...(i % 2 ? { status: 'closed' } : {}) });
  }
  await makeTicket(owner.test, base(testBrand), { title: 'test mode', status: 'resolved' });
  await check(t, 'after creates');
});

t.test('creation and resolution spread over days, to the microsecond', async (t) => {
  // Fractions of a second and of a minute, so sums and the rounded average are exercised. Row by
  // row with constants: a cluster refuses now() and timestamp arithmetic beside column references.
  const { rows } = await db.raw(`select now() as now, account_id, id, brand_id, resolved_at is not null as resolved from tickets order by id`);
  const firstOfB = rows.find((r: Any) => r.brand_id === B).id;
  const created = `?::timestamptz - (?::int * interval '1 day' / 2) - ?::int * interval '1 minute 0.123457 second'`;
  for (const [i, r] of rows.entries()) {
    const at = [r.now, i + 1, i + 1];
    const key = [r.account_id, r.id];
    if (r.resolved) {
      const after = (r.id.length % 7) as number;
      await db.raw(`update tickets set resolved_at = ${created} + ?::int * interval '37 minutes 30.5 second' where account_id = ? and id = ?`, [...at, after, ...key]);
    }
    const yearBack = r.id === firstOfB ? 1 : 0;
    await db.raw(`update tickets set created_at = ${created} - ?::int * interval '400 days' where account_id = ? and id = ?`, [...at, yearBack, ...key]);
  }
  // Rows moved by hand are counted afresh, as after a load.
  await db.raw('select ticketd_rebuild_ticket_counts()');
  t.equal(await pending(), 0, 'the rebuild leaves nothing to move');
  await compare(t, 'after moving created_at and resolved_at and a rebuild');
  t.equal(await everyDayDisagreements(), 0, "each brand and status's every-day row sums its day rows");
});

t.test('status changes, custom statuses, resolve and reopen', async (t) => {
  const [a1, a2, a3] = await ticketsOf(A);
  t.equal((await patch(A, a1!, { status: 'pending' })).status, 200);
  t.equal((await patch(A, a2!, { status: 'waiting_on_vendor' })).status, 200);
  t.equal((await patch(A, a3!, { status: 'resolved' })).status, 200);
  await check(t, 'after status changes');
  t.equal((await patch(A, a3!, { status: 'closed' })).status, 200, 'closing keeps resolved_at, moves the count to closed');
  await check(t, 'after closing a resolved ticket');
  t.equal((await patch(A, a3!, { status: 'open' })).status, 200);
  await check(t, 'after reopening');
  const bulk = await owner.live('POST', `${base(B)}/tickets/bulk`, { action: 'resolve', ticketIds: await ticketsOf(B) });
  t.equal(bulk.status, 200);
  await check(t, 'after a bulk resolve');
});

t.test('spam and not spam, soft delete and restore', async (t) => {
  const [a1, a2] = await ticketsOf(A);
  t.equal((await owner.live('POST', `${base(A)}/tickets/${a1}/spam`, { isSpam: true })).status, 200);
  await check(t, 'after marking spam');
  t.equal((await owner.live('POST', `${base(A)}/tickets/${a1}/spam`, { isSpam: false })).status, 200);
  await check(t, 'after unmarking spam');
  t.equal((await owner.live('DELETE', `${base(A)}/tickets/${a2}`)).status, 200);
  await check(t, 'after a soft delete');
  // The API has no restore: one made by hand is counted by a rebuild.
  await db('tickets').where({ id: a2 }).update({ deletedAt: null });
  await db.raw('select ticketd_rebuild_ticket_counts()');
  await compare(t, 'after a restore by hand and a rebuild');
});

t.test('merge', async (t) => {
  const [target, ...sources] = await ticketsOf(B);
  const res = await owner.live('POST', `${base(B)}/tickets/${target}/merge`, { sourceTicketIds: sources.slice(0, 2) });
  t.equal(res.status, 200);
  await check(t, 'after a merge');
});

t.test('concurrent creates (batched by the create path), with roll-ups running among them', async (t) => {
  const before = (await owner.live('GET', '/v1/tickets/stats')).body.total;
  const creates = Array.from({ length: 40 }, (_, i) => makeTicket(owner.live, base(i % 2 ? A : B), { title: `c${i}`, ...(i % 5 === 0 ? { status: 'resolved' } : {}) }));
  const rollUps = Array.from({ length: 4 }, () => rollUp(system));
  await Promise.all([...creates, ...rollUps]);
  await makeTicket(owner.live, base(A), { title: 'one more' });
  await check(t, 'after concurrent creates');
  t.equal((await owner.live('GET', '/v1/tickets/stats')).body.total, before + 41);
});

t.test('a change counts once it commits, not before; the roll-up leaves it alone meanwhile', async (t) => {
  const [a1] = await ticketsOf(A);
  const total = (await owner.live('GET', '/v1/tickets/stats')).body.total;
  const trx = await db.transaction();
  try {
    await updateTickets(tenantCtx({ ...system, db: trx }, owner.accountId, true), A, [a1!], { deletedAt: new Date(testNow()) });
    t.equal(await rollUp(system), 0, 'the uncommitted change is not moved (nor waited for)');
    t.equal((await owner.live('GET', '/v1/tickets/stats')).body.total, total, 'not counted before it commits');
    await trx.commit();
  } catch (err) {
    await trx.rollback();
    throw err;
  }
  t.equal((await owner.live('GET', '/v1/tickets/stats')).body.total, total - 1, 'counted as soon as it commits');
  await check(t, 'after the commit');
});

t.test('a roll-up run twice changes nothing; a roll-up under way elsewhere is left to finish', async (t) => {
  await makeTicket(owner.live, base(A), { title: 'twice' });
  t.ok((await rollUp(system)) > 0);
  const rows = await rolledUp();
  t.equal(await rollUp(system), 0, 'nothing to move the second time');
  t.strictSame(await rolledUp(), rows, 'ticket_counts unchanged');
  t.notOk(
    rows.some((r: Any) => r.created === 0 && r.resolved === 0 && Number(r.resolutionSeconds) === 0),
    'no row left at zero',
  );

  await makeTicket(owner.live, base(B), { title: 'while locked' });
  const trx = await db.transaction();
  try {
    await trx.raw(`select pg_advisory_xact_lock(hashtext('ticketd:ticket-counts'))`);
    t.equal(await rollUp(system), 0, 'another roll-up holds the lock: this one moves nothing, without waiting');
    await compare(t, 'while another roll-up holds the lock');
  } finally {
    await trx.rollback();
  }
  await check(t, 'once the lock is free');
});

t.test('two roll-ups at once neither double nor lose a change', async (t) => {
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 5; i++) await makeTicket(owner.live, base(i % 2 ? A : B), { title: `r${round}.${i}` });
    const waiting = await pending();
    const moved = await Promise.all([rollUp(system), rollUp(system), rollUp(system)]);
    t.equal(
      moved.reduce((a, b) => a + b, 0),
      waiting,
      `round ${round}: every change moved exactly once`,
    );
    t.equal(await pending(), 0);
    await compare(t, `round ${round}, after concurrent roll-ups`);
  }
});

t.test("a brand's deletion takes its counts and its changes not rolled up yet", async (t) => {
  const C = (await makeBrand(owner.live, 'Gamma')).id as string;
  for (let i = 0; i < 4; i++) await makeTicket(owner.live, base(C), { title: `g${i}`, ...(i % 2 ? { status: 'resolved' } : {}) });
  await rollUp(system);
  const countsOfC = async () => Number((await db('ticket_counts').where({ brandId: C }).count({ n: '*' }))[0]!.n);
  t.ok((await countsOfC()) > 0, 'the brand has counts');
  await makeTicket(owner.live, base(C), { title: 'not rolled up' });
  await makeTicket(owner.live, base(A), { title: 'beside it' });
  t.equal((await owner.live('DELETE', `${base(C)}?confirm=true`)).status, 200);
  t.equal(await countsOfC(), 0, 'its rolled-up counts went with it');
  t.equal(Number((await db('ticket_count_changes').where({ brandId: C }).count({ n: '*' }))[0]!.n), 0, 'and its changes, those of the deletion included');
  await check(t, 'after deleting a brand');
  t.equal(await countsOfC(), 0, 'nothing of it was rolled up');
});

t.test('a brand being deleted holds the roll-up back for a moment, never fails it or the deletion', async (t) => {
  const D = (await makeBrand(owner.live, 'Delta')).id as string;
  for (let i = 0; i < 3; i++) await makeTicket(owner.live, base(D), { title: `d${i}` });
  await makeTicket(owner.live, base(A), { title: 'beside it' });
  const trx = await db.transaction();
  try {
    await trx('brands').where({ id: D }).delete();
    const started = Date.now();
    t.equal(await rollUp(system), 0, 'the roll-up leaves its batch to the next tick');
    t.ok(Date.now() - started < 5_000, 'after a short wait');
    t.ok((await pending()) > 0, 'the changes are still there');
    await trx.commit();
  } catch (err) {
    await trx.rollback();
    throw err;
  }
  t.equal((await owner.live('GET', `${base(D)}`)).status, 404, 'the brand is deleted');
  await check(t, 'after the deletion committed');
});

t.test("the dispatcher's tick rolls the counts up and reports it", async (t) => {
  await makeTicket(owner.live, base(A), { title: 'ticked' });
  const waiting = await pending();
  const dispatcher = new Dispatcher(servicesOf(db), { info: () => undefined, error: () => undefined });
  t.teardown(() => dispatcher.stop());
  const tick = await dispatcher.tick();
  t.equal(tick.rolledUpCounts, waiting);
  t.equal(await pending(), 0);
  await compare(t, 'after a tick');
});
