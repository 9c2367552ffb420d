import { fakeTimeEnv } from './faketime.js';

/**
 * "Now" for tests. A test never reads today's date: it takes "now" from here, and the app under
 * test runs on the same clock (testApp, servicesOf). Run on another day (`TICKETD_TEST_NOW=… npm
 * test`, or `npm run test:dates`), the runner passes the distance from the real time in
 * TICKETD_TEST_CLOCK_OFFSET_MS, and this clock runs that far ahead (or behind) at the real pace.
 */
const offset = Number(process.env.TICKETD_TEST_CLOCK_OFFSET_MS ?? 0);
/** The process's own clock, kept: onTestDay replaces Date.now for a moment. */
const processNow = Date.now;

/** Milliseconds since the epoch, as the app under test sees them. */
export const testNow = (): number => processNow() + offset;

/**
 * What a process a test starts (`bin/ticketd`) needs in its environment to believe the same date:
 * libfaketime, which the runner found, on another day; nothing otherwise.
 */
export function processClockEnv(): Record<string, string> {
  const library = process.env.TICKETD_TEST_LIBFAKETIME;
  return offset && library ? fakeTimeEnv(library, offset) : {};
}

/** A clock a test moves: testNow() plus how far the test moved it. */
export interface MovableClock {
  (): number;
  /** Moves the clock on by `ms` (back, when negative). */
  advance(ms: number): void;
  /** Moves the clock to `instant`; from there it runs at the real pace. */
  setTo(instant: number): void;
  /** Back to testNow(). */
  reset(): void;
}

export function movableClock(): MovableClock {
  let ahead = 0;
  const now = () => testNow() + ahead;
  return Object.assign(now, {
    advance: (ms: number) => void (ahead += ms),
    setTo: (instant: number) => void (ahead = instant - testNow()),
    reset: () => void (ahead = 0),
  });
}

/**
 * Runs `fn`, a synchronous call into an outside party's library that reads the process's time
 * (a receiver's signature check: standardwebhooks judges a timestamp by Date.now), as that party
 * would on the test's day.
 */
export function onTestDay<T>(fn: () => T): T {
  const real = Date.now;
  Date.now = testNow;
  try {
    return fn();
  } finally {
    Date.now = real;
  }
}
