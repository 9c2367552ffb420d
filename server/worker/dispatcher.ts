import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import cron, { type ScheduledTask } from 'node-cron';
import { systemCtx, withTx, type BaseCtx } from '../core/context.js';
import type { Services } from '../core/services.js';
import { poolMaxOf } from '../core/db.js';
import { purgeExpired as purgeExpiredIdempotencyKeys } from '../core/idempotency.js';
import { analyzeNewTables } from '../core/first-statistics.js';
import { Listener } from '../core/notify.js';
import * as apiKeys from '../domains/api-keys/service.js';
import * as attachments from '../domains/attachments/service.js';
import * as rawMails from '../domains/raw-mails/service.js';
import * as signupCheckouts from '../domains/billing/signup-checkouts.js';
import * as ticketCounts from '../domains/tickets/counts.js';
import * as ruleTallies from '../domains/rules/tallies.js';
import { renewDue as renewDueSubscriptions } from '../flows/billing.js';
import { sendDueRequests as sendDueRatingRequests } from '../flows/feedback.js';
import { announceOverdue } from '../flows/ticket-overdue.js';
import { runAutomations, type AutomationStats } from '../flows/automations.js';
import { applyRetention, type RetentionStats } from '../flows/retention.js';
import { receiveHeld as receiveHeldMail } from '../flows/inbound-mail.js';
import { RunInterrupted, runDue as runDueRecurringTickets, type DueRunStats } from '../flows/recurring-tickets.js';
import { SyncInterrupted, syncDue as syncDueStores, type StoreSyncStats } from '../flows/commerce-sync.js';
import { syncDue as syncDueMailboxes, syncWoken as syncWokenMailbox, type MailboxSyncDeps } from '../flows/mailbox-sync.js';
import type { EmailConnection } from '../domains/email-connections/model.js';
import { MailboxWatch } from './mailbox-watch.js';
import { hasAttemptsLeft, retryDelayMs } from './backoff.js';
import type { Attempt, OutboxHandler } from './handler.js';
import { webhookHandler, type WebhookDeliveryOptions } from './handlers/webhook.js';
import type { OutboxKind } from '../core/outbox/model.js';
import * as brandDomains from '../domains/brand-domains/service.js';
import * as outbox from '../core/outbox/service.js';
import { dispatcherMetricsPart, type DeliveryOutcome, type DispatcherMetrics } from './metrics.js';

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
  /** The most messages of one account delivered at once by this process; default config dispatcherAccountConcurrency. */
  accountConcurrency?: number;
  /** How long a claim holds unless renewed; renewed every third of it while the attempt runs. Default 30 s. */
  leaseMs?: number;
  /** Finished messages older than this many days are purged; default config outboxRetentionDays. */
  retentionDays?: number;
  webhooks?: WebhookDeliveryOptions;
  /** Handlers by kind, over the default ones (main.ts gives mail its handler with the configured transport). */
  handlers?: Partial<Record<OutboxKind, OutboxHandler>>;
  /** Names this process in lease_owner. */
  instanceId?: string;
  /** How long each mailbox sync of a round may start new messages (flows/mailbox-sync.ts); default 10 s. */
  mailboxRoundMs?: number;
  /**
   * Tests only: the id of a recurring ticket whose scheduled run this dispatcher holds between its
   * claim and its commit (its row locked, its ticket written, nothing committed) until it stops,
   * so a test can kill the process there (main.ts reads it from TICKETD_TEST_HOLD_RECURRING_RUN).
   */
  holdRecurringRun?: string;
  /**
   * Tests only: a store sync of this dispatcher holds in the transaction of the page that follows
   * this many pages it wrote (its rows written, nothing committed) until it stops, so a test can
   * kill the process there (main.ts reads it from TICKETD_TEST_HOLD_COMMERCE_PAGE).
   */
  holdCommercePage?: number;
  /** Tests only: tickets per automation transaction (flows/automations.ts), small so two dispatchers interleave. */
  automationBatchSize?: number;
  /** Tests only: rows per retention transaction (flows/retention.ts), small so a backlog takes several batches. */
  retentionBatchSize?: number;
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

