import { withTx, type TenantCtx } from '../../core/context.js';
import { badRequest, notFound } from '../../core/errors.js';
import { canonicalJson, claim as claimIdempotencyKey, requestFingerprint } from '../../core/idempotency.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { BOUND_TENANT, isoText, preparedRows, scopeOf, sameTenant, tenantIs, tenantScope } from '../../core/model.js';
import { isEmail, normalizeEmail } from '../../core/text.js';
import * as audit from '../../core/audit.js';
import type { Change } from '../../core/audit.js';
import { requireBrand, visibleBrandId } from '../../core/brand.js';
import { updateTickets, type TicketSet } from '../../core/ticket-writes.js';
import * as events from '../../core/outbox/events.js';
import { enqueueEvents } from '../../core/outbox/service.js';
import { Comment } from './model.js';
import type { CommentView, CreateCommentInput, UpdateCommentInput } from './schemas.js';

/**
 * Comments of a ticket: create (optionally also setting the ticket status), list as threads, get,
 * update, soft delete; and, for ticket merge, moving comments and adding system notes.
 *
 * tickets.comment_count is kept exact by one rule: every write that changes a ticket's set of live
 * comments first locks the ticket row (SELECT … FOR UPDATE) and changes the count in the same
 * transaction. The lock also makes the "parent is a live comment" check of a reply agree with
 * concurrent deletes. The ticket columns are written here with scoped SQL (as tags do for their
 * stats) rather than through the tickets service, which will call this one for merge.
 *
 * Threads are one level deep: a top-level comment carries every live reply of its thread (replies
 * to replies included, each with its own parentId), oldest first. A reply whose parent was deleted
 * starts a thread of its own at top level, in its chronological place; deleted comments never show.
 */

export interface TicketRow {
  id: string;
  ticketNumber: number;
  title: string;
  status: string;
}

/** A ticket as insert locks it: with its service-level clock, which a status it sets may move. */
export interface LockedTicket extends TicketRow {
  createdAt: Date;
  priority: string | null;
  dueAt: Date | null;
  dueAtManual: boolean;
  slaPausedAt: Date | null;
  slaPausedSeconds: number;
}

const LOCKED_COLUMNS = ['id', 'ticketNumber', 'title', 'status', 'createdAt', 'priority', 'dueAt', 'dueAtManual', 'slaPausedAt', 'slaPausedSeconds'];

