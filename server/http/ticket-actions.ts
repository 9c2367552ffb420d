import type { FastifyInstance } from 'fastify';
import { BrandParams } from '../core/schemas.js';
import { isDashboardCaller } from '../core/client-shapes.js';
import { BulkBody, BulkResult, MergeBody, MergeResult, SpamBody, type BulkInput, type MergeInput, type SpamInput } from '../domains/tickets/actions-schemas.js';
import * as actions from '../flows/ticket-actions.js';
import * as merging from '../flows/ticket-merge.js';
import { TicketOut, TicketParams } from '../domains/tickets/schemas.js';

/** Ticket actions (spam, merge, bulk), mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function ticketActionRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Tickets'];

  app.post<{ Params: { brandId: string; ticketId: string }; Body: SpamInput }>(
    '/tickets/:ticketId/spam',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:write' },
      schema: {
        tags,
        summary: "Mark or unmark as spam ({ isSpam } or { action: mark|unmark }); marking also blocks the sender's address, unmarking unblocks it",
        params: TicketParams,
        body: SpamBody,
        response: { 200: TicketOut },
      },
    },
    async (req) => actions.setSpam(req.ctx, req.params.brandId, req.params.ticketId, req.body),
  );

  app.post<{ Params: { brandId: string; ticketId: string }; Body: MergeInput }>(
    '/tickets/:ticketId/merge',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:write' },
      schema: {
        tags,
        summary: 'Merge source tickets into this one: their comments and attachments move here, they are closed with mergedIntoId and a note',
        params: TicketParams,
        body: MergeBody,
        response: { 200: MergeResult },
      },
    },
    async (req) => merging.merge(req.ctx, req.params.brandId, req.params.ticketId, req.body),
  );

  app.post<{ Params: { brandId: string }; Body: BulkInput }>(
    '/tickets/bulk',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:write' },
      schema: {
        tags,
        summary:
          'Apply one action to up to 100 tickets in one transaction; unknown, deleted or foreign ids are counted as failed. success is the number acted on to a session, whether all were to an API key',
        params: BrandParams,
        body: BulkBody,
        response: { 200: BulkResult },
      },
    },
    async (req) => {
      const { count, failedIds } = await actions.bulk(req.ctx, req.params.brandId, req.body);
      const failed = failedIds.length;
      return { success: isDashboardCaller(req.ctx) ? count : failed === 0, count, failed, failedIds };
    },
  );
}