export interface PeriodicStats {
  revokedKeys: number;
  purgedIdempotencyKeys: number;
  /** Inbound raw messages past rawMailRetentionDays, deleted. */
  purgedRawMails: number;
  abandonedAttachments: number;
  removedFiles: number;
  /** Leased messages of dispatchers that are gone, made due again. */
  reclaimed: number;
  /** Finished outbox messages past their retention, deleted. */
  purgedOutbox: number;
  /** Ticket count changes rolled up into ticket_counts (0 when another dispatcher was rolling up). */
  rolledUpCounts: number;
  /** Rule firing tallies moved into the rules' counts. */
  rolledUpFirings: number;
  /** Satisfaction rating requests due: mailed, or cancelled (the ticket was reopened meanwhile). */
  ratingRequests: { sent: number; cancelled: number };
  /** Tickets that passed their dueAt unresolved, announced (ticket.overdue). */
  overdueTickets: number;
  /** Subscriptions whose period ended: renewed, changed to the scheduled plan, or ended. */
  renewedSubscriptions: number;
  /** Inbound messages held over a plan's ticket allowance, received now that it has room. */
  receivedHeldMail: number;
  /** Verified mail domains checked again (a day after their last check), and those whose records went away. */
  domains: { checked: number; unverified: number };
  /** Recurring tickets due: their tickets opened, or their runs failed (recorded on them, moved on). */
  recurringTickets: DueRunStats;
  /** Automations (once a minute; skipped in the same minute): the tickets they fired on, or could not be applied to. */
  automations: AutomationStats;
  /** Tables that had grown without planner statistics, analyzed (core/first-statistics.ts). */
  analyzedTables: string[];
  /** What brands' retention policies removed (once a minute, or every tick while there is more to do). */
  retention: RetentionStats;
}

/** Connected IMAP mailboxes due a sync: read (synced) or not (failed), and the tickets their mail created. */
export interface MailboxStats {
  synced: number;
  failed: number;
  ticketsCreated: number;
}

/** The lease of a message this process has claimed and not yet settled or given back. */
interface Lease {
  /** When it runs out unless renewed (ms). */
  until: number;
  /** A renewal found the message taken over by another dispatcher. */
  lost: boolean;
}

const emptyStats = (): DeliveryStats => ({ claimed: 0, success: 0, retrying: 0, failed: 0, dead: 0, lost: 0, released: 0 });
type SettledStatus = 'success' | 'retrying' | 'failed' | 'dead';
/** The metrics' name of a settled status, and the run's stats of each outcome it counts. */
const OUTCOME_OF: Readonly<Record<SettledStatus, DeliveryOutcome>> = { success: 'delivered', retrying: 'retry', failed: 'failed', dead: 'dead' };
const STATS_OF: Readonly<Record<Exclude<DeliveryOutcome, 'unsettled'>, Exclude<keyof DeliveryStats, 'claimed'>>> = {
  delivered: 'success',
  retry: 'retrying',
  failed: 'failed',
  dead: 'dead',
  lost: 'lost',
  released: 'released',
};
const DAY_MS = 86_400_000;
/** Recurring runs at once, each a transaction holding a connection: at most 8, and two of the dispatcher's pool left to the rest. */
const recurringRunsAtOnce = (poolMax: number) => Math.max(1, Math.min(8, poolMax - 2));
/** A settle that failed (the database away for a moment) is tried again after these pauses, doubling. */
const SETTLE_RETRY_FIRST_MS = 50;
const SETTLE_RETRY_MAX_MS = 2_000;

/**
 * Slots never lent to an account past its share (outbox.claim): an eighth of them, at least one, so
 * a lone account uses nearly all of them and another account's first messages still start at once.
 */
export const lendingReserve = (concurrency: number) => Math.max(1, Math.floor(concurrency / 8));

/** What the claim reads for the handlers that ask (attachedToClaim), each for the claimed rows of its kind. */
function attachedToClaim(handlers: Partial<Record<OutboxKind, OutboxHandler>>): outbox.Attached {
  const asking = Object.entries(handlers).filter(([, h]) => h?.attachedToClaim) as [OutboxKind, Required<OutboxHandler>][];
  if (!asking.length) return () => null;
  return (picked, accountId) => {
    const parts = asking.map(([kind, h]) => h.attachedToClaim(picked, accountId, kind));
    return { sql: parts.map((p) => p.sql).join(' union all '), bindings: parts.flatMap((p) => p.bindings) };
  };
}

/**
 * The background worker: one node-cron task that never overlaps itself runs the periodic jobs and
 * delivers due outbox messages every few seconds; a LISTEN on the outbox channel starts delivery
 * as soon as a transaction that enqueued something commits.
 *
 * Delivery: claim due rows (leased, FOR UPDATE SKIP LOCKED: any number of dispatcher processes may
 * run), deliver each outside any transaction with bounded concurrency, and at most
 * accountConcurrency of one account at once while another account has messages due (so one
 * account's hanging receivers leave the other slots to other accounts; alone, it may borrow all
 * but lendingReserve of them), then settle each in one statement (a failure's bookkeeping in a short
 * transaction) that first checks the claim is still ours. Leases are short and renewed while their attempt runs. A process that dies is known
 * to be gone when its owner lock (a session advisory lock on its listener's connection) is free:
 * the others make its rows due at once (reclaimGone, at start-up and every tick); a lease that is
 * not renewed runs out anyway. A settle that fails is retried while the lease may still be ours,
 * so a database blip does not send a delivered message again. Delivery is at least once: a
 * receiver de-duplicates on webhook-id.
 */
