import type { TenantCtx } from '../../core/context.js';
import { tenantScope } from '../../core/model.js';

/**
 * What retention (flows/retention.ts) does to tickets themselves. A ticket counts as closed once
 * its status is resolved or closed: resolved_at is set then, and cleared when it leaves them. A
 * ticket under legal hold is never among them.
 */

export interface ExpiredTicket {
  id: string;
  ticketNumber: number;
  title: string;
  /** Not soft-deleted yet: its deletion still takes it out of the counts and announces it. */
  live: boolean;
}

/**
 * The brand's closed tickets done and unchanged since `cutoff`, oldest first, at most `limit`,
 * locked until the transaction ends; one someone is changing now (locked) waits for the next run.
 * `toAnonymize`: live ones not anonymized yet; otherwise soft-deleted and anonymized ones as well
 * (a brand that moved from anonymize to delete).
 */
export async function expiredClosed(tx: TenantCtx, brandId: string, cutoff: Date, limit: number, toAnonymize: boolean): Promise<ExpiredTicket[]> {
  const { rows } = await tx.db.raw<{ rows: ExpiredTicket[] }>(
    `select t.id, t.ticket_number as "ticketNumber", t.title, t.deleted_at is null as live from tickets t
    where ? and t.brand_id = ? and t.resolved_at <= ? and t.updated_at <= ? and t.status in ('resolved', 'closed')
      and not t.legal_hold${toAnonymize ? ' and t.deleted_at is null and t.anonymized_at is null' : ''}
    order by t.resolved_at, t.id limit ? for update of t skip locked`,
    [tenantScope(tx, 't'), brandId, cutoff, cutoff, limit],
  );
  return rows;
}

/** Deletes the rows of these tickets (locked by expiredClosed); comments, attachments, raw mail and every link cascade. */
export async function eraseRows(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<number> {
  const { rowCount } = await tx.db.raw<{ rowCount: number }>(`delete from tickets t where ? and t.brand_id = ? and t.id = any(?::text[]) and not t.legal_hold`, [
    tenantScope(tx, 't'),
    brandId,
    [...ticketIds],
  ]);
  return rowCount;
}

/**
 * Strips these tickets (locked by expiredClosed) of what names their requester: the customer link
 * and its copies for search and sorting, who created it, the body, the source's data. The title,
 * status, dates and counts stay, so reports keep counting them; anonymizedAt marks them done.
 */
export async function anonymizeRows(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<number> {
  const { rowCount } = await tx.db.raw<{ rowCount: number }>(
    `update tickets t set body = null, customer_id = null, customer_text = '', customer_sort = '', company_sort = '', created_by = null,
      source_data = null, attachment_count = 0, search_vector = ticketd_ticket_vector(t.title, '', null), anonymized_at = now(), updated_at = now()
    where ? and t.brand_id = ? and t.id = any(?::text[]) and not t.legal_hold and t.anonymized_at is null`,
    [tenantScope(tx, 't'), brandId, [...ticketIds]],
  );
  return rowCount;
}
