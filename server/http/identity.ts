import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../core/config.js';
import { receive } from '../flows/identity-notifications.js';
import { Notification, NotificationResult, ProviderParams, type NotificationInput } from '../domains/identity/schemas.js';
import { secretOf, verify } from '../domains/identity/service.js';

/** Notifications are small; a larger body is refused before it is read. */
const MAX_NOTIFICATION_BYTES = 256 * 1024;

/**
 * `POST /v1/webhooks/{provider}`: an identity provider's notification. The signature covers the
 * exact bytes: this scope's JSON parser keeps the text of each body beside the parsed value (the
 * app's own parser does the parsing, with its limits).
 */
export async function identityRoutes(app: FastifyInstance, { config }: { config: Config }): Promise<void> {
  const texts = new WeakMap<FastifyRequest, string>();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: MAX_NOTIFICATION_BYTES }, (req, body, done) => {
    texts.set(req, body as string);
    parseJson(req, body as string, done);
  });

  app.post<{ Params: { provider: string }; Body: NotificationInput }>(
    '/v1/webhooks/:provider',
    {
      // The provider retries what fails; its deliveries are not one client's to budget.
      config: { auth: 'none', permission: 'identity:notify', rateLimit: false },
      bodyLimit: MAX_NOTIFICATION_BYTES,
      // The provider is known, and the signature holds, before the body's shape is judged.
      attachValidation: true,
      schema: {
        tags: ['Identity provider'],
        summary:
          "A notification of the identity provider (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature). user.created and user.updated set the member's name and email, user.deleted ends their sessions; applied once per webhook-id. Unknown provider 404, bad signature 400",
        params: ProviderParams,
        body: Notification,
        response: { 200: NotificationResult },
      },
    },
    async (req) => {
      verify(secretOf(config, req.params.provider), texts.get(req) ?? '', req.headers, req.baseCtx.services.now());
      if (req.validationError) throw req.validationError;
      return receive(req.baseCtx, req.params.provider, String(req.headers['webhook-id']), req.body);
    },
  );
}
