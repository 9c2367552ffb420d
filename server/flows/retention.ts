import { tenantCtx, withTx, type Actor, type BaseCtx, type TenantCtx } from '../core/context.js';
import * as audit from '../core/audit.js';
import type { BrandRetention } from '../core/brand.js';
import * as events from '../core/outbox/events.js';
import { updateTickets } from '../core/ticket-writes.js';
import * as attachments from '../domains/attachments/retention.js';
import * as brands from '../domains/brands/service.js';
import * as comments from '../domains/comments/retention.js';
import * as mail from '../domains/mail/retention.js';
import * as rawMails from '../domains/raw-mails/retention.js';
import * as tickets from '../domains/tickets/retention.js';

/**
 * Retention per brand (decision 0121): the dispatcher applies each brand's policy
 * (brand.retention) in small batches, each one transaction in the brand's account with its audit
 * entries (source retention) and events:
 * - closedTicketsDays: tickets resolved or closed, unchanged for that long, are deleted (rows
 *   gone with their comments, attachments and raw mail; ticket.deleted announced for those not
 *   deleted already) or anonymized (kept and counted, stripped of what names their requester);
 * - attachmentsDays: attachments older than that are removed (their comment keeps a count of them);
 * - rawMailDays: raw mail older than that is removed, besides the instance's rawMailRetentionDays
 *   (the shorter of the two wins).
 * Files go through the deletion queue (core/file-deletions.ts). A ticket under legal hold is
 * passed over by all of it. What was done is not found again, so a second run changes nothing.
 */

export interface RetentionStats {
  ticketsDeleted: number;
  ticketsAnonymized: number;
  attachmentsDeleted: number;
  rawMailsDeleted: number;
}

export interface RetentionRun extends RetentionStats {
  /** Some brand had more than this run's batches could take: the next run should come soon. */
  more: boolean;
}

export interface RetentionOptions {
  /** The clock (ms). */
  now: () => number;
  /** True once the dispatcher stops: no new batch starts. */
  stopping?: () => boolean;
  /** Rows per transaction (default BATCH). */
  batchSize?: number;
}

/** Rows per transaction: a batch's statements are set-wise, so it costs about what a few rows do. */
const BATCH = 500;
/** Batches of each kind per brand and run: a brand with years to catch up on does not hold up the others. */
const BATCHES_PER_KIND = 4;
const DAY_MS = 86_400_000;

export const RETENTION_ACTOR: Actor = { type: 'system', id: null, name: 'retention', source: 'retention' };

/** The dispatcher's job: the policy of every brand that has one, once. */
export async function applyRetention(base: BaseCtx, options: RetentionOptions): Promise<RetentionRun> {
  const run: RetentionRun = { ticketsDeleted: 0, ticketsAnonymized: 0, attachmentsDeleted: 0, rawMailsDeleted: 0, more: false };
  const size = options.batchSize ?? BATCH;
  for (const b of await brands.withRetention(base)) {
    if (options.stopping?.()) break;
    const ctx = tenantCtx({ ...base, actor: RETENTION_ACTOR }, b.accountId, b.livemode);
    await applyPolicy(ctx, b.brandId, b.retention, options, size, run);
  }
  return run;
}

async function applyPolicy(ctx: TenantCtx, brandId: string, policy: BrandRetention, options: RetentionOptions, size: number, run: RetentionRun): Promise<void> {
  const before = (days: number) => new Date(options.now() - days * DAY_MS);
  /** Up to BATCHES_PER_KIND batches while they come back full. */
  const batches = async (batch: () => Promise<number>) => {
    for (let i = 0; i < BATCHES_PER_KIND; i++) {
      if (options.stopping?.()) return;
      if ((await batch()) < size) return;
    }
    run.more = true;
  };
  // Tickets first: a deleted ticket's attachments and raw mail go with it.
  const { closedTicketsDays, attachmentsDays, rawMailDays } = policy;
  if (closedTicketsDays !== null) {
    const cutoff = before(closedTicketsDays);
    await batches(() => (policy.mode === 'delete' ? deleteTickets(ctx, brandId, cutoff, size, run) : anonymizeTickets(ctx, brandId, cutoff, size, run)));
  }
  if (attachmentsDays !== null) await batches(() => removeAttachments(ctx, brandId, before(attachmentsDays), size, run));
  if (rawMailDays !== null) await batches(() => removeRawMails(ctx, brandId, before(rawMailDays), size, run));
}

