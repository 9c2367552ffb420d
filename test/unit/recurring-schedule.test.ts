import t from 'tap';
import { cronProblem, isValidTimezone, nextRunAfter, type Schedule } from '../../server/domains/recurring-tickets/schedule.js';

/** The next run of a calendar schedule after an ISO instant, as an ISO instant. */
const next = (schedule: Partial<Schedule>, after: string) =>
  nextRunAfter({ schedule: { frequency: 'daily', timeOfDay: '09:00', timezone: 'UTC', skipWeekends: false, ...schedule } }, new Date(after)).toISOString();
/** The first `n` runs after an instant, each the next one after the one before. */
function runs(schedule: Partial<Schedule>, after: string, n: number): string[] {
  const out: string[] = [];
  for (let at = after; out.length < n; ) out.push((at = next(schedule, at)));
  return out;
}
const cron = (cronExpr: string, timezone: string, after: string) => nextRunAfter({ cronExpr, timezone }, new Date(after)).toISOString();

t.test('daily: the time of day in the zone, strictly after the instant', async (t) => {
  const paris = { timezone: 'Europe/Paris' };
  t.equal(next(paris, '2026-06-10T06:59:00Z'), '2026-06-10T07:00:00.000Z', '09:00 in Paris is 07:00 UTC in summer');
  t.equal(next(paris, '2026-06-10T07:00:00Z'), '2026-06-11T07:00:00.000Z', 'at the run itself: the next day');
  t.equal(next(paris, '2026-12-10T07:30:00Z'), '2026-12-10T08:00:00.000Z', 'and 08:00 UTC in winter');
  t.equal(next({ timezone: 'Asia/Kolkata', timeOfDay: '00:00' }, '2026-06-10T18:29:59Z'), '2026-06-10T18:30:00.000Z', 'midnight in a +05:30 zone');
  t.equal(next({ timezone: 'Pacific/Auckland', timeOfDay: '23:59' }, '2026-12-31T10:00:00Z'), '2026-12-31T10:59:00.000Z', 'the zone decides the date');
});

t.test('weekly: dayOfWeek 0 is Sunday, 6 Saturday', async (t) => {
  // 2026-06-10 is a Wednesday.
  t.equal(next({ frequency: 'weekly', dayOfWeek: 0 }, '2026-06-10T12:00:00Z'), '2026-06-14T09:00:00.000Z');
  t.equal(next({ frequency: 'weekly', dayOfWeek: 3 }, '2026-06-10T08:00:00Z'), '2026-06-10T09:00:00.000Z', 'the same day when the time is still ahead');
  t.equal(next({ frequency: 'weekly', dayOfWeek: 3 }, '2026-06-10T09:00:00Z'), '2026-06-17T09:00:00.000Z', 'else a week on');
  t.same(runs({ frequency: 'weekly', dayOfWeek: 6 }, '2026-06-10T00:00:00Z', 3), ['2026-06-13T09:00:00.000Z', '2026-06-20T09:00:00.000Z', '2026-06-27T09:00:00.000Z']);
});

t.test('monthly: a day the month lacks runs on its last day', async (t) => {
  t.same(runs({ frequency: 'monthly', dayOfMonth: 31 }, '2026-01-01T00:00:00Z', 5), [
    '2026-01-31T09:00:00.000Z',
    '2026-02-28T09:00:00.000Z',
    '2026-03-31T09:00:00.000Z',
    '2026-04-30T09:00:00.000Z',
    '2026-05-31T09:00:00.000Z',
  ]);
  t.equal(next({ frequency: 'monthly', dayOfMonth: 30 }, '2028-02-01T00:00:00Z'), '2028-02-29T09:00:00.000Z', 'a leap February ends on the 29th');
  t.equal(next({ frequency: 'monthly', dayOfMonth: 15 }, '2026-06-15T09:00:00Z'), '2026-07-15T09:00:00.000Z');
});

t.test('yearly: month and day; Feb 29 runs on Feb 28 in other years', async (t) => {
  t.same(runs({ frequency: 'yearly', month: 2, dayOfMonth: 29 }, '2026-01-01T00:00:00Z', 3), ['2026-02-28T09:00:00.000Z', '2027-02-28T09:00:00.000Z', '2028-02-29T09:00:00.000Z']);
  t.equal(next({ frequency: 'yearly', month: 11, dayOfMonth: 15 }, '2026-11-27T00:00:00Z'), '2027-11-15T09:00:00.000Z', 'passed this year: next year');
  t.equal(next({ frequency: 'yearly', month: 4, dayOfMonth: 31 }, '2026-01-01T00:00:00Z'), '2026-04-30T09:00:00.000Z');
});

