import type { SqlFragment } from '../db.js';
import type { TenantCtx } from '../context.js';
import { enqueueEvents, eventsInsert, type EventSpec } from './service.js';

/**
 * The webhook events, enqueued by the services beside their audit entries, in the same
 * transaction. Bodies follow the wire contract: ticket events carry the ticket's fields and its
 * customer's; comment and attachment events carry the ticket id and number, the customer, and the
 * comment or attachment. Ticket fields are read by the enqueueing statement itself, after the
 * change, so they are the committed values.
 */

export const WEBHOOK_EVENTS = [
  'ticket.created',
  'ticket.updated',
  'ticket.deleted',
  'ticket.rated',
  'ticket.overdue',
  'ticket.comment.created',
  'comment.created',
  'comment.updated',
  'comment.deleted',
  'attachment.created',
  'attachment.deleted',
  'contact.erased',
] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** A new comment is announced as comment.created, and as ticket.comment.created to webhooks that chose that name. */
const COMMENT_CREATED = ['comment.created', 'ticket.comment.created'];

const CUSTOMER = ['customerId', 'customerEmail', 'customerName'];
const TICKET_CREATED_FIELDS = ['id', 'ticketNumber', 'title', 'status', 'priority', 'source', 'createdAt', ...CUSTOMER];
const TICKET_UPDATED_FIELDS = ['id', 'ticketNumber', 'title', 'status', 'priority', 'assigneeId', 'updatedAt', ...CUSTOMER];
const TICKET_DELETED_FIELDS = ['id', 'ticketNumber', 'title', 'status', 'priority', 'deletedAt', ...CUSTOMER];
const PART_FIELDS = ['ticketId', 'ticketNumber', ...CUSTOMER];
const TICKET_RATED_FIELDS = ['id', 'ticketNumber', 'title', 'status', 'assigneeId', ...CUSTOMER];
const TICKET_OVERDUE_FIELDS = ['id', 'ticketNumber', 'title', 'status', 'priority', 'assigneeId', 'dueAt', ...CUSTOMER];

const iso = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString() : null);

/**
 * ticket.created as an INSERT that ticket create runs inside its statement, for each ticket it
 * creates: the body carries the number that statement assigns, and the new tickets are there only
 * as its CTE `ticketsRelation` (a contact it creates, in `contactsRelation`); a ticket absent
 * there (not created) is not announced.
 */
export function ticketsCreated(tx: TenantCtx, tickets: readonly { brandId: string; ticketId: string }[], ticketsRelation: string, contactsRelation: string): SqlFragment {
  return eventsInsert(tx, ticketsCreatedEvents(tickets), ticketsRelation, contactsRelation);
}

/** ticket.created of each ticket, for eventsJson (ticket create's statement made once per shape: eventsInsertSql). */
export function ticketsCreatedEvents(tickets: readonly { brandId: string; ticketId: string }[]): EventSpec[] {
  return tickets.map(({ brandId, ticketId }) => ({ brandId, names: ['ticket.created'], ticketId, ticketFields: TICKET_CREATED_FIELDS, data: {} }));
}

/** `changes` are the names of the changed fields, per ticket. */
export function ticketsUpdated(tx: TenantCtx, brandId: string, updates: readonly { ticketId: string; changes: readonly string[] }[]): Promise<void> {
  return enqueueEvents(tx, ticketsUpdatedEvents(brandId, updates));
}

/** ticket.updated as events to enqueue with others (a change and its rules' in one statement); `source`: when not the ctx's actor's. */
export function ticketsUpdatedEvents(brandId: string, updates: readonly { ticketId: string; changes: readonly string[] }[], source?: string): EventSpec[] {
  return updates.map((u) => ({
    brandId,
    names: ['ticket.updated'],
    ticketId: u.ticketId,
    ticketFields: TICKET_UPDATED_FIELDS,
    data: { changes: u.changes },
    ...(source ? { source } : {}),
  }));
}

/** Tickets that passed their dueAt unresolved (announced once per deadline). */
export function ticketsOverdue(tx: TenantCtx, tickets: readonly { brandId: string; ticketId: string }[]): Promise<void> {
  return enqueueEvents(
    tx,
    tickets.map((t) => ({ brandId: t.brandId, names: ['ticket.overdue'], ticketId: t.ticketId, ticketFields: TICKET_OVERDUE_FIELDS, data: {} })),
  );
}