/**
 * One batch of expired closed tickets deleted. Those not soft-deleted yet are first, as a DELETE
 * of a ticket does (their counts, ticket.deleted); then the rows go, their files queued.
 */
function deleteTickets(ctx: TenantCtx, brandId: string, cutoff: Date, size: number, run: RetentionRun): Promise<number> {
  return withTx(ctx, async (tx) => {
    const found = await tickets.expiredClosed(tx, brandId, cutoff, size, false);
    if (!found.length) return 0;
    const ids = found.map((t) => t.id);
    const live = found.filter((t) => t.live).map((t) => t.id);
    if (live.length) {
      await updateTickets(tx, brandId, live, { deletedAt: tx.db.raw('now()') });
      // Read from the ticket rows: enqueued before they go.
      await events.ticketsDeleted(tx, brandId, live);
    }
    await audit.recordMany(
      tx,
      // No title: what the ticket said goes with it.
      found.map((t) => ({
        brandId,
        ticketId: t.id,
        entityType: 'ticket',
        entityId: t.id,
        event: 'ticket.deleted',
        metadata: { ticketNumber: t.ticketNumber, reason: 'retention' },
      })),
    );
    await attachments.forgetOfTickets(tx, brandId, ids);
    await rawMails.forgetOfTickets(tx, brandId, ids);
    await tickets.eraseRows(tx, brandId, ids);
    run.ticketsDeleted += found.length;
    return found.length;
  });
}

/** One batch of expired closed tickets anonymized: the tickets, their comments and mail records stripped, their attachments and raw mail removed. */
function anonymizeTickets(ctx: TenantCtx, brandId: string, cutoff: Date, size: number, run: RetentionRun): Promise<number> {
  return withTx(ctx, async (tx) => {
    const found = await tickets.expiredClosed(tx, brandId, cutoff, size, true);
    if (!found.length) return 0;
    const ids = found.map((t) => t.id);
    await comments.redactOfTickets(tx, brandId, ids);
    await mail.redactOfTickets(tx, brandId, ids);
    run.attachmentsDeleted += await attachments.removeOfTickets(tx, brandId, ids);
    run.rawMailsDeleted += await rawMails.removeOfTickets(tx, brandId, ids);
    await tickets.anonymizeRows(tx, brandId, ids);
    await audit.recordMany(
      tx,
      found.map((t) => ({
        brandId,
        ticketId: t.id,
        entityType: 'ticket',
        entityId: t.id,
        event: 'ticket.anonymized',
        metadata: { ticketNumber: t.ticketNumber, reason: 'retention' },
      })),
    );
    run.ticketsAnonymized += found.length;
    return found.length;
  });
}

function removeAttachments(ctx: TenantCtx, brandId: string, cutoff: Date, size: number, run: RetentionRun): Promise<number> {
  return withTx(ctx, async (tx) => {
    const { removed, byComment } = await attachments.removeExpired(tx, brandId, cutoff, size);
    await comments.markAttachmentsRemoved(tx, brandId, byComment);
    run.attachmentsDeleted += removed;
    return removed;
  });
}

/** One batch of the brand's raw mail removed, with one audit entry for the batch (raw mail has no entries of its own). */
function removeRawMails(ctx: TenantCtx, brandId: string, cutoff: Date, size: number, run: RetentionRun): Promise<number> {
  return withTx(ctx, async (tx) => {
    const removed = await rawMails.removeExpired(tx, brandId, cutoff, size);
    if (removed) {
      await audit.record(tx, {
        brandId,
        entityType: 'brand',
        entityId: brandId,
        event: 'raw_mails.deleted',
        metadata: { count: removed, receivedBefore: cutoff.toISOString(), reason: 'retention' },
      });
    }
    run.rawMailsDeleted += removed;
    return removed;
  });
}
