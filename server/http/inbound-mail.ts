import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../core/config.js';
import { HttpError, unauthorized } from '../core/errors.js';
import { receive, type InboundDeps } from '../flows/inbound-mail.js';
import { InboundResultOut } from '../domains/mail/schemas.js';

export interface InboundMailOptions {
  config: Pick<Config, 'inboundSecret' | 'inboundMaxBytes'>;
  deps: InboundDeps;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest();

/**
 * `POST /v1/inbound/email`: a raw RFC 822 message (`Content-Type: message/rfc822`) from a mail
 * server's pipe or an inbound-mail provider, with `Authorization: Bearer <TICKETD_INBOUND_SECRET>`.
 * No secret configured: the route answers 404 (inbound mail is off; a sender treats it as final).
 * The secret is checked before the body is read, in constant time (hashes of equal length).
 */
export async function inboundMailRoutes(app: FastifyInstance, opts: InboundMailOptions): Promise<void> {
  const expected = opts.config.inboundSecret ? sha256(opts.config.inboundSecret) : null;
  app.addContentTypeParser('message/rfc822', { parseAs: 'buffer', bodyLimit: opts.config.inboundMaxBytes }, (_req, body, done) => done(null, body));

  const checkSecret = async (req: FastifyRequest) => {
    if (!expected) throw new HttpError(404, 'inbound_disabled', 'Inbound email is not enabled on this server: set TICKETD_INBOUND_SECRET');
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!match) throw unauthorized('Send the inbound secret as "Authorization: Bearer <TICKETD_INBOUND_SECRET>"', 'missing_credentials');
    if (!timingSafeEqual(sha256(match[1]!), expected)) throw unauthorized('The inbound secret is not right', 'invalid_inbound_secret');
  };

  app.post<{ Body: unknown }>(
    '/v1/inbound/email',
    {
      // Not limited by address: one mail provider posts everything, and a refused message waits for its retry.
      config: { auth: 'none', permission: 'inbound_email:write', rateLimit: false },
      bodyLimit: opts.config.inboundMaxBytes,
      onRequest: checkSecret,
      schema: {
        tags: ['Inbound email'],
        summary:
          'Deliver one raw RFC 822 message (Content-Type: message/rfc822; Authorization: Bearer <TICKETD_INBOUND_SECRET>): it becomes a ticket, a comment on the ticket it replies to, or nothing; the brand is the recipient <brandId>@<inbound domain>',
        response: { 200: InboundResultOut },
      },
    },
    async (req) => {
      if (!Buffer.isBuffer(req.body)) throw new HttpError(415, 'unsupported_media_type', 'Send the raw message with Content-Type: message/rfc822');
      return receive(req.baseCtx, opts.deps, req.body);
    },
  );
}