t.test('skipWeekends: a run on a Saturday or Sunday moves to the next Monday', async (t) => {
  // 2026-08-01 is a Saturday.
  t.equal(next({ frequency: 'monthly', dayOfMonth: 1, skipWeekends: true }, '2026-07-15T00:00:00Z'), '2026-08-03T09:00:00.000Z');
  t.equal(
    next({ frequency: 'monthly', dayOfMonth: 1, skipWeekends: true }, '2026-08-02T12:00:00Z'),
    '2026-08-03T09:00:00.000Z',
    'also when asked on the Sunday after the Saturday',
  );
  t.equal(next({ frequency: 'monthly', dayOfMonth: 1 }, '2026-07-15T00:00:00Z'), '2026-08-01T09:00:00.000Z', 'without it, the Saturday');
  t.equal(next({ frequency: 'weekly', dayOfWeek: 0, skipWeekends: true }, '2026-06-10T00:00:00Z'), '2026-06-15T09:00:00.000Z', 'weekly on Sundays runs on Mondays');
  t.same(
    runs({ skipWeekends: true }, '2026-06-11T10:00:00Z', 4),
    ['2026-06-12T09:00:00.000Z', '2026-06-15T09:00:00.000Z', '2026-06-16T09:00:00.000Z', '2026-06-17T09:00:00.000Z'],
    'daily: weekdays only, Monday once',
  );
  t.equal(
    next({ skipWeekends: true, timezone: 'Pacific/Auckland', timeOfDay: '08:00' }, '2026-06-12T20:00:00Z'),
    '2026-06-14T20:00:00.000Z',
    "the weekend is the zone's: Saturday morning in Auckland is Friday in UTC",
  );
});

t.test('spring forward: a time that does not exist runs when the clocks land, once', async (t) => {
  const newYork = { timezone: 'America/New_York', timeOfDay: '02:30' };
  // 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC).
  t.same(runs(newYork, '2026-03-07T12:00:00Z', 3), ['2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z', '2026-03-10T06:30:00.000Z'], '03:00 EDT that day, 02:30 again after');
  t.equal(next({ timezone: 'Europe/Paris', timeOfDay: '02:15' }, '2026-03-28T12:00:00Z'), '2026-03-29T01:00:00.000Z', 'Paris: 02:00 CET becomes 03:00 CEST');
  t.equal(next({ timezone: 'Australia/Lord_Howe', timeOfDay: '02:15' }, '2026-10-03T12:00:00Z'), '2026-10-03T15:30:00.000Z', 'a half-hour jump lands at 02:30');
  t.equal(next({ timezone: 'America/New_York', timeOfDay: '03:00' }, '2026-03-07T12:00:00Z'), '2026-03-08T07:00:00.000Z', 'the landing time itself exists');
});

t.test('fall back: a time that exists twice runs once, at its first occurrence', async (t) => {
  const newYork = { timezone: 'America/New_York', timeOfDay: '01:30' };
  // 2026-11-01: 02:00 EDT becomes 01:00 EST; 01:30 is 05:30 UTC (EDT), then 06:30 UTC (EST).
  t.same(runs(newYork, '2026-10-31T12:00:00Z', 3), ['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z', '2026-11-03T06:30:00.000Z']);
  t.equal(next(newYork, '2026-11-01T06:00:00Z'), '2026-11-02T06:30:00.000Z', 'asked between the two: not again that day');
  t.equal(next({ timezone: 'Europe/London', timeOfDay: '01:30' }, '2026-10-24T12:00:00Z'), '2026-10-25T00:30:00.000Z', 'London: 01:30 BST');
});

t.test('missed runs: the next run after now is the first future one', async (t) => {
  t.equal(next({ frequency: 'daily' }, '2026-06-20T10:00:00Z'), '2026-06-21T09:00:00.000Z', 'ten days of downtime still give one next run, tomorrow');
});

t.test('cron expressions: five fields, in the zone, strictly after', async (t) => {
  t.equal(cron('0 9 * * 1-5', 'Europe/Paris', '2026-06-12T07:00:00Z'), '2026-06-15T07:00:00.000Z', 'Friday 09:00 Paris passed: Monday');
  t.equal(cron('*/15 * * * *', 'UTC', '2026-06-12T07:00:00Z'), '2026-06-12T07:15:00.000Z');
  t.equal(cron('*/15 * * * *', 'UTC', '2026-06-12T07:00:00.500Z'), '2026-06-12T07:15:00.000Z', 'within the matching minute: the next one');
  t.equal(cron('0 0 L * *', 'UTC', '2026-02-02T00:00:00Z'), '2026-02-28T00:00:00.000Z', 'L: the last day of the month');
  t.equal(cron('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z'), '2026-11-01T05:30:00.000Z', 'a doubled time runs at its first occurrence');
  t.equal(cron('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z'), '2026-03-08T07:30:00.000Z', "a skipped time runs the jump's length later (cron-parser's way)");
  t.equal(cronProblem('0 9 * * MON-FRI', 'Europe/Paris'), null);
  t.equal(cronProblem('0 9 * * THU', 'UTC'), null, 'day names are no H');
  for (const [expr, why] of [
    ['* * * *', /five fields/],
    ['0 0 9 * * *', /five fields/],
    ['@daily', /five fields/],
    ['H 9 * * *', /H/],
    ['61 * * * *', /range 0-59/],
    ['0 0 31 2 *', /day of month/],
    ['x y z a b', /Invalid/],
  ] as const) {
    t.match(cronProblem(expr, 'UTC'), why, `${expr} is refused`);
  }
});

t.test('time zones are IANA names', async (t) => {
  for (const zone of ['Europe/Paris', 'America/Argentina/Buenos_Aires', 'UTC', 'Etc/GMT+5']) t.ok(isValidTimezone(zone), zone);
  for (const zone of ['Mars/Olympus_Mons', '+05:00', '', 'Europe/Pariss']) t.notOk(isValidTimezone(zone), zone || '(empty)');
});
