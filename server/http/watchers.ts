import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { AddWatcherBody, UpdateWatcherBody, WatcherOut, WatcherParams, WatcherTicketParams, type AddWatcherInput, type UpdateWatcherInput } from '../domains/watchers/schemas.js';
import * as watchers from '../flows/ticket-watchers.js';

type TicketParams = { brandId: string; ticketId: string };
type Params = TicketParams & { memberId: string };

/** /tickets/:ticketId/watchers under a brand; a watcher is addressed by its member id. */
export async function watcherRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Watchers'];

  app.get<{ Params: TicketParams }>(
    '/tickets/:ticketId/watchers',
    {
      config: { auth: ['api-key', 'session'], permission: 'watchers:read' },
      schema: { tags, summary: "List the ticket's watchers (oldest first, bare array)", params: WatcherTicketParams, response: { 200: Type.Array(WatcherOut) } },
    },
    async (req) => watchers.list(req.ctx, req.params.brandId, req.params.ticketId),
  );

  app.post<{ Params: TicketParams; Body: AddWatcherInput }>(
    '/tickets/:ticketId/watchers',
    {
      config: { auth: ['api-key', 'session'], permission: 'watchers:write' },
      schema: {
        tags,
        summary: 'Add a member as a watcher (201); a member already watching returns that watcher (200)',
        params: WatcherTicketParams,
        body: AddWatcherBody,
        response: { 201: WatcherOut, 200: WatcherOut },
      },
    },
    async (req, reply) => {
      const result = await watchers.add(req.ctx, req.params.brandId, req.params.ticketId, req.body);
      return reply.status(result.created ? 201 : 200).send(result.watcher);
    },
  );

  app.patch<{ Params: Params; Body: UpdateWatcherInput }>(
    '/tickets/:ticketId/watchers/:memberId',
    {
      config: { auth: ['api-key', 'session'], permission: 'watchers:write' },
      schema: { tags, summary: "Change a watcher's notification preferences", params: WatcherParams, body: UpdateWatcherBody, response: { 200: WatcherOut } },
    },
    async (req) => watchers.update(req.ctx, req.params.brandId, req.params.ticketId, req.params.memberId, req.body),
  );

  app.delete<{ Params: Params }>(
    '/tickets/:ticketId/watchers/:memberId',
    {
      config: { auth: ['api-key', 'session'], permission: 'watchers:write' },
      schema: { tags, summary: 'Stop a member watching; returns the removed watcher (404 if not watching)', params: WatcherParams, response: { 200: WatcherOut } },
    },
    async (req) => watchers.remove(req.ctx, req.params.brandId, req.params.ticketId, req.params.memberId),
  );
}
