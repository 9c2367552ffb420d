import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import {
  ApiKeyOut,
  ApiKeyWithSecret,
  CreateApiKeyBody,
  KeyParams,
  RevokeResult,
  RotateBody,
  RotateResult,
  UpdateScopeBody,
  type CreateApiKeyInput,
  type UpdateScopeInput,
} from '../domains/api-keys/schemas.js';
import { Success } from '../core/schemas.js';
import * as apiKeys from '../domains/api-keys/service.js';

type KeyRoute<B = undefined> = { Params: { keyId: string }; Body: B };

export async function apiKeyRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['API keys'];

  app.get(
    '/v1/accounts/me/api-keys',
    {
      config: { auth: ['api-key', 'session'], permission: 'api_keys:read' },
      schema: { tags, summary: 'List active API keys of this mode (secrets are never shown again)', response: { 200: Type.Array(ApiKeyOut) } },
    },
    async (req) => apiKeys.list(req.ctx),
  );

  app.post<{ Body: CreateApiKeyInput }>(
    '/v1/accounts/me/api-keys',
    {
      config: { auth: ['api-key', 'session'], permission: 'api_keys:write' },
      schema: { tags, summary: 'Create an API key in the mode of the calling key; `key` is returned once', body: CreateApiKeyBody, response: { 201: ApiKeyWithSecret } },
    },
    async (req, reply) => reply.status(201).send(await apiKeys.create(req.ctx, req.body)),
  );

  app.patch<KeyRoute<UpdateScopeInput>>(
    '/v1/accounts/me/api-keys/:keyId/scope',
    {
      config: { auth: ['api-key', 'session'], permission: 'api_keys:write' },
      schema: {
        tags,
        summary: 'Change the brand scope of a key',
        params: KeyParams,
        body: UpdateScopeBody,
        response: { 200: Type.Object({ ...Success.properties, apiKey: ApiKeyOut }) },
      },
    },
    async (req) => ({ success: true as const, apiKey: await apiKeys.updateScope(req.ctx, req.params.keyId, req.body) }),
  );

  app.post<KeyRoute<{ graceMinutes?: number }>>(
    '/v1/accounts/me/api-keys/:keyId/rotate',
    {
      config: { auth: ['api-key', 'session'], permission: 'api_keys:write' },
      schema: {
        tags,
        summary: 'Issue a replacement with the same scope; the old key stops now or after graceMinutes',
        params: KeyParams,
        body: RotateBody,
        response: { 200: RotateResult },
      },
    },
    async (req) => apiKeys.rotate(req.ctx, req.params.keyId, req.body.graceMinutes ?? 0),
  );

  app.delete<KeyRoute>(
    '/v1/accounts/me/api-keys/:keyId',
    {
      config: { auth: ['api-key', 'session'], permission: 'api_keys:write' },
      schema: { tags, summary: 'Revoke a key; it fails with 401 from the next request on', params: KeyParams, response: { 200: RevokeResult } },
    },
    async (req) => apiKeys.revoke(req.ctx, req.params.keyId),
  );
}
