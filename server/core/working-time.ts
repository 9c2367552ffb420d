import { DateTime, IANAZone } from 'luxon';

/**
 * Working time, for service-level clocks: how far a deadline lies when only some hours count.
 * Calendar arithmetic (days, daylight saving, the local date of an instant) is Luxon's; this file
 * only walks the working windows day by day.
 */
export interface WorkingTime {
  /** The instant `seconds` of working time after `from` (epoch milliseconds); null beyond ten years of days walked. */
  after(from: number, seconds: number): number | null;
  /** The working seconds between two instants (0 when `to` is not after `from`). */
  between(from: number, to: number): number;
}

/** Every hour counts: a deadline is plain elapsed time. */
export const ALWAYS_OPEN: WorkingTime = {
  after: (from, seconds) => from + seconds * 1000,
  between: (from, to) => Math.max(0, (to - from) / 1000),
};

export interface BusinessHoursSpec {
  /** 'HH:mm', local time; `end` after `start`. */
  start: string;
  end: string;
  /** Open weekdays, 0 = Sunday. */
  days: readonly number[];
  timezone: string;
  /** Closed local dates, 'YYYY-MM-DD'. */
  holidays?: readonly string[];
}

/** Why a business-hours setting cannot be used, or null when it can. */
export function businessHoursProblem(spec: BusinessHoursSpec): { field: string; message: string } | null {
  if (!IANAZone.isValidZone(spec.timezone)) return { field: 'slaBusinessHours.timezone', message: `${spec.timezone} is not an IANA time zone (such as Europe/Paris)` };
  if (minutesOf(spec.end) <= minutesOf(spec.start)) return { field: 'slaBusinessHours.end', message: 'must be after start (the same day)' };
  if (spec.days.length === 0) return { field: 'slaBusinessHours.days', message: 'must name at least one day' };
  const badHoliday = (spec.holidays ?? []).find((d) => !DateTime.fromISO(d, { zone: 'UTC' }).isValid);
  if (badHoliday !== undefined) return { field: 'slaBusinessHours.holidays', message: `${badHoliday} is not a date (YYYY-MM-DD)` };
  return null;
}

const minutesOf = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

/**
 * Days walked at most: a deadline further away is none. Hours a brand can save (up to ten years of
 * them) in a window of a minute a week would lie centuries ahead; the walk stops instead, and the
 * remembered windows (below) hold every day it walked.
 */
const MAX_DAYS = 3_700;
/** Day windows remembered per calendar: every create of a brand walks the same days. */
const MAX_REMEMBERED_DAYS = 4_000;

/** A day's working window [open, close) in epoch milliseconds; null when closed all day. */
type Window = readonly [number, number] | null;

/**
 * Opening hours on some weekdays in one time zone, minus holidays. Each local day's window is
 * computed once with Luxon (so a daylight-saving day has its true length) and remembered.
 */
export class BusinessHours implements WorkingTime {
  private readonly startMinutes: number;
  private readonly endMinutes: number;
  private readonly days: ReadonlySet<number>;
  private readonly holidays: ReadonlySet<string>;
  private readonly windows = new Map<number, Window>();

  constructor(private readonly spec: BusinessHoursSpec) {
    const problem = businessHoursProblem(spec);
    if (problem) throw new Error(`unusable business hours: ${problem.field} ${problem.message}`);
    this.startMinutes = minutesOf(spec.start);
    this.endMinutes = minutesOf(spec.end);
    this.days = new Set(spec.days);
    this.holidays = new Set(spec.holidays ?? []);
  }

  after(from: number, seconds: number): number | null {
    let left = seconds * 1000;
    let day = this.dayOf(from);
    for (let walked = 0; walked < MAX_DAYS; walked++, day++) {
      const window = this.window(day);
      if (window) {
        const open = Math.max(window[0], from);
        const length = window[1] - open;
        if (length > 0) {
          if (left <= length) return open + left;
          left -= length;
        }
      }
    }
    return null;
  }

  between(from: number, to: number): number {
    if (to <= from) return 0;
    let total = 0;
    for (let day = this.dayOf(from), last = this.dayOf(to); day <= last; day++) {
      const window = this.window(day);
      if (window) total += Math.max(0, Math.min(window[1], to) - Math.max(window[0], from));
    }
    return total / 1000;
  }

  /** The local day of an instant, numbered from 1970-01-01 (a count of days, not of 24 hours). */
  private dayOf(instant: number): number {
    const local = DateTime.fromMillis(instant, { zone: this.spec.timezone });
    return Math.round(DateTime.utc(local.year, local.month, local.day).toMillis() / 86_400_000);
  }

  private window(day: number): Window {
    const known = this.windows.get(day);
    if (known !== undefined) return known;
    const date = DateTime.fromMillis(day * 86_400_000, { zone: 'UTC' });
    const weekday = date.weekday % 7; // Luxon: 1 = Monday … 7 = Sunday
    let window: Window = null;
    if (this.days.has(weekday) && !this.holidays.has(date.toISODate()!)) {
      const at = (minutes: number) =>
        DateTime.fromObject({ year: date.year, month: date.month, day: date.day, hour: Math.floor(minutes / 60), minute: minutes % 60 }, { zone: this.spec.timezone }).toMillis();
      window = [at(this.startMinutes), at(this.endMinutes)];
    }
    if (this.windows.size >= MAX_REMEMBERED_DAYS) this.windows.clear();
    this.windows.set(day, window);
    return window;
  }
}

/** Working time by these business hours; none, or hours saved before they were checked: every hour counts. */
export function workingTimeOf(spec: BusinessHoursSpec | null): WorkingTime {
  return spec && !businessHoursProblem(spec) ? new BusinessHours(spec) : ALWAYS_OPEN;
}
