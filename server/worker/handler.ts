import type { BaseCtx } from '../core/context.js';
import type { SqlFragment } from '../core/db.js';
import type { Claimed, NamedPart, Settlement } from '../core/outbox/service.js';

/** What one attempt to deliver a message came to. */
export type Attempt =
  | { outcome: 'success'; responseCode: number | null; responseBody: string | null }
  /** retry: a transient failure (the schedule in backoff.ts decides when, or dead); fail: permanent. */
  | {
      outcome: 'retry' | 'fail';
      error: string;
      responseCode: number | null;
      responseBody: string | null;
      retryAfterMs?: number | null;
      /** Nothing was sent (e.g. the webhook was disabled meanwhile): not a failure of the receiver. */
      notSent?: boolean;
    }
  /** Cut off by shutdown: the message is given back, not settled. */
  | { outcome: 'interrupted' };

/**
 * Delivers the messages of one outbox kind (handlers/webhook.ts, handlers/mail.ts). The dispatcher claims, calls
 * deliver outside any transaction, then settles the row: in one statement with settledPart's
 * part, or in a transaction with settled.
 */
export interface OutboxHandler {
  deliver(ctx: BaseCtx, message: Claimed, signal: AbortSignal, now: Date): Promise<Attempt>;
  /**
   * What deliver needs from other tables, read with the claim instead of by each delivery, handed
   * over as message.attached: a SELECT of (id, attached JSON) for the rows of `picked` (outbox.Attached)
   * whose kind is `kind`.
   */
  attachedToClaim?(picked: string, accountId: string, kind: string): SqlFragment;
  /**
   * The kind's own bookkeeping for a settled message as a part of the settle's statement (gated on
   * `settled`, the relation holding the row when this dispatcher still held it): the settle is then
   * that one statement. null: nothing to record; undefined: settled() does it.
   */
  settledPart?(ctx: BaseCtx, message: Claimed, attempt: Attempt, settlement: Settlement, settled: string): NamedPart | null | undefined;
  /** The bookkeeping settledPart leaves out, in the settle's transaction (only when this dispatcher still held the message). */
  settled?(tx: BaseCtx, message: Claimed, attempt: Attempt, settlement: Settlement): Promise<void>;
  close?(): Promise<void>;
}
