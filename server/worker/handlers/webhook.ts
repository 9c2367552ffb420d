import net from 'node:net';
import { Agent, request } from 'undici';
import { tenantCtx, type BaseCtx } from '../../core/context.js';
import { assertPublicHost, hostOf, OutboundRefused, publicLookup } from '../../core/outbound.js';
import * as webhooks from '../../domains/webhooks/service.js';
import { parseRetryAfter } from '../backoff.js';
import type { Attempt, OutboxHandler } from '../handler.js';
import type { Claimed } from '../../core/outbox/service.js';
import { signatureHeaders } from '../signing.js';

/**
 * Webhook delivery: one signed POST of the stored body, with the webhook's current URL and
 * secrets. Outbound rules: connect and total deadline (timeoutMs), no redirects (a 3xx fails),
 * at most READ_LIMIT bytes of the answer read and STORED_LIMIT kept, and only public addresses
 * unless allowPrivate (checked on the address actually connected to: see core/outbound.ts).
 * Outcomes: 2xx success; 408, 429, 5xx, timeouts and network errors retry (honouring
 * Retry-After); anything else fails for good, and 410 Gone also disables the webhook.
 */

export interface WebhookDeliveryOptions {
  allowPrivate: boolean;
  timeoutMs: number;
}

export const STORED_LIMIT = 4 * 1024;
export const READ_LIMIT = 64 * 1024;
const USER_AGENT = 'ticketd';

function failure(outcome: 'retry' | 'fail', error: string, responseCode: number | null = null, responseBody: string | null = null, retryAfterMs: number | null = null): Attempt {
  return { outcome, error, responseCode, responseBody, retryAfterMs };
}

/** The first STORED_LIMIT bytes of the answer as text; reading stops at READ_LIMIT. */
async function readCapped(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size < STORED_LIMIT) chunks.push(chunk);
    size += chunk.length;
    if (size >= READ_LIMIT) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, STORED_LIMIT).toString('utf8').replace(/\0/g, '');
}

function refusal(err: unknown): OutboundRefused | null {
  for (let e = err as { cause?: unknown } | undefined; e; e = e.cause as { cause?: unknown } | undefined) {
    if (e instanceof OutboundRefused) return e;
  }
  return null;
}

const TIMEOUT_CODES: ReadonlySet<string> = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

export function webhookHandler(options: WebhookDeliveryOptions): OutboxHandler {
  // One connection pool per dispatcher: keep-alive to busy receivers. New connections resolve
  // through publicLookup, so a name that now points inside is refused at connect time.
  const agent = new Agent({
    connect: { timeout: options.timeoutMs, ...(options.allowPrivate ? {} : { lookup: publicLookup }) },
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  });

  async function send(url: URL, headers: Record<string, string>, body: string, stop: AbortSignal, now: Date): Promise<Attempt> {
    const deadline = AbortSignal.timeout(options.timeoutMs);
    try {
      // IP literals never go through lookup: judge them here.
      if (net.isIP(hostOf(url))) await assertPublicHost(url, options.allowPrivate);
      const res = await request(url, { dispatcher: agent, method: 'POST', headers, body, signal: AbortSignal.any([deadline, stop]) });
      const text = await readCapped(res.body);
      const code = res.statusCode;
      if (code >= 200 && code < 300) return { outcome: 'success', responseCode: code, responseBody: text };
      if (code >= 300 && code < 400) return failure('fail', `redirect (HTTP ${code}) not followed: register the final URL`, code, text);
      if (code === 408 || code === 429 || code >= 500) return failure('retry', `HTTP ${code}`, code, text, parseRetryAfter(res.headers['retry-after'], now.getTime()));
      return failure('fail', code === 410 ? 'HTTP 410 Gone: the receiver asked to stop' : `HTTP ${code}`, code, text);
    } catch (err) {
      if (stop.aborted) return { outcome: 'interrupted' };
      const refused = refusal(err);
      if (refused) return failure('fail', `refused: ${refused.message}`);
      const code = (err as { code?: string }).code;
      if (deadline.aborted || (code && TIMEOUT_CODES.has(code))) return failure('retry', `timeout after ${options.timeoutMs} ms`);
      return failure('retry', `${code ?? (err as Error).name}: ${(err as Error).message}`);
    }
  }

  return {
    async deliver(ctx: BaseCtx, message: Claimed, signal: AbortSignal, now: Date): Promise<Attempt> {
      // Read through the tenant the message belongs to: a webhook id of another tenant finds nothing.
      const target = await webhooks.deliveryTarget(tenantCtx(ctx, message.accountId, message.livemode), message.webhookId!, now, message.attached);
      if (!target) return { outcome: 'fail', error: 'the webhook was deleted', responseCode: null, responseBody: null, notSent: true };
      if (!target.enabled) return { outcome: 'fail', error: 'the webhook is disabled', responseCode: null, responseBody: null, notSent: true };
      const headers = {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        ...signatureHeaders(target.secrets, message.id, Math.floor(now.getTime() / 1000), message.body),
      };
      return send(new URL(target.url), headers, message.body, signal, now);
    },

    attachedToClaim: webhooks.targetWithClaim,

    settledPart(ctx, message, attempt, settlement, settled) {
      if (attempt.outcome === 'interrupted' || (attempt.outcome !== 'success' && attempt.notSent)) return null;
      if (attempt.outcome !== 'success') return undefined;
      return webhooks.successPart(tenantCtx(ctx, message.accountId, message.livemode), message.webhookId!, settlement.attemptedAt, settled);
    },

    /** A failure: counted, and perhaps the webhook disabled with an audit entry. */
    async settled(tx, message, attempt, settlement) {
      if (attempt.outcome === 'interrupted' || attempt.outcome === 'success' || attempt.notSent) return;
      await webhooks.recordAttempt(tenantCtx(tx, message.accountId, message.livemode), {
        webhookId: message.webhookId!,
        at: settlement.attemptedAt,
        failure: attempt.error,
        ...(attempt.responseCode === 410 ? { disable: 'the receiver answered 410 Gone' } : {}),
        exhausted: settlement.status === 'dead',
      });
    },

    async close() {
      await agent.close();
    },
  };
}