interface CommentWithTicket extends Comment {
  ticketNumber: number;
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
const iso = (d: Date | string) => new Date(d).toISOString();

export function toView(row: Comment): CommentView {
  return {
    id: row.id,
    object: 'comment',
    ticketId: row.ticketId,
    brandId: row.brandId,
    body: row.body,
    authorId: row.authorId,
    authorName: row.authorName,
    authorType: row.authorType,
    parentId: row.parentId,
    isInternal: row.isInternal,
    links: row.links ?? [],
    // The dashboard labels a comment by metadata.authorName, the SDK by authorName: both carry it,
    // unless the comment's own metadata names someone.
    metadata: { authorName: row.authorName, ...row.metadata },
    source: row.source,
    sourceId: row.sourceId,
    sourceData: row.sourceData ?? null,
    cc: row.cc ?? [],
    connectionId: row.connectionId,
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
    deletedAt: row.deletedAt ? iso(row.deletedAt) : null,
    replies: [],
  };
}

/** Live comments of one ticket (id = creation order) grouped into threads; see the file comment. */
function threads(rows: Comment[]): CommentView[] {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const rootOf = new Map<string, string>();
  // Iterative walk up the live parents (memoized), so a long reply chain cannot exhaust the stack.
  const rootId = (row: Comment): string => {
    const path: string[] = [];
    let cur = row;
    let root: string;
    for (;;) {
      const known = rootOf.get(cur.id);
      if (known) {
        root = known;
        break;
      }
      path.push(cur.id);
      const parent = cur.parentId ? byId.get(cur.parentId) : undefined;
      if (!parent) {
        root = cur.id;
        break;
      }
      cur = parent;
    }
    for (const id of path) rootOf.set(id, root);
    return root;
  };
  const tops = new Map<string, CommentView>();
  for (const row of rows) if (rootId(row) === row.id) tops.set(row.id, toView(row));
  for (const row of rows) {
    const root = rootOf.get(row.id)!;
    if (root !== row.id) tops.get(root)!.replies.push(toView(row));
  }
  return [...tops.values()];
}

function liveComments(ctx: TenantCtx, brandId: string, ticketId: string) {
  return Comment.scoped(ctx).where({ 'comments.brandId': brandId, 'comments.ticketId': ticketId }).whereNull('comments.deletedAt').orderBy('comments.id');
}

/** The comment as lists show it: a top-level comment with its thread, a reply without one. */
async function present(ctx: TenantCtx, row: Comment): Promise<CommentView> {
  if (row.deletedAt) return toView(row);
  return threads(await liveComments(ctx, row.brandId, row.ticketId)).find((c) => c.id === row.id) ?? toView(row);
}

/** A live ticket of the brand, optionally locked (see the file comment; then with its clock), or 404. */
async function ticketOf(ctx: TenantCtx, brandId: string, ticketId: string, lock: true): Promise<LockedTicket>;
async function ticketOf(ctx: TenantCtx, brandId: string, ticketId: string, lock?: false): Promise<TicketRow>;
async function ticketOf(ctx: TenantCtx, brandId: string, ticketId: string, lock = false): Promise<TicketRow> {
  const q = ctx
    .db('tickets')
    .where({ ...scopeOf(ctx), brandId, id: ticketId })
    .whereNull('deletedAt')
    .first(...(lock ? LOCKED_COLUMNS : ['id', 'ticketNumber', 'title', 'status']));
  if (lock) q.forUpdate();
  const row = (await q) as TicketRow | undefined;
  if (!row) throw notFound('Ticket');
  return row;
}

function ticketRow(ctx: TenantCtx, brandId: string, ticketId: string) {
  return ctx.db('tickets').where({ ...scopeOf(ctx), brandId, id: ticketId });
}

/** A live comment of a live ticket of the brand (of `ticketId` when given), with the ticket number; or 404. */
async function find(ctx: TenantCtx, brandId: string, commentId: string, ticketId?: string, lock = false): Promise<CommentWithTicket> {
  const q = Comment.scoped(ctx)
    .join('tickets as t', (j) =>
      j.on('t.accountId', 'comments.accountId').andOn('t.livemode', 'comments.livemode').andOn('t.brandId', 'comments.brandId').andOn('t.id', 'comments.ticketId'),
    )
    .where({ 'comments.brandId': brandId, 'comments.id': commentId })
    .whereNull('comments.deletedAt')
    .whereNull('t.deletedAt')
    .select('comments.*', 't.ticketNumber as ticketNumber');
  if (ticketId !== undefined) q.where('comments.ticketId', ticketId);
  // Lock the comment row only (FOR UPDATE OF); objection's typings omit knex's table list.
  if (lock) (q as unknown as { forUpdate(...tables: string[]): void }).forUpdate('comments');
  const row = (await q.first()) as CommentWithTicket | undefined;
  if (!row) throw notFound('Comment');
  return row;
}

/** metadata.isInternal, which must be a boolean when given. */
function internalFlag(metadata: Record<string, unknown> | undefined): boolean | undefined {
  const value = metadata?.isInternal;
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') {
    throw badRequest('metadata.isInternal must be true or false', [{ field: 'metadata.isInternal', message: 'must be a boolean' }]);
  }
  return value;
}

function normalizeCc(cc: readonly string[] | undefined): string[] {
  const emails = [...new Set((cc ?? []).map(normalizeEmail))];
  const bad = emails.findIndex((e) => !isEmail(e));
  if (bad >= 0) throw badRequest('cc must list email addresses', [{ field: `cc.${bad}`, message: 'is not an email address' }], 'invalid_email');
  return emails;
}

export type NewComment = Pick<
  Comment,
  'id' | 'body' | 'authorId' | 'authorName' | 'authorType' | 'parentId' | 'isInternal' | 'links' | 'metadata' | 'source' | 'sourceId' | 'sourceData' | 'cc' | 'connectionId'