export function ticketsDeleted(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<void> {
  return enqueueEvents(tx, ticketsDeletedEvents(brandId, ticketIds));
}

/** ticket.deleted as events to enqueue in the statement that deletes (a bulk delete). */
export function ticketsDeletedEvents(brandId: string, ticketIds: readonly string[]): EventSpec[] {
  return ticketIds.map((ticketId) => ({ brandId, names: ['ticket.deleted'], ticketId, ticketFields: TICKET_DELETED_FIELDS, data: {} }));
}

export interface CommentFacts {
  id: string;
  ticketId: string;
  body: string;
  authorId: string | null;
  authorName: string | null;
  authorType: string;
  parentId: string | null;
  isInternal: boolean;
  createdAt: Date | string;
  updatedAt: Date | string;
  deletedAt: Date | string | null;
}

function commentEvent(brandId: string, names: readonly string[], c: CommentFacts, extra: Record<string, unknown> = {}): EventSpec {
  const comment = {
    id: c.id,
    body: c.body,
    authorId: c.authorId,
    authorName: c.authorName,
    authorType: c.authorType,
    parentId: c.parentId,
    isInternal: c.isInternal,
    createdAt: iso(c.createdAt),
    updatedAt: iso(c.updatedAt),
    ...(c.deletedAt ? { deletedAt: iso(c.deletedAt) } : {}),
  };
  return { brandId, names, ticketId: c.ticketId, ticketFields: PART_FIELDS, data: { ticketId: c.ticketId, comment, ...extra } };
}

/** comment.created as an event to enqueue with others (a comment and the status it set, in one statement). */
export function commentCreatedEvent(brandId: string, comment: CommentFacts): EventSpec {
  return commentEvent(brandId, COMMENT_CREATED, comment);
}

export function commentUpdated(tx: TenantCtx, brandId: string, comment: CommentFacts, changes: readonly string[]): Promise<void> {
  return enqueueEvents(tx, [commentEvent(brandId, ['comment.updated'], comment, { changes })]);
}

export function commentDeleted(tx: TenantCtx, brandId: string, comment: CommentFacts): Promise<void> {
  return enqueueEvents(tx, [commentEvent(brandId, ['comment.deleted'], comment)]);
}

export interface AttachmentFacts {
  id: string;
  brandId: string;
  ticketId: string | null;
  commentId: string | null;
  filename: string;
  contentType: string;
  size: number | string;
  createdAt: Date | string;
}

/** attachment.created or attachment.deleted; a pending attachment (no ticket yet) has ticketId null. */
export function attachmentsChanged(tx: TenantCtx, event: 'attachment.created' | 'attachment.deleted', rows: readonly AttachmentFacts[]): Promise<void> {
  return enqueueEvents(
    tx,
    rows.map((a) => ({
      brandId: a.brandId,
      names: [event],
      ticketId: a.ticketId,
      ticketFields: PART_FIELDS,
      data: {
        ticketId: a.ticketId,
        attachment: { id: a.id, ticketId: a.ticketId, commentId: a.commentId, filename: a.filename, contentType: a.contentType, size: Number(a.size), createdAt: iso(a.createdAt) },
      },
    })),
  );
}

export interface RatingFacts {
  id: string;
  ticketId: string;
  rating: number;
  ratingType: string;
  comment: string | null;
  /** The member the rating is credited to: the ticket's assignee when it was resolved. */
  resolverId: string | null;
  submittedAt: Date | string;
}

/** A customer rated a resolution (satisfaction): the ticket's fields and the rating. */
export function ticketRated(tx: TenantCtx, brandId: string, r: RatingFacts): Promise<void> {
  return enqueueEvents(tx, [
    {
      brandId,
      names: ['ticket.rated'],
      ticketId: r.ticketId,
      ticketFields: TICKET_RATED_FIELDS,
      data: {
        ticketId: r.ticketId,
        feedback: { id: r.id, rating: r.rating, ratingType: r.ratingType, comment: r.comment, resolverId: r.resolverId, submittedAt: iso(r.submittedAt) },
      },
    },
  ]);
}

/** What a contact's erasure reports: counts and ids, never the person's email or name. */
export interface ErasureFacts {
  contactId: string;
  brandId: string;
  tombstone: string;
  erasedAt: Date | string;
  counts: Record<string, number>;
}

/** A contact was erased (its personal data removed): no ticket, and no personal data in the body. */
export function contactErased(tx: TenantCtx, e: ErasureFacts): Promise<void> {
  return enqueueEvents(tx, [
    {
      brandId: e.brandId,
      names: ['contact.erased'],
      ticketId: null,
      ticketFields: [],
      data: { contactId: e.contactId, brandId: e.brandId, tombstone: e.tombstone, counts: e.counts, erasedAt: iso(e.erasedAt) },
    },
  ]);
}
