import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import { ConnectStoreBody, StoreOut, StoreParams, type ConnectStoreInput } from '../domains/commerce/store-schemas.js';
import * as stores from '../domains/commerce/stores.js';
import { connectStore, disconnectStore } from '../flows/commerce-stores.js';

type InBrand<B = undefined> = { Params: { brandId: string }; Body: B };
type InStore = { Params: { brandId: string; storeId: string } };

/**
 * A brand's connected stores: list, connect, sync, disconnect. Mounted under
 * /v1/brands/:brandId/ecommerce and /v1/workspaces/:brandId/ecommerce. Connect and disconnect talk
 * to the store while the request waits (bounded by commerceTimeoutMs), never inside a transaction;
 * the syncs are the dispatcher's.
 */
export async function commerceStoreRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['E-commerce'];
  const read = { auth: ['api-key', 'session'], permission: 'commerce:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'commerce:write' } as const;

  app.get<InBrand>(
    '/ecommerce/stores',
    {
      config: read,
      schema: {
        tags,
        summary: "List the brand's connected stores, oldest first (a bare array; [] without any). The access token never comes out",
        params: BrandParams,
        response: { 200: Type.Array(StoreOut) },
      },
    },
    async (req) => stores.list(req.ctx, req.params.brandId),
  );

  app.post<InBrand<ConnectStoreInput>>(
    '/ecommerce/stores/connect',
    {
      config: write,
      schema: {
        tags,
        summary:
          "Connect a store: { platform: BIGCOMMERCE, accessToken, storeHash }, checked against the store first (400 store_credentials_refused with the store's words; 400 store_unreachable). The token is kept sealed; the store's order notifications are registered and a first full sync starts at once. The same store again: the new token, its orders kept",
        params: BrandParams,
        body: ConnectStoreBody,
        response: { 201: StoreOut },
      },
    },
    async (req, reply) => reply.status(201).send((await connectStore(req.ctx, req.params.brandId, req.body)).store),
  );

  app.post<InStore>(
    '/ecommerce/stores/:storeId/sync',
    {
      config: write,
      schema: {
        tags,
        summary:
          'Sync the store now (no body): 202, the dispatcher reads what changed (the whole store, the first time). 409 store_disconnected when the store refused its token: connect it again',
        params: StoreParams,
        response: { 202: StoreOut },
      },
    },
    async (req, reply) => reply.status(202).send(await stores.requestSync(req.ctx, req.params.brandId, req.params.storeId)),
  );

  app.delete<InStore>(
    '/ecommerce/stores/:storeId',
    {
      config: write,
      schema: {
        tags,
        summary:
          'Disconnect the store: its orders, their links to tickets and its products are deleted with it, its notifications removed at the store (best effort). Returns it, DISCONNECTED',
        params: StoreParams,
        response: { 200: StoreOut },
      },
    },
    async (req) => disconnectStore(req.ctx, req.params.brandId, req.params.storeId),
  );
}
