import type { Knex } from 'knex';
import * as audit from '../core/audit.js';
import { runInAccount } from '../core/citus.js';
import { withTx, type TenantCtx } from '../core/context.js';
import { HttpError } from '../core/errors.js';
import type { ScanStatus } from '../core/scanning.js';
import { newId, ID_PREFIX } from '../core/ids.js';
import { accountIs, BOUND_TENANT, sameTenant, tenantIs, tenantScope } from '../core/model.js';
import type { StagedObject } from '../core/ports.js';
import { countChangesSql, linkEachTags, linkTags, updateTickets, type TicketSet } from '../core/ticket-writes.js';
import * as attachments from '../domains/attachments/service.js';

/**
 * The write side of imports (decision 0123): every object an import writes is remembered in
 * import_mappings under the account and mode, by the source's id, with the source's version of it;
 * a second run finds it there and updates it when that version changed, so it never makes a
 * duplicate. Writes are made by an actor whose source is `import`: their audit entries say so, and
 * the outbox announces nothing for them (no webhook, no mail: core/outbox/service.ts announces).
 *
 * Brands, statuses, fields, categories, tags, contacts and companies go through their own
 * services. Tickets and comments do not: their usual writes stamp now() and announce themselves
 * by design (one statement with their events), and an import must keep the source's times,
 * authors and numbers. Their rows are written here with every derived column computed as the
 * usual writes compute it (the sort keys, search vector, resolved_at, the count changes, the
 * tag links' copies, comment and attachment counts, the moments automations count from).
 */

/** The actor of every import write: the system, from source `import`. */
export function importCtx(ctx: TenantCtx, name = 'import'): TenantCtx {
  return { ...ctx, actor: { type: 'system', id: null, name, source: 'import' } };
}

export interface Mapping {
  targetId: string;
  version: string | null;
}

/** What the import made of the objects `sourceIds` of `kind`, by source id. */
export async function mappingsOf(ctx: TenantCtx, source: string, kind: string, sourceIds: readonly string[]): Promise<Map<string, Mapping>> {
  if (!sourceIds.length) return new Map();
  const { rows } = (await ctx.db.raw(
    `select m.source_id, m.target_id, m.source_version from import_mappings m
    where ? and m.source = ? and m.kind = ? and m.source_id = any(?::text[])`,
    [tenantScope(ctx, 'm'), source, kind, [...sourceIds]],
  )) as { rows: { source_id: string; target_id: string; source_version: string | null }[] };
  return new Map(rows.map((r) => [r.source_id, { targetId: r.target_id, version: r.source_version }]));
}

/** Every mapping of a kind, source id to target id (small kinds: statuses, tags, members…). */
export async function allMappings(ctx: TenantCtx, source: string, kind: string): Promise<Map<string, string>> {
  const { rows } = (await ctx.db.raw(`select m.source_id, m.target_id from import_mappings m where ? and m.source = ? and m.kind = ?`, [tenantScope(ctx, 'm'), source, kind])) as {
    rows: { source_id: string; target_id: string }[];
  };
  return new Map(rows.map((r) => [r.source_id, r.target_id]));
}

/** Remembers (or moves) a mapping, in the transaction of the write it records. */
export function remember(tx: TenantCtx, source: string, kind: string, sourceId: string, targetId: string, version: string | null): Promise<void> {
  return rememberMany(tx, source, [{ kind, sourceId, targetId, version }]);
}

export interface Remembered {
  kind: string;
  sourceId: string;
  targetId: string;
  version: string | null;
}

/** Remembers (or moves) mappings, in one statement. */
export async function rememberMany(tx: TenantCtx, source: string, rows: readonly Remembered[]): Promise<void> {
  if (!rows.length) return;
  // The time as a value, not now(): Citus takes only IMMUTABLE functions in an upsert's SET.
  await tx.db.raw(
    `insert into import_mappings (account_id, livemode, source, kind, source_id, target_id, source_version, updated_at)
    select ?, ?, ?, r.kind, r.source_id, r.target_id, r.source_version, ? from unnest(?::text[], ?::text[], ?::text[], ?::text[]) as r (kind, source_id, target_id, source_version)
    on conflict (account_id, livemode, source, kind, source_id) do update set target_id = excluded.target_id, source_version = excluded.source_version, updated_at = excluded.updated_at`,
    [
      tx.accountId,
      tx.livemode,
      source,
      new Date(tx.services.now()),
      rows.map((r) => r.kind),
      rows.map((r) => r.sourceId),
      rows.map((r) => r.targetId),
      rows.map((r) => r.version),
    ] as Knex.RawBinding[],
  );
}

