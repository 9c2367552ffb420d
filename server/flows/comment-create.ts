import type { TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import type { CreateCommentInput } from '../domains/comments/schemas.js';
import * as comments from '../domains/comments/service.js';
import type { Comment } from '../domains/comments/model.js';
import * as members from '../domains/members/service.js';
import * as mentions from '../domains/mentions/service.js';
import * as messages from '../domains/mail/messages.js';
import * as mail from '../domains/mail/service.js';
import type { MemberView } from '../domains/members/schemas.js';
import type { MailMessage } from '../core/ports.js';
import type { TicketView } from '../domains/tickets/schemas.js';
import * as profiles from '../domains/profiles/service.js';
import * as statuses from '../domains/statuses/service.js';
import { clockMoveOf } from '../domains/tickets/service-level.js';
import * as tickets from '../domains/tickets/service.js';
import * as watchers from './ticket-watchers.js';
import { mailingBrand } from './brand-domains.js';
import { runTriggersAfter } from './ticket-update.js';

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
  let statusBefore: string | null = null;
  // Read (or made) before the transaction, so its first reading is kept and no reply reads it in one.
  await mail.replyTokenKey(ctx);
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

/** `@[Display Name](memberId)`, as the dashboard writes a mention into a comment's body. */
const MENTION_IN_BODY = /@\[[^\]\n]{0,200}\]\(([A-Za-z0-9_]{1,64})\)/g;
/** More names than any comment needs; the rest are not recorded. */
export const MAX_MENTIONS_PER_COMMENT = 50;

/** The member ids a comment names, in its body and in `metadata.mentions[].memberId`, each once. */
export function mentionedMemberIds(body: string, metadata: Record<string, unknown>): string[] {
  const ids = [...body.matchAll(MENTION_IN_BODY)].map((m) => m[1]!);
  const listed = Array.isArray(metadata.mentions) ? metadata.mentions : [];
  for (const entry of listed) {
    const id = (entry as { memberId?: unknown } | null)?.memberId;
    if (typeof id === 'string') ids.push(id);
  }
  return [...new Set(ids)].slice(0, MAX_MENTIONS_PER_COMMENT);
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
 * notifications get one message about any comment, and each member mentioned a message of their
 * own (which stands for the watchers' one: a mentioned watcher gets one mail). A member whose
 * profile turned mail off (notifyEmail false) gets neither. Returns the ticket if it was read.
 */
async function mailAboutComment(tx: TenantCtx, brandId: string, comment: CreatedComment, mentioned: readonly MemberView[]): Promise<TicketView | undefined> {
  const toCustomer = comment.authorType === 'AGENT' && !comment.isInternal;
  const notified = (await watchers.watchersOf(tx, brandId, comment.ticketId)).filter((w) => w.notifyOnComment);
  const optedOut = await profiles.mailOptedOut(tx, [...notified.map((w) => w.memberId), ...mentioned.map((m) => m.id)]);
  const toMention = mentioned.filter((m) => !optedOut.has(m.id));
  const watching = notified.filter((w) => !optedOut.has(w.memberId) && !mentioned.some((m) => m.id === w.memberId));
  if (!toCustomer && !watching.length && !toMention.length) return undefined;
  const ticket = await tickets.fetchView(tx, brandId, comment.ticketId);
  const customer = ticket.customer?.email && !ticket.isSpam ? { name: ticket.customer.name, address: ticket.customer.email } : null;
  if (!watching.length && !toMention.length && !(toCustomer && customer)) return ticket;

  const common = {
    settings: mail.settingsOf(tx.services),
    key: await mail.replyTokenKey(tx),
    brand: await mailingBrand(tx, await requireBrand(tx, brandId)),
    ticket: mail.ticketInfo(ticket),
    thread: { inboundMessageIds: await mail.inboundMessageIds(tx, brandId, ticket.id) },
  };
  const queued: MailMessage[] = [];
  if (toCustomer && customer) queued.push(messages.agentReply({ ...common, comment, customer }));
  if (watching.length) {
    const to = watching.map((w) => ({ name: w.memberName, address: w.memberEmail }));
    queued.push(messages.watcherNotification({ ...common, comment, watchers: to }));
  }
  const authorName = comment.authorName ?? tx.actor.name;
  for (const m of toMention) {
    const member = { id: m.id, name: m.name, address: m.email };
    queued.push(messages.mentionNotification({ ...common, comment: { ...comment, authorName }, member }));
  }
  await mail.queueMails(tx, brandId, ticket.id, queued);
  return ticket;
}
