import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import { BlockedSourceOut, BlockedSourceParams, CreateBlockedSourceBody, type CreateBlockedSourceInput } from '../domains/blocked-sources/schemas.js';
import * as blockedSources from '../domains/blocked-sources/service.js';

const tags = ['Blocked sources'];

/** /blocked-sources under a brand: block an address or a domain, list, unblock. */
export async function blockedSourceRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Params: { brandId: string }; Body: CreateBlockedSourceInput }>(
    '/blocked-sources',
    {
      config: { auth: ['api-key', 'session'], permission: 'blocked_sources:write' },
      schema: { tags, summary: 'Block an email address or a domain', params: BrandParams, body: CreateBlockedSourceBody, response: { 201: BlockedSourceOut } },
    },
    async (req, reply) => reply.status(201).send(await blockedSources.create(req.ctx, req.params.brandId, req.body)),
  );

  app.get<{ Params: { brandId: string } }>(
    '/blocked-sources',
    {
      config: { auth: ['api-key', 'session'], permission: 'blocked_sources:read' },
      schema: { tags, summary: 'List blocked sources (oldest first, bare array)', params: BrandParams, response: { 200: Type.Array(BlockedSourceOut) } },
    },
    async (req) => blockedSources.list(req.ctx, req.params.brandId),
  );

  app.delete<{ Params: { brandId: string; sourceId: string } }>(
    '/blocked-sources/:sourceId',
    {
      config: { auth: ['api-key', 'session'], permission: 'blocked_sources:write' },
      schema: { tags, summary: 'Unblock: returns the removed blocked source', params: BlockedSourceParams, response: { 200: BlockedSourceOut } },
    },
    async (req) => blockedSources.remove(req.ctx, req.params.brandId, req.params.sourceId),
  );
}
