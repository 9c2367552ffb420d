import type { FastifyReply } from 'fastify';
import ipaddr from 'ipaddr.js';
import type { Config } from './config.js';
import type { Db } from './db.js';
import { HttpError } from './errors.js';
import { part, type ServiceLogger, type Services } from './services.js';

/**
 * Rate limits: a fixed window per budget and subject, the subject being the credential a request
 * carries (`key:<keyId>`, `session:<id>`, a portal token's `customer:<contactId>`) or, without one, the client's address (`ip:<addr>`, which
 * honours trustProxy). The sign-in routes anyone may call count per address and per email address
 * too (`email:<address>`), each route apart (signInPolicies); public web forms per address and per
 * form (`form:<formId>`, formPolicies).
 *
 * Every process counts in memory and decides at once from what it knows: the total all processes
 * had written at its last sync, plus what it counted since. Every `rateLimitSyncMs` it adds its new
 * counts to the shared table in one statement, which answers the new totals. So no request waits
 * for the database, and several processes agree to within what they admit in one sync interval.
 */

/** Who a budget belongs to. */
export type Subject = `key:${string}` | `session:${string}` | `customer:${string}` | `ip:${string}` | `email:${string}` | `form:${string}`;

/**
 * The budget of a client address. An IPv6 host usually holds a whole /64 and can pick any address
 * in it, so the /64 shares one budget; IPv4 (also when mapped into IPv6) counts per address.
 */
export function addressSubject(address: string): Subject {
  if (!ipaddr.isValid(address)) return `ip:${address}`;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return `ip:${parsed.toString()}`;
  const prefix = (parsed as ipaddr.IPv6).parts.slice(0, 4);
  return `ip:${new ipaddr.IPv6([...prefix, 0, 0, 0, 0]).toString()}/64`;
}

export interface Policy {
  /** Names the budget in the shared table: one subject has one count per policy. */
  readonly name: string;
  /** Requests per window; 0: no limit. */
  readonly limit: number;
  readonly windowMs: number;
  /** Whose budget ran out, for the 429's message. */
  readonly holder: string;
}

export type PolicyName = 'apiKey' | 'session' | 'portal' | 'ip' | 'signup';

export function policiesFrom(config: Config): Readonly<Record<PolicyName, Policy>> {
  const windowMs = config.rateLimitWindowSeconds * 1000;
  return {
    apiKey: { name: 'api', limit: config.rateLimitPerApiKey, windowMs, holder: 'this API key' },
    // A member's session has the budget of a key.
    session: { name: 'api', limit: config.rateLimitPerApiKey, windowMs, holder: 'this session' },
    // One customer in a browser: the budget of a client address, counted per customer.
    portal: { name: 'api', limit: config.rateLimitPerIp, windowMs, holder: 'this portal customer' },
    ip: { name: 'api', limit: config.rateLimitPerIp, windowMs, holder: 'this address' },
    signup: { name: 'signup', limit: config.signupRateLimitPerHour, windowMs: 3_600_000, holder: 'sign-ups from this address' },
  };
}

/** The hourly budgets of one sign-in route (check-email, signup, magic-link): per client address and per email address. */
export function signInPolicies(config: Config, route: string): { ip: Policy; email: Policy } {
  const hour = 3_600_000;
  return {
    ip: { name: `auth.${route}`, limit: config.authRateLimitPerIpPerHour, windowMs: hour, holder: `${route} requests from this address` },
    email: { name: `auth.${route}`, limit: config.authRateLimitPerEmailPerHour, windowMs: hour, holder: `${route} requests for this email address` },
  };
}

/** The hourly budgets of public web-form submissions: per client address (every form alike) and per form (every address alike). */
export function formPolicies(config: Config): { ip: Policy; form: Policy } {
  const hour = 3_600_000;
  return {
    ip: { name: 'forms', limit: config.formRateLimitPerIpPerHour, windowMs: hour, holder: 'form submissions from this address' },
    form: { name: 'forms', limit: config.formRateLimitPerFormPerHour, windowMs: hour, holder: 'submissions to this form' },
  };
}

export interface Decision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** When the window ends, in ms since the epoch. */
  resetAt: number;
  /** Until then. */
  resetInMs: number;
}

/** One subject's count in one window, as this process knows it. */
interface Count {
  readonly bucket: string;
  readonly windowStart: number;
  readonly windowEnd: number;
  /** The shared total at our last sync (our own requests included). */
  synced: number;
  /** Counted here, being written by the sync under way. */
  sending: number;
  /** Counted here since. */
  unsent: number;
}

/** Windows that ended this long ago are deleted (a little later than their end: process clocks differ). */
const PURGE_AFTER_MS = 60_000;
const PURGE_EVERY_MS = 60_000;

const UPSERT = `
  INSERT INTO rate_limit_counters (bucket, window_start, window_end, hits)
  SELECT * FROM unnest(?::text[], ?::bigint[], ?::bigint[], ?::integer[])
  ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + excluded.hits
  RETURNING bucket, hits`;

export class RateLimiter {
  private readonly counts = new Map<string, Count>();
  /** Counts with something unsent. */
  private readonly pending = new Set<Count>();
  private running: Promise<void> | null = null;
  private again: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lastPurge = -Infinity;
  private failing = false;

  constructor(
    private readonly db: Db,
    private readonly now: () => number,
    private readonly log: ServiceLogger,
  ) {}

