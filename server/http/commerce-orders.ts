import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import {
  ByCustomerParams,
  ByTicketParams,
  LinkBody,
  OrderListQuery,
  OrderOut,
  OrderPage,
  OrderParams,
  OrderTicketOut,
  OrderTicketParams,
  ProductListQuery,
  ProductPage,
  type LinkInput,
  type OrderListInput,
  type ProductListInput,
} from '../domains/commerce/order-schemas.js';
import * as orders from '../domains/commerce/orders.js';

type InBrand<Q = unknown> = { Params: { brandId: string }; Querystring: Q };
type InOrder<B = undefined> = { Params: { brandId: string; orderId: string }; Body: B };

/** A brand's orders and products from its connected stores, and their links to tickets. Mounted under /v1/brands/:brandId/ecommerce and /v1/workspaces/:brandId/ecommerce. */
export async function commerceOrderRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['E-commerce'];
  const read = { auth: ['api-key', 'session'], permission: 'commerce:read' } as const;
  const linking = { auth: ['api-key', 'session'], permission: 'commerce:link' } as const;

  app.get<InBrand<OrderListInput>>(
    '/ecommerce/orders',
    {
      config: read,
      schema: {
        tags,
        summary: "List the brand's orders, newest first (by the platform's creation time), with their items",
        params: BrandParams,
        querystring: OrderListQuery,
        response: { 200: OrderPage },
      },
    },
    async (req) => orders.list(req.ctx, req.params.brandId, req.query),
  );

  app.get<{ Params: { brandId: string; contactId: string } }>(
    '/ecommerce/orders/by-customer/:contactId',
    {
      config: read,
      schema: {
        tags,
        summary: `A contact's orders (those placed with its email), newest first, at most ${orders.ORDERS_BESIDE_MAX}: a bare array, [] without a store; 404 for a contact the brand does not have`,
        params: ByCustomerParams,
        response: { 200: Type.Array(OrderOut) },
      },
    },
    async (req) => orders.byCustomer(req.ctx, req.params.brandId, req.params.contactId),
  );

  app.get<{ Params: { brandId: string; ticketId: string } }>(
    '/ecommerce/orders/by-ticket/:ticketId',
    {
      config: read,
      schema: {
        tags,
        summary: `A ticket's linked orders, newest first, at most ${orders.ORDERS_BESIDE_MAX}: a bare array, [] without a store; 404 for a ticket the brand does not have`,
        params: ByTicketParams,
        response: { 200: Type.Array(OrderOut) },
      },
    },
    async (req) => orders.byTicket(req.ctx, req.params.brandId, req.params.ticketId),
  );

  app.get<InOrder>(
    '/ecommerce/orders/:orderId',
    {
      config: read,
      schema: { tags, summary: 'Get an order with its items, its store and its links to tickets', params: OrderParams, response: { 200: OrderOut } },
    },
    async (req) => orders.get(req.ctx, req.params.brandId, req.params.orderId),
  );

  app.post<InOrder<LinkInput>>(
    '/ecommerce/orders/:orderId/link',
    {
      config: linking,
      schema: {
        tags,
        summary: 'Link the order to a ticket of the brand (201 with the link); linked already, the existing link (200). 404 for an order or ticket the brand does not have',
        params: OrderParams,
        body: LinkBody,
        response: { 201: OrderTicketOut, 200: OrderTicketOut },
      },
    },
    async (req, reply) => {
      const result = await orders.link(req.ctx, req.params.brandId, req.params.orderId, req.body.ticketId, req.body.linkType);
      return reply.status(result.created ? 201 : 200).send(result.link);
    },
  );

  app.delete<{ Params: { brandId: string; orderId: string; ticketId: string } }>(
    '/ecommerce/orders/:orderId/link/:ticketId',
    {
      config: linking,
      schema: {
        tags,
        summary: "Remove the order's link to the ticket, by hand or automatic (204); 404 when there is none",
        params: OrderTicketParams,
        response: { 204: Type.Null({ description: 'No content' }) },
      },
    },
    async (req, reply) => {
      await orders.unlink(req.ctx, req.params.brandId, req.params.orderId, req.params.ticketId);
      return reply.status(204).send();
    },
  );

  app.get<InBrand<ProductListInput>>(
    '/ecommerce/products',
    {
      config: read,
      schema: {
        tags,
        summary: "List the brand's products from its stores, by name",
        params: BrandParams,
        querystring: ProductListQuery,
        response: { 200: ProductPage },
      },
    },
    async (req) => orders.listProducts(req.ctx, req.params.brandId, req.query),
  );
}
