import t from 'tap';
import { ALWAYS_OPEN, BusinessHours, businessHoursProblem } from '../../server/core/working-time.js';

// Service-level deadlines counted in working time: opening hours on some weekdays in one time
// zone, minus holidays, across daylight-saving changes; and every hour for a 24/7 brand.

const HOUR = 3600;
const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const weekdays = (timezone: string, holidays: string[] = []) => new BusinessHours({ start: '09:00', end: '17:00', days: [1, 2, 3, 4, 5], timezone, holidays });

t.test('24/7: a deadline is plain elapsed time, whatever the time zone or daylight saving', async (t) => {
  // 2026-03-29 is the spring-forward night in Europe: 24 hours later is still 24 real hours.
  t.equal(iso(ALWAYS_OPEN.after(at('2026-03-28T12:00:00Z'), 24 * HOUR)), '2026-03-29T12:00:00.000Z');
  t.equal(ALWAYS_OPEN.between(at('2026-03-28T12:00:00Z'), at('2026-03-29T12:00:00Z')), 24 * HOUR);
  t.equal(ALWAYS_OPEN.between(at('2026-03-29T12:00:00Z'), at('2026-03-28T12:00:00Z')), 0, 'never negative');
  t.equal(iso(ALWAYS_OPEN.after(at('2026-03-28T12:00:00Z'), 1.5 * HOUR)), '2026-03-28T13:30:00.000Z', 'fractions of hours');
});

t.test('within hours: the time left today, then the next open day', async (t) => {
  const hours = weekdays('Europe/Paris'); // CET, UTC+1 in January
  // Wednesday 2026-01-14 10:00 Paris: 4 working hours later is 14:00 the same day.
  t.equal(iso(hours.after(at('2026-01-14T09:00:00Z'), 4 * HOUR)), '2026-01-14T13:00:00.000Z');
  // 8 hours from 10:00: 7 today (to 17:00), 1 tomorrow (to 10:00 Thursday).
  t.equal(iso(hours.after(at('2026-01-14T09:00:00Z'), 8 * HOUR)), '2026-01-15T09:00:00.000Z');
  // Exactly at closing with time left: the deadline is the close itself.
  t.equal(iso(hours.after(at('2026-01-14T08:00:00Z'), 8 * HOUR)), '2026-01-14T16:00:00.000Z');
});

t.test('created outside hours: the clock starts at the next opening', async (t) => {
  const hours = weekdays('America/New_York'); // EST, UTC-5 in January
  // Friday 2026-01-16 20:00 New York (after closing): 2 hours is Monday 11:00.
  t.equal(iso(hours.after(at('2026-01-17T01:00:00Z'), 2 * HOUR)), '2026-01-19T16:00:00.000Z');
  // Saturday morning: also Monday.
  t.equal(iso(hours.after(at('2026-01-17T14:00:00Z'), 2 * HOUR)), '2026-01-19T16:00:00.000Z');
  // Before opening on a weekday: from 09:00 that day.
  t.equal(iso(hours.after(at('2026-01-20T11:00:00Z'), 1 * HOUR)), '2026-01-20T15:00:00.000Z');
  // A week of working time (40 h) from Monday 09:00 ends Friday 17:00.
  t.equal(iso(hours.after(at('2026-01-19T14:00:00Z'), 40 * HOUR)), '2026-01-23T22:00:00.000Z');
});

t.test('holidays count no working time', async (t) => {
  const hours = weekdays('Europe/London', ['2026-12-25', '2026-12-28']);
  // Thursday 2026-12-24 16:00 London: 1 hour today, then Friday 25th (holiday), the weekend and
  // Monday 28th (holiday): the rest is Tuesday 29th.
  t.equal(iso(hours.after(at('2026-12-24T16:00:00Z'), 3 * HOUR)), '2026-12-29T11:00:00.000Z');
  t.equal(hours.between(at('2026-12-24T16:00:00Z'), at('2026-12-29T11:00:00Z')), 3 * HOUR, 'between() agrees');
});

