import type { FastifyInstance } from 'fastify';
import { sendJsonText } from '../core/http.js';
import { pageJson } from '../core/pagination.js';
import { onReplica } from '../core/read-replica.js';
import * as dashboard from '../domains/tickets/dashboard.js';
import {
  CrossBrandListQuery,
  DashboardTicketPage,
  StatsOut,
  StatsQuery,
  TeamMetricsOut,
  TeamMetricsQuery,
  TrendsOut,
  TrendsQuery,
  type CrossBrandListInput,
  type StatsInput,
  type TeamMetricsInput,
  type TrendsInput,
} from '../domains/tickets/dashboard-schemas.js';

/** The cross-brand dashboard (spec 4.9), mounted at /v1: every brand the credential may see. */
export async function dashboardRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Dashboard'];
  const config = { auth: ['api-key', 'session'], permission: 'tickets:read' } as const;

  app.get<{ Querystring: CrossBrandListInput }>(
    '/v1/tickets',
    {
      config: { ...config, conditional: true },
      schema: {
        tags,
        summary: "Tickets of every brand the credential may see (or of brandIds): the brand list's filters, sorts and cursor pages, each ticket with its brand",
        querystring: CrossBrandListQuery,
        response: { 200: DashboardTicketPage },
      },
    },
    async (req, reply) => sendJsonText(reply, pageJson(await onReplica(req.ctx, (ctx) => dashboard.listAcrossBrands(ctx, req.query)))),
  );

  app.get<{ Querystring: StatsInput }>(
    '/v1/tickets/stats',
    {
      config: { ...config, conditional: true },
      schema: { tags, summary: 'Live, non-spam tickets counted by status and by brand, and the average resolution time', querystring: StatsQuery, response: { 200: StatsOut } },
    },
    async (req) => onReplica(req.ctx, (ctx) => dashboard.stats(ctx, req.query)),
  );

  app.get<{ Querystring: TrendsInput }>(
    '/v1/tickets/trends',
    {
      config,
      schema: { tags, summary: 'Tickets created and resolved per UTC day, every day of the period', querystring: TrendsQuery, response: { 200: TrendsOut } },
    },
    async (req) => onReplica(req.ctx, (ctx) => dashboard.trends(ctx, req.query)),
  );

  app.get<{ Querystring: TeamMetricsInput }>(
    '/v1/tickets/team-metrics',
    {
      config,
      schema: {
        tags,
        summary:
          'Per active member: assigned tickets resolved and closed in the period; satisfaction ratings submitted in the period for their resolutions (csatCount, csatPositive, csatScore: positive share in percent)',
        querystring: TeamMetricsQuery,
        response: { 200: TeamMetricsOut },
      },
    },
    async (req) => onReplica(req.ctx, (ctx) => dashboard.teamMetrics(ctx, req.query)),
  );
}