>;

/**
 * The write shared by create and system notes, inside the caller's transaction: lock the ticket,
 * check the parent, bump comment_count and updated_at (and the status when setStatus changes
 * it; a public comment's moment, see messageMoment), insert the comment, record the audit
 * entries. The ticket is written before the comment is inserted; one transaction makes both
 * happen or neither.
 */
async function insert(
  tx: TenantCtx,
  brandId: string,
  ticketId: string,
  comment: NewComment,
  setStatus?: string,
  reopenFrom: readonly string[] = [],
  statusChanging?: CreateSteps['statusChanging'],
): Promise<Comment> {
  const ticket = await ticketOf(tx, brandId, ticketId, true);
  // Decided under the ticket's lock, so a reply racing a status change reopens what it finds.
  if (setStatus === undefined && reopenFrom.includes(ticket.status)) setStatus = 'open';
  if (comment.parentId) {
    const parent = await liveComments(tx, brandId, ticket.id).where('comments.id', comment.parentId).first();
    if (!parent) {
      throw badRequest(`parentId ${comment.parentId} is not a comment of this ticket`, [{ field: 'parentId', message: 'is not a live comment of this ticket' }], 'invalid_parent');
    }
  }
  const statusChange = setStatus !== undefined && setStatus !== ticket.status ? { status: setStatus } : {};
  const moved = statusChange.status && statusChanging ? await statusChanging(tx, brandId, ticket, statusChange.status) : { set: {}, changes: [] };
  const alsoChanged = moved.changes;
  await updateTickets(tx, brandId, [ticket.id], {
    ...moved.set,
    commentCount: tx.db.raw('comment_count + 1'),
    updatedAt: tx.db.raw('now()'),
    ...statusChange,
    ...messageMoment(tx, comment),
  });
  const entries = createdEntries(brandId, ticket, comment, statusChange.status ? [{ field: 'status', from: ticket.status, to: statusChange.status }, ...alsoChanged] : []);
  // The comment and its audit entries in one statement (a data-modifying CTE), its events in one more.
  const recorded = audit.insertRowsStatement(audit.entryRows(tx, entries));
  const row = (await Comment.query(tx.db)
    .with('entries', tx.db.raw(recorded.sql, recorded.bindings as never[]))
    .insert({ ...scopeOf(tx), brandId, ticketId: ticket.id, ...comment })
    .returning('*')) as unknown as Comment;
  await enqueueEvents(tx, [
    events.commentCreatedEvent(brandId, row),
    ...(statusChange.status ? events.ticketsUpdatedEvents(brandId, [{ ticketId: ticket.id, changes: ['status', ...alsoChanged.map((c) => c.field)] }]) : []),
  ]);
  return row;
}

/** The audit entries of a comment created: its own, and the ticket's when it changed the status (`changes`, the status first). */
export function createdEntries(brandId: string, ticket: TicketRow, comment: Pick<NewComment, 'id' | 'isInternal'>, changes: Change[]): audit.AuditFact[] {
  const entries: audit.AuditFact[] = [
    {
      brandId,
      ticketId: ticket.id,
      entityType: 'comment',
      entityId: comment.id,
      event: 'comment.created',
      metadata: { ticketNumber: ticket.ticketNumber, isInternal: comment.isInternal },
    },
  ];
  if (changes.length) {
    entries.push({
      brandId,
      ticketId: ticket.id,
      entityType: 'ticket',
      entityId: ticket.id,
      event: 'ticket.updated',
      changes,
      metadata: { ticketNumber: ticket.ticketNumber, title: ticket.title },
    });
  }
  return entries;
}

/** A public message is a moment automations count from: the customer's last message, or an agent's last reply. */
export function messageMoment(tx: TenantCtx, comment: Pick<NewComment, 'isInternal' | 'authorType'>) {
  if (comment.isInternal) return {};
  if (comment.authorType === 'CUSTOMER') return { lastCustomerMessageAt: tx.db.raw('now()') };
  if (comment.authorType === 'AGENT') return { lastAgentReplyAt: tx.db.raw('now()') };
  return {};
}

