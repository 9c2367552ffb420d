/**
 * The days that break calendars, and the test files that take "now", for `npm run test:dates`
 * (test/run.ts --dates): every file below runs once on each day, the app's clock and PostgreSQL
 * starting at `at` in the zone `zone`. The days are fixed, so a failure found is found again, and
 * past: libfaketime delays PostgreSQL's own timers (lock_timeout) without end on a day ahead of
 * the real one. A file that reads a month, a year, a weekday, business
 * hours, a service level, a schedule, a billing period, a renewal, a retention or an expiry
 * belongs here; `grep` keeps a long file to the tests that do (tap's TAP_GREP, its top-level names).
 */
export interface Day {
  at: string;
  zone: string;
  why: string;
}

export const DAYS: Day[] = [
  { at: '2025-06-01T00:00:30Z', zone: 'UTC', why: 'the 1st of a month, just after midnight' },
  { at: '2025-06-15T12:00:00Z', zone: 'UTC', why: 'the 15th of a month' },
  { at: '2025-06-30T23:30:00Z', zone: 'UTC', why: 'the last day of a 30-day month' },
  { at: '2024-02-28T12:00:00Z', zone: 'UTC', why: '28 February of a leap year' },
  { at: '2024-02-29T12:00:00Z', zone: 'UTC', why: '29 February' },
  { at: '2025-12-31T23:59:00Z', zone: 'UTC', why: '31 December at 23:59 UTC: the year ends during the run' },
  { at: '2026-03-29T00:30:00Z', zone: 'Europe/Paris', why: 'Paris springs forward at 01:00 UTC (a 23-hour day)' },
  { at: '2026-10-25T00:30:00Z', zone: 'Europe/Paris', why: 'Paris falls back at 01:00 UTC (a 25-hour day)' },
  { at: '2026-03-08T06:30:00Z', zone: 'America/New_York', why: 'New York springs forward at 07:00 UTC' },
  { at: '2026-11-01T05:30:00Z', zone: 'America/New_York', why: 'New York falls back at 06:00 UTC' },
];

export interface DateFile {
  /** Under test/, as written. */
  file: string;
  /** Only the tests whose names match (top level); all when absent. */
  grep?: RegExp;
}

export const DATE_FILES: DateFile[] = [
  { file: 'unit/working-time.test.ts' },
  { file: 'unit/recurring-schedule.test.ts' },
  { file: 'http/ticket-quota.test.ts', grep: /billing period/ },
  { file: 'http/billing.test.ts', grep: /^on the default plan|cheaper plan waits|^cancel and reactivate/ },
  { file: 'http/billing-coupons.test.ts', grep: /discounts the invoice|expire/ },
  { file: 'http/service-levels.test.ts', grep: /^a 24\/7 brand|^business hours: created|past its dueAt unresolved/ },
  { file: 'http/recurring-tickets.test.ts', grep: /^a yearly schedule|^pause, resume|dispatcher runs a due one|^missed several times/ },
  { file: 'http/tickets-stats-trends.test.ts', grep: /^creates, in both modes|spread over days/ },
  { file: 'http/dashboard-tickets.test.ts', grep: /^the dataset|^trends|^team metrics/ },
  { file: 'http/feedback.test.ts', grep: /after the delay|expired link/ },
  { file: 'http/audit.test.ts', grep: /date range/ },
  { file: 'http/auth-sign-in.test.ts', grep: /expires after|ends when idle/ },
  { file: 'http/checkout.test.ts', grep: /deleted 30 days after/ },
  { file: 'http/inbound-raw-mail.test.ts', grep: /past rawMailRetentionDays/ },
  // A process of its own: bin/ticketd believes the day through libfaketime.
  { file: 'cli/recurring.test.ts' },
];
