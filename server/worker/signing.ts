import { createHmac } from 'node:crypto';

/**
 * Webhook signatures, two schemes on every request:
 *  - X-Dispatch-Signature: sha256=<hex HMAC-SHA256 of the raw body>, keyed by the secret string as
 *    it is (its UTF-8 bytes): the hosted product's scheme, which its clients verify.
 *  - Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC-SHA256 of
 *    "<id>.<timestamp>.<body>">), so any Standard Webhooks library can verify and reject replays.
 *    Its key is the base64 after `whsec_` for secrets of that form (what ticketd generates: pass the
 *    secret to the library as it is), else the secret's bytes (the libraries' "raw" format).
 */

const WHSEC = /^whsec_((?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)$/;

export function standardWebhooksKey(secret: string): Buffer {
  const match = WHSEC.exec(secret);
  return match && match[1] ? Buffer.from(match[1], 'base64') : Buffer.from(secret, 'utf8');
}

export function dispatchSignature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
}

export function standardSignature(secret: string, msgId: string, timestampSec: number, body: string): string {
  return `v1,${createHmac('sha256', standardWebhooksKey(secret)).update(`${msgId}.${timestampSec}.${body}`, 'utf8').digest('base64')}`;
}

/**
 * The signature headers of one attempt. `secrets`: the current secret first, then one still in its
 * rotation grace period (it adds a second signature to webhook-signature only).
 */
export function signatureHeaders(secrets: readonly string[], msgId: string, timestampSec: number, body: string): Record<string, string> {
  return {
    'x-dispatch-signature': dispatchSignature(secrets[0]!, body),
    'webhook-id': msgId,
    'webhook-timestamp': String(timestampSec),
    'webhook-signature': secrets.map((s) => standardSignature(s, msgId, timestampSec, body)).join(' '),
  };
}