export class Dispatcher {
  private task: ScheduledTask | null = null;
  private running: Promise<unknown> | null = null;
  private listener: Listener | null = null;
  private delivering: Promise<DeliveryStats> | null = null;
  private deliverAgain: Promise<DeliveryStats> | null = null;
  private mailboxRun: Promise<MailboxStats> | null = null;
  private storeRun: Promise<StoreSyncStats> | null = null;
  /** Syncs of watched mailboxes that reported new mail (IDLE), under way. */
  private readonly wokenRuns = new Set<Promise<void>>();
  private readonly mailboxWatch: MailboxWatch;
  /** Something changed since the run's last claim (a deliverDue call, a delivery that ended): it claims again. */
  private claimAgain = false;
  private wakeRun: (() => void) | null = null;
  /** Every claim this process holds, by claimed row (one object per claim). */
  private readonly held = new Map<outbox.Claimed, Lease>();
  private renewing: Promise<number> | null = null;
  private stopping = false;
  private readonly interrupt = new AbortController();
  private readonly ctx: BaseCtx;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly concurrency: number;
  private readonly accountConcurrency: number;
  private readonly leaseMs: number;
  private readonly retentionDays: number;
  private readonly mailboxRoundMs: number | undefined;
  private readonly handlers: Partial<Record<OutboxKind, OutboxHandler>>;
  private readonly attachedToClaim: outbox.Attached;
  private readonly metrics: DispatcherMetrics;
  private readonly holdRecurringRun: string | undefined;
  private readonly holdCommercePage: number | undefined;
  private readonly automationBatchSize: number | undefined;
  /** The minute (of the clock) the last automation sweep began in: one sweep a minute. */
  private automationsMinute: number | null = null;
  private readonly retentionBatchSize: number | undefined;
  /** The minute the last retention run began in, and whether it left work for the next. */
  private retentionMinute: number | null = null;
  private retentionMore = false;
  readonly instanceId: string;

