import objection from 'objection';
import type { PerformerType, TenantCtx } from './context.js';
import type { SqlFragment } from './db.js';
import { canonicalJson } from './idempotency.js';
import { newId, ID_PREFIX } from './ids.js';
import { scopeOf, TenantModel } from './model.js';

/**
 * The audit log's write side: every domain records what it changed, in the change's transaction.
 * The reads (the brand's log, a ticket's history) live in domains/audit and flows/audit-history.
 */

export interface Change {
  field: string;
  from: unknown;
  to: unknown;
}

export class AuditEntry extends TenantModel {
  static override tableName = 'auditLog';
  static override jsonAttributes = ['changes', 'metadata'];

  declare id: string;
  declare brandId: string | null;
  declare ticketId: string | null;
  declare entityType: string;
  declare entityId: string;
  declare event: string;
  declare performerType: PerformerType;
  declare performerId: string | null;
  declare performerName: string | null;
  declare source: string;
  declare changes: Change[];
  declare metadata: Record<string, unknown>;
  declare requestId: string | null;
  declare createdAt: Date;
  /** Selected by reads: the display prefix of the API key that made the change. */
  declare apiKeyPrefix?: string | null;
}

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

/** Where the changes of the ctx's actor come from: its audit entries' source, and its events'. */
export const sourceOf = (ctx: Pick<TenantCtx, 'actor'>): string => ctx.actor.source ?? DEFAULT_SOURCE[ctx.actor.type];

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

const AUDIT_COLUMNS = [
  'id',
  'account_id',
  'livemode',
  'brand_id',
  'ticket_id',
  'entity_type',
  'entity_id',
  'event',
  'performer_type',
  'performer_id',
  'performer_name',
  'source',
  'changes',
  'metadata',
  'request_id',
  'created_at',
].join(', ');
const { format: propertiesToColumns } = objection.snakeCaseMappers();

/** The rows of these entries as insertRowsStatement takes them (each entry's id and time are fixed here). */
export function entryRows(ctx: TenantCtx, facts: readonly AuditFact[]): Record<string, unknown>[] {
  const now = ctx.services.now();
  return facts.map((fact) => propertiesToColumns(rowOf(ctx, fact, now)));
}

/**
 * The INSERT of rows made by entryRows, for recordMany and for a statement that also makes the
 * change they describe (ticket create's, for every create it takes; a single statement commits as
 * a whole). `when` may test each row, whose columns are those of audit_log under the name `entry`
 * (e.g. "the statement inserted this entry's ticket"): no change, no entry.
 */
export function insertRowsStatement(rows: readonly Record<string, unknown>[], when?: SqlFragment): SqlFragment {
  return { sql: insertRowsSql('?', when?.sql), bindings: [JSON.stringify(rows), ...(when?.bindings ?? [])] };
}

/** insertRowsStatement's text, with `rows` the SQL expression of the rows' JSON (a statement's placeholder). */
export function insertRowsSql(rows: string, when?: string): string {
  return `insert into audit_log (${AUDIT_COLUMNS}) select ${AUDIT_COLUMNS} from jsonb_populate_recordset(null::audit_log, ${rows}::jsonb) entry${when ? ` where ${when}` : ''}`;
}

/** These entries as a part (a CTE named `entries`) of a statement that writes more of the same change (outbox enqueueEventsWith). */
export function entriesPart(ctx: TenantCtx, facts: readonly AuditFact[]): SqlFragment & { name: string } {
  if (!ctx.db.isTransaction) throw new Error(`audit entry ${facts[0]?.event} must run inside the change's transaction`);
  return { name: 'entries', ...insertRowsStatement(entryRows(ctx, facts)) };
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
    source: sourceOf(ctx),
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
  return fields.filter((field) => canonicalJson(before[field]) !== canonicalJson(after[field])).map((field) => ({ field, from: before[field] ?? null, to: after[field] ?? null }));
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
export async function recordReorder(
  ctx: TenantCtx,
  brandId: string,
  entityType: string,
  from: readonly string[],
  to: readonly string[],
  metadata?: Record<string, unknown>,
): Promise<void> {
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