export async function list(ctx: TenantCtx, brandId: string, ticketId: string, shape: 'threads' | 'flat' = 'threads'): Promise<CommentView[]> {
  const id = await visibleBrandId(ctx, brandId);
  // The live ticket and its live comments in one read, planned once per connection (on Citus, on
  // the account's worker): the dashboard polls it. No row: no such ticket; one empty row: no comments.
  const read = await preparedRows<Comment>(
    ctx,
    ctx
      .db('tickets as t')
      .joinRaw(`left join comments c on ${sameTenant('c', 't')} and c.brand_id = t.brand_id and c.ticket_id = t.id and c.deleted_at is null`)
      .whereRaw('?', [tenantScope(ctx, 't')])
      .where({ 't.brandId': id, 't.id': ticketId })
      .whereNull('t.deletedAt')
      .orderBy('c.id')
      .select('c.*'),
  );
  if (!read.length) throw notFound('Ticket');
  const rows = read[0]!.id === null ? [] : read;
  return shape === 'flat' ? rows.map(toView) : threads(rows);
}

/**
 * The comment row named `alias` as toView makes it, as JSON text built by PostgreSQL (as the
 * tickets' viewJson), in CommentOut's field order, its `replies` the JSON text `replies`.
 * row_to_json writes no blanks; metadata carries authorName unless its own names someone.
 */
function commentJson(alias: string, replies: string): string {
  const a = alias;
  return `(select row_to_json(v)::text from (select ${a}.id as "id", 'comment' as "object", ${a}.ticket_id as "ticketId", ${a}.brand_id as "brandId",
      ${a}.body as "body", ${a}.author_id as "authorId", ${a}.author_name as "authorName", ${a}.author_type as "authorType", ${a}.parent_id as "parentId",
      ${a}.is_internal as "isInternal", coalesce(${a}.links, '[]'::jsonb) as "links",
      jsonb_build_object('authorName', ${a}.author_name) || coalesce(${a}.metadata, '{}'::jsonb) as "metadata",
      ${a}.source as "source", ${a}.source_id as "sourceId", ${a}.source_data as "sourceData", coalesce(${a}.cc, '{}') as "cc", ${a}.connection_id as "connectionId",
      ${isoText(`${a}.created_at`)} as "createdAt", ${isoText(`${a}.updated_at`)} as "updatedAt", ${isoText(`${a}.deleted_at`)} as "deletedAt",
      (${replies})::json as "replies") v)`;
}

/** A list of comment JSON texts (commentJson) as one JSON array, in id order. */
const jsonList = (alias: string, replies: string) => `'[' || string_agg(${commentJson(alias, replies)}, ',' order by ${alias}.id) || ']'`;

/**
 * The live comments of some tickets of a brand (checked by the caller), by ticket, each list as
 * `list` gives it but as JSON text built by PostgreSQL: for the ticket export, one statement for a
 * page of tickets, whose comments never become objects here. Threads as `threads` makes them: a
 * comment without a live parent starts one, which holds every live comment below it. A ticket
 * without comments is absent from the map.
 */
export async function listJsonOfTickets(ctx: TenantCtx, brandId: string, ticketIds: readonly string[], shape: 'threads' | 'flat'): Promise<Map<string, string>> {
  if (!ticketIds.length) return new Map();
  const live = 'select c.* from comments c where ? and c.brand_id = ? and c.ticket_id = any(?::text[]) and c.deleted_at is null';
  const sql =
    shape === 'flat'
      ? `select l.ticket_id, ${jsonList('l', "'[]'")} as list_json from (${live}) l group by l.ticket_id`
      : `with recursive lc as (${live}),
          th as (
            select l.ticket_id, l.id, l.id as root_id from lc l
              where not exists (select 1 from lc p where p.ticket_id = l.ticket_id and p.id = l.parent_id)
            union all
            select l.ticket_id, l.id, t.root_id from th t join lc l on l.ticket_id = t.ticket_id and l.parent_id = t.id
          ),
          rp as (
            select t.ticket_id, t.root_id, ${jsonList('l', "'[]'")} as list_json
            from th t join lc l on l.ticket_id = t.ticket_id and l.id = t.id where t.id <> t.root_id group by t.ticket_id, t.root_id
          )
        select l.ticket_id, ${jsonList('l', "coalesce(rp.list_json, '[]')")} as list_json
        from th t join lc l on l.ticket_id = t.ticket_id and l.id = t.id
          left join rp on rp.ticket_id = t.ticket_id and rp.root_id = t.id
        where t.id = t.root_id group by l.ticket_id`;
  const rows = await preparedRows<{ ticketId: string; listJson: string }>(ctx, ctx.db.raw(sql, [tenantScope(ctx, 'c'), brandId, [...ticketIds]]));
  return new Map(rows.map((r) => [r.ticketId, r.listJson]));
}

