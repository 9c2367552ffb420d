import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Storage } from '../core/ports.js';
import { RawMailOut, TicketRawMailParams, TicketRawMailsParams } from '../domains/raw-mails/schemas.js';
import * as rawMails from '../domains/raw-mails/service.js';

export interface RawMailRouteOptions {
  storage: Storage;
}

type TicketRoute = { Params: { brandId: string; ticketId: string } };
type OneRoute = { Params: { brandId: string; ticketId: string; rawMailId: string } };

/** Read-only, for the ticket's readers. Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function rawMailRoutes(app: FastifyInstance, { storage }: RawMailRouteOptions): Promise<void> {
  const tags = ['Inbound email'];
  const read = { auth: ['api-key', 'session'], permission: 'tickets:read' } as const;

  app.get<TicketRoute>(
    '/tickets/:ticketId/raw-mails',
    {
      config: read,
      schema: {
        tags,
        summary: "The ticket's inbound messages exactly as they arrived, oldest first (bare array), while kept (rawMailRetentionDays)",
        params: TicketRawMailsParams,
        response: { 200: Type.Array(RawMailOut) },
      },
    },
    async (req) => rawMails.list(req.ctx, req.params.brandId, req.params.ticketId),
  );

  app.get<OneRoute>(
    '/tickets/:ticketId/raw-mails/:rawMailId',
    {
      config: read,
      schema: { tags, summary: 'One inbound message as it arrived: its bytes, as message/rfc822 (a download)', params: TicketRawMailParams },
    },
    async (req, reply) => {
      const file = await rawMails.open(req.ctx, storage, req.params.brandId, req.params.ticketId, req.params.rawMailId);
      return reply
        .header('Content-Type', 'message/rfc822')
        .header('Content-Length', file.size)
        .header('Content-Disposition', `attachment; filename="${file.filename}"`)
        .header('X-Content-Type-Options', 'nosniff')
        .header('Content-Security-Policy', "default-src 'none'; sandbox")
        .header('Cache-Control', 'private, no-store')
        .send(file.stream);
    },
  );
}