export type Outcome = 'created' | 'updated' | 'unchanged';

/**
 * One object: created (and remembered) when the source's id is new, updated when its version
 * changed, else left alone. A mapped object since deleted in the target is created again. Each
 * write and its mapping commit together.
 */
export async function importObject(
  ctx: TenantCtx,
  key: { source: string; kind: string; sourceId: string; version: string | null },
  known: Mapping | undefined,
  write: { create(tx: TenantCtx): Promise<string>; update(tx: TenantCtx, targetId: string): Promise<void> },
): Promise<{ outcome: Outcome; targetId: string }> {
  if (known && known.version !== null && known.version === key.version) return { outcome: 'unchanged', targetId: known.targetId };
  if (known) {
    try {
      await withTx(ctx, async (tx) => {
        await write.update(tx, known.targetId);
        await remember(tx, key.source, key.kind, key.sourceId, known.targetId, key.version);
      });
      return { outcome: 'updated', targetId: known.targetId };
    } catch (err) {
      if (!(err instanceof HttpError && err.statusCode === 404)) throw err;
    }
  }
  const targetId = await withTx(ctx, async (tx) => {
    const id = await write.create(tx);
    await remember(tx, key.source, key.kind, key.sourceId, id, key.version);
    return id;
  });
  return { outcome: 'created', targetId };
}

// ---------------------------------------------------------------------------------------------
// Tickets, comments and attachments.

