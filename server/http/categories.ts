import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams, Success } from '../core/schemas.js';
import {
  CategoryOut,
  CategoryParams,
  CategoryStats,
  CreateCategoryBody,
  ReorderCategoriesBody,
  UpdateCategoryBody,
  type CreateCategoryInput,
  type ReorderCategoriesInput,
  type UpdateCategoryInput,
} from '../domains/categories/schemas.js';
import * as categories from '../domains/categories/service.js';
import { onReplica } from '../core/read-replica.js';
import { isDashboardCaller, keyedById } from '../core/client-shapes.js';

type BrandRoute<B = undefined> = { Params: { brandId: string }; Body: B };
type CategoryRoute<B = undefined> = { Params: { brandId: string; categoryId: string }; Body: B };

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function categoryRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Categories'];
  const read = { auth: ['api-key', 'session'], permission: 'categories:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'categories:write' } as const;

  app.get<BrandRoute>(
    '/categories',
    {
      config: read,
      schema: { tags, summary: 'List the categories of a brand, by sortOrder', params: BrandParams, response: { 200: Type.Array(CategoryOut) } },
    },
    async (req) => categories.list(req.ctx, req.params.brandId),
  );

  app.post<BrandRoute<CreateCategoryInput>>(
    '/categories',
    {
      config: write,
      schema: { tags, summary: 'Create a category (name unique per brand, ignoring case)', params: BrandParams, body: CreateCategoryBody, response: { 201: CategoryOut } },
    },
    async (req, reply) => reply.status(201).send(await categories.create(req.ctx, req.params.brandId, req.body)),
  );

  // Fixed paths before /:categoryId (find-my-way prefers static segments anyway; this keeps intent obvious).
  app.get<BrandRoute>(
    '/categories/stats',
    {
      config: read,
      schema: {
        tags,
        summary: 'Ticket count per category: a list [{ id, name, color, ticketCount }] to a session, { [categoryId]: { … } } to an API key',
        params: BrandParams,
        response: { 200: CategoryStats },
      },
    },
    async (req) => {
      const rows = await onReplica(req.ctx, (ctx) => categories.stats(ctx, req.params.brandId));
      return isDashboardCaller(req.ctx) ? rows : keyedById(rows);
    },
  );

  app.post<BrandRoute<ReorderCategoriesInput>>(
    '/categories/reorder',
    {
      config: write,
      schema: { tags, summary: 'Set the order of all categories of the brand', params: BrandParams, body: ReorderCategoriesBody, response: { 200: Type.Array(CategoryOut) } },
    },
    async (req) => categories.reorder(req.ctx, req.params.brandId, req.body),
  );

  app.get<CategoryRoute>(
    '/categories/:categoryId',
    {
      config: read,
      schema: { tags, summary: 'Get a category', params: CategoryParams, response: { 200: CategoryOut } },
    },
    async (req) => categories.get(req.ctx, req.params.brandId, req.params.categoryId),
  );

  app.patch<CategoryRoute<UpdateCategoryInput>>(
    '/categories/:categoryId',
    {
      config: write,
      schema: { tags, summary: 'Update a category', params: CategoryParams, body: UpdateCategoryBody, response: { 200: CategoryOut } },
    },
    async (req) => categories.update(req.ctx, req.params.brandId, req.params.categoryId, req.body),
  );

  app.delete<CategoryRoute>(
    '/categories/:categoryId',
    {
      config: write,
      schema: { tags, summary: 'Delete a category; its tickets become uncategorized', params: CategoryParams, response: { 200: Success } },
    },
    async (req) => {
      await categories.remove(req.ctx, req.params.brandId, req.params.categoryId);
      return { success: true as const };
    },
  );
}
