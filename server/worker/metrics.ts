import { Counter, Gauge, Histogram } from 'prom-client';
import { metricsPart } from '../core/metrics.js';
import { OUTBOX_KINDS } from '../core/outbox/model.js';
import { part } from '../core/services.js';

/**
 * What became of a claimed message: settled as delivered, retry (scheduled again), failed (for
 * good) or dead (out of attempts); lost (another dispatcher had taken it over); released (given back
 * at shutdown); unsettled (its settle could not be recorded: delivered again once its lease runs out).
 */
export const DELIVERY_OUTCOMES = ['delivered', 'retry', 'failed', 'dead', 'lost', 'released', 'unsettled'] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** What brand retention removed (flows/retention.ts), by kind. */
export const RETENTION_KINDS = ['tickets_deleted', 'tickets_anonymized', 'attachments_deleted', 'raw_mails_deleted'] as const;
export type RetentionKind = (typeof RETENTION_KINDS)[number];

/** A webhook answers in milliseconds up to its timeout (10 s by default); an SMTP send may take minutes. */
const DELIVERY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
/** The periodic jobs are a statement or a few each. */
const JOB_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

export interface DispatcherMetrics {
  readonly deliveries: Counter<'kind' | 'outcome'>;
  readonly deliveryDuration: Histogram<'kind' | 'outcome'>;
  readonly inFlight: Gauge;
  readonly concurrency: Gauge;
  readonly claimBatch: Histogram;
  readonly ticks: Counter<'outcome'>;
  readonly tickDuration: Histogram;
  readonly jobRuns: Counter<'job' | 'outcome'>;
  readonly jobDuration: Histogram<'job'>;
  readonly jobItems: Counter<'job'>;
  readonly listenerUp: Gauge;
  readonly watchedMailboxes: Gauge;
  readonly retention: Counter<'kind'>;
}

/**
 * The dispatcher's own figures, in the process's one registry (core/metrics.ts): the API's /metrics
 * shows them too when both run in one process. Made only where a dispatcher runs, so an API-only
 * process shows none.
 */
export const dispatcherMetricsPart = part('dispatcher-metrics', (services): DispatcherMetrics => {
  const registers = [services.get(metricsPart).registry];
  const deliveries = new Counter({
    name: 'ticketd_dispatcher_deliveries_total',
    help: 'Outbox messages this process attempted, by kind and what became of them (delivered, retry, failed, dead, lost, released, unsettled)',
    labelNames: ['kind', 'outcome'] as const,
    registers,
  });
  // Every series from the start, so rate() and increase() see the first one.
  for (const kind of OUTBOX_KINDS) for (const outcome of DELIVERY_OUTCOMES) deliveries.inc({ kind, outcome }, 0);
  const retention = new Counter({
    name: 'ticketd_dispatcher_retention_total',
    help: "What brands' retention policies removed, by kind (tickets_deleted, tickets_anonymized, attachments_deleted, raw_mails_deleted)",
    labelNames: ['kind'] as const,
    registers,
  });
  for (const kind of RETENTION_KINDS) retention.inc({ kind }, 0);
  return {
    deliveries,
    deliveryDuration: new Histogram({
      name: 'ticketd_dispatcher_delivery_duration_seconds',
      help: 'Time of one delivery attempt (the request or the send), by kind and outcome',
      labelNames: ['kind', 'outcome'] as const,
      buckets: DELIVERY_BUCKETS,
      registers,
    }),
    inFlight: new Gauge({ name: 'ticketd_dispatcher_deliveries_in_flight', help: 'Messages this process holds now: claimed and not yet settled', registers }),
    concurrency: new Gauge({ name: 'ticketd_dispatcher_concurrency', help: 'Most messages this process delivers at once (dispatcherConcurrency)', registers }),
    claimBatch: new Histogram({ name: 'ticketd_dispatcher_claim_batch_size', help: 'Messages taken by each claim that found any', buckets: BATCH_BUCKETS, registers }),
    ticks: new Counter({
      name: 'ticketd_dispatcher_ticks_total',
      help: 'Runs of the periodic jobs (every 5 s), by outcome (ok, error)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    tickDuration: new Histogram({ name: 'ticketd_dispatcher_tick_duration_seconds', help: 'Time of one run of every periodic job', buckets: JOB_BUCKETS, registers }),
    jobRuns: new Counter({
      name: 'ticketd_dispatcher_job_runs_total',
      help: 'Runs of each periodic job, by outcome (ok, error)',
      labelNames: ['job', 'outcome'] as const,
      registers,
    }),
    jobDuration: new Histogram({
      name: 'ticketd_dispatcher_job_duration_seconds',
      help: 'Time of one run of a periodic job',
      labelNames: ['job'] as const,
      buckets: JOB_BUCKETS,
      registers,
    }),
    jobItems: new Counter({
      name: 'ticketd_dispatcher_job_items_total',
      help: 'What each periodic job handled: keys revoked, rows purged, messages reclaimed, counts rolled up, rating requests, subscriptions renewed, held mail received',
      labelNames: ['job'] as const,
      registers,
    }),
    listenerUp: new Gauge({ name: 'ticketd_dispatcher_listener_up', help: "1 while the dispatcher's LISTEN connection (which holds its owner lock) is up", registers }),
    watchedMailboxes: new Gauge({ name: 'ticketd_dispatcher_watched_mailboxes', help: 'Mailboxes this process holds open in IMAP IDLE, waiting for new mail', registers }),
    retention,
  };
});
