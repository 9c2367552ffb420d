import { CronExpressionParser } from 'cron-parser';
import { DateTime, IANAZone } from 'luxon';

/**
 * When a recurring ticket is due: the pure "next run after instant X" of a calendar schedule or a
 * cron expression, in its IANA time zone. Calendar and zone arithmetic is Luxon's (cron-parser's
 * for cron expressions); nothing here counts days or offsets by hand.
 *
 * Calendar schedules:
 *  - monthly on a day the month lacks (the 31st in April) runs on its last day; yearly on Feb 29
 *    runs on Feb 28 in other years;
 *  - skipWeekends moves a run that falls on a Saturday or Sunday to the next Monday, same time
 *    (a daily schedule then runs on weekdays only, once each);
 *  - a time of day that does not exist that day (clocks go forward) runs at the first instant
 *    after the gap, when the clocks land (02:30 on a 02:00→03:00 night runs at 03:00); one that
 *    exists twice (clocks go back) runs once, at its first occurrence.
 */

export const FREQUENCIES = ['daily', 'weekly', 'monthly', 'yearly'] as const;
export type Frequency = (typeof FREQUENCIES)[number];

/** A calendar schedule as stored: only the fields its frequency uses. */
export interface Schedule {
  frequency: Frequency;
  /** 0 = Sunday … 6 = Saturday (weekly). */
  dayOfWeek?: number;
  /** 1-31 (monthly, yearly). */
  dayOfMonth?: number;
  /** 1-12 (yearly). */
  month?: number;
  /** HH:mm, 24-hour. */
  timeOfDay: string;
  timezone: string;
  skipWeekends: boolean;
}

/** What decides the runs: a calendar schedule, or a cron expression in a time zone. */
export type Rule = { schedule: Schedule } | { cronExpr: string; timezone: string };

export function isValidTimezone(name: string): boolean {
  return IANAZone.isValidZone(name);
}

/** The month (1-12) it is at `at` in the zone. */
export function monthIn(timezone: string, at: Date): number {
  return DateTime.fromJSDate(at, { zone: timezone }).month;
}

/** The reason a cron expression is refused, or null when it is a usable five-field expression. */
export function cronProblem(expr: string, timezone: string): string | null {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5) return `must have five fields (minute hour day-of-month month day-of-week), not ${fields.length}`;
  // H picks a random value at every parse: the next run would move each time it is computed.
  if (/\bH\b/i.test(expr)) return 'must not use H (a random value)';
  try {
    CronExpressionParser.parse(expr, { tz: timezone, currentDate: new Date() }).next();
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** Luxon's weekday numbers of Saturday and Sunday (Monday is 1). */
const WEEKEND = [6, 7];
/** More occurrences than any schedule skips before its next run (a yearly one looks at one a year). */
const MAX_OCCURRENCES = 1_000;

/** The first instant strictly after `after` at which the rule runs. */
export function nextRunAfter(rule: Rule, after: Date): Date {
  if ('cronExpr' in rule) return CronExpressionParser.parse(rule.cronExpr, { tz: rule.timezone, currentDate: after }).next().toDate();
  const { schedule } = rule;
  const [hour, minute] = schedule.timeOfDay.split(':').map(Number) as [number, number];
  // A run moved off a weekend lands up to two days after its day: start looking a little earlier.
  const from = DateTime.fromJSDate(after, { zone: schedule.timezone }).startOf('day').minus({ days: 3 });
  if (!from.isValid) throw new Error(`no run of a schedule in ${schedule.timezone}: ${from.invalidExplanation ?? from.invalidReason}`);
  let seen = 0;
  for (const day of occurrenceDays(schedule, from)) {
    const runDay = schedule.skipWeekends ? nextWeekday(day) : day;
    const at = wallClock(runDay, hour, minute);
    if (at > after.getTime()) return new Date(at);
    if (++seen > MAX_OCCURRENCES) break;
  }
  throw new Error(`no run of the ${schedule.frequency} schedule after ${after.toISOString()}`);
}

/** The days (midnight in the schedule's zone) the schedule falls on, from `from` on, in order. */
function* occurrenceDays(s: Schedule, from: DateTime): Generator<DateTime> {
  switch (s.frequency) {
    case 'daily':
      for (let day = from; ; day = day.plus({ days: 1 })) yield day;
    case 'weekly': {
      const weekday = s.dayOfWeek === 0 ? 7 : s.dayOfWeek!;
      let day = from;
      while (day.weekday !== weekday) day = day.plus({ days: 1 });
      for (; ; day = day.plus({ weeks: 1 })) yield day;
    }
    case 'monthly':
      for (let month = from.startOf('month'); ; month = month.plus({ months: 1 })) {
        const day = month.set({ day: Math.min(s.dayOfMonth!, month.daysInMonth!) });
        if (day >= from) yield day;
      }
    case 'yearly':
      for (let year = from.startOf('year'); ; year = year.plus({ years: 1 })) {
        const month = year.set({ month: s.month! });
        const day = month.set({ day: Math.min(s.dayOfMonth!, month.daysInMonth!) });
        if (day >= from) yield day;
      }
  }
}

function nextWeekday(day: DateTime): DateTime {
  let weekday = day;
  while (WEEKEND.includes(weekday.weekday)) weekday = weekday.plus({ days: 1 });
  return weekday;
}

/**
 * The instant (ms) the clocks of `day`'s zone read hour:minute on that day: the first of two when
 * the clocks go back over it, the instant they land when they jump over it.
 */
function wallClock(day: DateTime, hour: number, minute: number): number {
  const zone = day.zone;
  // The wall-clock reading as if it were UTC; each offset the zone uses around that day turns it into one candidate instant.
  const reading = DateTime.utc(day.year, day.month, day.day, hour, minute).toMillis();
  const offsets = [...new Set([zone.offset(reading - DAY_MS), zone.offset(reading + DAY_MS)])].sort((a, b) => a - b);
  const instants = offsets.map((offset) => reading - offset * MINUTE_MS).filter((at) => zone.offset(at) * MINUTE_MS === reading - at);
  if (instants.length) return Math.min(...instants);
  // Jumped over: the transition lies between the reading under the later offset (still before it)
  // and under the earlier one (already after it). Find the minute the clocks land.
  let before = (reading - offsets[1]! * MINUTE_MS) / MINUTE_MS;
  let landed = (reading - offsets[0]! * MINUTE_MS) / MINUTE_MS;
  while (landed - before > 1) {
    const mid = Math.floor((before + landed) / 2);
    if (zone.offset(mid * MINUTE_MS) === offsets[0]) before = mid;
    else landed = mid;
  }
  return landed * MINUTE_MS;
}