/** A ticket as the import writes it: the source's values, its references already in target ids. */
export interface ImportedTicket {
  brandId: string;
  /** The source's number: kept when asked to and free in the brand. */
  ticketNumber: number | null;
  keepNumber: boolean;
  title: string;
  body: string | null;
  status: string;
  priority: string | null;
  assigneeId: string | null;
  createdBy: string | null;
  customerId: string | null;
  categoryId: string | null;
  tagIds: string[];
  links: unknown[];
  customFields: unknown;
  metadata: Record<string, unknown>;
  source: string;
  sourceId: string | null;
  sourceData: Record<string, unknown> | null;
  isSpam: boolean;
  /** Kept: a ticket held in the source must not fall to the target's retention. */
  legalHold: boolean;
  closeReason: string | null;
  dueAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface ImportedComment {
  /** The source's id of the comment (its mapping's key). */
  ref: string;
  version: string | null;
  /** The parent's ref (a reply): written before it. */
  parentRef: string | null;
  body: string;
  authorId: string | null;
  authorName: string | null;
  authorType: string;
  isInternal: boolean;
  links: unknown[];
  metadata: Record<string, unknown>;
  source: string;
  sourceId: string | null;
  sourceData: Record<string, unknown> | null;
  cc: string[];
  createdAt: string;
  updatedAt: string;
}

/** An attachment's bytes already staged (read from the source before the transaction). */
export interface ImportedAttachment {
  /** The source's id of the attachment, and of its comment. */
  ref: string;
  commentRef: string | null;
  filename: string;
  contentType: string;
  uploadedBy: string | null;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  staged: StagedObject;
  scanStatus: ScanStatus;
}

export interface TicketWriteResult {
  ticketId: string;
  ticketNumber: number;
  outcome: 'created' | 'updated';
  comments: { created: number; updated: number; unchanged: number };
  attachments: { created: number; unchanged: number };
}

const DONE = `('resolved', 'closed')`;

/**
 * Numbers for tickets about to be inserted into a brand, in one short transaction of their own: the
 * brand row is locked only for it, so the tickets themselves are written side by side. Each takes
 * the source's number when kept, free in the brand and not given twice here, else the brand's
 * next; the counter moves past them all. A number reserved for a ticket whose write then fails
 * stays unused, as a number of a ticket deleted does.
 */
export async function reserveNumbers(ctx: TenantCtx, brandId: string, tickets: readonly Pick<ImportedTicket, 'ticketNumber' | 'keepNumber'>[]): Promise<number[]> {
  if (!tickets.length) return [];
  const wanted = tickets.map((t) => (t.keepNumber && t.ticketNumber !== null && t.ticketNumber > 0 ? t.ticketNumber : null));
  return withTx(ctx, async (tx) => {
    // Two statements: Citus locks a row only in a statement on its one table.
    const { rows } = (await tx.db.raw(`select b.next_ticket_number from brands b where ? and b.id = ? for no key update`, [tenantScope(tx, 'b'), brandId])) as {
      rows: { next_ticket_number: number }[];
    };
    if (!rows[0]) throw new HttpError(404, 'not_found', 'Brand not found');
    const { rows: taken } = (await tx.db.raw(`select x.ticket_number from tickets x where ? and x.brand_id = ? and x.ticket_number = any(?::int[])`, [
      tenantScope(tx, 'x'),
      brandId,
      wanted.filter((n) => n !== null),
    ])) as { rows: { ticket_number: number }[] };
    const given = new Set(taken.map((r) => r.ticket_number));
    const kept = wanted.map((n) => (n !== null && !given.has(n) ? (given.add(n), n) : null));
    // The counter is past every number in the brand; the next ones also go past those kept here.
    let next = Math.max(rows[0].next_ticket_number, ...kept.map((n) => (n ?? 0) + 1));
    const numbers = kept.map((n) => n ?? next++);
    await tx.db.raw(`update brands b set next_ticket_number = greatest(b.next_ticket_number, ?::int) where ? and b.id = ?`, [next, tenantScope(tx, 'b'), brandId]);
    return numbers;
  });
}

/** A new ticket with the id it is inserted under. */
type NewRow = NewTicket & { id: string };

/** Inserts the tickets with their derived columns and their count changes (the rows counted from the source's days), in one statement. */
async function insertTickets(tx: TenantCtx, rows: readonly NewRow[]): Promise<void> {
  const given = rows.map(({ id, number, t, comments }) => {
    // What settleTicket would recompute, from its comments (all new with it): the row is written once.
    const lastOf = (authorType: string) =>
      comments
        .filter((c) => !c.isInternal && c.authorType === authorType)
        .map((c) => new Date(c.createdAt).toISOString())
        .sort()
        .pop() ?? null;
    return {
      id,
      comment_count: comments.length,
      last_customer_message_at: lastOf('CUSTOMER'),
      last_agent_reply_at: lastOf('AGENT'),
      brand_id: t.brandId,
      ticket_number: number,
      title: t.title,
      body: t.body,
      status: t.status,
      priority: t.priority,
      assignee_id: t.assigneeId,
      created_by: t.createdBy,
      customer_id: t.customerId,
      category_id: t.categoryId,
      links: t.links,
      custom_fields: t.customFields ?? null,
      metadata: t.metadata,
      source: t.source,
      source_id: t.sourceId,
      source_data: t.sourceData,
      is_spam: t.isSpam,
      legal_hold: t.legalHold,
      close_reason: t.closeReason,
      due_at: t.dueAt,
      created_at: t.createdAt,
      updated_at: t.updatedAt,
    };
  });
  // On Citus, on the worker that holds the account (as ticket create's statement): its count
  // changes draw their ids from the sequence by name there.
  await runInAccount(
    tx,
    tx.db.raw(
      `with g as (
      select * from jsonb_to_recordset(:given::jsonb) as g(id text, comment_count int, last_customer_message_at timestamptz, last_agent_reply_at timestamptz, brand_id text, ticket_number int, title text, body text, status text, priority text, assignee_id text,
        created_by text, customer_id text, category_id text, links jsonb, custom_fields jsonb, metadata jsonb, source text, source_id text, source_data jsonb,
        is_spam boolean, legal_hold boolean, close_reason text, due_at timestamptz, created_at timestamptz, updated_at timestamptz)
    ), t as (
      insert into tickets (id, account_id, livemode, brand_id, ticket_number, title, body, status, priority, assignee_id, created_by, customer_id, category_id,
        links, custom_fields, metadata, source, source_id, source_data, is_spam, legal_hold, close_reason, due_at, due_at_manual, created_at, updated_at,
        customer_sort, customer_text, company_sort, assignee_sort, category_sort, search_vector, resolved_at, status_changed_at,
        comment_count, last_customer_message_at, last_agent_reply_at)
      select g.id, :account, :livemode, g.brand_id, g.ticket_number, g.title, g.body, g.status, g.priority, g.assignee_id, g.created_by, c.id, g.category_id,
        coalesce(g.links, '[]'), g.custom_fields, coalesce(g.metadata, '{}'), g.source, g.source_id, g.source_data, g.is_spam, g.legal_hold, g.close_reason, g.due_at, g.due_at is not null,
        g.created_at, g.updated_at,
        coalesce(ticketd_person_sort(c.name, c.email), ''), coalesce(ticketd_person_text(c.name, c.email), ''),
        coalesce((select lower(co.name) from companies co where ${sameTenant('co', 'c')} and co.brand_id = c.brand_id and co.id = c.company_id), ''),
        coalesce((select ticketd_person_sort(m.name, m.email) from members m where ${accountIs('m', ':account')} and m.id = g.assignee_id), ''),
        coalesce((select lower(ca.name) from categories ca where ${tenantIs('ca', BOUND_TENANT)} and ca.brand_id = g.brand_id and ca.id = g.category_id), ''),
        ticketd_ticket_vector(g.title, coalesce(ticketd_person_text(c.name, c.email), ''), g.body),
        -- The source shows no time of resolution: its last update stands for it.
        case when g.status in ${DONE} then g.updated_at end, g.updated_at,
        g.comment_count, g.last_customer_message_at, g.last_agent_reply_at
      from g left join contacts c on ${tenantIs('c', BOUND_TENANT)} and c.brand_id = g.brand_id and c.id = g.customer_id
      returning account_id, livemode, brand_id, status, created_at, resolved_at, deleted_at, is_spam
    ), counts as (${countChangesSql({ after: 't' })})
    select 1 as done`,
      { given: JSON.stringify(given), account: tx.accountId, livemode: tx.livemode },
    ),
  );
}

/** The ticket's tag links made exactly `tagIds` (with their copies of status and priority). */
async function setTags(tx: TenantCtx, brandId: string, ticketId: string, tagIds: readonly string[]): Promise<void> {
  await tx.db.raw(`delete from ticket_tags tt where ? and tt.brand_id = ? and tt.ticket_id = ? and not (tt.tag_id = any(?::text[]))`, [
    tenantScope(tx, 'tt'),
    brandId,
    ticketId,
    [...tagIds],
  ]);
  await linkTags(tx, brandId, [ticketId], tagIds);
}

/**
 * What follows from a ticket's comments and attachments, recomputed: its comment and attachment
 * counts, the customer's last public message and the last public agent reply (what automations
 * count from), and the source's updatedAt (the writes above moved it).
 */
async function settleTicket(tx: TenantCtx, brandId: string, ticketId: string, updatedAt: string): Promise<void> {
  const live = `${tenantIs('x', BOUND_TENANT)} and x.brand_id = t.brand_id and x.ticket_id = t.id`;
  await tx.db.raw(
    `update tickets t set
      comment_count = (select count(*) from comments x where ${live} and x.deleted_at is null),
      attachment_count = (select count(*) from attachments x where ${live} and x.status = 'UPLOADED'),
      last_customer_message_at = (select max(x.created_at) from comments x where ${live} and x.deleted_at is null and not x.is_internal and x.author_type = 'CUSTOMER'),
      last_agent_reply_at = (select max(x.created_at) from comments x where ${live} and x.deleted_at is null and not x.is_internal and x.author_type = 'AGENT'),
      updated_at = :updatedAt
    where :scope and t.brand_id = :brandId and t.id = :ticketId`,
    { account: tx.accountId, livemode: tx.livemode, updatedAt, scope: tenantScope(tx, 't'), brandId, ticketId },
  );
}

/** Comments of the brand's tickets, in one statement: a reply's parent is checked at its end. */
async function insertComments(tx: TenantCtx, brandId: string, rows: readonly { id: string; ticketId: string; parentId: string | null; c: ImportedComment }[]): Promise<void> {
  if (!rows.length) return;
  const given = rows.map(({ id, ticketId, parentId, c }) => ({
    id,
    ticket_id: ticketId,
    parent_id: parentId,
    body: c.body,
    author_id: c.authorId,
    author_name: c.authorName,
    author_type: c.authorType,
    is_internal: c.isInternal,
    links: c.links ?? [],
    metadata: c.metadata ?? {},
    source: c.source,
    source_id: c.sourceId,
    source_data: c.sourceData,
    cc: c.cc,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
  }));
  await tx.db.raw(
    `insert into comments (id, account_id, livemode, brand_id, ticket_id, parent_id, body, author_id, author_name, author_type, is_internal, links, metadata,
      source, source_id, source_data, cc, created_at, updated_at)
    select g.id, ?, ?, ?, g.ticket_id, g.parent_id, g.body, g.author_id, g.author_name, g.author_type, g.is_internal, g.links, g.metadata,
      g.source, g.source_id, g.source_data, array(select jsonb_array_elements_text(g.cc)), g.created_at, g.updated_at
    from jsonb_to_recordset(?::jsonb) as g (id text, ticket_id text, parent_id text, body text, author_id text, author_name text, author_type text, is_internal boolean, links jsonb,
      metadata jsonb, source text, source_id text, source_data jsonb, cc jsonb, created_at timestamptz, updated_at timestamptz)`,
    [tx.accountId, tx.livemode, brandId, JSON.stringify(given)] as Knex.RawBinding[],
  );
}

async function updateComment(tx: TenantCtx, brandId: string, id: string, c: ImportedComment): Promise<void> {
  await tx.db.raw(
    `update comments x set body = ?, author_id = ?, author_name = ?, author_type = ?, is_internal = ?, links = ?::jsonb, metadata = ?::jsonb, cc = ?::text[], updated_at = ?
    where ? and x.brand_id = ? and x.id = ?`,
    [
      c.body,
      c.authorId,
      c.authorName,
      c.authorType,
      c.isInternal,
      JSON.stringify(c.links ?? []),
      JSON.stringify(c.metadata ?? {}),
      c.cc,
      c.updatedAt,
      tenantScope(tx, 'x'),
      brandId,
      id,
    ] as Knex.RawBinding[],
  );
}

/**
 * Tickets new to the target with their comments and tag links, all of one brand, each kind of row in
 * one statement; their mappings and audit facts are added to `remembered` and `facts` (each
 * ticket's before its comments'). Gives each ticket's comment ids by the source's refs.
 */
async function insertWhole(tx: TenantCtx, source: string, rows: readonly NewRow[], remembered: Remembered[], facts: audit.AuditFact[]): Promise<Map<string, string>[]> {
  if (!rows.length) return [];
  const brandId = rows[0]!.t.brandId;
  if (rows.some((r) => r.t.brandId !== brandId)) throw new Error('tickets of one brand at a time');
  const commentRows: { id: string; ticketId: string; parentId: string | null; c: ImportedComment }[] = [];
  const commentIds = rows.map(({ id, key, number, t, comments }) => {
    facts.push({ brandId, ticketId: id, entityType: 'ticket', entityId: id, event: 'ticket.created', metadata: { ticketNumber: number, title: t.title, importedFrom: source } });
    remembered.push({ kind: 'ticket', sourceId: key.sourceId, targetId: id, version: key.version });
    const ids = new Map<string, string>();
    for (const c of comments) {
      const commentId = newId(ID_PREFIX.comment, Date.parse(c.createdAt));
      commentRows.push({ id: commentId, ticketId: id, parentId: c.parentRef ? (ids.get(c.parentRef) ?? null) : null, c });
      ids.set(c.ref, commentId);
      facts.push({ brandId, ticketId: id, entityType: 'comment', entityId: commentId, event: 'comment.created', metadata: { importedFrom: source } });
      remembered.push({ kind: 'comment', sourceId: c.ref, targetId: commentId, version: c.version });
    }
    return ids;
  });
  await insertTickets(tx, rows);
  await linkEachTags(
    tx,
    brandId,
    rows.map((r) => ({ ticketId: r.id, tagIds: r.t.tagIds })),
  );
  await insertComments(tx, brandId, commentRows);
  return commentIds;
}

/** A ticket new to the target as the import inserts it: the source's, its number reserved (reserveNumbers). */
export interface NewTicket {
  key: { sourceId: string; version: string | null };
  number: number;
  t: ImportedTicket;
  comments: readonly ImportedComment[];
}

/**
 * Tickets new to the target, without files, each with its comments: ONE transaction for them all
 * with their mappings and audit entries, each kind of row in one statement (most of a first
 * import: a page at a time, where a transaction a ticket spent most of its time on statements and
 * commits). Its references were resolved by the importer; nothing here refuses a ticket.
 */
export async function insertNewTickets(ctx: TenantCtx, source: string, tickets: readonly NewTicket[]): Promise<TicketWriteResult[]> {
  // Made at the source's creation times: lists order tickets "by creation" by their ids.
  const rows = tickets.map((it) => ({ ...it, id: newId(ID_PREFIX.ticket, Date.parse(it.t.createdAt)) }));
  if (rows.length)
    await withTx(ctx, async (tx) => {
      const remembered: Remembered[] = [];
      const facts: audit.AuditFact[] = [];
      await insertWhole(tx, source, rows, remembered, facts);
      await rememberMany(tx, source, remembered);
      await audit.recordMany(tx, facts);
    });
  return rows.map((r) => ({
    ticketId: r.id,
    ticketNumber: r.number,
    outcome: 'created' as const,
    comments: { created: r.comments.length, updated: 0, unchanged: 0 },
    attachments: { created: 0, unchanged: 0 },
  }));
}

/**
 * One ticket with its comments and attachments, in ONE transaction with their mappings and audit
 * entries: a run killed midway has either written the whole ticket or nothing of it. A ticket
 * met again (`existing`: its mapping, the caller having found it still in the target with
 * ticketExists) is updated through updateTickets (core/ticket-writes.ts: its derived columns and
 * count changes follow), its comments created or updated by their own versions, its new
 * attachments added; else it is inserted whole.
 */
export async function writeTicket(
  ctx: TenantCtx,
  source: string,
  key: { sourceId: string; version: string | null },
  existing: Mapping | undefined,
  t: ImportedTicket,
  comments: readonly ImportedComment[],
  files: readonly ImportedAttachment[],
  /** Its number when it is inserted (reserveNumbers); reserved here when not given. */
  reserved: number | null = null,
): Promise<TicketWriteResult> {
  // A new ticket's comments and files are new too.
  const [knownComments, knownFiles] = existing
    ? await Promise.all([
        mappingsOf(
          ctx,
          source,
          'comment',
          comments.map((c) => c.ref),
        ),
        mappingsOf(
          ctx,
          source,
          'attachment',
          files.map((f) => f.ref),
        ),
      ])
    : [new Map<string, Mapping>(), new Map<string, Mapping>()];
  return withTx(ctx, async (tx) => {
    let ticketId: string;
    let number: number;
    let commentIds: Map<string, string>;
    const facts: audit.AuditFact[] = [];
    const remembered: Remembered[] = [];
    const counts = { created: 0, updated: 0, unchanged: 0 };
    if (existing) {
      ticketId = existing.targetId;
      const set: TicketSet = {
        title: t.title,
        body: t.body,
        status: t.status,
        priority: t.priority,
        assigneeId: t.assigneeId,
        categoryId: t.categoryId,
        links: t.links,
        customFields: t.customFields ?? null,
        metadata: t.metadata,
        closeReason: t.closeReason,
        dueAt: t.dueAt,
        dueAtManual: t.dueAt !== null,
        isSpam: t.isSpam,
        legalHold: t.legalHold,
      };
      await updateTickets(tx, t.brandId, [ticketId], set);
      await setTags(tx, t.brandId, ticketId, t.tagIds);
      number = await numberOf(tx, t.brandId, ticketId);
      facts.push({
        brandId: t.brandId,
        ticketId,
        entityType: 'ticket',
        entityId: ticketId,
        event: 'ticket.updated',
        metadata: { ticketNumber: number, title: t.title, importedFrom: source },
      });
      remembered.push({ kind: 'ticket', sourceId: key.sourceId, targetId: ticketId, version: key.version });
      commentIds = new Map<string, string>();
      const inserted: { id: string; ticketId: string; parentId: string | null; c: ImportedComment }[] = [];
      for (const c of comments) {
        const seen = knownComments.get(c.ref);
        if (seen) {
          commentIds.set(c.ref, seen.targetId);
          if (seen.version !== null && seen.version === c.version) {
            counts.unchanged++;
            continue;
          }
          await updateComment(tx, t.brandId, seen.targetId, c);
          facts.push({ brandId: t.brandId, ticketId, entityType: 'comment', entityId: seen.targetId, event: 'comment.updated', metadata: { importedFrom: source } });
          counts.updated++;
        } else {
          const id = newId(ID_PREFIX.comment, Date.parse(c.createdAt));
          inserted.push({ id, ticketId, parentId: c.parentRef ? (commentIds.get(c.parentRef) ?? null) : null, c });
          commentIds.set(c.ref, id);
          facts.push({ brandId: t.brandId, ticketId, entityType: 'comment', entityId: id, event: 'comment.created', metadata: { importedFrom: source } });
          counts.created++;
        }
        remembered.push({ kind: 'comment', sourceId: c.ref, targetId: commentIds.get(c.ref)!, version: c.version });
      }
      await insertComments(tx, t.brandId, inserted);
    } else {
      // Made at the source's creation time: lists order tickets "by creation" by their ids.
      ticketId = newId(ID_PREFIX.ticket, Date.parse(t.createdAt));
      number = reserved ?? (await reserveNumbers(tx, t.brandId, [t]))[0]!;
      [commentIds] = (await insertWhole(tx, source, [{ id: ticketId, key, number, t, comments }], remembered, facts)) as [Map<string, string>];
      counts.created = comments.length;
    }

    const fileCounts = { created: 0, unchanged: 0 };
    for (const f of files) {
      if (knownFiles.has(f.ref)) {
        fileCounts.unchanged++;
        continue;
      }
      const commentId = f.commentRef ? (commentIds.get(f.commentRef) ?? null) : null;
      const made = await attachments.addStagedFile(
        tx,
        t.brandId,
        ticketId,
        commentId,
        { filename: f.filename, contentType: f.contentType, staged: f.staged, scanStatus: f.scanStatus },
        f.uploadedBy,
      );
      await tx.db.raw(`update attachments x set created_at = ?, updated_at = ?, metadata = ?::jsonb where ? and x.brand_id = ? and x.id = ?`, [
        f.createdAt,
        f.updatedAt,
        JSON.stringify(f.metadata ?? {}),
        tenantScope(tx, 'x'),
        t.brandId,
        made.id,
      ] as Knex.RawBinding[]);
      remembered.push({ kind: 'attachment', sourceId: f.ref, targetId: made.id, version: null });
      fileCounts.created++;
    }
    await rememberMany(tx, source, remembered);
    // A new ticket was inserted whole; files, or a ticket met again, move what follows from them.
    if (existing || fileCounts.created) await settleTicket(tx, t.brandId, ticketId, t.updatedAt);
    await audit.recordMany(tx, facts);
    return { ticketId, ticketNumber: number, outcome: (existing ? 'updated' : 'created') as 'created' | 'updated', comments: counts, attachments: fileCounts };
  }).catch(async (err: unknown) => {
    // Bytes moved under an attachment id whose row did not commit: nothing would ever remove them.
    await Promise.all(files.map((f) => f.staged.discard()));
    throw err;
  });
}

/** Whether the ticket a mapping names is still there (deleted since: imported again, whole). */
export async function ticketExists(ctx: TenantCtx, brandId: string, ticketId: string): Promise<boolean> {
  const { rows } = (await ctx.db.raw(`select 1 from tickets t where ? and t.brand_id = ? and t.id = ? and t.deleted_at is null`, [tenantScope(ctx, 't'), brandId, ticketId])) as {
    rows: unknown[];
  };
  return rows.length > 0;
}

async function numberOf(tx: TenantCtx, brandId: string, ticketId: string): Promise<number> {
  const { rows } = (await tx.db.raw(`select t.ticket_number from tickets t where ? and t.brand_id = ? and t.id = ?`, [tenantScope(tx, 't'), brandId, ticketId])) as {
    rows: { ticket_number: number }[];
  };
  return rows[0]!.ticket_number;
}

/**
 * A ticket merged in the source, merged here into the import of the ticket it went into (both
 * written already; their comments and status came from the source as they are). False: it was already.
 */
export async function setMergedInto(ctx: TenantCtx, brandId: string, ticketId: string, intoId: string): Promise<boolean> {
  return withTx(ctx, async (tx) => {
    const { rows } = (await tx.db.raw(`select t.merged_into_id from tickets t where ? and t.brand_id = ? and t.id = ? for update`, [tenantScope(tx, 't'), brandId, ticketId])) as {
      rows: { merged_into_id: string | null }[];
    };
    if (!rows[0] || rows[0].merged_into_id === intoId) return false;
    await updateTickets(tx, brandId, [ticketId], { mergedIntoId: intoId });
    await audit.record(tx, { brandId, ticketId, entityType: 'ticket', entityId: ticketId, event: 'ticket.merged', metadata: { mergedIntoId: intoId } });
    return true;
  });
}

/** With the source's numbers kept: the brand's next number is at least the source's (numbers of its deleted tickets stay unused). */
export async function nextNumberAtLeast(ctx: TenantCtx, brandId: string, next: number): Promise<void> {
  await ctx.db.raw(`update brands b set next_ticket_number = greatest(b.next_ticket_number, ?::int) where ? and b.id = ?`, [next, tenantScope(ctx, 'b'), brandId]);
}

// ---------------------------------------------------------------------------------------------
// Satisfaction ratings (the Zendesk importer's).

/** A rating given in the source, as a rated request of the ticket's (decision 0056's ticket_feedback row). */
export interface ImportedRating {
  ticketId: string;
  ratingType: 'thumbs' | 'scale5' | 'scale10';
  rating: number;
  comment: string | null;
  /** Who the rating is credited to: the target's member, else none. */
  resolverId: string | null;
  /** When it was asked for, and when it was given. */
  createdAt: string;
  submittedAt: string;
}

/**
 * A rating written as a request already `rated` (asked and answered at the source's times, with
 * no token: nothing is mailed for it), or `feedbackId`'s updated. The ticket's customer is the one
 * rating: a ticket without one is refused (409). Gives the request's id.
 */
export async function writeRating(tx: TenantCtx, r: ImportedRating, feedbackId: string | null): Promise<string> {
  const { rows } = (await tx.db.raw(`select t.brand_id, t.customer_id from tickets t where ? and t.id = ? and t.deleted_at is null`, [tenantScope(tx, 't'), r.ticketId])) as {
    rows: { brand_id: string; customer_id: string | null }[];
  };
  if (!rows[0]) throw new HttpError(404, 'not_found', 'Ticket not found');
  const brandId = rows[0].brand_id;
  if (!rows[0].customer_id) throw new HttpError(409, 'no_customer', 'The ticket has no customer to have rated it');
  let id = feedbackId;
  if (id) {
    const updated = (await tx.db.raw(
      `update ticket_feedback f set rating_type = ?, rating = ?, comment = ?, resolver_id = ?, send_at = ?, sent_at = ?, submitted_at = ?, created_at = ?, status = 'rated'
      where ? and f.brand_id = ? and f.ticket_id = ? and f.id = ?`,
      [r.ratingType, r.rating, r.comment, r.resolverId, r.createdAt, r.createdAt, r.submittedAt, r.createdAt, tenantScope(tx, 'f'), brandId, r.ticketId, id] as Knex.RawBinding[],
    )) as { rowCount: number };
    if (!updated.rowCount) id = null;
  }
  if (!id) {
    id = newId(ID_PREFIX.feedback, Date.parse(r.createdAt));
    await tx.db.raw(
      `insert into ticket_feedback (account_id, livemode, brand_id, id, ticket_id, contact_id, rating_type, rating, comment, resolver_id, send_at, sent_at, submitted_at, created_at, status)
      values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'rated')`,
      [
        tx.accountId,
        tx.livemode,
        brandId,
        id,
        r.ticketId,
        rows[0].customer_id,
        r.ratingType,
        r.rating,
        r.comment,
        r.resolverId,
        r.createdAt,
        r.createdAt,
        r.submittedAt,
        r.createdAt,
      ] as Knex.RawBinding[],
    );
  }
  await audit.record(tx, {
    brandId: brandId,
    ticketId: r.ticketId,
    entityType: 'ticket',
    entityId: r.ticketId,
    event: 'ticket.rated',
    metadata: { rating: r.rating, ratingType: r.ratingType, resolverId: r.resolverId, hasComment: r.comment !== null },
  });
  return id;
}
