/**
 * The days that break calendars, and the test files that take "now", for `npm run test:dates`
 * (test/run.ts --dates): every file below runs once on each day, the app's clock and PostgreSQL
 * starting at `at`, in the zone `zone`. Each listed kind of day is here: the 1st, the 15th and the
 * last day of a month, 28 and 29 February of a leap year, 31 December at 23:59 UTC, and both days
 * of a clock change in Paris and New York (some days are two kinds at once). The days are fixed,
 * so a failure found is found again, and past: libfaketime keeps PostgreSQL's own timers
 * (lock_timeout) from firing on a day ahead of the real one.
 *
 * A test file that reads a month, a year, a weekday, business hours, a service level, a schedule, a
 * billing period, a renewal, a retention or an expiry belongs here; `grep` keeps a long file to the
 * tests that do (tap's TAP_GREP, on top-level names; a test they need first must match too).
 */
export interface Day {
  at: string;
  zone: string;
  why: string;
}

export const DAYS: Day[] = [
  { at: '2025-06-15T12:00:00Z', zone: 'UTC', why: 'the 15th of a month' },
  { at: '2024-02-28T12:00:00Z', zone: 'UTC', why: '28 February of a leap year' },
  { at: '2024-02-29T23:30:00Z', zone: 'UTC', why: '29 February, the last day of its month, half an hour before March' },
  { at: '2025-12-31T23:59:45Z', zone: 'UTC', why: '31 December at 23:59:45 UTC: the year ends 15 s into the run' },
  { at: '2026-03-29T00:30:00Z', zone: 'Europe/Paris', why: 'Paris springs forward at 01:00 UTC (a 23-hour day)' },
  { at: '2026-10-25T00:30:00Z', zone: 'Europe/Paris', why: 'Paris falls back at 01:00 UTC (a 25-hour day)' },
  { at: '2026-03-08T06:30:00Z', zone: 'America/New_York', why: 'New York springs forward at 07:00 UTC' },
  { at: '2026-11-01T05:30:00Z', zone: 'America/New_York', why: 'the 1st of a month, on which New York falls back at 06:00 UTC' },
];

export interface DateFile {
  /** Under test/, as written. */
  file: string;
  /** Only the tests whose names match (top level); all when absent. */
  grep?: RegExp;
  /** Only on these days (their `at`); every day when absent. */
  days?: string[];
}

export const DATE_FILES: DateFile[] = [
  { file: 'unit/working-time.test.ts' },
  { file: 'unit/recurring-schedule.test.ts' },
  { file: 'http/ticket-quota.test.ts', grep: /billing period/ },
  { file: 'http/billing.test.ts', grep: /cheaper plan waits for the period end/ },
  { file: 'http/service-levels.test.ts', grep: /^business hours: created|past its dueAt unresolved/ },
  { file: 'http/recurring-tickets.test.ts', grep: /^a yearly schedule|dispatcher runs a due one|^missed several times/ },
  { file: 'http/tickets-stats-trends.test.ts', grep: /^creates, in both modes|spread over days/ },
  { file: 'http/feedback.test.ts', grep: /after the delay/ },
  { file: 'http/audit.test.ts', grep: /date range/ },
  { file: 'http/auth-sign-in.test.ts', grep: /ends when idle/ },
  { file: 'http/checkout.test.ts', grep: /deleted 30 days after/ },
  { file: 'http/inbound-raw-mail.test.ts', grep: /past rawMailRetentionDays/ },
  { file: 'dispatcher/retention.test.ts', grep: /^mode delete|^attachmentsDays/ },
  // Processes of their own (four bin/ticketd) believe the day through libfaketime: on the day the
  // year turns during the run, the one day of the sweep worth their ten seconds.
  { file: 'cli/recurring.test.ts', days: ['2025-12-31T23:59:45Z'] },
];
