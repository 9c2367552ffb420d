import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { HttpError } from '../core/errors.js';
import type { Db } from '../core/db.js';

const READY_TIMEOUT_MS = 2000;

export interface HealthOptions {
  db: Db;
  version: string;
  /** True once shutdown began: readiness fails so load balancers drain this process. */
  isShuttingDown: () => boolean;
  /** When given (a dispatcher's listener): readiness also wants this process's LISTEN connection up. */
  isListening?: () => boolean;
}

async function databaseAnswers(db: Db): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS);
  });
  try {
    return await Promise.race([db.raw('select 1').then(() => true as const), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** /health, /health/live and /health/ready: the API registers them under /v1, a dispatcher alone at its root. */
export async function healthRoutes(app: FastifyInstance, opts: HealthOptions): Promise<void> {
  const tags = ['Health'];
  // Never limited: an orchestrator that got 429 from a probe would restart a healthy process.
  const config = { auth: 'none', permission: 'health:read', rateLimit: false } as const;
  const started = Date.now();

  app.get(
    '/health',
    {
      config,
      schema: {
        tags,
        summary: 'Overall health: process and database',
        response: {
          200: Type.Object({
            status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')]),
            version: Type.String(),
            uptimeSeconds: Type.Integer(),
            checks: Type.Object({ database: Type.Union([Type.Literal('ok'), Type.Literal('unavailable')]) }),
          }),
        },
      },
    },
    async () => {
      const database = (await databaseAnswers(opts.db)) ? ('ok' as const) : ('unavailable' as const);
      return {
        status: database === 'ok' ? ('ok' as const) : ('degraded' as const),
        version: opts.version,
        uptimeSeconds: Math.floor((Date.now() - started) / 1000),
        checks: { database },
      };
    },
  );

  app.get(
    '/health/live',
    {
      config,
      schema: { tags, summary: 'Liveness: the process answers', response: { 200: Type.Object({ status: Type.Literal('ok') }) } },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/health/ready',
    {
      config,
      schema: {
        tags,
        summary: 'Readiness: 503 while the database is unreachable or the process is shutting down',
        response: { 200: Type.Object({ status: Type.Literal('ready') }) },
      },
    },
    async () => {
      if (opts.isShuttingDown()) throw new HttpError(503, 'shutting_down', 'This process is shutting down');
      if (!(await databaseAnswers(opts.db))) throw new HttpError(503, 'database_unavailable', 'The database does not answer');
      if (opts.isListening && !opts.isListening()) throw new HttpError(503, 'listener_down', "This process's LISTEN connection to the database is down; it is being opened again");
      return { status: 'ready' as const };
    },
  );
}
