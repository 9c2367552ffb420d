import type { FastifyInstance } from 'fastify';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { OUTBOX_STATUSES, type OutboxStatus } from './outbox/model.js';
import type { Db } from './db.js';
import { part, type Services } from './services.js';

/** The label of requests no route matched (one series, whatever the URL). */
export const UNMATCHED_ROUTE = '(unmatched)';

/** Most API requests take a few milliseconds: the buckets start at 1 ms. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface Metrics {
  readonly registry: Registry;
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly latency: Histogram<'method' | 'route' | 'status'>;
  readonly outboxMessages: Gauge<'status'>;
  readonly outboxLastHour: Gauge<'status'>;
  readonly outboxBacklog: Gauge;
  readonly outboxOldestPendingAge: Gauge;
  readonly outboxOldestDueAge: Gauge;
  readonly databaseUp: Gauge;
  readonly poolConnections: Gauge<'pool' | 'state'>;
  readonly poolPendingAcquires: Gauge<'pool'>;
  readonly poolPendingCreates: Gauge<'pool'>;
  readonly poolMax: Gauge<'pool'>;
  /** The figures of this process's dispatcher thread (`--role all`), when it has one: see showDispatcherThread. */
  dispatcherThread: (() => Promise<Figures>) | null;
}

/** A registry's metrics as plain data, as a thread sends them. */
export type Figures = MetricObjectWithValues<MetricValue<string>>[];

