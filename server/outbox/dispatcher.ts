import { randomBytes } from 'node:crypto';
import os from 'node:os';
import cron, { type ScheduledTask } from 'node-cron';
import { systemCtx, withTx, type BaseCtx } from '../core/context.js';
import type { Services } from '../core/services.js';
import { purgeExpired as purgeExpiredIdempotencyKeys } from '../core/idempotency.js';
import { Listener } from '../core/notify.js';
import * as apiKeys from '../domains/api-keys/service.js';
import * as attachments from '../domains/attachments/service.js';
import { hasAttemptsLeft, retryDelayMs } from './backoff.js';
import type { Attempt, OutboxHandler } from './handler.js';
import { webhookHandler, type WebhookDeliveryOptions } from './handlers/webhook.js';
import type { OutboxKind } from './model.js';
import * as outbox from './service.js';

export interface DispatcherLog {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface OutboxOptions {
  /** The clock (ms); tests inject one to move through retry schedules and lease expiry. */
  now?: () => number;
  /** [0, 1) for the backoff jitter. */
  random?: () => number;
  /** Messages delivered at once by this process. */
  concurrency?: number;
  /** How long a claim holds; default the longer of 2 × the webhook timeout + 30 s and 3 min (a slow SMTP relay). */
  leaseMs?: number;
  webhooks?: WebhookDeliveryOptions;
  /** Handlers by kind, over the default ones (main.ts gives mail its handler with the configured transport). */
  handlers?: Partial<Record<OutboxKind, OutboxHandler>>;
  /** Names this process in lease_owner. */
  instanceId?: string;
}

export interface DeliveryStats {
  claimed: number;
  success: number;
  retrying: number;
  failed: number;
  dead: number;
  /** Settles refused because the lease had passed to another dispatcher. */
  lost: number;
  /** Given back at shutdown. */
  released: number;
}

const emptyStats = (): DeliveryStats => ({ claimed: 0, success: 0, retrying: 0, failed: 0, dead: 0, lost: 0, released: 0 });

/**
 * The background worker: one node-cron task that never overlaps itself runs the periodic jobs and
 * delivers due outbox messages every few seconds; a LISTEN on the outbox channel starts delivery
 * as soon as a transaction that enqueued something commits.
 *
 * Delivery: claim a batch (leased, FOR UPDATE SKIP LOCKED: any number of dispatcher processes may
 * run), deliver each message outside any transaction with bounded concurrency, then settle it in a
 * short transaction that first checks the lease is still ours. A process that dies leaves leases
 * that expire; the rows are then due again for everyone. Delivery is at least once: a receiver
 * de-duplicates on webhook-id.
 */
export class Dispatcher {
  private task: ScheduledTask | null = null;
  private running: Promise<unknown> | null = null;
  private listener: Listener | null = null;
  private delivering: Promise<DeliveryStats> | null = null;
  private deliverAgain: Promise<DeliveryStats> | null = null;
  private stopping = false;
  private readonly interrupt = new AbortController();
  private readonly ctx: BaseCtx;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly handlers: Partial<Record<OutboxKind, OutboxHandler>>;
  readonly instanceId: string;

