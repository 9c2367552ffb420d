import cron, { type ScheduledTask } from 'node-cron';
import { systemCtx } from '../core/context.js';
import type { Db } from '../core/db.js';
import { purgeExpired as purgeExpiredIdempotencyKeys } from '../core/idempotency.js';
import * as apiKeys from '../domains/api-keys/service.js';
import * as attachments from '../domains/attachments/service.js';

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

  /** attachmentDeps: without them (tests of other jobs) the attachment cleanup is skipped. */
  constructor(private readonly db: Db, private readonly log: DispatcherLog, private readonly attachmentDeps: attachments.AttachmentDeps | null = null) {}

  /** One pass over every job; tests call it directly instead of waiting for the clock. */
  async tick(): Promise<{ revokedKeys: number; purgedIdempotencyKeys: number; abandonedAttachments: number; removedFiles: number }> {
    const ctx = systemCtx(this.db, 'dispatcher');
    const revokedKeys = await apiKeys.revokeExpired(ctx);
    if (revokedKeys) this.log.info({ revokedKeys }, 'revoked API keys whose grace period ended');
    const purgedIdempotencyKeys = await purgeExpiredIdempotencyKeys(ctx);
    if (purgedIdempotencyKeys) this.log.info({ purgedIdempotencyKeys }, 'purged expired idempotency keys');
    const purged = this.attachmentDeps ? await attachments.purgeAbandoned(ctx, this.attachmentDeps) : { abandoned: 0, files: 0 };
    if (purged.abandoned) this.log.info({ abandonedAttachments: purged.abandoned }, 'removed attachments never linked to a ticket or never uploaded');
    return { revokedKeys, purgedIdempotencyKeys, abandonedAttachments: purged.abandoned, removedFiles: purged.files };
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
