import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import { bearerToken } from '../core/auth.js';
import type { Config } from '../core/config.js';
import { forbidden, HttpError, unauthorized } from '../core/errors.js';
import { scrape } from '../core/metrics.js';
import type { Services } from '../core/services.js';

export interface MetricsOptions {
  config: Pick<Config, 'metricsEnabled' | 'metricsToken'>;
  services: Services;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest();

function isLoopback(address: string): boolean {
  try {
    return ipaddr.process(address).range() === 'loopback';
  } catch {
    return false;
  }
}

/**
 * `GET /metrics`: Prometheus text for operators, outside the tenant API (not in the OpenAPI
 * document). With metricsToken set it wants that token as a bearer; without one it answers
 * loopback clients only (the client address as `trustProxy` reads it).
 */
export async function metricsRoutes(app: FastifyInstance, opts: MetricsOptions): Promise<void> {
  const expected = opts.config.metricsToken ? sha256(opts.config.metricsToken) : null;

  const mayScrape = async (req: FastifyRequest) => {
    if (!opts.config.metricsEnabled) throw new HttpError(404, 'metrics_disabled', 'Metrics are not enabled on this server: set TICKETD_METRICS_ENABLED=true');
    if (!expected) {
      if (!isLoopback(req.ip)) throw forbidden('Without TICKETD_METRICS_TOKEN, /metrics answers loopback clients only', 'metrics_loopback_only');
      return;
    }
    const token = bearerToken(req);
    if (!token) throw unauthorized('Send the metrics token as "Authorization: Bearer <TICKETD_METRICS_TOKEN>"', 'missing_credentials');
    if (!timingSafeEqual(sha256(token), expected)) throw unauthorized('The metrics token is not right', 'invalid_metrics_token');
  };

  app.get('/metrics', { config: { auth: 'none', permission: 'metrics:read' }, onRequest: mayScrape, schema: { hide: true } }, async (_req, reply) => {
    const { contentType, body } = await scrape(opts.services);
    return reply.type(contentType).send(body);
  });
}