  /** attachmentDeps: without them (tests of other jobs) the attachment cleanup is skipped. */
  constructor(
    private readonly services: Services,
    private readonly log: DispatcherLog,
    private readonly attachmentDeps: attachments.AttachmentDeps | null = null,
    options: OutboxOptions = {},
  ) {
    this.ctx = systemCtx(services, 'dispatcher');
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.concurrency = options.concurrency ?? 16;
    const webhookOptions = options.webhooks ?? { allowPrivate: false, timeoutMs: 10_000 };
    // Longer than any one attempt may take, or another dispatcher would start the same message
    // again: a webhook is cut off at its timeout, an SMTP send (timeouts in integrations/mail.ts:
    // 30 s to connect, 30 s for the greeting, 60 s idle) can take a couple of minutes.
    this.leaseMs = options.leaseMs ?? Math.max(2 * webhookOptions.timeoutMs + 30_000, 180_000);
    this.handlers = { webhook: webhookHandler(webhookOptions), ...options.handlers };
    this.instanceId = options.instanceId ?? `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  }

  /** One pass over every job, deliveries included; tests call it directly instead of waiting for the clock. */
  async tick(): Promise<{ revokedKeys: number; purgedIdempotencyKeys: number; abandonedAttachments: number; removedFiles: number; delivery: DeliveryStats }> {
    const jobs = await this.periodicJobs();
    return { ...jobs, delivery: await this.deliverDue() };
  }

  private async periodicJobs(): Promise<{ revokedKeys: number; purgedIdempotencyKeys: number; abandonedAttachments: number; removedFiles: number }> {
    const ctx = this.ctx;
    const revokedKeys = await apiKeys.revokeExpired(ctx);
    if (revokedKeys) this.log.info({ revokedKeys }, 'revoked API keys whose grace period ended');
    const purgedIdempotencyKeys = await purgeExpiredIdempotencyKeys(ctx);
    if (purgedIdempotencyKeys) this.log.info({ purgedIdempotencyKeys }, 'purged expired idempotency keys');
    const purged = this.attachmentDeps ? await attachments.purgeAbandoned(ctx, this.attachmentDeps) : { abandoned: 0, files: 0 };
    if (purged.abandoned) this.log.info({ abandonedAttachments: purged.abandoned }, 'removed attachments never linked to a ticket or never uploaded');
    return { revokedKeys, purgedIdempotencyKeys, abandonedAttachments: purged.abandoned, removedFiles: purged.files };
  }

  /**
   * Delivers every message due now, until none is left. Called while a run is under way, it
   * resolves after one more run that starts when the current one ends (so a wake-up is never lost
   * and runs in one process never overlap).
   */
  deliverDue(): Promise<DeliveryStats> {
    if (!this.delivering) {
      this.delivering = this.deliverAll().finally(() => {
        this.delivering = null;
      });
      return this.delivering;
    }
    this.deliverAgain ??= this.delivering
      .catch(() => undefined)
      .then(() => {
        this.deliverAgain = null;
        return this.deliverDue();
      });
    return this.deliverAgain;
  }

  private async deliverAll(): Promise<DeliveryStats> {
    const stats = emptyStats();
    const queue: outbox.Claimed[] = [];
    let exhausted = false;
    let claiming: Promise<void> | null = null;
    const next = async (): Promise<outbox.Claimed | null> => {
      while (!queue.length && !exhausted && !this.stopping) {
        claiming ??= this.claim(this.concurrency)
          .then((rows) => {
            if (!rows.length) exhausted = true;
            stats.claimed += rows.length;
            queue.push(...rows);
          })
          .finally(() => {
            claiming = null;
          });
        await claiming;
      }
      return this.stopping ? null : (queue.shift() ?? null);
    };
    const worker = async () => {
      for (let row = await next(); row; row = await next()) await this.deliverOne(row, stats);
    };
    try {
      await Promise.all(Array.from({ length: this.concurrency }, worker));
    } finally {
      // Claimed but never started (shutdown): their attempt is given back.
      if (queue.length) stats.released += await outbox.release(this.ctx, queue.splice(0), false, new Date(this.now()));
    }
    return stats;
  }

  private claim(limit: number): Promise<outbox.Claimed[]> {
    const now = this.now();
    return outbox.claim(this.ctx, this.instanceId, new Date(now), new Date(now + this.leaseMs), limit);
  }

  private async deliverOne(row: outbox.Claimed, stats: DeliveryStats): Promise<void> {
    const handler = this.handlers[row.kind];
    let attempt: Attempt;
    if (!handler) attempt = { outcome: 'retry', error: `this dispatcher has no handler for ${row.kind} messages`, responseCode: null, responseBody: null, notSent: true };
    else {
      try {
        attempt = await handler.deliver(this.ctx, row, this.interrupt.signal, new Date(this.now()));
      } catch (err) {
        attempt = { outcome: 'retry', error: `delivery failed: ${(err as Error).message}`, responseCode: null, responseBody: null };
      }
    }
    try {
      if (attempt.outcome === 'interrupted') {
        stats.released += await outbox.release(this.ctx, [row], true, new Date(this.now()));
        return;
      }
      const settlement = this.settlementOf(row, attempt);
      const settled = await withTx(this.ctx, async (tx) => {
        if (!(await outbox.settle(tx, row, settlement))) return false;
        await handler?.settled?.(tx, row, attempt, settlement);
        return true;
      });
      if (settled) stats[settlement.status as 'success' | 'retrying' | 'failed' | 'dead']++;
      else stats.lost++;
    } catch (err) {
      // The lease runs out and the message is delivered again: at least once.
      this.log.error({ err, outboxId: row.id }, 'could not settle an outbox message');
    }
  }

  /** success; failed (permanent); retrying at the scheduled time; dead when attempts are exhausted. */
  private settlementOf(row: outbox.Claimed, attempt: Exclude<Attempt, { outcome: 'interrupted' }>): outbox.Settlement {
    const now = this.now();
    const base = { attemptedAt: new Date(now), responseCode: attempt.responseCode, responseBody: attempt.responseBody, availableAt: null };
    if (attempt.outcome === 'success') return { ...base, status: 'success', error: null };
    if (attempt.outcome === 'fail') return { ...base, status: 'failed', error: attempt.error };
    if (!hasAttemptsLeft(row.attempts)) return { ...base, status: 'dead', error: attempt.error };
    const delay = retryDelayMs(row.attempts, this.random(), attempt.retryAfterMs ?? null);
    return { ...base, status: 'retrying', error: attempt.error, availableAt: new Date(now + delay) };
  }

  start(): void {
    const wake = () => {
      if (!this.stopping) this.deliverDue().catch((err) => this.log.error({ err }, 'outbox delivery failed'));
    };
    // The tick does not wait for deliveries: a long backlog must not hold up the periodic jobs.
    this.task = cron.schedule(
      '*/5 * * * * *',
      async () => {
        this.running = this.periodicJobs().catch((err) => this.log.error({ err }, 'dispatcher tick failed'));
        await this.running;
        wake();
      },
      { name: 'ticketd-dispatcher', noOverlap: true },
    );
    // 'up' also after a reconnect: notifications sent while the connection was down are lost.
    this.listener = Listener.forDb(this.services.db, [outbox.OUTBOX_CHANNEL]).start();
    this.listener.on('notification', wake);
    this.listener.on('up', wake);
  }

  /**
   * Stops claiming, waits up to drainMs for deliveries in flight, then interrupts the rest (their
   * messages are given back, due at once for any dispatcher), and waits for a tick in progress.
   */
  async stop(drainMs = 5_000): Promise<void> {
    this.stopping = true;
    await this.task?.stop();
    await this.task?.destroy();
    this.task = null;
    await this.listener?.close();
    this.listener = null;
    const cutOff = setTimeout(() => this.interrupt.abort(), drainMs);
    try {
      await Promise.all([this.delivering, this.deliverAgain, this.running].map((p) => p?.catch(() => undefined)));
    } finally {
      clearTimeout(cutOff);
      for (const handler of Object.values(this.handlers)) await handler.close?.();
    }
  }
}