/**
 * Whether `address` (normalized) is on a ticket's mail thread through its live comments: CC'd on
 * a public one (our mail went to it), or the sender of a customer comment that came by mail.
 */
export async function isOnMailThread(ctx: TenantCtx, brandId: string, ticketId: string, address: string): Promise<boolean> {
  const found = await liveComments(ctx, brandId, ticketId)
    .where((either) =>
      either
        .where((cc) => cc.where('comments.isInternal', false).whereRaw('? = any(comments.cc)', [address]))
        .orWhere((sender) => sender.where({ 'comments.authorType': 'CUSTOMER', 'comments.source': 'email' }).whereRaw("comments.metadata #>> '{email,from}' = ?", [address])),
    )
    .clearOrder()
    .select('comments.id')
    .first();
  return Boolean(found);
}

export async function get(ctx: TenantCtx, brandId: string, commentId: string, ticketId?: string): Promise<CommentView> {
  return present(ctx, await find(ctx, await visibleBrandId(ctx, brandId), commentId, ticketId));
}

export interface CreateResult {
  created: boolean;
  comment: CommentView;
}

/**
 * Create (see insert). With an idempotency key, the same request again answers with the first
 * comment as it is now (created: false), even if it was deleted since.
 */
/** What a flow adds to comment create inside its transaction (flows/comment-create.ts: the status check and the mail). */
export interface CreateSteps {
  /** Before anything is written, e.g. a check that may refuse the request. */
  check?: (tx: TenantCtx, brandId: string) => Promise<void>;
  /** After the comment is written. */
  then?: (tx: TenantCtx, brandId: string, row: Comment) => Promise<void>;
  /** Statuses the comment sets back to open (a customer's reply); not part of the request, so a replay matches. */
  reopenFrom?: readonly string[];
  /**
   * Before the ticket's new status is written: what else that changes (its service-level clock),
   * written by the same statement, and those changes for its audit entry.
   */
  statusChanging?: (tx: TenantCtx, brandId: string, ticket: LockedTicket, to: string) => Promise<{ set: TicketSet; changes: Change[] }>;
}

/** The comment a create request makes (its id given), as insert takes it; a 400 for a bad metadata.isInternal or CC. */
export function newComment(ctx: TenantCtx, input: CreateCommentInput, id: string): NewComment {
  const metadataName = input.metadata?.authorName;
  const actor = ctx.actor;
  return {
    id,
    body: input.body,
    authorId: input.authorId ?? (actor.type === 'user' ? actor.id : null),
    authorName: (input.authorName ?? (typeof metadataName === 'string' ? metadataName : null))?.trim() || null,
    authorType: input.authorType ?? (actor.type === 'customer' ? 'CUSTOMER' : actor.type === 'system' ? 'SYSTEM' : 'AGENT'),
    parentId: input.parentId ?? null,
    isInternal: internalFlag(input.metadata) ?? false,
    links: input.links ?? [],
    metadata: input.metadata ?? {},
    source: input.source ?? 'api',
    sourceId: input.sourceId ?? null,
    sourceData: input.sourceData ?? null,
    cc: normalizeCc(input.cc),
    connectionId: input.connectionId ?? null,
  };
}

