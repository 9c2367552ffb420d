import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import { BrandOut, CreateBrandBody, DeleteBrandQuery, DeleteBrandResult, UpdateBrandBody, type CreateBrandInput, type UpdateBrandInput } from '../domains/brands/schemas.js';
import * as brands from '../domains/brands/service.js';
import { createBrand, deleteBrand } from '../flows/brands.js';

type BrandRoute<B = undefined, Q = undefined> = { Params: { brandId: string }; Body: B; Querystring: Q };

/** Registered twice: under /v1/brands and under /v1/workspaces, with identical behaviour. */
export async function brandRoutes(app: FastifyInstance): Promise<void> {
  const tags = [app.prefix.endsWith('workspaces') ? 'Workspaces (alias of brands)' : 'Brands'];

  app.post<{ Body: CreateBrandInput }>(
    '',
    {
      config: { auth: ['api-key', 'session'], permission: 'brands:create' },
      schema: { tags, summary: 'Create a brand', body: CreateBrandBody, response: { 201: BrandOut } },
    },
    async (req, reply) => reply.status(201).send(await createBrand(req.ctx, req.body)),
  );

  app.get(
    '',
    {
      config: { auth: ['api-key', 'session'], permission: 'brands:read' },
      schema: { tags, summary: 'List the brands this key may see', response: { 200: Type.Array(BrandOut) } },
    },
    async (req) => brands.list(req.ctx),
  );

  app.get<BrandRoute>(
    '/:brandId',
    {
      config: { auth: ['api-key', 'session'], permission: 'brands:read' },
      schema: { tags, summary: 'Get a brand', params: BrandParams, response: { 200: BrandOut } },
    },
    async (req) => brands.get(req.ctx, req.params.brandId),
  );

  app.patch<BrandRoute<UpdateBrandInput>>(
    '/:brandId',
    {
      config: { auth: ['api-key', 'session'], permission: 'brands:write' },
      schema: { tags, summary: 'Update a brand', params: BrandParams, body: UpdateBrandBody, response: { 200: BrandOut } },
    },
    async (req) => brands.update(req.ctx, req.params.brandId, req.body),
  );

  app.delete<BrandRoute<undefined, { confirm?: boolean }>>(
    '/:brandId',
    {
      config: { auth: ['api-key', 'session'], permission: 'brands:delete' },
      schema: {
        tags,
        summary: 'Preview deleting a brand, or delete it with everything in it (?confirm=true)',
        params: BrandParams,
        querystring: DeleteBrandQuery,
        response: { 200: DeleteBrandResult },
      },
    },
    async (req) => deleteBrand(req.ctx, req.params.brandId, req.query.confirm === true),
  );
}
