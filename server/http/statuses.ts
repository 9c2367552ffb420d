import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import {
  CreateStatusBody,
  ReorderStatusesBody,
  StatusOut,
  StatusParams,
  StatusWithCount,
  UpdateStatusBody,
  type CreateStatusInput,
  type ReorderStatusesInput,
  type UpdateStatusInput,
} from '../domains/statuses/schemas.js';
import * as statuses from '../domains/statuses/service.js';
import { onReplica } from '../core/read-replica.js';

type InBrand<B = undefined> = { Params: { brandId: string }; Body: B };
type InStatus<B = undefined> = { Params: { brandId: string; statusId: string }; Body: B };

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function statusRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Statuses'];
  const read = { auth: ['api-key', 'session'], permission: 'statuses:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'statuses:write' } as const;

  app.get<InBrand>(
    '/statuses',
    {
      config: read,
      schema: { tags, summary: "List the brand's statuses in display order", params: BrandParams, response: { 200: Type.Array(StatusOut) } },
    },
    async (req) => statuses.list(req.ctx, req.params.brandId),
  );

  app.post<InBrand<CreateStatusInput>>(
    '/statuses',
    {
      config: write,
      schema: { tags, summary: 'Create a custom status (409 status_key_taken when the key exists)', params: BrandParams, body: CreateStatusBody, response: { 201: StatusOut } },
    },
    async (req, reply) => reply.status(201).send(await statuses.create(req.ctx, req.params.brandId, req.body)),
  );

  // Static paths before /:statusId, so "stats" and "reorder" are never taken for ids.
  app.get<InBrand>(
    '/statuses/stats',
    {
      config: read,
      schema: { tags, summary: 'Statuses with their ticket counts', params: BrandParams, response: { 200: Type.Array(StatusWithCount) } },
    },
    async (req) => onReplica(req.ctx, (ctx) => statuses.stats(ctx, req.params.brandId)),
  );

  app.post<InBrand<ReorderStatusesInput>>(
    '/statuses/reorder',
    {
      config: write,
      schema: {
        tags,
        summary: 'Reorder statuses: statusIds lists every status of the brand once',
        params: BrandParams,
        body: ReorderStatusesBody,
        response: { 200: Type.Array(StatusOut) },
      },
    },
    async (req) => statuses.reorder(req.ctx, req.params.brandId, req.body),
  );

  app.get<InStatus>(
    '/statuses/:statusId',
    {
      config: read,
      schema: { tags, summary: 'Get a status', params: StatusParams, response: { 200: StatusOut } },
    },
    async (req) => statuses.get(req.ctx, req.params.brandId, req.params.statusId),
  );

  app.patch<InStatus<UpdateStatusInput>>(
    '/statuses/:statusId',
    {
      config: write,
      schema: { tags, summary: 'Update a status (a system status keeps its key: 403 system_status)', params: StatusParams, body: UpdateStatusBody, response: { 200: StatusOut } },
    },
    async (req) => statuses.update(req.ctx, req.params.brandId, req.params.statusId, req.body),
  );

  app.delete<InStatus>(
    '/statuses/:statusId',
    {
      config: write,
      schema: { tags, summary: 'Delete a custom status (403 system_status for system ones); returns it', params: StatusParams, response: { 200: StatusOut } },
    },
    async (req) => statuses.remove(req.ctx, req.params.brandId, req.params.statusId),
  );
}
