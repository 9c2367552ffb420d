import t from 'tap';
import { buildApp } from '../../server/app.js';
import { makeBrand, mustCreate, ownerWithBrand, testConfig } from '../helpers/app.js';
import { startServer, type Server } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { until } from '../helpers/wait.js';
import { testNow } from '../helpers/clock.js';

// Recurring tickets run by real dispatcher processes: two at once run each due schedule exactly
// once, and one killed (SIGKILL) between a run's claim and its commit leaves nothing behind, so the
// next one runs it, once.

const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url, TICKETD_DNS_SERVERS: '127.0.0.1:9' };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

const count = async (where: Record<string, unknown>) => Number((await db('tickets').where(where).count({ n: '*' }))[0]!.n);
const dispatcher = (extra: Record<string, string> = {}): Server => {
  // At info: the test reads what the dispatcher logs.
  const server = startServer({ ...env, TICKETD_LOG_LEVEL: 'info', ...extra }, ['--role', 'dispatcher']);
  t.teardown(() => void server.child.kill('SIGKILL'));
  return server;
};
/** What a dispatcher says it opened, summed over its log lines. */
const openedBy = (server: Server) =>
  [...server.stderr().matchAll(/recurring tickets due: [^{]*(\{.*\})/g)].reduce((n, m) => n + (JSON.parse(m[1]!) as { created: number }).created, 0);

t.test('two dispatcher processes, 200 schedules due at once: one ticket each', async (t) => {
  const SCHEDULES = 200;
  const { owner, brand } = await ownerWithBrand(app);
  const brands = [brand.id, (await makeBrand(owner.live, 'Two')).id, (await makeBrand(owner.live, 'Three')).id];
  // As many as this, through the API, would take the test longer than the run: written as the API writes them.
  await db.raw(
    `insert into recurring_tickets (account_id, id, livemode, brand_id, title, schedule, timezone, next_run_at)
     select ?, 'rec_crash' || lpad(n::text, 17, '0'), true, (?::text[])[1 + n % 3], 'Due ' || n,
       '{"frequency": "daily", "timeOfDay": "08:00", "timezone": "UTC", "skipWeekends": false}', 'UTC', now() - interval '1 minute'
     from generate_series(1, ?::int) n`,
    [owner.accountId, brands, SCHEDULES],
  );
  const first = dispatcher();
  const second = dispatcher();
  t.ok(await first.ready, first.stderr());
  t.ok(await second.ready, second.stderr());
  const opened = async () => Number((await db('tickets').whereIn('brandId', brands).count({ n: '*' }))[0]!.n);
  await until('every schedule has its ticket', async () => (await opened()) >= SCHEDULES, 60_000);
  first.child.kill('SIGTERM');
  second.child.kill('SIGTERM');
  t.equal(await first.exited, 0);
  t.equal(await second.exited, 0);

  const made = (await db('tickets').whereIn('brandId', brands).select('sourceId')) as { sourceId: string }[];
  t.equal(made.length, SCHEDULES, 'as many tickets as schedules');
  t.equal(new Set(made.map((r) => r.sourceId)).size, SCHEDULES, 'none twice');
  t.equal(openedBy(first) + openedBy(second), SCHEDULES, `the two dispatchers' counts add up (${openedBy(first)} + ${openedBy(second)})`);
  const runs = (await db('recurringTickets').where({ accountId: owner.accountId }).select('runCount')) as { runCount: number }[];
  t.same([...new Set(runs.map((r) => r.runCount))], [1], 'each ran once');
});

t.test('kill -9 between the claim and the commit: nothing stays; the next dispatcher runs it once', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const rec = await mustCreate(owner.live, `${base}/recurring-tickets`, { title: 'Held', schedule: { frequency: 'daily', timeOfDay: '08:00', timezone: 'UTC' } });
  const due = new Date(testNow() - 60_000);
  await db('recurringTickets').where({ id: rec.id }).update({ nextRunAt: due });
  const numberBefore = (await db('brands').where({ id: brand.id }).first()).nextTicketNumber;

  const held = dispatcher({ TICKETD_TEST_HOLD_RECURRING_RUN: rec.id });
  t.ok(await held.ready, held.stderr());
  await until('the run is held before its commit', () => held.stderr().includes('test hook: holding a recurring run'), 30_000);
  const locked = await db.transaction(async (trx) => trx('recurringTickets').where({ id: rec.id }).forUpdate().skipLocked().first());
  t.equal(locked, undefined, 'the held run has the row locked');
  t.equal(await count({ brandId: brand.id }), 0, 'its ticket is written but not committed');

  held.child.kill('SIGKILL');
  await held.exited;
  await until('PostgreSQL has ended the killed run', async () =>
    Boolean(await db.transaction(async (trx) => trx('recurringTickets').where({ id: rec.id }).forUpdate().skipLocked().first())),
  );
  t.match(await db('recurringTickets').where({ id: rec.id }).first(), { runCount: 0, nextRunAt: due, lastTicketId: null }, 'the claim went with the process: still due');
  t.equal(await count({ brandId: brand.id }), 0, 'no ticket');

  const next = dispatcher();
  t.ok(await next.ready, next.stderr());
  await until('the next dispatcher has run it', async () => (await count({ brandId: brand.id })) >= 1, 30_000);
  next.child.kill('SIGTERM');
  t.equal(await next.exited, 0);
  const tickets = await db('tickets').where({ brandId: brand.id });
  t.equal(tickets.length, 1, 'exactly one ticket');
  t.equal(tickets[0].ticketNumber, numberBefore, 'numbered as if the killed run had never been: no gap');
  const row = await db('recurringTickets').where({ id: rec.id }).first();
  t.match(row, { runCount: 1, lastTicketId: tickets[0].id, failCount: 0 });
  t.ok(row.nextRunAt > new Date(testNow()), 'and moved on');
});
