import objection from 'objection';
import type { PerformerType, TenantCtx } from '../../core/context.js';
import type { SqlFragment } from '../../core/db.js';
import { badRequest } from '../../core/errors.js';
import { canonicalJson } from '../../core/idempotency.js';
import { idTimePrefix, newId, ID_PREFIX } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { keysetPage, type Page } from '../../core/pagination.js';
import * as brands from '../brands/service.js';
import * as tickets from '../tickets/service.js';
import { AuditEntry, type Change } from './model.js';
import type { AuditLogListInput, AuditLogView } from './schemas.js';

export type { Change };

export interface AuditFact {
  /** null for account-level entities (API keys, members). */
  brandId: string | null;
  /** The ticket the entry is about, also for its comments, attachments and watchers. */
  ticketId?: string | null;
  entityType: string;
  entityId: string;
  /** `<entity>.<verb>`: ticket.created, ticket.updated, comment.deleted, … */
  event: string;
  changes?: Change[];
  /** Small context for readers of the log (ticket number, title, …). Never secrets. */
  metadata?: Record<string, unknown>;
}

/** Where a performer's changes come from unless its actor says otherwise (Actor.source). */
const DEFAULT_SOURCE: Record<PerformerType, string> = { api: 'api', user: 'dashboard', customer: 'portal', system: 'system' };

/**
 * Records one audit entry: who (ctx.actor) did what, under which request. It must run inside the
 * transaction of the change it describes, so the change and its entry commit or roll back
 * together; called outside one it throws, which tests catch at once.
 */
export async function record(ctx: TenantCtx, fact: AuditFact): Promise<void> {
  await recordMany(ctx, [fact]);
}

/** Several entries in one statement (bulk actions), in the given order; same rules as record. */
export async function recordMany(ctx: TenantCtx, facts: readonly AuditFact[]): Promise<void> {
  if (!facts.length) return;
  if (!ctx.db.isTransaction) throw new Error(`audit entry ${facts[0]?.event} must run inside the change's transaction`);
  const { sql, bindings } = insertRowsStatement(entryRows(ctx, facts));
  await ctx.db.raw(sql, bindings as never[]);
}

const AUDIT_COLUMNS = ['id', 'account_id', 'livemode', 'brand_id', 'ticket_id', 'entity_type', 'entity_id', 'event', 'performer_type',
  'performer_id', 'performer_name', 'source', 'changes', 'metadata', 'request_id', 'created_at'].join(', ');
const { format: propertiesToColumns } = objection.snakeCaseMappers();

/** The rows of these entries as insertRowsStatement takes them (each entry's id and time are fixed here). */
export function entryRows(ctx: TenantCtx, facts: readonly AuditFact[]): Record<string, unknown>[] {
  const now = Date.now();
  return facts.map((fact) => propertiesToColumns(rowOf(ctx, fact, now)));
}

/**
 * The INSERT of rows made by entryRows, for recordMany and for a statement that also makes the
 * change they describe (ticket create's, for every create it takes; a single statement commits as
 * a whole). `when` may test each row, whose columns are those of audit_log under the name `entry`
 * (e.g. "the statement inserted this entry's ticket"): no change, no entry.
 */
export function insertRowsStatement(rows: readonly Record<string, unknown>[], when?: SqlFragment): SqlFragment {
  return {
    sql: `insert into audit_log (${AUDIT_COLUMNS}) select ${AUDIT_COLUMNS} from jsonb_populate_recordset(null::audit_log, ?::jsonb) entry${when ? ` where ${when.sql}` : ''}`,
    bindings: [JSON.stringify(rows), ...(when?.bindings ?? [])],
  };
}

/**
 * createdAt is the time in the entry's id (not the database clock): the id orders the log and the
 * date filters are id ranges, so a date range selects exactly the entries whose createdAt is in it.
 */
function rowOf(ctx: TenantCtx, fact: AuditFact, now: number): Partial<AuditEntry> {
  return {
    id: newId(ID_PREFIX.auditEntry, now),
    ...scopeOf(ctx),
    brandId: fact.brandId,
    ticketId: fact.ticketId ?? null,
    entityType: fact.entityType,
    entityId: fact.entityId,
    event: fact.event,
    performerType: ctx.actor.type,
    performerId: ctx.actor.id,
    performerName: ctx.actor.name,
    source: ctx.actor.source ?? DEFAULT_SOURCE[ctx.actor.type],
    changes: fact.changes ?? [],
    metadata: fact.metadata ?? {},
    requestId: ctx.requestId,
    createdAt: new Date(now),
  };
}

/**
 * The fields whose value differs between two states of a record (views, so dates are ISO text),
 * as changes in the given field order. Values compare as JSON, ignoring object key order.
 */
export function changesBetween<T extends object>(before: T, after: T, fields: readonly (keyof T & string)[]): Change[] {
  return fields
    .filter((field) => canonicalJson(before[field]) !== canonicalJson(after[field]))
    .map((field) => ({ field, from: before[field] ?? null, to: after[field] ?? null }));
}

/** The ids of records in display order (sortOrder, then id), as a reorder's `from`. */
export function displayOrder(rows: readonly { id: string; sortOrder: number }[]): string[] {
  return [...rows].sort((a, b) => a.sortOrder - b.sortOrder || (a.id < b.id ? -1 : 1)).map((r) => r.id);
}

