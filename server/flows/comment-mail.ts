import type { MailMessage } from '../core/ports.js';
import { agentReply, mentionNotification, watcherNotification } from '../domains/mail/messages.js';

/**
 * What a comment's mail is made of, for both ways a comment is written (comment-create.ts step by
 * step, comment-create-statement.ts in two statements): the members it mentions, who is told, the messages.
 */

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

export interface CreatedComment {
  id: string;
  ticketId: string;
  body: string;
  authorType: string;
  authorName: string | null;
  isInternal: boolean;
  cc: string[];
}

/** A member to tell of a comment: a watcher asking for comment notifications, or one it mentions. */
export interface Notified {
  memberId: string;
  memberName: string | null;
  memberEmail: string;
}

export interface Recipients {
  /** A public AGENT comment goes to the customer (when the ticket has one and is not spam). */
  customer: boolean;
  watching: Notified[];
  mentioned: { id: string; name: string | null; email: string }[];
}

/** Who is told of a comment: a mentioned watcher gets one mail (the mention's); opted-out members none. */
export function recipientsOf(
  comment: Pick<CreatedComment, 'authorType' | 'isInternal'>,
  notified: readonly Notified[],
  mentioned: readonly { id: string; name: string | null; email: string }[],
  optedOut: ReadonlySet<string>,
): Recipients {
  return {
    customer: comment.authorType === 'AGENT' && !comment.isInternal,
    watching: notified.filter((w) => !optedOut.has(w.memberId) && !mentioned.some((m) => m.id === w.memberId)),
    mentioned: mentioned.filter((m) => !optedOut.has(m.id)),
  };
}

/** The ticket's customer as mail addresses them; none for a spam ticket. */
export function customerOf(ticket: { isSpam: boolean; customer?: { name: string | null; email: string | null } | null }): { name: string | null; address: string } | null {
  return ticket.customer?.email && !ticket.isSpam ? { name: ticket.customer.name, address: ticket.customer.email } : null;
}

/** The messages of a comment, in order: the customer's copy, the watchers' one, one per member mentioned. */
export function commentMessages(
  common: Omit<Parameters<typeof agentReply>[0], 'comment' | 'customer'>,
  comment: CreatedComment,
  authorName: string | null,
  to: Recipients,
  customer: { name: string | null; address: string } | null,
): MailMessage[] {
  const queued: MailMessage[] = [];
  if (to.customer && customer) queued.push(agentReply({ ...common, comment, customer }));
  if (to.watching.length) {
    const watchers = to.watching.map((w) => ({ name: w.memberName, address: w.memberEmail }));
    queued.push(watcherNotification({ ...common, comment, watchers }));
  }
  for (const m of to.mentioned) {
    const member = { id: m.id, name: m.name, address: m.email };
    queued.push(mentionNotification({ ...common, comment: { ...comment, authorName }, member }));
  }
  return queued;
}