  /** attachmentDeps: without them (tests of other jobs) the attachment cleanup is skipped. */
  constructor(
    private readonly services: Services,
    private readonly log: DispatcherLog,
    private readonly attachmentDeps: attachments.AttachmentDeps | null = null,
    options: OutboxOptions = {},
  ) {
    this.ctx = systemCtx(services, 'dispatcher');
    this.now = options.now ?? services.now;
    this.random = options.random ?? Math.random;
    this.concurrency = options.concurrency ?? 16;
    this.accountConcurrency = options.accountConcurrency ?? services.config.dispatcherAccountConcurrency;
    // Short, so a process that stalls or vanishes unnoticed holds its messages briefly; an attempt
    // that takes longer (an SMTP send may take minutes, see integrations/mail.ts) keeps it renewed.
    this.leaseMs = options.leaseMs ?? 30_000;
    this.retentionDays = options.retentionDays ?? services.config.outboxRetentionDays;
    this.mailboxRoundMs = options.mailboxRoundMs;
    this.holdRecurringRun = options.holdRecurringRun;
    this.holdCommercePage = options.holdCommercePage;
    this.automationBatchSize = options.automationBatchSize;
    this.retentionBatchSize = options.retentionBatchSize;
    this.handlers = { webhook: webhookHandler(options.webhooks ?? { allowPrivate: false, timeoutMs: 10_000 }), ...options.handlers };
    this.attachedToClaim = attachedToClaim(this.handlers);
    this.instanceId = options.instanceId ?? `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.metrics = services.get(dispatcherMetricsPart);
    this.metrics.concurrency.set(this.concurrency);
    this.mailboxWatch = new MailboxWatch({
      max: services.config.mailboxIdleSessions,
      // Under the 30 minutes after which RFC 2177 lets a server end an IDLE session.
      maxMs: 25 * 60_000,
      onNewMail: (row) => this.takeInWoken(row),
      onSize: (size) => this.metrics.watchedMailboxes.set(size),
    });
  }

  /** Started and not stopping: what readiness wants, with the LISTEN connection up. */
  isRunning(): boolean {
    return this.task !== null && !this.stopping;
  }

  /** Its LISTEN connection is up (and holds its owner lock): it hears commits and may claim. */
  isListening(): boolean {
    return this.listener?.live ?? false;
  }

  /** One pass over every job, mailboxes and deliveries included; tests call it directly instead of waiting for the clock. */
  async tick(): Promise<PeriodicStats & { mailboxes: MailboxStats; stores: StoreSyncStats; delivery: DeliveryStats }> {
    const jobs = await this.periodicJobs();
    return { ...jobs, mailboxes: await this.syncMailboxes(), stores: await this.syncStores(), delivery: await this.deliverDue() };
  }

  /**
   * Syncs the connected stores due now (flows/commerce-sync.ts), beside the periodic jobs: a
   * store's first sync may read thousands of orders, and nothing else waits for it. Called while
   * a run is under way, it returns that run.
   */
  syncStores(): Promise<StoreSyncStats> {
    this.storeRun ??= this.job(
      'sync_commerce_stores',
      () => this.syncDueStores(),
      (s) => s.synced + s.failed,
    ).finally(() => {
      this.storeRun = null;
    });
    return this.storeRun;
  }

  private async syncDueStores(): Promise<StoreSyncStats> {
    const hold = this.holdCommercePage;
    const stats = await syncDueStores(this.ctx, {
      now: () => this.now(),
      stopping: () => this.stopping,
      beforeCommit:
        hold !== undefined
          ? async (store, pagesBefore) => {
              if (pagesBefore !== hold) return;
              this.log.info({ storeId: store.id, pagesBefore }, 'test hook: holding a commerce sync page before its commit');
              await new Promise((resolve) => this.interrupt.signal.addEventListener('abort', resolve, { once: true }));
              throw new SyncInterrupted('the dispatcher stopped');
            }
          : undefined,
    });
    if (stats.synced || stats.failed) this.log.info(stats, 'connected stores synced, or their failures recorded');
    return stats;
  }

  /** Every periodic job once, in order; a job that fails ends the run (the next tick runs them all again). */
  private async periodicJobs(): Promise<PeriodicStats> {
    const endTick = this.metrics.tickDuration.startTimer();
    try {
      const stats = await this.runJobs();
      this.metrics.ticks.inc({ outcome: 'ok' });
      return stats;
    } catch (err) {
      this.metrics.ticks.inc({ outcome: 'error' });
      throw err;
    } finally {
      endTick();
    }
  }

  /** Runs one job, counted and timed under its name; `items` says how much work its result stands for. */
  private async job<T>(name: string, run: () => Promise<T>, items: (result: T) => number = Number): Promise<T> {
    const end = this.metrics.jobDuration.startTimer({ job: name });
    try {
      const result = await run();
      this.metrics.jobRuns.inc({ job: name, outcome: 'ok' });
      this.metrics.jobItems.inc({ job: name }, items(result));
      return result;
    } catch (err) {
      this.metrics.jobRuns.inc({ job: name, outcome: 'error' });
      throw err;
    } finally {
      end();
    }
  }

  private async runJobs(): Promise<PeriodicStats> {
    const ctx = this.ctx;
    // First: the other jobs' statements, and every request's, are planned with these statistics.
    const analyzedTables = await this.job(
      'analyze_new_tables',
      () => analyzeNewTables(ctx),
      (t) => t.length,
    );
    if (analyzedTables.length) this.log.info({ analyzedTables }, 'analyzed tables that had grown without planner statistics');
    const revokedKeys = await this.job('revoke_api_keys', () => apiKeys.revokeExpired(ctx));
    if (revokedKeys) this.log.info({ revokedKeys }, 'revoked API keys whose grace period ended');
    const purgedIdempotencyKeys = await this.job('purge_idempotency_keys', () => purgeExpiredIdempotencyKeys(ctx));
    if (purgedIdempotencyKeys) this.log.info({ purgedIdempotencyKeys }, 'purged expired idempotency keys');
    // Before the attachment purge, which removes the files of the rows this one deletes.
    const purgedRawMails = await this.job('purge_raw_mails', () => rawMails.purgeExpired(ctx, ctx.services.config.rawMailRetentionDays, this.now()));
    if (purgedRawMails) this.log.info({ purgedRawMails }, 'deleted inbound raw messages past their retention');
    const purgedSignupCheckouts = await this.job('purge_signup_checkouts', () => signupCheckouts.purgeExpired(ctx, this.now()));
    if (purgedSignupCheckouts) this.log.info({ purgedSignupCheckouts }, 'deleted paid sign-up checkouts expired 30 days ago');
    // Before the attachment purge, which removes the files of what it deletes.
    const retention = await this.job(
      'apply_retention',
      () => this.applyRetention(),
      (r) => r.ticketsDeleted + r.ticketsAnonymized + r.attachmentsDeleted + r.rawMailsDeleted,
    );
    if (retention.ticketsDeleted || retention.ticketsAnonymized || retention.attachmentsDeleted || retention.rawMailsDeleted) {
      this.log.info(retention, "brands' retention applied: tickets deleted or anonymized, attachments and raw mail removed");
    }
    const deps = this.attachmentDeps;
    const purged = deps
      ? await this.job(
          'purge_attachments',
          () => attachments.purgeAbandoned(ctx, deps),
          (p) => p.abandoned,
        )
      : { abandoned: 0, files: 0 };
    if (purged.abandoned) this.log.info({ abandonedAttachments: purged.abandoned }, 'removed attachments never linked to a ticket or never uploaded');
    const reclaimed = await this.job('reclaim_outbox', () => this.reclaimGone());
    // One batch a tick: a large first purge is spread over ticks instead of holding one up.
    const purgedOutbox = await this.job('purge_outbox', () => outbox.purge(ctx, new Date(this.now() - this.retentionDays * DAY_MS), 1));
    if (purgedOutbox) this.log.info({ purgedOutbox, retentionDays: this.retentionDays }, 'purged finished outbox messages past their retention');
    // Readers also sum the changes not rolled up yet: rolling up keeps their reads short; the counts are exact either way.
    const rolledUpCounts = await this.job('roll_up_ticket_counts', () => ticketCounts.rollUp(ctx));
    // The same for the rules' firing counts.
    const rolledUpFirings = await this.job('roll_up_rule_firings', () => ruleTallies.rollUp(ctx));
    const ratingRequests = await this.job(
      'rating_requests',
      () => sendDueRatingRequests(ctx, new Date(this.now())),
      (r) => r.sent + r.cancelled,
    );
    if (ratingRequests.sent || ratingRequests.cancelled) this.log.info(ratingRequests, 'satisfaction rating requests due: mailed or cancelled');
    const overdueTickets = await this.job('announce_overdue_tickets', () => announceOverdue(ctx, new Date(this.now())));
    if (overdueTickets) this.log.info({ overdueTickets }, 'tickets past their dueAt announced');
    const renewedSubscriptions = await this.job('renew_subscriptions', () => renewDueSubscriptions(ctx, new Date(this.now())));
    if (renewedSubscriptions) this.log.info({ renewedSubscriptions }, 'subscriptions whose period ended: renewed or ended');
    // After renewals: a new period has room for the mail held over the last one's allowance.
    const receivedHeldMail = deps ? await this.job('receive_held_mail', () => receiveHeldMail(ctx, { attachments: deps })) : 0;
    if (receivedHeldMail) this.log.info({ receivedHeldMail }, 'inbound mail held over a plan allowance received now there is room');
    // Few a tick: a DNS server that does not answer costs seconds a domain, and the other jobs wait.
    const domains = await this.job(
      'recheck_domains',
      () => brandDomains.recheckDue(ctx, 5),
      (r) => r.checked,
    );
    if (domains.unverified) this.log.info(domains, 'mail domains whose DNS records went away are no longer used');
    const recurringTickets = await this.job(
      'run_recurring_tickets',
      () => this.runDueRecurringTickets(),
      (r) => r.created + r.failed,
    );
    if (recurringTickets.created || recurringTickets.failed) this.log.info(recurringTickets, 'recurring tickets due: tickets opened, or failures recorded');
    const automations = await this.job(
      'run_automations',
      () => this.runAutomationsOncePerMinute(),
      (a) => a.fired + a.failed,
    );
    if (automations.fired || automations.failed) this.log.info(automations, 'automations fired on tickets, or could not be applied');
    return {
      revokedKeys,
      purgedIdempotencyKeys,
      purgedRawMails,
      abandonedAttachments: purged.abandoned,
      removedFiles: purged.files,
      reclaimed,
      purgedOutbox,
      rolledUpCounts,
      rolledUpFirings,
      ratingRequests,
      overdueTickets,
      renewedSubscriptions,
      receivedHeldMail,
      domains,
      recurringTickets,
      automations,
      analyzedTables,
      retention,
    };
  }

  /**
   * Every brand's retention (flows/retention.ts), at the first tick of each minute, or at every
   * tick while the last run left more than its batches took: policies count in days.
   */
  private async applyRetention(): Promise<RetentionStats> {
    const minute = Math.floor(this.now() / 60_000);
    if (minute === this.retentionMinute && !this.retentionMore) return { ticketsDeleted: 0, ticketsAnonymized: 0, attachmentsDeleted: 0, rawMailsDeleted: 0 };
    this.retentionMinute = minute;
    const { more, ...stats } = await applyRetention(this.ctx, { now: () => this.now(), stopping: () => this.stopping, batchSize: this.retentionBatchSize });
    this.retentionMore = more;
    const counted = this.metrics.retention;
    counted.inc({ kind: 'tickets_deleted' }, stats.ticketsDeleted);
    counted.inc({ kind: 'tickets_anonymized' }, stats.ticketsAnonymized);
    counted.inc({ kind: 'attachments_deleted' }, stats.attachmentsDeleted);
    counted.inc({ kind: 'raw_mails_deleted' }, stats.rawMailsDeleted);
    return stats;
  }

  /**
   * Every enabled automation of every brand (flows/automations.ts), at the first tick of each
   * minute: the ticks come every few seconds, and a duration counted in hours gains nothing from
   * more sweeps. Another dispatcher sweeping the same minute finds the tickets fired on or locked.
   */
  private async runAutomationsOncePerMinute(): Promise<AutomationStats> {
    const minute = Math.floor(this.now() / 60_000);
    if (minute === this.automationsMinute) return { fired: 0, failed: 0 };
    this.automationsMinute = minute;
    return runAutomations(this.ctx, {
      now: () => this.now(),
      stopping: () => this.stopping,
      batchSize: this.automationBatchSize,
      onFailure: (failure) => this.log.error(failure, 'an automation could not be applied to a ticket: left until the ticket changes'),
    });
  }

  /** Every recurring ticket due now, a few at once, until none is left (or the rest are another dispatcher's right now). */
  private runDueRecurringTickets(): Promise<DueRunStats> {
    const hold = this.holdRecurringRun;
    return runDueRecurringTickets(this.ctx, {
      now: () => this.now(),
      concurrency: recurringRunsAtOnce(poolMaxOf(this.ctx.db)),
      stopping: () => this.stopping,
      beforeCommit: hold
        ? async (row) => {
            if (row.id !== hold) return;
            this.log.info({ recurringTicketId: row.id }, 'test hook: holding a recurring run between its claim and its commit');
            await new Promise((resolve) => this.interrupt.signal.addEventListener('abort', resolve, { once: true }));
            throw new RunInterrupted('the dispatcher stopped');
          }
        : undefined,
    });
  }

  /**
   * Takes in the connected mailboxes due now (flows/mailbox-sync.ts: a few at once, each for a
   * bounded time), and again at once while a sync stopped with mail still waiting, so a large
   * mailbox is read without pause and the periodic jobs never wait for it. Called while a run is
   * under way, it returns that run.
   */
  syncMailboxes(): Promise<MailboxStats> {
    this.mailboxRun ??= this.syncMailboxesUntilDone().finally(() => {
      this.mailboxRun = null;
    });
    return this.mailboxRun;
  }

  private mailboxDeps(): MailboxSyncDeps | null {
    return this.attachmentDeps && { inbound: { attachments: this.attachmentDeps } };
  }

  private mailboxOptions() {
    return { stopping: () => this.stopping, roundMs: this.mailboxRoundMs, watcher: this.mailboxWatch };
  }

  private async syncMailboxesUntilDone(): Promise<MailboxStats> {
    const total: MailboxStats = { synced: 0, failed: 0, ticketsCreated: 0 };
    const deps = this.mailboxDeps();
    if (!deps) return total;
    for (let again = true; again && !this.stopping; ) {
      const round = await this.job(
        'sync_mailboxes',
        () => syncDueMailboxes(this.ctx, deps, this.mailboxOptions()),
        (m) => m.synced + m.failed,
      );
      total.synced += round.synced;
      total.failed += round.failed;
      total.ticketsCreated += round.ticketsCreated;
      again = round.unfinished > 0;
    }
    if (total.ticketsCreated || total.failed) this.log.info(total, 'connected mailboxes taken in');
    return total;
  }

  /** A watched mailbox has new mail: taken in now, round after round while mail is still waiting. */
  private takeInWoken(row: EmailConnection): void {
    const deps = this.mailboxDeps();
    if (!deps || this.stopping) return;
    const run = (async () => {
      for (let again = true; again && !this.stopping; ) {
        const woken = await this.job(
          'sync_woken_mailbox',
          () => syncWokenMailbox(this.ctx, deps, row, this.mailboxOptions()),
          (m) => Number(m.synced),
        );
        if (woken.ticketsCreated) this.log.info({ connectionId: row.id, ticketsCreated: woken.ticketsCreated }, 'new mail of a watched mailbox taken in');
        again = woken.unfinished;
      }
    })()
      .catch((err: unknown) => this.log.error({ err, connectionId: row.id }, 'a watched mailbox could not be synced: the next poll takes it up'))
      .finally(() => this.wokenRuns.delete(run));
    this.wokenRuns.add(run);
  }

  private async reclaimGone(): Promise<number> {
    const reclaimed = await outbox.reclaimGone(this.ctx, this.instanceId, new Date(this.now()));
    if (reclaimed) this.log.info({ reclaimed }, 'outbox messages of dispatchers that are gone are due again');
    return reclaimed;
  }

  /**
   * Delivers every message due now, until none is left. Called while a run is under way, it makes
   * that run claim again at once, and resolves after one more run that starts when the current one
   * ends (so a wake-up is never lost and runs in one process never overlap).
   */
  deliverDue(): Promise<DeliveryStats> {
    if (!this.delivering) {
      this.delivering = this.deliverAll().finally(() => {
        this.delivering = null;
      });
      return this.delivering;
    }
    this.nudge();
    this.deliverAgain ??= this.delivering
      .catch(() => undefined)
      .then(() => {
        this.deliverAgain = null;
        return this.deliverDue();
      });
    return this.deliverAgain;
  }

  /** Tells the run under way to claim again (a slot freed, or something new may be due). */
  private nudge(): void {
    this.claimAgain = true;
    this.wakeRun?.();
  }

  /**
   * Claims as many messages as there are free slots and starts each; when nothing more can be
   * claimed, waits until a delivery ends or deliverDue is called, and claims again; ends when
   * nothing is due and nothing is in flight.
   */
  private async deliverAll(): Promise<DeliveryStats> {
    const stats = emptyStats();
    const inFlight = new Set<Promise<void>>();
    const renewal = setInterval(() => {
      this.renewLeases().catch((err) => this.log.error({ err }, 'could not renew outbox leases'));
    }, this.leaseMs / 3);
    renewal.unref();
    try {
      while (!this.stopping) {
        this.claimAgain = false;
        const free = this.concurrency - inFlight.size;
        const rows = free > 0 ? await this.claim(free) : [];
        stats.claimed += rows.length;
        for (const row of rows) {
          const delivery: Promise<void> = this.deliverOne(row, stats).finally(() => {
            inFlight.delete(delivery);
            this.nudge();
          });
          inFlight.add(delivery);
        }
        // A delivery that ended while the claim ran freed its account's share after the claim read it.
        if (rows.length || this.claimAgain) continue;
        if (!inFlight.size) break;
        await new Promise<void>((resolve) => {
          this.wakeRun = resolve;
        });
        this.wakeRun = null;
      }
    } finally {
      // A run never ends with deliveries in flight (a claim that failed included).
      await Promise.all(inFlight);
      clearInterval(renewal);
    }
    return stats;
  }

  /**
   * Up to `limit` due messages, within each account's share. A started dispatcher claims only while
   * its listener holds its owner lock: without it the others would take its claims for a dead
   * process's. (One driven by hand, in tests, holds none.)
   */
  private async claim(limit: number): Promise<outbox.Claimed[]> {
    if (this.listener && !this.listener.live) return [];
    const held = new Map<string, number>();
    for (const row of this.held.keys()) held.set(row.accountId, (held.get(row.accountId) ?? 0) + 1);
    const now = this.now();
    const leaseUntil = now + this.leaseMs;
    const share = { perAccount: this.accountConcurrency, held, reserve: lendingReserve(this.concurrency) };
    const rows = await outbox.claim(this.ctx, this.instanceId, new Date(now), new Date(leaseUntil), limit, share, this.attachedToClaim);
    for (const row of rows) this.held.set(row, { until: leaseUntil, lost: false });
    if (rows.length) this.metrics.claimBatch.observe(rows.length);
    this.metrics.inFlight.inc(rows.length);
    return rows;
  }

  /**
   * Extends the lease of every message this process holds; the delivery loop calls it every third
   * of the lease (tests call it directly). A message another dispatcher took over is marked lost
   * and no longer renewed. Returns how many were renewed.
   */
  renewLeases(): Promise<number> {
    this.renewing ??= this.renew().finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  private async renew(): Promise<number> {
    const holding = [...this.held].filter(([, lease]) => !lease.lost);
    if (!holding.length) return 0;
    const until = this.now() + this.leaseMs;
    const renewed = await outbox.renew(
      this.ctx,
      holding.map(([row]) => row),
      new Date(until),
    );
    for (const [row, lease] of holding) {
      if (renewed.has(row.id)) lease.until = until;
      else lease.lost = true;
    }
    return renewed.size;
  }

  private async deliverOne(row: outbox.Claimed, stats: DeliveryStats): Promise<void> {
    let outcome: DeliveryOutcome = 'unsettled';
    let seconds: number | null = null;
    try {
      const handler = this.handlers[row.kind];
      const started = performance.now();
      let attempt: Attempt;
      if (!handler) attempt = { outcome: 'retry', error: `this dispatcher has no handler for ${row.kind} messages`, responseCode: null, responseBody: null, notSent: true };
      else {
        try {
          attempt = await handler.deliver(this.ctx, row, this.interrupt.signal, new Date(this.now()));
        } catch (err) {
          attempt = { outcome: 'retry', error: `delivery failed: ${(err as Error).message}`, responseCode: null, responseBody: null };
        }
      }
      // The attempt's own time: a settle retried while the database is away is not the receiver's.
      seconds = (performance.now() - started) / 1000;
      if (attempt.outcome === 'interrupted') {
        // Not given back (the database is away): its lease runs out and it is due again.
        if (await outbox.release(this.ctx, row, new Date(this.now())).catch(() => false)) outcome = 'released';
      } else outcome = await this.settle(row, handler, attempt);
    } finally {
      this.held.delete(row);
      this.metrics.inFlight.dec();
      this.metrics.deliveries.inc({ kind: row.kind, outcome });
      if (seconds !== null) this.metrics.deliveryDuration.observe({ kind: row.kind, outcome }, seconds);
      if (outcome !== 'unsettled') stats[STATS_OF[outcome]]++;
    }
  }

  /**
   * Records the attempt; a settle that fails is tried again, with growing pauses, while the lease
   * may still be ours (kept renewed meanwhile), so a delivered message is not sent again because
   * the database was away for a moment. Past that, another dispatcher may have claimed it: the
   * message is delivered again (at least once).
   */
  private async settle(row: outbox.Claimed, handler: OutboxHandler | undefined, attempt: Exclude<Attempt, { outcome: 'interrupted' }>): Promise<DeliveryOutcome> {
    const settlement = this.settlementOf(row, attempt);
    const part = handler?.settledPart?.(this.ctx, row, attempt, settlement, outbox.SETTLED);
    const inTransaction = part === undefined && handler?.settled !== undefined;
    for (let pause = SETTLE_RETRY_FIRST_MS; ; pause = Math.min(2 * pause, SETTLE_RETRY_MAX_MS)) {
      try {
        const settled = inTransaction
          ? await withTx(this.ctx, async (tx) => {
              if (!(await outbox.settle(tx, row, settlement))) return false;
              await handler!.settled!(tx, row, attempt, settlement);
              return true;
            })
          : await outbox.settle(this.ctx, row, settlement, part ? [part] : []);
        return settled ? OUTCOME_OF[settlement.status as SettledStatus] : 'lost';
      } catch (err) {
        const lease = this.held.get(row);
        if (!lease || lease.lost || this.now() + pause >= lease.until || this.interrupt.signal.aborted) {
          this.log.error({ err, outboxId: row.id }, 'could not settle an outbox message: it is delivered again once its lease runs out');
          return 'unsettled';
        }
        this.log.info({ outboxId: row.id, error: (err as Error).message, retryInMs: pause }, 'could not settle an outbox message yet: trying again');
        await sleep(pause, undefined, { signal: this.interrupt.signal }).catch(() => undefined);
      }
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
        if (!this.stopping) this.syncMailboxes().catch((err) => this.log.error({ err }, 'mailbox sync failed'));
        if (!this.stopping) this.syncStores().catch((err) => this.log.error({ err }, 'store sync failed'));
      },
      { name: 'ticketd-dispatcher', noOverlap: true },
    );
    // Mail waiting in connected mailboxes is taken in at once, not at the first tick (up to 5 s on).
    this.syncMailboxes().catch((err) => this.log.error({ err }, 'mailbox sync failed'));
    this.syncStores().catch((err) => this.log.error({ err }, 'store sync failed'));
    // The listening connection also holds this process's owner lock, for as long as it lives.
    this.listener = Listener.forServices(this.services, [outbox.OUTBOX_CHANNEL], [outbox.ownerLock(this.instanceId)]).start();
    this.listener.on('notification', wake);
    // 'up' also after a reconnect: notifications sent while the connection was down are lost. At
    // start-up, the messages of a dispatcher that died are due at once rather than after its lease.
    this.metrics.listenerUp.set(0);
    this.listener.on('down', () => this.metrics.listenerUp.set(0));
    this.listener.on('up', () => {
      this.metrics.listenerUp.set(1);
      if (this.stopping) return;
      this.reclaimGone()
        .catch((err) => this.log.error({ err }, 'could not reclaim the outbox messages of dispatchers that are gone'))
        .finally(wake);
    });
  }

  /**
   * Stops claiming, waits up to drainMs for deliveries in flight, then interrupts the rest (their
   * messages are given back, due at once for any dispatcher), and waits for a tick in progress.
   */
  async stop(drainMs = 5_000): Promise<void> {
    this.stopping = true;
    this.wakeRun?.();
    await this.task?.stop();
    await this.task?.destroy();
    this.task = null;
    const cutOff = setTimeout(() => this.interrupt.abort(), drainMs);
    try {
      await Promise.all([this.delivering, this.deliverAgain, this.running, this.mailboxRun, this.storeRun, ...this.wokenRuns].map((p) => p?.catch(() => undefined)));
      await this.mailboxWatch.close();
    } finally {
      clearTimeout(cutOff);
      // Closed last: its connection holds the owner lock, and the messages still held are ours until settled.
      await this.listener?.close();
      this.listener = null;
      this.metrics.listenerUp.set(0);
      for (const handler of Object.values(this.handlers)) await handler.close?.();
    }
  }
}
