import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { onReplica } from '../core/read-replica.js';
import { BrandParams } from '../core/schemas.js';
import { AuditLogListQuery, AuditLogOut, AuditLogPage, TicketLogParams, type AuditLogListInput } from '../domains/audit/schemas.js';
import * as audit from '../domains/audit/service.js';
import { ticketHistory } from '../flows/audit-history.js';

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. Read-only: entries are append-only. */
export async function auditRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Audit log'];
  const config = { auth: ['api-key', 'session'], permission: 'audit_logs:read' } as const;

  app.get<{ Params: { brandId: string }; Querystring: AuditLogListInput }>(
    '/logs',
    {
      config,
      schema: {
        tags,
        summary: "The brand's audit log, newest first, in keyset cursor pages; filters combine",
        params: BrandParams,
        querystring: AuditLogListQuery,
        response: { 200: AuditLogPage },
      },
    },
    async (req) => onReplica(req.ctx, (ctx) => audit.list(ctx, req.params.brandId, req.query)),
  );

  app.get<{ Params: { brandId: string; ticketId: string } }>(
    '/tickets/:ticketId/logs',
    {
      config,
      schema: {
        tags,
        summary: "A ticket's history, oldest first (bare array): its own entries and its comments', attachments' and watchers'; readable after the ticket is deleted",
        params: TicketLogParams,
        response: { 200: Type.Array(AuditLogOut) },
      },
    },
    async (req) => onReplica(req.ctx, (ctx) => ticketHistory(ctx, req.params.brandId, req.params.ticketId)),
  );
}
