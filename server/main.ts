import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { buildApp } from './app.js';
import { dispatcherPoolShare, listenUrl, publicBaseUrl, type Config } from './core/config.js';
import { createDb, type Db } from './core/db.js';
import type { Services } from './core/services.js';
import { createServices } from './compose.js';
import { buildDispatcherHttp } from './dispatcher-http.js';
import { systemCtx } from './core/context.js';
import { migrateLatest } from './core/migrate.js';
import { showDispatcherThread } from './core/metrics.js';
import { openDatabase, type DatabaseHandle } from './integrations/embedded-postgres.js';
import { startSmtpListener, type SmtpListener } from './integrations/smtp-listener.js';
import type { Dispatcher } from './worker/dispatcher.js';
import { startDispatcher } from './dispatcher-start.js';
import { DispatcherThread } from './dispatcher-thread.js';
import { attachmentDepsOf } from './domains/attachments/service.js';
import { inboundBrand } from './domains/brand-domains/service.js';
import { receive as receiveMail } from './flows/inbound-mail.js';
import type { CreatedAccountView } from './domains/accounts/schemas.js';
import { bootstrapIfEmpty } from './flows/accounts.js';

export type Role = 'api' | 'dispatcher' | 'all';

export interface Running {
  baseUrl: string;
  role: Role;
  database: 'embedded' | 'external';
  /** What the first start on an empty database created (keys shown only now); otherwise null. */
  bootstrap: CreatedAccountView | null;
  /** Port of the inbound SMTP listener, when one runs (config smtpPort / --smtp-port). */
  smtpPort: number | null;
  /** Where a dispatcher-only process serves its health and metrics (config dispatcherHost, dispatcherPort); otherwise null. */
  dispatcherUrl: string | null;
  /**
   * Graceful stop: refuse new requests, finish in-flight ones, drain the dispatcher, close the pool
   * (all of that within drainDeadlineMs, when given), then stop the embedded database whatever
   * happened. Resolves false when the drain ran past its deadline.
   */
  stop(drainDeadlineMs?: number): Promise<boolean>;
}

type Log = (line: string) => void;