function makeMetrics(): Metrics {
  // prom-client's default registry is module state: every Services gets its own.
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });
  const gauge = <L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) => new Gauge<L>({ name, help, labelNames, registers });
  const labelNames = ['method', 'route', 'status'] as const;
  return {
    registry,
    requests: new Counter({ name: 'ticketd_http_requests_total', help: 'HTTP requests answered, by method, route pattern and status', labelNames, registers }),
    latency: new Histogram({
      name: 'ticketd_http_request_duration_seconds',
      help: 'Time from request to response, by method, route pattern and status',
      labelNames,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    outboxMessages: gauge(
      'ticketd_outbox_messages',
      'Outbox messages (webhook deliveries and mail) waiting or given up on, by status (pending, retrying, failed, dead), until purged',
      ['status'],
    ),
    outboxLastHour: gauge('ticketd_outbox_messages_last_hour', 'Outbox messages created in the last hour, by their status now: the outcome of recent deliveries', ['status']),
    outboxBacklog: gauge('ticketd_outbox_backlog', 'Outbox messages still to deliver (pending and retrying)'),
    outboxOldestPendingAge: gauge('ticketd_outbox_oldest_pending_age_seconds', 'Age of the oldest message still to deliver; 0 when there is none'),
    outboxOldestDueAge: gauge(
      'ticketd_outbox_oldest_due_age_seconds',
      'How long the message due the longest (new, or its retry time reached) has waited for a dispatcher: the delivery lag; 0 when none is due',
    ),
    databaseUp: gauge(
      'ticketd_database_up',
      '1 when the database answered this scrape; 0 when it did not, and the outbox figures are those of the last scrape that could read them',
    ),
    poolConnections: gauge('ticketd_db_pool_connections', 'Database connections of this process, by pool (main, dispatcher) and state (used, free)', ['pool', 'state']),
    poolPendingAcquires: gauge('ticketd_db_pool_pending_acquires', 'Queries waiting for a free database connection, by pool', ['pool']),
    poolPendingCreates: gauge('ticketd_db_pool_pending_creates', 'Database connections being opened, by pool', ['pool']),
    poolMax: gauge('ticketd_db_pool_max', 'Most database connections a pool of this process opens, by pool', ['pool']),
    dispatcherThread: null,
  };
}

/** This process's metrics: one registry per Services. */
export const metricsPart = part('metrics', makeMetrics, (metrics) => metrics.registry.clear());

/** Counts and times every answered request, labelled by route pattern (never the raw URL: ids would make a series each). */
export function installRequestMetrics(app: FastifyInstance, services: Services): void {
  app.addHook('onResponse', async (req, reply) => {
    const { requests, latency } = services.get(metricsPart);
    const labels = { method: req.method, route: req.routeOptions.url ?? UNMATCHED_ROUTE, status: String(reply.statusCode) };
    requests.inc(labels);
    latency.observe(labels, reply.elapsedTime / 1000);
  });
}

interface TarnPool {
  max: number;
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
  numPendingCreates(): number;
}

/**
 * Makes this process's scrape show its dispatcher thread's figures (`--role all`): the thread's
 * own counters, its pool (labelled `dispatcher`) and the outbox figures, which it reads on its own
 * connections, so a scrape answers while requests hold every connection of the API.
 */
export function showDispatcherThread(services: Services, figures: () => Promise<Figures>): void {
  services.get(metricsPart).dispatcherThread = figures;
}

/** The families a dispatcher thread reports for its process; the pools' come from both sides, each its own label. */
const fromDispatcherThread = (name: string) => /^ticketd_(dispatcher_|outbox_|database_up$)/.test(name);
const isPoolFamily = (name: string) => name.startsWith('ticketd_db_pool_');

function readPool(metrics: Metrics, name: string, db: Db): void {
  const pool = (db.client as { pool?: TarnPool }).pool;
  if (!pool) return; // destroyed
  metrics.poolMax.set({ pool: name }, pool.max);
  metrics.poolConnections.set({ pool: name, state: 'used' }, pool.numUsed());
  metrics.poolConnections.set({ pool: name, state: 'free' }, pool.numFree());
  metrics.poolPendingAcquires.set({ pool: name }, pool.numPendingAcquires());
  metrics.poolPendingCreates.set({ pool: name }, pool.numPendingCreates());
}

const UNFINISHED: readonly OutboxStatus[] = ['pending', 'retrying', 'failed', 'dead'];
const HOUR_MS = 3_600_000;

/**
 * The outbox figures, read at scrape time in one statement. The first two parts are index-only
 * range scans of outbox_status_idx (status, created_at): every row that is not a success (few,
 * while deliveries work), and the last hour's successes. Counting every success kept would read
 * the whole retained history: 1.5 s at 1M rows, against 30 ms. The third reads the first entry of
 * outbox_due_idx: when the longest-waiting message became due (a claimed one is due at its lease's
 * end, in the future).
 */
async function readOutbox(metrics: Metrics, db: Db, now: number): Promise<void> {
  const since = new Date(now - HOUR_MS);
  const { rows } = (await db.raw(
    `select status, count(*)::int as count, min(created_at) as oldest, (count(*) filter (where created_at >= ?))::int as "lastHour"
    from outbox where status in (${UNFINISHED.map(() => '?').join(', ')}) group by status
    union all
    select 'success', null, null, count(*)::int from outbox where status = 'success' and created_at >= ?
    union all
    select 'due', null, min(available_at), null from outbox where status in ('pending', 'retrying')`,
    [since, ...UNFINISHED, since],
  )) as { rows: { status: OutboxStatus | 'due'; count: number | null; oldest: Date | null; lastHour: number }[] };
  const byStatus = new Map(rows.map((r) => [r.status, r]));
  for (const status of UNFINISHED) metrics.outboxMessages.set({ status }, byStatus.get(status)?.count ?? 0);
  for (const status of OUTBOX_STATUSES) metrics.outboxLastHour.set({ status }, byStatus.get(status)?.lastHour ?? 0);
  const waiting = [byStatus.get('pending'), byStatus.get('retrying')].filter((r) => r !== undefined);
  metrics.outboxBacklog.set(waiting.reduce((sum, r) => sum + r.count!, 0));
  const oldest = Math.min(...waiting.map((r) => new Date(r.oldest!).getTime()));
  metrics.outboxOldestPendingAge.set(Number.isFinite(oldest) ? Math.max(0, (now - oldest) / 1000) : 0);
  const dueSince = byStatus.get('due')?.oldest;
  metrics.outboxOldestDueAge.set(dueSince ? Math.max(0, (now - new Date(dueSince).getTime()) / 1000) : 0);
}

async function readDatabaseFigures(services: Services, metrics: Metrics): Promise<void> {
  try {
    await readOutbox(metrics, services.db, services.now());
    metrics.databaseUp.set(1);
  } catch (err) {
    // The process's own figures are still worth serving while the database is away.
    services.log.warn({ err }, 'metrics: the outbox figures could not be read');
    metrics.databaseUp.set(0);
  }
}

/** The exposition text of this process's metrics, the database-wide figures read now. */
export async function scrape(services: Services): Promise<{ contentType: string; body: string }> {
  const metrics = services.get(metricsPart);
  readPool(metrics, 'main', services.db);
  const thread = metrics.dispatcherThread;
  if (!thread) {
    await readDatabaseFigures(services, metrics);
    return { contentType: metrics.registry.contentType, body: await metrics.registry.metrics() };
  }
  const [own, theirs] = await Promise.all([
    metrics.registry.getMetricsAsJSON(),
    thread().catch((err: unknown) => {
      services.log.warn({ err }, 'metrics: the dispatcher thread did not answer');
      return [] as Figures;
    }),
  ]);
  const merged = AggregatorRegistry.aggregate([own.filter((f) => !fromDispatcherThread(f.name)), theirs.filter((f) => fromDispatcherThread(f.name) || isPoolFamily(f.name))]);
  return { contentType: merged.contentType, body: await merged.metrics() };
}

/** What a dispatcher thread answers its process's scrape with (see showDispatcherThread). */
export async function dispatcherThreadFigures(services: Services): Promise<Figures> {
  const metrics = services.get(metricsPart);
  readPool(metrics, 'dispatcher', services.db);
  await readDatabaseFigures(services, metrics);
  return metrics.registry.getMetricsAsJSON();
}
