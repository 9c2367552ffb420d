import { timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { BaseCtx } from '../../core/context.js';
import type { Config } from '../../core/config.js';
import { badRequest, HttpError } from '../../core/errors.js';

/**
 * Notifications of an identity provider: verified with the Standard Webhooks scheme (the
 * `standardwebhooks` library: HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the
 * configured secret, timestamps within five minutes of the services' clock) and applied once per message id.
 */

/** The provider's signing secret; 404 for a provider that is not configured. */
export function secretOf(config: Pick<Config, 'identityProviders'>, provider: string): string {
  const configured = Object.hasOwn(config.identityProviders, provider) ? config.identityProviders[provider] : undefined;
  if (!configured) throw new HttpError(404, 'not_found', `Identity provider ${provider} not found: it is not configured (identityProviders)`);
  return configured.secret;
}

/** How far a notification's timestamp may lie from the services' clock, either way (the scheme's five minutes). */
const TOLERANCE_SECONDS = 5 * 60;

/**
 * The raw body, verified against its headers at `now` (the services' clock); 400 when the
 * signature or its timestamp does not hold. The signature is the library's (`sign`); the
 * timestamp is judged here, as the library's own `verify` judges it by the process's time.
 */
export function verify(secret: string, body: string, headers: Record<string, string | string[] | undefined>, now: number): void {
  const header = (name: string) => (typeof headers[name] === 'string' ? headers[name] : undefined);
  const [id, timestamp, signatures] = [header('webhook-id'), header('webhook-timestamp'), header('webhook-signature')];
  const refuse = (why: string) => badRequest(`The notification's signature does not verify: ${why}`, undefined, 'invalid_signature');
  if (!id || !timestamp || !signatures) throw refuse('Missing required headers');
  const seconds = Number.parseInt(timestamp, 10);
  if (Number.isNaN(seconds)) throw refuse('Invalid Signature Headers');
  if (now / 1000 - seconds > TOLERANCE_SECONDS) throw refuse('Message timestamp too old');
  if (seconds - now / 1000 > TOLERANCE_SECONDS) throw refuse('Message timestamp too new');
  const expected = Buffer.from(new Webhook(secret).sign(id, new Date(seconds * 1000), body).split(',')[1]!);
  const matches = signatures.split(' ').some((versioned) => {
    const [version, signature] = versioned.split(',');
    const given = Buffer.from(signature ?? '');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw refuse('No matching signature found');
}

/** Records a message id as applied (in the applying transaction); false when it was applied before. */
export async function firstDelivery(tx: BaseCtx, provider: string, messageId: string, event: string): Promise<boolean> {
  const inserted = await tx.db('identityNotifications').insert({ provider, messageId, event }).onConflict(['provider', 'messageId']).ignore().returning('messageId');
  return (inserted as unknown[]).length === 1;
}
