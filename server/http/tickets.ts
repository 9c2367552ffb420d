import { Readable } from 'node:stream';
import formatContentDisposition from 'content-disposition';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { isDashboardCaller } from '../core/client-shapes.js';
import { sendJsonText } from '../core/http.js';
import { pageJson } from '../core/pagination.js';
import { onReplica } from '../core/read-replica.js';
import { BrandParams } from '../core/schemas.js';
import {
  CreateTicketBody,
  IdempotencyHeaders,
  TicketExportQuery,
  TicketListQuery,
  TicketOut,
  TicketPage,
  TicketParams,
  UpdateTicketBody,
  type CreateTicketInput,
  type TicketExportInput,
  type TicketListInput,
  type UpdateTicketInput,
} from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import { updateTicket } from '../flows/ticket-update.js';
import { createTicket } from '../flows/ticket-create.js';
import { exportTickets } from '../flows/ticket-export.js';

/** How much export text may wait for the client before no more pages are read (a page is taken whole, then reading stops). */
const EXPORT_BUFFER_BYTES = 256 * 1024;

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

  // A static segment: find-my-way matches it before /tickets/:ticketId (no ticket id is `export`).
  app.get<{ Params: { brandId: string }; Querystring: TicketExportInput }>(
    '/tickets/export',
    {
      config: { auth: ['api-key', 'session'], permission: 'tickets:export' },
      schema: {
        tags,
        summary: 'Export every ticket the list with these filters holds, streamed as NDJSON or CSV (a download; owners, admins and API keys)',
        description:
          'In creation order, read page by page (no snapshot: a ticket comes at most once; one changed meanwhile comes as it was when its page was read). ' +
          'NDJSON: one ticket a line as the list shows it, with `comments` when comments=true (every comment to a session, threads to an API key) and `watchers` when watchers=true. ' +
          "CSV: a fixed header of flat fields, customFields, links and metadata as JSON, formula-like cells prefixed with `'`. " +
          'A complete export ends with the HTTP trailer X-Ticket-Count; one that failed midway is cut short (its chunked body never ends): after=<the last ticket id received> takes it up.',
        params: BrandParams,
        querystring: TicketExportQuery,
        response: {
          200: {
            description: 'The export, as a download (Content-Disposition: attachment)',
            content: { 'application/x-ndjson': { schema: Type.String() }, 'text/csv': { schema: Type.String() } },
          },
        },
      },
    },
    async (req, reply) => {
      const { format = 'ndjson', comments = false, watchers = false, after, ...filters } = req.query;
      const exported = await exportTickets(req.ctx, req.params.brandId, filters, {
        format,
        comments,
        watchers,
        after,
        commentShape: isDashboardCaller(req.ctx) ? 'flat' : 'threads',
      });
      reply
        .type(exported.contentType)
        .header('content-disposition', formatContentDisposition(exported.filename))
        .header('cache-control', 'no-store')
        .header('x-content-type-options', 'nosniff');
      // HEAD: the headers only (Fastify would otherwise read the whole stream to discard it).
      if (req.method === 'HEAD') {
        await exported.chunks.return();
        return reply.send();
      }
      reply.trailer('x-ticket-count', async () => String(exported.written));
      // Not object mode: the stream asks for the next page only once what it holds is under the mark,
      // and Fastify destroys it (ending the generator, so no more pages) when the client goes away.
      return reply.send(Readable.from(exported.chunks, { objectMode: false, highWaterMark: EXPORT_BUFFER_BYTES }));
    },
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