export async function create(
  ctx: TenantCtx,
  brandId: string,
  ticketId: string,
  input: CreateCommentInput,
  idempotencyKey?: string,
  steps: CreateSteps = {},
): Promise<CreateResult> {
  const given = newComment(ctx, input, '');

  const outcome = await withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const id = newId(ID_PREFIX.comment);
    if (idempotencyKey !== undefined) {
      // The ticket's row first, then the key: the order the reply in two statements takes them in, so the two never deadlock.
      await tx
        .db('tickets')
        .where({ ...scopeOf(tx), brandId: brand.id, id: ticketId })
        .forUpdate()
        .select('id');
      const fingerprint = requestFingerprint('POST', `/brands/${brand.id}/tickets/${ticketId}/comments`, input);
      const claim = await claimIdempotencyKey(tx, idempotencyKey, fingerprint, id, 'comment');
      if (!claim.claimed) return { created: false, id: claim.resourceId, brandId: brand.id };
    }
    await steps.check?.(tx, brand.id);
    const row = await insert(tx, brand.id, ticketId, { ...given, id }, input.setStatus, steps.reopenFrom, steps.statusChanging);
    await steps.then?.(tx, brand.id, row);
    return { created: true, row };
  });

  if (outcome.row) return { created: true, comment: toView(outcome.row) };
  const first = await Comment.scoped(ctx).where({ brandId: outcome.brandId, id: outcome.id }).first();
  if (!first) throw notFound('Comment');
  return { created: false, comment: await present(ctx, first) };
}

/**
 * PATCH body, links, metadata (replaced as a whole). An internal note stays internal when the new
 * metadata does not mention isInternal: an edit that forgets the flag must not publish the note;
 * send isInternal: false to make it public. Nothing changed: nothing written, updatedAt stays.
 */
export async function update(ctx: TenantCtx, brandId: string, commentId: string, input: UpdateCommentInput, ticketId?: string): Promise<CommentView> {
  if (Object.keys(input).length === 0) throw badRequest('Send at least one field to change', [], 'empty_update');
  const flag = input.metadata !== undefined ? internalFlag(input.metadata) : undefined;

  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const current = await find(tx, brand.id, commentId, ticketId, true);
    const changes: Change[] = [];
    const patch: Partial<Pick<Comment, 'body' | 'links' | 'metadata' | 'isInternal'>> = {};
    if (input.body !== undefined && input.body !== current.body) {
      changes.push({ field: 'body', from: current.body, to: input.body });
      patch.body = input.body;
    }
    if (input.links !== undefined && !same(current.links, input.links)) {
      changes.push({ field: 'links', from: current.links, to: input.links });
      patch.links = input.links;
    }
    if (input.metadata !== undefined) {
      const metadata = flag === undefined && current.isInternal ? { ...input.metadata, isInternal: true } : input.metadata;
      if (!same(current.metadata, metadata)) {
        changes.push({ field: 'metadata', from: current.metadata, to: metadata });
        patch.metadata = metadata;
        patch.isInternal = metadata.isInternal === true;
      }
    }
    if (!changes.length) return present(tx, current);

    const [row] = (await Comment.scoped(tx)
      .where({ brandId: brand.id, id: current.id })
      .patch({ ...patch, updatedAt: tx.db.fn.now() as unknown as Date })
      .returning('*')) as unknown as Comment[];
    await audit.record(tx, {
      brandId: brand.id,
      ticketId: current.ticketId,
      entityType: 'comment',
      entityId: current.id,
      event: 'comment.updated',
      changes,
      metadata: { ticketNumber: current.ticketNumber, isInternal: row!.isInternal },
    });
    await events.commentUpdated(
      tx,
      brand.id,
      row!,
      changes.map((c) => c.field),
    );
    return present(tx, row!);
  });
}

