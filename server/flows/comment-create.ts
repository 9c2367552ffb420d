import type { TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import type { CreateCommentInput } from '../domains/comments/schemas.js';
import * as comments from '../domains/comments/service.js';
import * as messages from '../domains/mail/messages.js';
import * as mail from '../domains/mail/service.js';
import * as statuses from '../domains/statuses/service.js';
import * as tickets from '../domains/tickets/service.js';
import * as watchers from './ticket-watchers.js';

/**
 * Comment create: the comment (comments), a status it may set (statuses), and in the same
 * transaction the customer's copy of a public agent comment and the watchers' notification (mail).
 */
export async function createComment(ctx: TenantCtx, brandId: string, ticketId: string, input: CreateCommentInput, idempotencyKey?: string): Promise<comments.CreateResult> {
  return comments.create(ctx, brandId, ticketId, input, idempotencyKey, {
    check: async (tx, brand) => {
      if (input.setStatus !== undefined) await statuses.assertStatusKey(tx, brand, input.setStatus, 'setStatus');
    },
    then: (tx, brand, row) => mailAboutComment(tx, brand, row),
  });
}

interface CreatedComment {
  id: string;
  ticketId: string;
  body: string;
  authorType: string;
  authorName: string | null;
  isInternal: boolean;
  cc: string[];
}

/**
 * In comment create's transaction: a public AGENT comment is mailed to the ticket's
 * customer (with the comment's CCs) unless the ticket is spam; watchers who asked for comment
 * notifications get one message about any comment.
 */
async function mailAboutComment(tx: TenantCtx, brandId: string, comment: CreatedComment): Promise<void> {
  const toCustomer = comment.authorType === 'AGENT' && !comment.isInternal;
  const watching = (await watchers.list(tx, brandId, comment.ticketId)).filter((w) => w.notifyOnComment);
  if (!toCustomer && !watching.length) return;
  const ticket = await tickets.fetchView(tx, brandId, comment.ticketId);
  const customer = ticket.customer?.email && !ticket.isSpam ? { name: ticket.customer.name, address: ticket.customer.email } : null;
  if (!watching.length && !(toCustomer && customer)) return;

  const common = {
    settings: mail.settingsOf(tx.services),
    key: await mail.replyTokenKey(tx.db),
    brand: mail.brandInfo(await requireBrand(tx, brandId)),
    ticket: mail.ticketInfo(ticket),
    thread: { inboundMessageIds: await mail.inboundMessageIds(tx, brandId, ticket.id) },
  };
  if (toCustomer && customer) await mail.queueMail(tx, brandId, ticket.id, messages.agentReply({ ...common, comment, customer }));
  if (watching.length) {
    const to = watching.map((w) => ({ name: w.memberName, address: w.memberEmail }));
    await mail.queueMail(tx, brandId, ticket.id, messages.watcherNotification({ ...common, comment, watchers: to }));
  }
}
