import type { FastifyInstance } from 'fastify';
import { sessionMemberId } from '../core/context.js';
import { Success } from '../core/schemas.js';
import {
  CreateFeatureRequestBody,
  FeatureRequestActivity,
  FeatureRequestList,
  FeatureRequestListQuery,
  FeatureRequestOut,
  FeatureRequestParams,
  UpdateFeatureRequestBody,
  type CreateFeatureRequestInput,
  type FeatureRequestListInput,
  type UpdateFeatureRequestInput,
} from '../domains/feature-requests/schemas.js';
import * as featureRequests from '../domains/feature-requests/service.js';

/** The team's feature-request board, for signed-in members. */
export async function featureRequestRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Feature requests'];
  const read = { auth: 'session', permission: 'feature_requests:read' } as const;
  const write = { auth: 'session', permission: 'feature_requests:write' } as const;

  app.get<{ Querystring: FeatureRequestListInput }>(
    '/v1/auth/feature-requests',
    {
      config: read,
      schema: {
        tags,
        summary: "The organization's requests (status filter; sortBy votes, newest or oldest)",
        querystring: FeatureRequestListQuery,
        response: { 200: FeatureRequestList },
      },
    },
    async (req) => ({ requests: await featureRequests.list(req.ctx, req.query) }),
  );

  app.post<{ Body: CreateFeatureRequestInput }>(
    '/v1/auth/feature-requests',
    { config: write, schema: { tags, summary: 'Propose a feature (status new)', body: CreateFeatureRequestBody, response: { 201: FeatureRequestOut } } },
    async (req, reply) => reply.status(201).send(await featureRequests.create(req.ctx, sessionMemberId(req.ctx), req.body)),
  );

  app.get(
    '/v1/auth/feature-requests/activity',
    { config: read, schema: { tags, summary: 'What the caller voted for and proposed', response: { 200: FeatureRequestActivity } } },
    async (req) => featureRequests.activity(req.ctx, sessionMemberId(req.ctx)),
  );

  app.patch<{ Params: { id: string }; Body: UpdateFeatureRequestInput }>(
    '/v1/auth/feature-requests/:id',
    {
      config: { auth: 'session', permission: 'feature_requests:manage' },
      schema: { tags, summary: "Set a request's status (owners and admins)", params: FeatureRequestParams, body: UpdateFeatureRequestBody, response: { 200: FeatureRequestOut } },
    },
    async (req) => featureRequests.setStatus(req.ctx, req.params.id, req.body.status),
  );

  for (const [method, on] of [
    ['POST', true],
    ['DELETE', false],
  ] as const) {
    app.route<{ Params: { id: string } }>({
      method,
      url: '/v1/auth/feature-requests/:id/vote',
      config: write,
      schema: {
        tags,
        summary: on ? 'Vote for a request (once per member; again: a no-op)' : 'Take back a vote (none cast: a no-op)',
        params: FeatureRequestParams,
        response: { 200: Success },
      },
      handler: async (req) => {
        await featureRequests.vote(req.ctx, sessionMemberId(req.ctx), req.params.id, on);
        return { success: true as const };
      },
    });
  }
}