/** Soft delete: returns the comment with deletedAt; the ticket's commentCount drops by one. */
export async function remove(ctx: TenantCtx, brandId: string, commentId: string, ticketId?: string): Promise<CommentView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const found = await find(tx, brand.id, commentId, ticketId);
    const ticket = await ticketOf(tx, brand.id, found.ticketId, true);
    // Re-checked under the ticket lock: of two concurrent deletes, one finds nothing left (404).
    const [row] = (await Comment.scoped(tx)
      .where({ brandId: brand.id, id: found.id })
      .whereNull('deletedAt')
      .patch({ deletedAt: tx.db.fn.now() as unknown as Date })
      .returning('*')) as unknown as Comment[];
    if (!row) throw notFound('Comment');
    await ticketRow(tx, brand.id, ticket.id).update({ commentCount: tx.db.raw('comment_count - 1') });
    await audit.record(tx, {
      brandId: brand.id,
      ticketId: ticket.id,
      entityType: 'comment',
      entityId: row.id,
      event: 'comment.deleted',
      metadata: { ticketNumber: ticket.ticketNumber, isInternal: row.isInternal },
    });
    await events.commentDeleted(tx, brand.id, row);
    return toView(row);
  });
}

/**
 * For ticket merge: moves every comment (deleted ones too, so threads stay whole) of the source
 * tickets to the target, and recounts commentCount on all of them. The tickets are locked in id
 * order. The target must be live; sources may be in any state. Returns how many live comments moved.
 */
export async function moveToTicket(ctx: TenantCtx, brandId: string, fromTicketIds: readonly string[], toTicketId: string): Promise<{ moved: number }> {
  const from = [...new Set(fromTicketIds)];
  if (from.includes(toTicketId)) throw badRequest('A ticket cannot take its own comments', [{ field: 'fromTicketIds', message: 'must not include the target ticket' }]);
  if (!from.length) return { moved: 0 };

  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const ids = [...from, toTicketId].sort();
    const locked = (await tx
      .db('tickets')
      .where({ ...scopeOf(tx), brandId: brand.id })
      .whereIn('id', ids)
      .orderBy('id')
      .forUpdate()
      .select('id', 'deletedAt')) as { id: string; deletedAt: Date | null }[];
    if (locked.length !== ids.length || locked.find((t) => t.id === toTicketId)?.deletedAt) throw notFound('Ticket');

    // One statement: a reply and its parent change ticket_id together (comments_parent_fk), and
    // the comments' mentions with them (mentions_comment_fk: its keys are checked at the statement's end).
    const moved = (
      await tx.db.raw<{ rows: { deleted_at: Date | null }[] }>(
        `with moved as (
          update comments c set ticket_id = ? where ? and c.brand_id = ? and c.ticket_id = any(?) returning c.deleted_at
        ), mentioned as (
          update mentions m set ticket_id = ? where ? and m.brand_id = ? and m.ticket_id = any(?)
        )
        select deleted_at from moved`,
        [toTicketId, tenantScope(tx, 'c'), brand.id, from, toTicketId, tenantScope(tx, 'm'), brand.id, from],
      )
    ).rows;
    await tx.db.raw(
      `
      update tickets t set comment_count = (select count(*) from comments c
        where ${tenantIs('c', BOUND_TENANT)} and c.brand_id = t.brand_id and c.ticket_id = t.id and c.deleted_at is null)
      where :scope and t.brand_id = :brandId and t.id = any(:ids)`,
      { account: tx.accountId, livemode: tx.livemode, scope: tenantScope(tx, 't'), brandId: brand.id, ids },
    );
    return { moved: moved.filter((c) => !c.deleted_at).length };
  });
}

/**
 * For ticket merge (and later automations): a SYSTEM comment on a live ticket, counted and audited
 * like any other. metadata.isInternal marks it internal.
 */
export async function addSystemComment(ctx: TenantCtx, brandId: string, ticketId: string, body: string, metadata: Record<string, unknown> = {}): Promise<CommentView> {
  if (!body.trim()) throw badRequest('body must not be blank', [{ field: 'body', message: 'must not be blank' }]);
  const isInternal = internalFlag(metadata) ?? false;
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await insert(tx, brand.id, ticketId, {
      id: newId(ID_PREFIX.comment),
      body,
      authorId: null,
      authorName: null,
      authorType: 'SYSTEM',
      parentId: null,
      isInternal,
      links: [],
      metadata,
      source: 'api',
      sourceId: null,
      sourceData: null,
      cc: [],
      connectionId: null,
    });
    return toView(row);
  });
}