t.test('daylight saving: a working day keeps its local hours on both sides of the change', async (t) => {
  const hours = weekdays('America/New_York');
  // 2026-03-06 is a Friday at UTC-5; Monday 2026-03-09 (after the change on Sunday the 8th) at UTC-4.
  // Friday 16:00 local + 2 working hours = Monday 10:00 local, which is 14:00Z (not 15:00Z).
  t.equal(iso(hours.after(at('2026-03-06T21:00:00Z'), 2 * HOUR)), '2026-03-09T14:00:00.000Z');
  // The autumn change (Sunday 2026-11-01): Friday 16:00 EDT + 2 h = Monday 10:00 EST = 15:00Z.
  t.equal(iso(hours.after(at('2026-10-30T20:00:00Z'), 2 * HOUR)), '2026-11-02T15:00:00.000Z');

  // Hours that span the change itself: open 00:00-06:00 every day in Paris. On 2026-03-29 the
  // clocks jump from 02:00 to 03:00, so that window holds 5 real hours; on 2026-10-25 (back from
  // 03:00 to 02:00) it holds 7.
  const night = new BusinessHours({ start: '00:00', end: '06:00', days: [0, 1, 2, 3, 4, 5, 6], timezone: 'Europe/Paris' });
  t.equal(night.between(at('2026-03-28T23:00:00Z'), at('2026-03-29T12:00:00Z')), 5 * HOUR, 'the short night');
  t.equal(night.between(at('2026-10-24T22:00:00Z'), at('2026-10-25T12:00:00Z')), 7 * HOUR, 'the long night');
  t.equal(iso(night.after(at('2026-03-28T23:00:00Z'), 5 * HOUR)), '2026-03-29T04:00:00.000Z', '06:00 CEST');
});

t.test('opening at a time the spring change skips starts at the first instant after it', async (t) => {
  const early = new BusinessHours({ start: '02:30', end: '04:00', days: [0], timezone: 'Europe/Paris' });
  // Sunday 2026-03-29: 02:30 does not exist; Luxon moves it on by the hour skipped, to 03:30 CEST,
  // so that day's window is 03:30-04:00.
  t.equal(early.between(at('2026-03-28T22:00:00Z'), at('2026-03-29T22:00:00Z')), 0.5 * HOUR);
});

t.test('between() and after() are inverse', async (t) => {
  const hours = weekdays('Asia/Kolkata', ['2026-08-15']);
  const from = at('2026-08-10T02:17:00Z');
  for (const seconds of [60, HOUR, 7.5 * HOUR, 30 * HOUR, 200 * HOUR]) {
    const due = hours.after(from, seconds);
    t.equal(hours.between(from, due!), seconds, `${seconds / HOUR} h`);
  }
});

t.test('a deadline beyond ten years of days walked is none, found quickly', async (t) => {
  // The most hours a brand may save, in one minute a week: centuries of calendar away.
  const minute = new BusinessHours({ start: '09:00', end: '09:01', days: [1], timezone: 'Europe/Paris' });
  const started = Date.now();
  t.equal(minute.after(at('2026-01-14T09:00:00Z'), 87_600 * HOUR), null);
  t.equal(minute.after(at('2026-01-14T09:00:00Z'), 87_600 * HOUR), null, 'again, from the remembered days');
  t.ok(Date.now() - started < 5_000, 'a bounded walk');
  t.equal(iso(minute.after(at('2026-01-12T08:00:00Z'), 60)), '2026-01-12T08:01:00.000Z', 'a minute of it is that minute');
});

t.test('unusable settings are named, field by field', async (t) => {
  const good = { start: '09:00', end: '17:00', days: [1], timezone: 'Europe/Paris' };
  t.equal(businessHoursProblem(good), null);
  t.match(businessHoursProblem({ ...good, timezone: 'Mars/Olympus' }), { field: 'slaBusinessHours.timezone' });
  t.match(businessHoursProblem({ ...good, end: '09:00' }), { field: 'slaBusinessHours.end' });
  t.match(businessHoursProblem({ ...good, days: [] }), { field: 'slaBusinessHours.days' });
  t.match(businessHoursProblem({ ...good, holidays: ['2026-02-30'] }), { field: 'slaBusinessHours.holidays' });
  t.throws(() => new BusinessHours({ ...good, timezone: 'nowhere' }));
});
