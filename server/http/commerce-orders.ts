import type { FastifyInstance } from 'fastify';

/** A brand's orders and products from its connected stores, and their links to tickets. Mounted under /v1/brands/:brandId/ecommerce and /v1/workspaces/:brandId/ecommerce. */
export async function commerceOrderRoutes(_app: FastifyInstance): Promise<void> {}