/**
 * A brand-wide reorder is one `<entityType>.reordered` entry, about the brand's records as a whole:
 * entityId is the brand id and `order` lists the records before and after. No entry when the order
 * did not change.
 */
export async function recordReorder(ctx: TenantCtx, brandId: string, entityType: string, from: readonly string[], to: readonly string[], metadata?: Record<string, unknown>): Promise<void> {
  const changes = changesBetween({ order: from }, { order: to }, ['order']);
  if (changes.length) await record(ctx, { brandId, entityType, entityId: brandId, event: `${entityType}.reordered`, changes, metadata });
}

/** An entity's entries, oldest first. */
export async function forEntity(ctx: TenantCtx, entityType: string, entityId: string): Promise<AuditEntry[]> {
  return AuditEntry.scoped(ctx).where({ entityType, entityId }).orderBy('id');
}

/** A ticket's history, oldest first: its own entries and those of its comments, attachments, … */
export async function forTicket(ctx: TenantCtx, ticketId: string): Promise<AuditEntry[]> {
  return AuditEntry.scoped(ctx).where({ ticketId }).orderBy('id');
}

// ---------------------------------------------------------------------------------------------
// Reads for the routes

export function toView(row: AuditEntry): AuditLogView {
  return {
    id: row.id,
    object: 'audit_log',
    brandId: row.brandId,
    ticketId: row.ticketId,
    event: row.event,
    entityType: row.entityType,
    entityId: row.entityId,
    changes: Object.fromEntries(row.changes.map((c) => [c.field, { old: c.from, new: c.to }])),
    changeList: row.changes,
    performedBy: {
      type: row.performerType,
      id: row.performerId,
      name: row.performerName,
      ...(row.apiKeyPrefix ? { apiKeyPrefix: row.apiKeyPrefix } : {}),
    },
    performerType: row.performerType,
    source: row.source,
    metadata: row.metadata,
    requestId: row.requestId,
    createdAt: row.createdAt.toISOString(),
  };
}

/**
 * Entries with the display prefix of the API key that made them. Keys are revoked, never deleted
 * (until their account goes, and its entries with it), so the join always finds the key.
 */
function withPerformer(ctx: TenantCtx) {
  return AuditEntry.scoped(ctx)
    .leftJoin('apiKeys', (j) => j.on('apiKeys.id', 'auditLog.performerId').andOnVal('auditLog.performerType', 'api'))
    .select('auditLog.*', 'apiKeys.keyPreview as apiKeyPrefix');
}

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;

/** startDate and endDate as an id range [from, before): a date alone is its whole day (UTC). */
function idRange(startDate: string | undefined, endDate: string | undefined): { from: string | null; before: string | null } {
  // Ids count milliseconds from 1970: an earlier bound is 1970.
  const start = startDate === undefined ? null : Math.max(0, Date.parse(startDate));
  const end = endDate === undefined ? null : Math.max(0, Date.parse(endDate) + (DATE_ONLY.test(endDate) ? DAY_MS : 1));
  if (start !== null && end !== null && start >= end) {
    throw badRequest('startDate must not be after endDate', [{ field: 'startDate', message: 'must not be after endDate' }]);
  }
  return {
    from: start === null ? null : idTimePrefix(ID_PREFIX.auditEntry, start),
    before: end === null ? null : idTimePrefix(ID_PREFIX.auditEntry, end),
  };
}

/**
 * The brand's log, newest first, in keyset pages over the id. Every filter the dashboard sends
 * alone has an index of (brand, filter, id), and the dates bound the id on it (migration 1400).
 */
export async function list(ctx: TenantCtx, brandId: string, input: AuditLogListInput): Promise<Page<AuditLogView>> {
  const brand = await brands.requireBrand(ctx, brandId);
  const { from, before } = idRange(input.startDate, input.endDate);
  const q = withPerformer(ctx).where('auditLog.brandId', brand.id);
  if (input.entityType !== undefined) q.where('auditLog.entityType', input.entityType);
  if (input.entityId !== undefined) q.where('auditLog.entityId', input.entityId);
  if (input.event !== undefined) q.where('auditLog.event', input.event);
  if (input.performerType !== undefined) q.where('auditLog.performerType', input.performerType);
  if (from) q.where('auditLog.id', '>=', from);
  if (before) q.where('auditLog.id', '<', before);
  return keysetPage(q, {
    sort: 'audit_log.id',
    id: 'audit_log.id',
    order: 'desc',
    limit: input.limit,
    cursor: input.cursor,
    filters: {
      brandId: brand.id, entityType: input.entityType, entityId: input.entityId, event: input.event, performerType: input.performerType, from, before,
    },
    valueOf: (row) => row.id,
    toView,
  });
}

/**
 * A ticket's history, oldest first (its comments', attachments' and watchers' entries included).
 * A deleted or merged ticket's history stays readable: history outlives the ticket. An id that is
 * not a ticket of this brand (never was, or of another brand, account or mode) is 404.
 */
export async function ticketHistory(ctx: TenantCtx, brandId: string, ticketId: string): Promise<AuditLogView[]> {
  const brand = await brands.requireBrand(ctx, brandId);
  const ticket = await tickets.fetchView(ctx, brand.id, ticketId, true);
  const rows = await withPerformer(ctx).where('auditLog.ticketId', ticket.id).orderBy('auditLog.id');
  return rows.map(toView);
}
