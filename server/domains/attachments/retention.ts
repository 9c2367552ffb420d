import type { TenantCtx } from '../../core/context.js';
import { deleteQueuingFiles, queueFileDeletions } from '../../core/file-deletions.js';
import { sameTenant, tenantScope } from '../../core/model.js';
import { recordRemoved, recount, type RemovedRow } from './service.js';

/**
 * What retention (flows/retention.ts) removes of attachments: their rows go in the retention's
 * transaction and their files are queued (core/file-deletions.ts); the dispatcher's attachment
 * purge, which runs after retention, removes the files. An attachment of a ticket under legal
 * hold is never removed.
 */

type Removed = RemovedRow & { ticket_id: string; status: string };

/** Before these tickets are deleted (their attachments cascade): the files, queued for removal after the commit. */
export async function forgetOfTickets(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<void> {
  await queueFileDeletions(tx, 'attachments', { sql: '? and f.brand_id = ? and f.ticket_id = any(?::text[])', bindings: [tenantScope(tx, 'f'), brandId, [...ticketIds]] });
}

/** Removes every attachment of these tickets (anonymized: their counts go to 0 with them); how many went. */
export async function removeOfTickets(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<number> {
  const gone = await deleteQueuingFiles(tx, 'attachments', {
    sql: '? and f.brand_id = ? and f.ticket_id = any(?::text[])',
    bindings: [tenantScope(tx, 'f'), brandId, [...ticketIds]],
  });
  return gone.length;
}

/**
 * The brand's attachments on tickets created at or before `cutoff`, oldest first, at most
 * `limit`: removed, their tickets' counts set again, each with its attachment.deleted entry
 * (reason retention) and event. Returns how many each comment lost (by comment id) and in all.
 */
export async function removeExpired(tx: TenantCtx, brandId: string, cutoff: Date, limit: number): Promise<{ removed: number; byComment: Map<string, number> }> {
  const rows = await deleteQueuingFiles<Removed>(
    tx,
    'attachments',
    {
      sql: `? and f.brand_id = ? and f.id in (
        select a.id from attachments a join tickets t on ${sameTenant('t', 'a')} and t.brand_id = a.brand_id and t.id = a.ticket_id
        where ? and a.brand_id = ? and a.ticket_id is not null and a.created_at <= ? and not t.legal_hold
        order by a.created_at, a.id limit ? for update of a skip locked)`,
      bindings: [tenantScope(tx, 'f'), brandId, tenantScope(tx, 'a'), brandId, cutoff, limit],
    },
    'f.id, f.brand_id, f.ticket_id, f.comment_id, f.status, f.filename, f.content_type, f.size, f.created_at',
  );
  if (!rows.length) return { removed: 0, byComment: new Map() };
  await recount(tx, brandId, [...new Set(rows.map((r) => r.ticket_id))]);
  await recordRemoved(tx, rows, 'retention');
  const byComment = new Map<string, number>();
  for (const r of rows) if (r.comment_id) byComment.set(r.comment_id, (byComment.get(r.comment_id) ?? 0) + 1);
  return { removed: rows.length, byComment };
}
