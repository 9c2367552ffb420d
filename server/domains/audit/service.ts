import type { TenantCtx } from '../../core/context.js';
import { AuditEntry } from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { badRequest } from '../../core/errors.js';
import { idTimePrefix, ID_PREFIX } from '../../core/ids.js';
import { keysetPage, type Page } from '../../core/pagination.js';
import type { AuditLogListInput, AuditLogView } from './schemas.js';

/** Reads of the audit log for its routes: the brand's log, newest first. Entries are written by core/audit.ts. */

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
    .leftJoin('apiKeys', (j) => j.on('apiKeys.accountId', 'auditLog.accountId').andOn('apiKeys.id', 'auditLog.performerId').andOnVal('auditLog.performerType', 'api'))
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
  const brand = await requireBrand(ctx, brandId);
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
      brandId: brand.id,
      entityType: input.entityType,
      entityId: input.entityId,
      event: input.event,
      performerType: input.performerType,
      from,
      before,
    },
    valueOf: (row) => row.id,
    toView,
  });
}

/** Entries with the display prefix of the API key that made them, for a ticket's history (flows/audit-history.ts). */
export function ticketEntries(ctx: TenantCtx, ticketId: string): Promise<AuditLogView[]> {
  return withPerformer(ctx)
    .where('auditLog.ticketId', ticketId)
    .orderBy('auditLog.id')
    .then((rows) => rows.map(toView));
}
