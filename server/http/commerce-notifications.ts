import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { receiveNotification } from '../flows/commerce-stores.js';

/** A store's notification is small: an event name and an id. */
const MAX_NOTIFICATION_BYTES = 64 * 1024;

const NotificationParams = Type.Object({
  platform: Type.String({ minLength: 1, maxLength: 32, pattern: '^[a-z]+$', description: 'bigcommerce' }),
  accountId: Type.String({ minLength: 1, maxLength: 64 }),
  storeId: Type.String({ minLength: 1, maxLength: 64 }),
});

const NotificationOut = Type.Object({
  received: Type.Literal(true),
  action: Type.Union([Type.Literal('updated'), Type.Literal('deferred'), Type.Literal('ignored')], {
    description: 'updated: the order was fetched from the store and written; deferred: the store could not be asked now, the store is due a sync; ignored: nothing ticketd keeps',
  }),
});

/**
 * `POST /v1/ecommerce/notifications/{platform}/{accountId}/{storeId}`: a connected store's order
 * notifications, registered at the store on connect. No credential but the secret ticketd gave the
 * store, in the header it registered (X-Ticketd-Notify-Secret for BigCommerce); the account in
 * the path keeps the lookup to one tenant.
 */
export async function commerceNotificationRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Params: { platform: string; accountId: string; storeId: string }; Body: unknown }>(
    '/v1/ecommerce/notifications/:platform/:accountId/:storeId',
    {
      // The store retries what fails; its deliveries are not one client's to budget.
      config: { auth: 'none', permission: 'commerce:notify', rateLimit: false },
      bodyLimit: MAX_NOTIFICATION_BYTES,
      schema: {
        tags: ['E-commerce'],
        summary:
          "A connected store's order notification, with the secret registered for it (401 invalid_notification_secret otherwise, for an unknown store too, and nothing changes). The order is fetched again from the store, not taken from the payload",
        params: NotificationParams,
        response: { 200: NotificationOut },
      },
    },
    async (req) => {
      const header = (name: string) => {
        const value = req.headers[name];
        return Array.isArray(value) ? value[0] : value;
      };
      return receiveNotification(req.baseCtx, req.params, header, req.body);
    },
  );
}
