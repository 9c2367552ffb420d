import type { FastifyInstance } from 'fastify';

/** A brand's connected stores: list, connect, sync, disconnect. Mounted under /v1/brands/:brandId/ecommerce and /v1/workspaces/:brandId/ecommerce. */
export async function commerceStoreRoutes(_app: FastifyInstance): Promise<void> {}
