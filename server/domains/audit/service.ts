import type { Knex } from 'knex';
import type { TenantCtx } from '../../core/context.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { AuditEntry, type Change } from './model.js';

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
  /** Small context for readers of the log (ticket number, title, …). */
  metadata?: Record<string, unknown>;
}

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
  const { sql, bindings } = insertStatement(ctx, facts);
  await ctx.db.raw(sql, bindings);
}

/**
 * The INSERT of these entries, for a caller that folds it into a larger statement (ticket create
 * runs it inside its last one). Same rules as record: the caller's transaction, or it throws.
 */
export function insertStatement(ctx: TenantCtx, facts: readonly AuditFact[]): Pick<Knex.Sql, 'sql' | 'bindings'> {
  if (!ctx.db.isTransaction) throw new Error(`audit entry ${facts[0]?.event} must run inside the change's transaction`);
  return AuditEntry.query(ctx.db).insert(facts.map((fact) => rowOf(ctx, fact))).toKnexQuery().toSQL();
}

function rowOf(ctx: TenantCtx, fact: AuditFact): Partial<AuditEntry> {
  return {
    id: newId(ID_PREFIX.auditEntry),
    ...scopeOf(ctx),
    brandId: fact.brandId,
    ticketId: fact.ticketId ?? null,
    entityType: fact.entityType,
    entityId: fact.entityId,
    event: fact.event,
    performerType: ctx.actor.type,
    performerId: ctx.actor.id,
    performerName: ctx.actor.name,
    changes: fact.changes ?? [],
    metadata: fact.metadata ?? {},
    requestId: ctx.requestId,
  };
}

/** An entity's entries, oldest first. */
export async function forEntity(ctx: TenantCtx, entityType: string, entityId: string): Promise<AuditEntry[]> {
  return AuditEntry.scoped(ctx).where({ entityType, entityId }).orderBy('id');
}

/** A ticket's history, oldest first: its own entries and those of its comments, attachments, … */
export async function forTicket(ctx: TenantCtx, ticketId: string): Promise<AuditEntry[]> {
  return AuditEntry.scoped(ctx).where({ ticketId }).orderBy('id');
}
