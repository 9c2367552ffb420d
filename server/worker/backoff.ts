/**
 * The retry schedule of outbox messages, as pure functions (tested without a clock).
 *
 * A message gets MAX_ATTEMPTS attempts. After failed attempt n (1-based) the next one waits
 * min(1 min × 2^(n-1), 12 h), ±20% jitter: 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 minutes, then
 * 12 h five times; the last attempt comes about 77 hours (~3.2 days) after the first. A receiver's
 * Retry-After (seconds or an HTTP date) is honoured: the next attempt is never earlier than it
 * asks, up to the 12 h cap, and never earlier than the schedule.
 */

export const MAX_ATTEMPTS = 16;
export const BASE_DELAY_MS = 60_000;
export const MAX_DELAY_MS = 12 * 3600_000;
export const JITTER = 0.2;

/** The delay before the attempt after failed attempt `attempt`, without jitter. */
export function scheduledDelayMs(attempt: number): number {
  return Math.min(BASE_DELAY_MS * 2 ** Math.max(0, attempt - 1), MAX_DELAY_MS);
}

/**
 * The delay before the next attempt. `random` is a number in [0, 1) (Math.random() in production)
 * spreading the delay over ±JITTER, so receivers recovering from an outage are not hit by every
 * queued message at once; `retryAfterMs` is what the receiver asked for, if anything.
 */
export function retryDelayMs(attempt: number, random: number, retryAfterMs: number | null = null): number {
  const jittered = Math.round(scheduledDelayMs(attempt) * (1 - JITTER + 2 * JITTER * random));
  if (retryAfterMs === null) return jittered;
  return Math.max(jittered, Math.min(retryAfterMs, MAX_DELAY_MS));
}

/** Whether a message that failed attempt `attempt` (retryably) has another one left. */
export function hasAttemptsLeft(attempt: number): boolean {
  return attempt < MAX_ATTEMPTS;
}

export { parseRetryAfter } from '../core/retry-after.js';
