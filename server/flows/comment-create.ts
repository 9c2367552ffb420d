import type { TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import type { CreateCommentInput } from '../domains/comments/schemas.js';
import * as comments from '../domains/comments/service.js';
import type { Comment } from '../domains/comments/model.js';
import * as members from '../domains/members/service.js';
import * as mentions from '../domains/mentions/service.js';
import * as mail from '../domains/mail/service.js';
import type { MemberView } from '../domains/members/schemas.js';
import type { TicketView } from '../domains/tickets/schemas.js';
import * as profiles from '../domains/profiles/service.js';
import * as statuses from '../domains/statuses/service.js';
import { clockMoveOf } from '../domains/tickets/service-level.js';
import * as tickets from '../domains/tickets/service.js';
import * as watchers from './ticket-watchers.js';
import { mailingBrand } from './brand-domains.js';
import { runTriggersAfter } from './ticket-update.js';
import { commentMessages, customerOf, mentionedMemberIds, recipientsOf, type CreatedComment } from './comment-mail.js';
import { createInTwoStatements } from './comment-create-statement.js';

export { mentionedMemberIds, MAX_MENTIONS_PER_COMMENT } from './comment-mail.js';

/**
 * Comment create: the comment (comments), a status it may set (statuses), and in the same
 * transaction the members it mentions (mentions), the customer's copy of a public agent comment,
 * the watchers' notification and one mail to each member mentioned (mail), each member's mail as
 * their profile's notifyEmail allows (profiles); then the brand's comment.created triggers.
 */
export async function createComment(
  ctx: TenantCtx,
  brandId: string,
  ticketId: string,
  input: CreateCommentInput,
  idempotencyKey?: string,
  options: { reopenFrom?: readonly string[] } = {},
): Promise<comments.CreateResult> {
  // Read (or made) before anything else, so its first reading is kept and no reply reads it in a statement of its own.
  await mail.replyTokenKey(ctx);
  // The usual reply: two statements, no transaction (comment-create-statement.ts); else step by step.
  const made = await createInTwoStatements(ctx, brandId, ticketId, input, options.reopenFrom, idempotencyKey);
  if (made) return made;
  let statusBefore: string | null = null;
  return comments.create(ctx, brandId, ticketId, input, idempotencyKey, {
    reopenFrom: options.reopenFrom,
    check: async (tx, brand) => {
      if (input.setStatus !== undefined) await statuses.assertStatusKey(tx, brand, input.setStatus, 'setStatus');
    },
    statusChanging: async (tx, brand, ticket, to) => {
      statusBefore = ticket.status;
      return clockMoveOf(tx, await requireBrand(tx, brand), { ticketId: ticket.id, fromStatus: ticket.status, to: { status: to } }, ticket);
    },
    then: async (tx, brand, row) => {
      const mentioned = await recordMentions(tx, brand, row);
      const ticket = await mailAboutComment(tx, brand, row, mentioned);
      // The ticket the mail was built from is the one the triggers start from: nothing wrote it since.
      await runTriggersAfter(tx, await requireBrand(tx, brand), row.ticketId, { event: 'comment.created', statusBefore, comment: row }, ticket);
    },
  });
}

/**
 * Mentions of active members of the account are recorded; other ids (a typo, a member since
 * removed, another account's) are text like any other, not an error. Writers do not mention themselves.
 * Returns the members recorded.
 */
async function recordMentions(tx: TenantCtx, brandId: string, comment: Comment): Promise<MemberView[]> {
  const named = mentionedMemberIds(comment.body, comment.metadata ?? {});
  if (!named.length) return [];
  const author = tx.actor.type === 'user' ? tx.actor.id : null;
  const found = (await members.findMany(tx, named)).filter((m) => m.status === 'active' && m.id !== author);
  await mentions.record(tx, {
    brandId,
    ticketId: comment.ticketId,
    commentId: comment.id,
    mentionedBy: comment.authorName ?? tx.actor.name,
    memberIds: found.map((m) => m.id),
  });
  return found;
}

/**
 * In comment create's transaction: a public AGENT comment is mailed to the ticket's
 * customer (with the comment's CCs) unless the ticket is spam; watchers who asked for comment
 * notifications get one message about any comment, and each member mentioned a message of their
 * own (which stands for the watchers' one: a mentioned watcher gets one mail). A member whose
 * profile turned mail off (notifyEmail false) gets neither. Returns the ticket if it was read.
 */
async function mailAboutComment(tx: TenantCtx, brandId: string, comment: CreatedComment, mentioned: readonly MemberView[]): Promise<TicketView | undefined> {
  const notified = (await watchers.watchersOf(tx, brandId, comment.ticketId)).filter((w) => w.notifyOnComment);
  const optedOut = await profiles.mailOptedOut(tx, [...notified.map((w) => w.memberId), ...mentioned.map((m) => m.id)]);
  const to = recipientsOf(comment, notified, mentioned, optedOut);
  if (!to.customer && !to.watching.length && !to.mentioned.length) return undefined;
  const ticket = await tickets.fetchView(tx, brandId, comment.ticketId);
  const customer = customerOf(ticket);
  if (!to.watching.length && !to.mentioned.length && !(to.customer && customer)) return ticket;

  const common = {
    settings: mail.settingsOf(tx.services),
    key: await mail.replyTokenKey(tx),
    brand: await mailingBrand(tx, await requireBrand(tx, brandId)),
    ticket: mail.ticketInfo(ticket),
    thread: { inboundMessageIds: await mail.inboundMessageIds(tx, brandId, ticket.id) },
  };
  await mail.queueMails(tx, brandId, ticket.id, commentMessages(common, comment, comment.authorName ?? tx.actor.name, to, customer));
  return ticket;
}
