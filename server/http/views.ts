import type { FastifyInstance } from 'fastify';
import { onReplica } from '../core/read-replica.js';
import { BrandParams } from '../core/schemas.js';
import { TicketPage } from '../domains/tickets/schemas.js';
import {
  CreateViewBody,
  UpdateViewBody,
  ViewCountsOut,
  ViewListOut,
  ViewOut,
  ViewParams,
  ViewTicketsQuery,
  type CreateViewInput,
  type UpdateViewInput,
  type ViewTicketsInput,
} from '../domains/views/schemas.js';
import * as views from '../domains/views/service.js';
import { createView, updateView, viewCounts, viewTickets } from '../flows/views.js';

type InBrand<B = undefined> = { Params: { brandId: string }; Body: B };
type InView<B = undefined> = { Params: { brandId: string; viewId: string }; Body: B };

/**
 * A brand's views: saved ticket list queries, shared in the brand (owners and admins manage them)
 * or personal to a member. Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId.
 */
export async function viewRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Views'];
  const read = { auth: ['api-key', 'session'], permission: 'views:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'views:write' } as const;
  const rights =
    'visibility brand takes an owner, an admin or an API key (403 insufficient_role for a member); personal takes a member’s session (400 personal_needs_member for an API key)';

  app.get<InBrand>(
    '/views',
    {
      config: read,
      schema: { tags, summary: 'List the views the caller sees: the brand’s, and their own personal ones, by name', params: BrandParams, response: { 200: ViewListOut } },
    },
    async (req) => views.list(req.ctx, req.params.brandId),
  );

  app.post<InBrand<CreateViewInput>>(
    '/views',
    {
      config: write,
      schema: {
        tags,
        summary: `Create a view: filters are GET …/tickets’ query parameters (checked by its schema: 400 names filters.<field>), sort { field, order }. ${rights}; 409 view_name_taken`,
        params: BrandParams,
        body: CreateViewBody,
        response: { 201: ViewOut },
      },
    },
    async (req, reply) => reply.status(201).send(await createView(req.ctx, req.params.brandId, req.body)),
  );

  app.get<InBrand>(
    '/views/counts',
    {
      config: read,
      schema: {
        tags,
        summary: 'The ticket count of every view the caller sees: { data: [{ id, count, fresh, countedAt }] }; fresh false: counted less than a minute ago, not now',
        params: BrandParams,
        response: { 200: ViewCountsOut },
      },
    },
    async (req) => viewCounts(req.ctx, req.params.brandId),
  );

  app.get<InView>(
    '/views/:viewId',
    { config: read, schema: { tags, summary: 'Get a view (another member’s personal view is 404)', params: ViewParams, response: { 200: ViewOut } } },
    async (req) => views.get(req.ctx, req.params.brandId, req.params.viewId),
  );

  app.patch<InView<UpdateViewInput>>(
    '/views/:viewId',
    {
      config: write,
      schema: { tags, summary: `Change any of its fields (filters replace the old ones). ${rights}`, params: ViewParams, body: UpdateViewBody, response: { 200: ViewOut } },
    },
    async (req) => updateView(req.ctx, req.params.brandId, req.params.viewId, req.body),
  );

  app.delete<InView>(
    '/views/:viewId',
    { config: write, schema: { tags, summary: `Delete a view; returns it. ${rights}`, params: ViewParams, response: { 200: ViewOut } } },
    async (req) => views.remove(req.ctx, req.params.brandId, req.params.viewId),
  );

  app.get<{ Params: { brandId: string; viewId: string }; Querystring: ViewTicketsInput }>(
    '/views/:viewId/tickets',
    {
      config: read,
      schema: {
        tags,
        summary: 'A page of the view’s tickets: GET …/tickets with the view’s filters and order, its page shape and cursor (limit and cursor as there)',
        params: ViewParams,
        querystring: ViewTicketsQuery,
        response: { 200: TicketPage },
      },
    },
    async (req) => onReplica(req.ctx, (ctx) => viewTickets(ctx, req.params.brandId, req.params.viewId, req.query)),
  );
}