  /** Counts one request of `subject` against `policy` unless its budget is spent; never waits. */
  take(policy: Policy, subject: Subject): Decision {
    const now = this.now();
    const windowStart = now - (now % policy.windowMs);
    const bucket = `${policy.name}/${subject}`;
    let count = this.counts.get(bucket);
    if (count?.windowStart !== windowStart) {
      // What was unsent of an ended window is dropped: no process decides on that window any more.
      if (count) this.pending.delete(count);
      count = { bucket, windowStart, windowEnd: windowStart + policy.windowMs, synced: 0, sending: 0, unsent: 0 };
      this.counts.set(bucket, count);
    }
    const used = count.synced + count.sending + count.unsent;
    const allowed = used < policy.limit;
    if (allowed) {
      count.unsent++;
      this.pending.add(count);
    }
    return { allowed, limit: policy.limit, remaining: allowed ? policy.limit - used - 1 : 0, resetAt: count.windowEnd, resetInMs: count.windowEnd - now };
  }

  /** Syncs every `intervalMs` until close(). */
  start(intervalMs: number): this {
    this.timer ??= setInterval(() => {
      if (!this.running) void this.sync();
    }, intervalMs).unref();
    return this;
  }

  /**
   * Writes what this process counted and learns the shared totals. Resolves after a sync that
   * started after the call, so everything counted before it is written (tests drive it directly).
   */
  sync(): Promise<void> {
    if (!this.running) {
      this.running = this.flush().finally(() => {
        this.running = null;
      });
      return this.running;
    }
    this.again ??= this.running.then(() => {
      this.again = null;
      return this.sync();
    });
    return this.again;
  }

  private async flush(): Promise<void> {
    const now = this.now();
    for (const [bucket, count] of this.counts) {
      if (count.windowEnd <= now) {
        this.counts.delete(bucket);
        this.pending.delete(count);
      }
    }
    // Sorted, so two processes writing the same rows lock them in the same order.
    const batch = [...this.pending].sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
    this.pending.clear();
    if (batch.length) await this.send(batch);
    if (now - this.lastPurge >= PURGE_EVERY_MS) {
      this.lastPurge = now;
      await this.db.raw('DELETE FROM rate_limit_counters WHERE window_end < ?', [now - PURGE_AFTER_MS]).catch((err: unknown) => this.failed(err));
    }
  }

  private async send(batch: Count[]): Promise<void> {
    for (const count of batch) {
      count.sending = count.unsent;
      count.unsent = 0;
    }
    try {
      const { rows } = await this.db.raw<{ rows: { bucket: string; hits: number }[] }>(UPSERT, [
        batch.map((c) => c.bucket),
        batch.map((c) => c.windowStart),
        batch.map((c) => c.windowEnd),
        batch.map((c) => c.sending),
      ]);
      const totals = new Map(rows.map((r) => [r.bucket, r.hits]));
      for (const count of batch) {
        count.synced = totals.get(count.bucket) ?? count.synced + count.sending;
        count.sending = 0;
      }
      if (this.failing) this.log.info({}, 'rate-limit counts are shared again');
      this.failing = false;
    } catch (err) {
      // Kept to send with the next sync; meanwhile this process goes on deciding from what it knows.
      for (const count of batch) {
        count.unsent += count.sending;
        count.sending = 0;
        this.pending.add(count);
      }
      this.failed(err);
    }
  }

  private failed(err: unknown): void {
    if (!this.failing) this.log.warn({ err }, 'rate-limit counts could not be shared; limiting from local counts until they can');
    this.failing = true;
  }

  /** Stops syncing; waits for a sync under way (the pool closes after the services). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }
}

const rateLimits = part(
  'core.rateLimits',
  (services) => new RateLimiter(services.db, () => services.now(), services.log).start(services.config.rateLimitSyncMs),
  (limiter) => limiter.close(),
);

/** This process's limiter (made, and syncing, from the first time it is asked for). */
export function rateLimiterOf(services: Services): RateLimiter {
  return services.get(rateLimits);
}

/** Whether budget `a` binds harder than `b`: refused before allowed, then less left, then (both refused) freed later. */
function isTighter(a: Decision, b: Decision): boolean {
  if (a.allowed !== b.allowed) return !a.allowed;
  return a.allowed ? a.remaining < b.remaining : a.resetAt > b.resetAt;
}

/**
 * Counts the request against each budget in turn; the X-RateLimit-* headers tell the tighter one,
 * and a spent budget is 429 with Retry-After. The budgets after a spent one are not counted: a
 * refused request spends no one else's budget (a flooding address does not use up a form's).
 */
export function enforceRateLimits(reply: FastifyReply, limiter: RateLimiter, budgets: readonly (readonly [Policy, Subject])[]): void {
  let told: { policy: Policy; decision: Decision } | null = null;
  for (const [policy, subject] of budgets) {
    if (policy.limit === 0) continue;
    const decision = limiter.take(policy, subject);
    if (!told || isTighter(decision, told.decision)) told = { policy, decision };
    if (!decision.allowed) break;
  }
  if (!told) return;
  const { policy, decision } = told;
  reply.header('X-RateLimit-Limit', decision.limit);
  reply.header('X-RateLimit-Remaining', decision.remaining);
  reply.header('X-RateLimit-Reset', Math.ceil(decision.resetAt / 1000));
  if (decision.allowed) return;
  const retryAfter = Math.max(1, Math.ceil(decision.resetInMs / 1000));
  reply.header('Retry-After', retryAfter);
  throw new HttpError(429, 'rate_limited', `Too many requests for ${policy.holder}: ${policy.limit} per ${policy.windowMs / 1000} s; retry in ${retryAfter} s`);
}

/** Counts the request; sets the X-RateLimit-* headers; a spent budget is 429 with Retry-After. */
export function enforceRateLimit(reply: FastifyReply, limiter: RateLimiter, policy: Policy, subject: Subject): void {
  enforceRateLimits(reply, limiter, [[policy, subject]]);
}
