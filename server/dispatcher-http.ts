import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Config } from './core/config.js';
import { installErrorHandling, requestIdFor } from './core/http.js';
import type { Services } from './core/services.js';
import { version } from './core/version.js';
import { healthRoutes } from './http/health.js';
import { metricsRoutes } from './http/metrics.js';

export interface DispatcherHttpDeps {
  config: Config;
  /** The process's services: the dispatcher's metrics are in their registry. */
  services: Services;
  /** Shutdown began, or the dispatcher is not running: readiness fails. */
  isShuttingDown: () => boolean;
  /** The dispatcher's LISTEN connection is up. */
  isListening: () => boolean;
}

/**
 * What a `--role dispatcher` process serves, having no API: the API's own health routes (at
 * /health/…) and /metrics, with the same rules (metricsEnabled, metricsToken, loopback clients
 * only without a token) and error shape. No proxy is trusted: the port is meant to be scraped
 * directly, and a forwarded address must not pass for loopback.
 */
export async function buildDispatcherHttp({ config, services, isShuttingDown, isListening }: DispatcherHttpDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: config.logLevel === 'silent' ? false : { level: config.logLevel, stream: process.stderr },
    // A scrape every few seconds would fill the log.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: requestIdFor,
    requestIdHeader: false,
    trustProxy: false,
    forceCloseConnections: 'idle',
  });
  installErrorHandling(app);
  await app.register(healthRoutes, { db: services.db, version, isShuttingDown, isListening });
  await app.register(metricsRoutes, { config, services });
  return app;
}
