import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams, Success } from '../core/schemas.js';
import {
  CreateTagBody,
  MergeBody,
  MergeIntoBody,
  MergeTargetParams,
  TagOut,
  TagParams,
  TagStats,
  UpdateTagBody,
  type CreateTagInput,
  type MergeInput,
  type MergeIntoInput,
  type UpdateTagInput,
} from '../domains/tags/schemas.js';
import * as tagService from '../domains/tags/service.js';
import { onReplica } from '../core/read-replica.js';
import { isDashboardCaller, keyedById } from '../core/client-shapes.js';

type BrandRoute<B = undefined> = { Params: { brandId: string }; Body: B };
type TagRoute<B = undefined> = { Params: { brandId: string; tagId: string }; Body: B };

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function tagRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Tags'];
  const read = { auth: ['api-key', 'session'], permission: 'tags:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'tags:write' } as const;

  app.get<BrandRoute>(
    '/tags',
    {
      config: read,
      schema: { tags, summary: 'List the tags of a brand, by name', params: BrandParams, response: { 200: Type.Array(TagOut) } },
    },
    async (req) => tagService.list(req.ctx, req.params.brandId),
  );

  app.post<BrandRoute<CreateTagInput>>(
    '/tags',
    {
      config: write,
      schema: { tags, summary: 'Create a tag (name unique per brand, ignoring case)', params: BrandParams, body: CreateTagBody, response: { 201: TagOut } },
    },
    async (req, reply) => reply.status(201).send(await tagService.create(req.ctx, req.params.brandId, req.body)),
  );

  // Fixed paths before /:tagId.
  app.get<BrandRoute>(
    '/tags/stats',
    {
      config: read,
      schema: {
        tags,
        summary: 'Ticket count per tag: a list [{ id, name, color, ticketCount }] to a session, { [tagId]: { … } } to an API key',
        params: BrandParams,
        response: { 200: TagStats },
      },
    },
    async (req) => {
      const rows = await onReplica(req.ctx, (ctx) => tagService.stats(ctx, req.params.brandId));
      return isDashboardCaller(req.ctx) ? rows : keyedById(rows);
    },
  );

  app.post<BrandRoute<MergeInput>>(
    '/tags/merge',
    {
      config: write,
      schema: { tags, summary: 'Merge tags into targetTagId (dashboard spelling); returns the target', params: BrandParams, body: MergeBody, response: { 200: TagOut } },
    },
    async (req) => tagService.merge(req.ctx, req.params.brandId, req.body.targetTagId, req.body.sourceTagIds),
  );

  app.get<TagRoute>(
    '/tags/:tagId',
    {
      config: read,
      schema: { tags, summary: 'Get a tag', params: TagParams, response: { 200: TagOut } },
    },
    async (req) => tagService.get(req.ctx, req.params.brandId, req.params.tagId),
  );

  app.patch<TagRoute<UpdateTagInput>>(
    '/tags/:tagId',
    {
      config: write,
      schema: { tags, summary: 'Update a tag', params: TagParams, body: UpdateTagBody, response: { 200: TagOut } },
    },
    async (req) => tagService.update(req.ctx, req.params.brandId, req.params.tagId, req.body),
  );

  app.delete<TagRoute>(
    '/tags/:tagId',
    {
      config: write,
      schema: { tags, summary: 'Delete a tag; tickets lose it', params: TagParams, response: { 200: Success } },
    },
    async (req) => {
      await tagService.remove(req.ctx, req.params.brandId, req.params.tagId);
      return { success: true as const };
    },
  );

  app.post<{ Params: { brandId: string; targetId: string }; Body: MergeIntoInput }>(
    '/tags/:targetId/merge',
    {
      config: write,
      schema: { tags, summary: 'Merge sourceTagIds into this tag (SDK spelling); returns the target', params: MergeTargetParams, body: MergeIntoBody, response: { 200: TagOut } },
    },
    async (req) => tagService.merge(req.ctx, req.params.brandId, req.params.targetId, req.body.sourceTagIds),
  );
}
