import t from 'tap';
import { BASE_DELAY_MS, MAX_ATTEMPTS, MAX_DELAY_MS, hasAttemptsLeft, parseRetryAfter, retryDelayMs, scheduledDelayMs } from '../../server/worker/backoff.js';

t.test('exponential from one minute, capped at 12 hours, about three days in all', async (t) => {
  t.same([1, 2, 3, 4, 10, 11, 15].map(scheduledDelayMs), [60_000, 120_000, 240_000, 480_000, 512 * 60_000, MAX_DELAY_MS, MAX_DELAY_MS]);
  const total = Array.from({ length: MAX_ATTEMPTS - 1 }, (_, i) => scheduledDelayMs(i + 1)).reduce((a, b) => a + b, 0);
  t.ok(total / 86_400_000 > 3 && total / 86_400_000 < 3.5, `last attempt ${(total / 3600_000).toFixed(1)} h after the first`);
  t.ok(hasAttemptsLeft(MAX_ATTEMPTS - 1));
  t.notOk(hasAttemptsLeft(MAX_ATTEMPTS));
});

t.test('jitter spreads each delay over ±20%, and only that', async (t) => {
  t.equal(retryDelayMs(1, 0), BASE_DELAY_MS * 0.8);
  t.equal(retryDelayMs(1, 0.5), BASE_DELAY_MS);
  t.equal(retryDelayMs(1, 0.999999), Math.round(BASE_DELAY_MS * 1.2 - 0.0000024 * BASE_DELAY_MS));
  t.equal(retryDelayMs(20, 0.5), MAX_DELAY_MS);
});

t.test('Retry-After is honoured: never earlier than asked or than the schedule, capped', async (t) => {
  t.equal(retryDelayMs(1, 0.5, 3600_000), 3600_000);
  t.equal(retryDelayMs(1, 0.5, 1000), BASE_DELAY_MS, 'a shorter ask does not speed the schedule up');
  t.equal(retryDelayMs(1, 0.5, 10 * 86_400_000), MAX_DELAY_MS);
  const now = Date.UTC(2026, 10, 22, 10, 0, 0);
  t.equal(parseRetryAfter('120', now), 120_000);
  t.equal(parseRetryAfter(['30'], now), 30_000);
  t.equal(parseRetryAfter('Sun, 22 Nov 2026 11:00:00 GMT', now), 3600_000);
  t.equal(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now), null, 'in the past');
  t.equal(parseRetryAfter('soon', now), null);
  t.equal(parseRetryAfter('-5', now), null);
  t.equal(parseRetryAfter(undefined, now), null);
});
