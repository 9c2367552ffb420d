import cron, { type ScheduledTask } from 'node-cron';
import { systemCtx } from '../core/context.js';
import type { Db } from '../core/db.js';
import { purgeExpired as purgeExpiredIdempotencyKeys } from '../core/idempotency.js';
import * as apiKeys from '../domains/api-keys/service.js';

export interface DispatcherLog {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * The background loop: one node-cron task that never overlaps itself. Each tick runs the
 * periodic jobs; the outbox delivery (webhooks, mail) joins them with the events issue.
 */
export class Dispatcher {
  private task: ScheduledTask | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly db: Db, private readonly log: DispatcherLog) {}

  /** One pass over every job; tests call it directly instead of waiting for the clock. */
  async tick(): Promise<{ revokedKeys: number; purgedIdempotencyKeys: number }> {
    const ctx = systemCtx(this.db, 'dispatcher');
    const revokedKeys = await apiKeys.revokeExpired(ctx);
    if (revokedKeys) this.log.info({ revokedKeys }, 'revoked API keys whose grace period ended');
    const purgedIdempotencyKeys = await purgeExpiredIdempotencyKeys(ctx);
    if (purgedIdempotencyKeys) this.log.info({ purgedIdempotencyKeys }, 'purged expired idempotency keys');
    return { revokedKeys, purgedIdempotencyKeys };
  }

  start(): void {
    this.task = cron.schedule('*/5 * * * * *', async () => {
      this.running = this.tick().then(() => undefined, (err) => this.log.error({ err }, 'dispatcher tick failed'));
      await this.running;
    }, { name: 'ticketd-dispatcher', noOverlap: true });
  }

  /** Stops scheduling and waits for a tick in progress to finish. */
  async stop(): Promise<void> {
    await this.task?.stop();
    await this.task?.destroy();
    this.task = null;
    await this.running;
  }
}
