import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { BaseCtx } from '../../core/context.js';
import type { Config } from '../../core/config.js';
import { badRequest, HttpError } from '../../core/errors.js';

/**
 * Notifications of an identity provider: verified with the Standard Webhooks scheme (the
 * `standardwebhooks` library: HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the
 * configured secret, timestamps within five minutes) and applied once per message id.
 */

/** The provider's signing secret; 404 for a provider that is not configured. */
export function secretOf(config: Pick<Config, 'identityProviders'>, provider: string): string {
  const configured = Object.hasOwn(config.identityProviders, provider) ? config.identityProviders[provider] : undefined;
  if (!configured) throw new HttpError(404, 'not_found', `Identity provider ${provider} not found: it is not configured (identityProviders)`);
  return configured.secret;
}

/** The raw body, verified against its headers; 400 when the signature or its timestamp does not hold. */
export function verify(secret: string, body: string, headers: Record<string, string | string[] | undefined>): void {
  const flat: Record<string, string> = {};
  for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
    const value = headers[name];
    if (typeof value === 'string') flat[name] = value;
  }
  try {
    new Webhook(secret).verify(body, flat);
  } catch (err) {
    if (err instanceof WebhookVerificationError) throw badRequest(`The notification's signature does not verify: ${err.message}`, undefined, 'invalid_signature');
    throw err;
  }
}

/** Records a message id as applied (in the applying transaction); false when it was applied before. */
export async function firstDelivery(tx: BaseCtx, provider: string, messageId: string, event: string): Promise<boolean> {
  const inserted = await tx.db('identityNotifications').insert({ provider, messageId, event }).onConflict(['provider', 'messageId']).ignore().returning('messageId');
  return (inserted as unknown[]).length === 1;
}