/** Config logLevel's values, least severe first; silent shows nothing. */
const LOG_LEVELS: readonly Config['logLevel'][] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** Starts a role in this process: database, migrations, bootstrap, then API and/or dispatcher. */
export async function startServer(config: Config, role: Role, log: Log = () => undefined): Promise<Running> {
  const handle: DatabaseHandle = await openDatabase(config, log);
  let db: Db | null = null;
  let readDb: Db | null = null;
  let services: Services | null = null;
  let app: FastifyInstance | null = null;
  let dispatcher: Dispatcher | null = null;
  let dispatcherThread: DispatcherThread | null = null;
  let dispatcherHttp: FastifyInstance | null = null;
  let smtp: SmtpListener | null = null;
  let shuttingDown = false;

  const stop = async (drainDeadlineMs?: number) => {
    shuttingDown = true;
    const drain = (async () => {
      await smtp?.close(); // refuses new SMTP sessions, waits for open ones
      await app?.close(); // stops accepting, waits for in-flight requests
      await dispatcher?.stop(Math.floor(config.shutdownTimeoutMs / 2));
      await dispatcherThread?.stop(Math.floor(config.shutdownTimeoutMs / 2));
      // Served through the drain: readiness says 503 meanwhile, and the last scrape sees the end.
      await dispatcherHttp?.close();
      await services?.close();
      await db?.destroy();
      await readDb?.destroy();
    })();
    let drained = true;
    if (drainDeadlineMs === undefined) await drain;
    else {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), drainDeadlineMs)));
      // Past the deadline the drain is abandoned: stopping PostgreSQL (fast mode) ends its connections.
      drained = await Promise.race([drain.then(() => true as const), late]).finally(() => clearTimeout(timer));
    }
    // The embedded database is stopped even after a late drain: no PostgreSQL is left running
    // (pg_ctl bounds its own wait).
    await handle.release();
    return drained;
  };

  try {
    const transactionPooling = config.databaseTransactionPooling;
    const directUrl = handle.embedded ? null : config.databaseDirectUrl;
    // With the API beside it, the dispatcher has connections of its own, so however many requests
    // hold or wait for the API's, its claims and settles go on (the two add up to dbPoolMax).
    const share = role === 'all' ? dispatcherPoolShare(config) : 0;
    db = createDb(handle.url, { poolMax: config.dbPoolMax - share, transactionPooling });
    // The replica serves some of the API's reads (core/read-replica.ts); a dispatcher reads none.
    if (config.databaseReadUrl && role !== 'dispatcher')
      readDb = createDb(config.databaseReadUrl, { poolMax: config.dbPoolMax, transactionPooling, applicationName: 'ticketd-read' });
    await migrateLatest(db, directUrl);
    // Without the API there is no Fastify logger: service and dispatcher lines at the configured
    // level or above go to the start-up log.
    const from = (level: Config['logLevel'], line: () => string) => (LOG_LEVELS.indexOf(level) >= LOG_LEVELS.indexOf(config.logLevel) ? log(line()) : undefined);
    const lines = {
      info: (o: object, m: string) => from('info', () => `${m} ${JSON.stringify(o)}`),
      warn: (o: object, m: string) => from('warn', () => `${m} ${JSON.stringify(o)}`),
      error: (o: object, m: string) => from('error', () => `${m}: ${String((o as { err?: Error }).err?.message)}`),
    };
    // One set of services for this thread: the API, the SMTP listener and a dispatcher on this
    // thread share them (a dispatcher thread builds its own). They log through Fastify's logger
    // once the API runs, and so does the dispatcher, on either thread.
    const logger = {
      info: (o: object, m: string) => (app?.log ?? lines).info(o, m),
      warn: (o: object, m: string) => (app?.log ?? lines).warn(o, m),
      error: (o: object, m: string) => (app?.log ?? lines).error(o, m),
    };
    const svc = (services = createServices({ config, db, readDb, directUrl, logger }));
    const bootstrap =
      role === 'dispatcher'
        ? null
        : await bootstrapIfEmpty(systemCtx(svc, 'bootstrap'), {
            email: config.bootstrap.ownerEmail,
            name: config.bootstrap.ownerName,
            accountName: config.bootstrap.accountName,
            brandName: config.bootstrap.brandName,
          });
    let port = config.port;
    const attachments = attachmentDepsOf(svc);
    if (role !== 'dispatcher') {
      app = await buildApp({ config, db, services: svc, isShuttingDown: () => shuttingDown });
      await app.listen({ port: config.port, host: config.host });
      port = (app.server.address() as { port: number }).port;
      if (config.smtpPort !== null) {
        const deps = { attachments };
        smtp = await startSmtpListener({
          host: config.host,
          port: config.smtpPort,
          maxBytes: config.inboundMaxBytes,
          acceptsDomain: async (domain) => domain === config.inboundDomain.toLowerCase() || (await inboundBrand(systemCtx(svc, 'smtp'), [domain])) !== null,
          log,
          deliver: (raw, recipients, client) => receiveMail(systemCtx(svc, 'smtp'), deps, raw, { envelope: recipients, client }),
        });
      }
    }
    // With no connections of its own (dispatcherDbPoolMax 0), the dispatcher shares the API's pool and thread.
    if (role === 'dispatcher' || (role === 'all' && !share)) dispatcher = startDispatcher(svc, logger, config);
    if (role === 'all' && share) {
      // Its own thread: deliveries keep their share of the process however busy the API is.
      const thread = (dispatcherThread = await DispatcherThread.start({ config, databaseUrl: handle.url, directUrl, poolMax: share, transactionPooling }, logger, (err) => {
        logger.error({ err }, 'the dispatcher thread failed: stopping');
        process.exitCode = 1;
        void stop();
      }));
      showDispatcherThread(svc, () => thread.figures());
    }
    let dispatcherUrl: string | null = null;
    // Alone, a dispatcher has no API port to be watched through; with the API (role all) the API's
    // health routes and /metrics (the same registry) serve the whole process.
    if (dispatcher && role === 'dispatcher' && config.dispatcherPort !== null) {
      const running = dispatcher;
      dispatcherHttp = await buildDispatcherHttp({
        config,
        services: svc,
        isShuttingDown: () => shuttingDown || !running.isRunning(),
        isListening: () => running.isListening(),
      });
      await dispatcherHttp.listen({ port: config.dispatcherPort, host: config.dispatcherHost });
      dispatcherUrl = listenUrl(config.dispatcherHost, (dispatcherHttp.server.address() as AddressInfo).port);
    }
    return {
      baseUrl: publicBaseUrl(config, port),
      role,
      database: handle.embedded ? 'embedded' : 'external',
      bootstrap,
      smtpPort: smtp?.port ?? null,
      dispatcherUrl,
      stop,
    };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}

/**
 * Ctrl-C / SIGTERM: graceful stop within the configured deadline; a second signal exits at once.
 * Installed before start-up finishes: a signal during start-up stops the server as soon as it is up
 * (so the embedded database it started is released, not left running).
 */
export function stopOnSignals(starting: Promise<Running>, config: Config, log: Log): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log(`${signal} again: exiting now`);
      process.exit(130);
    }
    stopping = true;
    log(`${signal} received: finishing in-flight requests, then stopping`);
    starting
      // The deadline is the shutdown's own: a signal during start-up (a first initdb on a slow disk
      // can take longer than the deadline) waits for start-up, then has the whole of it.
      .then((running) => running.stop(config.shutdownTimeoutMs))
      .then(
        (drained) => {
          if (drained) log('stopped');
          else log(`shutdown took longer than ${config.shutdownTimeoutMs} ms: requests and deliveries still running were cut off`);
          process.exit(drained ? 0 : 1);
        },
        (err) => {
          log(`shutdown failed: ${(err as Error).message}`);
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
