import type { FastifyInstance } from 'fastify';
import { sendJsonText } from '../core/http.js';
import { pageJson } from '../core/pagination.js';
import { onReplica } from '../core/read-replica.js';
import { BrandParams } from '../core/schemas.js';
import {
  CreateTicketBody,
  IdempotencyHeaders,
  TicketListQuery,
  TicketOut,
  TicketPage,
  TicketParams,
  UpdateTicketBody,
  type CreateTicketInput,
  type TicketListInput,
  type UpdateTicketInput,
} from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import { updateTicket } from '../flows/ticket-update.js';
import { createTicket } from '../flows/ticket-create.js';

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function ticketRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Tickets'];

  app.post<{ Params: { brandId: string }; Body: CreateTicketInput; Headers: { 'x-idempotency-key'?: string } }>(
    '/tickets',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:write' },
      schema: {
        tags,
        summary: 'Create a ticket (201); with X-Idempotency-Key, a repeat of the same request returns the first ticket (200)',
        params: BrandParams,
        headers: IdempotencyHeaders,
        body: CreateTicketBody,
        response: { 201: TicketOut, 200: TicketOut },
      },
    },
    async (req, reply) => {
      const result = await createTicket(req.ctx, req.params.brandId, req.body, req.headers['x-idempotency-key']);
      return reply.status(result.created ? 201 : 200).send(result.ticket);
    },
  );

  app.get<{ Params: { brandId: string; ticketId: string } }>(
    '/tickets/:ticketId',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:read', conditional: true },
      schema: { tags, summary: 'Get a ticket with its customer, category, tags and status', params: TicketParams, response: { 200: TicketOut } },
    },
    async (req) => tickets.get(req.ctx, req.params.brandId, req.params.ticketId),
  );

  app.get<{ Params: { brandId: string }; Querystring: TicketListInput }>(
    '/tickets',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:read', conditional: true },
      schema: {
        tags,
        summary: 'List tickets (filters of spec 4.8, keyset cursor pages; spam excluded unless isSpam is given)',
        params: BrandParams,
        querystring: TicketListQuery,
        response: { 200: TicketPage },
      },
    },
    async (req, reply) => sendJsonText(reply, pageJson(await onReplica(req.ctx, (ctx) => tickets.listJson(ctx, req.params.brandId, req.query)))),
  );

  app.patch<{ Params: { brandId: string; ticketId: string }; Body: UpdateTicketInput }>(
    '/tickets/:ticketId',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:write' },
      schema: {
        tags,
        summary: 'Update a ticket (null clears assigneeId, categoryId, priority; tags is a full replacement)',
        params: TicketParams,
        body: UpdateTicketBody,
        response: { 200: TicketOut },
      },
    },
    async (req) => (await updateTicket(req.ctx, req.params.brandId, req.params.ticketId, req.body)).ticket,
  );

  app.delete<{ Params: { brandId: string; ticketId: string } }>(
    '/tickets/:ticketId',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:write' },
      schema: { tags, summary: 'Soft-delete a ticket; returns it with deletedAt', params: TicketParams, response: { 200: TicketOut } },
    },
    async (req) => tickets.remove(req.ctx, req.params.brandId, req.params.ticketId),
  );
}
