import { tenantCtx, type BaseCtx } from '../../core/context.js';
import type { MailMessage, MailTransport, SentMail } from '../../core/ports.js';
import * as brandDomains from '../../domains/brand-domains/service.js';
import { sendMail } from '../../integrations/mail.js';
import type { Attempt, OutboxHandler } from '../handler.js';
import type { Claimed } from '../../core/outbox/service.js';

/**
 * Mail delivery: the message stored in the row at enqueue time (`payload.message`, built by
 * server/domains/mail/messages.ts) is sent through the dispatcher's one transport, so every attempt
 * is the same message with the same Message-ID. The outbox row is the delivery record (status,
 * attempts, last error, and the relay's answer or the file written); mail_messages keeps the message.
 * A message queued to go from a brand's own domain (`brandDomain`) is signed here, with the domain's
 * key opened for this send only.
 *
 * Outcomes: accepted (or written) is success. An SMTP 5xx answer (550 mailbox unavailable, …) and a
 * stored message that cannot be read fail for good: sending again would get the same answer. A 4xx
 * answer (451 try later, greylisting), a connection error, a timeout, a refused login (the
 * operator's configuration, fixable without the message changing) and a file that could not be
 * written are retried on the outbox schedule.
 */

/** Errors of nodemailer that mean this message cannot be sent as it is, whatever the relay. */
const MESSAGE_ERRORS: ReadonlySet<string> = new Set(['EENVELOPE', 'EMESSAGE']);

const isAddress = (a: unknown) => typeof (a as { address?: unknown } | null)?.address === 'string';

/** The stored message, or why it cannot be sent. */
function storedMessage(body: string): MailMessage | string {
  let message: Partial<MailMessage> | undefined;
  try {
    message = (JSON.parse(body) as { message?: Partial<MailMessage> }).message;
  } catch (err) {
    return `the stored payload is not JSON: ${(err as Error).message}`;
  }
  if (!message || typeof message !== 'object') return 'the stored payload has no message';
  const wellFormed =
    typeof message.messageId === 'string' &&
    typeof message.subject === 'string' &&
    typeof message.text === 'string' &&
    isAddress(message.from) &&
    Array.isArray(message.to) &&
    message.to.length > 0 &&
    message.to.every(isAddress) &&
    Array.isArray(message.cc) &&
    message.cc.every(isAddress) &&
    Array.isArray(message.references) &&
    (message.brandDomain === undefined || (typeof message.brandDomain?.id === 'string' && isAddress(message.brandDomain.from)));
  if (!wellFormed)
    return `the stored message ${typeof message.messageId === 'string' ? `${message.messageId} ` : ''}is incomplete (needs messageId, from, to, cc, subject, text, references)`;
  return message as MailMessage;
}

/** The SMTP reply code at the start of a relay's answer ("250 2.0.0 Ok: queued"), if any. */
function replyCode(response: string | undefined): number | null {
  const match = /^(\d{3})\b/.exec(response ?? '');
  return match ? Number(match[1]) : null;
}

function failed(err: unknown): Attempt {
  const e = err as { code?: string; responseCode?: number; response?: string; message?: string };
  const code = typeof e.responseCode === 'number' ? e.responseCode : null;
  const error = `${e.code ?? 'error'}: ${e.message ?? String(err)}`;
  const answer = { responseCode: code, responseBody: e.response ?? null };
  if (e.code === 'EAUTH') return { outcome: 'retry', error, ...answer };
  if ((code !== null && code >= 500) || (code === null && e.code && MESSAGE_ERRORS.has(e.code))) return { outcome: 'fail', error, ...answer };
  return { outcome: 'retry', error, ...answer };
}

/**
 * A message queued to go from a brand's own domain goes from it, DKIM-signed, when the domain is
 * still its brand's verified primary one; otherwise from the default sender it carries, unsigned.
 * Its bounces come back to `bounces+<delivery id>@bounces.<domain>`, an address naming the delivery.
 */
async function send(ctx: BaseCtx, transport: MailTransport, row: Claimed, message: MailMessage): Promise<SentMail> {
  const own = message.brandDomain;
  const key = own && row.brandId ? await brandDomains.signingKey(tenantCtx(ctx, row.accountId, row.livemode), row.brandId, own.id) : null;
  if (!own || !key) return sendMail(transport, message);
  const bounces = brandDomains.RETURN_PATH_LABEL;
  return sendMail(
    transport,
    { ...message, from: own.from },
    {
      envelopeFrom: `${bounces}+${row.id}@${bounces}.${key.domain}`,
      dkim: { domainName: key.domain, keySelector: key.selector, privateKey: key.privateKey },
    },
  );
}

/** transport: built once per dispatcher from the configuration (mailTransport); closed by close(). */
export function mailHandler(transport: MailTransport): OutboxHandler {
  return {
    async deliver(ctx, row: Claimed): Promise<Attempt> {
      const message = storedMessage(row.body);
      if (typeof message === 'string') return { outcome: 'fail', error: message, responseCode: null, responseBody: null };
      try {
        const sent = await send(ctx, transport, row, message);
        return sent.transport === 'file'
          ? { outcome: 'success', responseCode: null, responseBody: `written to ${sent.path}` }
          : { outcome: 'success', responseCode: replyCode(sent.response), responseBody: sent.response ?? null };
      } catch (err) {
        return failed(err);
      }
    },

    async close() {
      transport.close();
    },
  };
}
