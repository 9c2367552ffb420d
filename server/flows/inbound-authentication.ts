import type { TenantCtx } from '../core/context.js';
import * as mail from '../domains/mail/service.js';
import { mailDnsCachePart } from '../integrations/dns.js';
import { checkMessage, type MailAuthentication, type SmtpClient } from '../integrations/mail-auth.js';

/**
 * The SPF, DKIM, DMARC and ARC results of an inbound message, looked up before its transaction
 * (network I/O never runs inside one). A held message received again keeps the results it had
 * when it arrived: its SMTP client is not known any more, and the sender's DNS may have changed.
 */
export async function authenticationOf(ctx: TenantCtx, raw: Buffer, source: { client?: SmtpClient; held?: string | null }): Promise<MailAuthentication> {
  const kept = source.held ? await mail.inboundAuthentication(ctx, source.held) : null;
  if (kept) return kept;
  const config = ctx.services.config;
  return checkMessage(raw, source.client ?? null, { dnsServers: config.dnsServers, mta: config.inboundDomain, cache: ctx.services.get(mailDnsCachePart) });
}

export { dmarcSpamReason, fromIsAuthenticated, type MailAuthentication, type SmtpClient } from '../integrations/mail-auth.js';
