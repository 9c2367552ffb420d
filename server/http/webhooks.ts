import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import {
  CreateWebhookBody,
  DeliveryListQuery,
  DeliveryOut,
  DeliveryParams,
  RotateSecretBody,
  UpdateWebhookBody,
  WebhookOut,
  WebhookParams,
  WebhookWithSecretOut,
  type CreateWebhookInput,
  type DeliveryListInput,
  type RotateSecretInput,
  type UpdateWebhookInput,
} from '../domains/webhooks/schemas.js';
import * as webhooks from '../domains/webhooks/service.js';

export interface WebhookRouteOptions {
  policy: webhooks.WebhookPolicy;
}

type BrandRoute<B = undefined> = { Params: { brandId: string }; Body: B };
type WebhookRoute<B = undefined, Q = undefined> = { Params: { brandId: string; webhookId: string }; Body: B; Querystring: Q };
type DeliveryRoute = { Params: { brandId: string; webhookId: string; deliveryId: string } };

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function webhookRoutes(app: FastifyInstance, { policy }: WebhookRouteOptions): Promise<void> {
  const tags = ['Webhooks'];
  const read = { auth: ['api-key', 'session'], permission: 'webhooks:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'webhooks:write' } as const;

  app.get<BrandRoute>(
    '/webhooks',
    {
      config: read,
      schema: { tags, summary: 'List the webhooks of a brand (bare array, oldest first; secrets are never shown)', params: BrandParams, response: { 200: Type.Array(WebhookOut) } },
    },
    async (req) => webhooks.list(req.ctx, req.params.brandId),
  );

  app.post<BrandRoute<CreateWebhookInput>>(
    '/webhooks',
    {
      config: write,
      schema: {
        tags,
        summary: 'Register a webhook; the answer carries its signing secret, shown only this once',
        params: BrandParams,
        body: CreateWebhookBody,
        response: { 201: WebhookWithSecretOut },
      },
    },
    async (req, reply) => reply.status(201).send(await webhooks.create(req.ctx, policy, req.params.brandId, req.body)),
  );

  app.get<WebhookRoute>(
    '/webhooks/:webhookId',
    {
      config: read,
      schema: { tags, summary: 'Get a webhook', params: WebhookParams, response: { 200: WebhookOut } },
    },
    async (req) => webhooks.get(req.ctx, req.params.brandId, req.params.webhookId),
  );

  app.patch<WebhookRoute<UpdateWebhookInput>>(
    '/webhooks/:webhookId',
    {
      config: write,
      schema: {
        tags,
        summary: 'Change url, events, or enabled (also spelled active); enabling clears the failure streak',
        params: WebhookParams,
        body: UpdateWebhookBody,
        response: { 200: WebhookOut },
      },
    },
    async (req) => webhooks.update(req.ctx, policy, req.params.brandId, req.params.webhookId, req.body),
  );

  app.delete<WebhookRoute>(
    '/webhooks/:webhookId',
    {
      config: write,
      schema: { tags, summary: 'Delete a webhook and its delivery log; returns it', params: WebhookParams, response: { 200: WebhookOut } },
    },
    async (req) => webhooks.remove(req.ctx, req.params.brandId, req.params.webhookId),
  );

  app.post<WebhookRoute<RotateSecretInput | undefined>>(
    '/webhooks/:webhookId/rotate-secret',
    {
      config: write,
      schema: { tags, summary: 'Replace the signing secret; the new one is returned once', params: WebhookParams, body: RotateSecretBody, response: { 200: WebhookWithSecretOut } },
    },
    async (req) => webhooks.rotateSecret(req.ctx, req.params.brandId, req.params.webhookId, req.body ?? {}),
  );

  app.get<WebhookRoute<undefined, DeliveryListInput>>(
    '/webhooks/:webhookId/deliveries',
    {
      config: read,
      schema: {
        tags,
        summary: "The webhook's deliveries, newest first (bare array)",
        params: WebhookParams,
        querystring: DeliveryListQuery,
        response: { 200: Type.Array(DeliveryOut) },
      },
    },
    async (req) => webhooks.deliveries(req.ctx, req.params.brandId, req.params.webhookId, req.query),
  );

  app.post<DeliveryRoute>(
    '/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
    {
      config: write,
      schema: {
        tags,
        summary: "Send a past delivery's body again now, as a new delivery (its own id and attempt log); 409 while the webhook is disabled",
        params: DeliveryParams,
        response: { 201: DeliveryOut },
      },
    },
    async (req, reply) => reply.status(201).send(await webhooks.redeliver(req.ctx, req.params.brandId, req.params.webhookId, req.params.deliveryId)),
  );
}
