import { canSeeBrand, type TenantCtx } from '../core/context.js';
import { normalizeEmail } from '../core/text.js';
import * as comments from '../domains/comments/service.js';
import * as mail from '../domains/mail/service.js';
import * as members from '../domains/members/service.js';
import type { TicketView } from '../domains/tickets/schemas.js';

/**
 * Who a message that threads to a ticket comes from, which decides what it may add there
 * (decision 0074). `from` is the normalized From address.
 *
 * - the customer of the ticket (or of the ticket it names, merged into this one): a CUSTOMER
 *   comment, even when they are also a member (they wrote to us as the customer);
 * - else an active member of the account who may see the brand: an AGENT comment by the member;
 * - else a participant (see isParticipant): a CUSTOMER comment;
 * - else a stranger: the message is theirs alone, a new ticket. Threading headers and reply
 *   addresses travel with forwarded and leaked mail, and a Message-ID can be guessed, so they
 *   never let anyone else onto a ticket.
 */
export type Writer = { as: 'agent'; member: members.SessionMember } | { as: 'customer' } | { as: 'stranger' };

/** `thread`: the ticket the message names, then the live ticket it was merged into, if any. */
export async function writerOf(ctx: TenantCtx, brandId: string, thread: readonly TicketView[], from: string, fromAuthenticated: boolean): Promise<Writer> {
  if (thread.some((t) => t.customer?.email === from)) return { as: 'customer' };
  // A From is easily forged: speaking as a member (to the customer, in their name) takes a From
  // shown to be theirs (DKIM or DMARC), unless the operator accepts any (inboundAgentReplies).
  const trusted = fromAuthenticated || ctx.services.config.inboundAgentReplies === 'any';
  const member = trusted ? await members.activeMemberByEmail(ctx, from) : null;
  if (member && canSeeBrand(member.brandScope, brandId)) return { as: 'agent', member };
  return (await isParticipant(ctx, brandId, thread, from)) ? { as: 'customer' } : { as: 'stranger' };
}

/**
 * A participant of a ticket's mail thread: the sender or a To/Cc recipient of the message that
 * opened an email ticket (its sourceData), an address CC'd on a public comment, or the sender of
 * a customer comment that came by mail. Mail the ticket got from anyone else is not on record.
 */
async function isParticipant(ctx: TenantCtx, brandId: string, thread: readonly TicketView[], from: string): Promise<boolean> {
  if (thread.some((t) => firstMessageAddresses(t).includes(from))) return true;
  return comments.isOnMailThread(ctx, brandId, thread[thread.length - 1]!.id, from);
}

/** The sender and the To/Cc recipients of the message that opened an email ticket. */
function firstMessageAddresses(ticket: TicketView): string[] {
  const sender = ticket.source === 'email' ? ticket.sourceData?.from : undefined;
  return [...(typeof sender === 'string' ? [normalizeEmail(sender)] : []), ...(mail.ticketInfo(ticket).writtenTo ?? [])];
}
