import type { TenantCtx } from '../../core/context.js';
import { sameTenant, tenantScope } from '../../core/model.js';

/**
 * What retention (flows/retention.ts) removes of raw mail: rows deleted and their files queued
 * in one statement (the dispatcher's attachment purge removes the files). Raw mail of a ticket
 * under legal hold is never removed.
 */

/** Deletes the brand's raw mails matching `where` (alias r, its bindings after the scope's) and queues their files; how many went. */
async function deleteQueuing(tx: TenantCtx, brandId: string, where: string, bindings: unknown[]): Promise<number> {
  const { rowCount } = await tx.db.raw<{ rowCount: number }>(
    `with gone as (delete from raw_mails r where ? and r.brand_id = ? and ${where} returning r.account_id, r.id)
     insert into attachment_file_deletions (account_id, attachment_id) select account_id, id from gone on conflict do nothing`,
    [tenantScope(tx, 'r'), brandId, ...bindings] as never[],
  );
  return rowCount;
}

/** Before these tickets are deleted (their raw mails cascade): the files, queued for removal after the commit. */
export async function forgetOfTickets(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<void> {
  await tx.db.raw(
    `insert into attachment_file_deletions (account_id, attachment_id)
     select r.account_id, r.id from raw_mails r where ? and r.brand_id = ? and r.ticket_id = any(?::text[]) on conflict do nothing`,
    [tenantScope(tx, 'r'), brandId, [...ticketIds]],
  );
}

/** Removes every raw mail of these tickets (anonymized); how many went. */
export function removeOfTickets(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<number> {
  return deleteQueuing(tx, brandId, 'r.ticket_id = any(?::text[])', [[...ticketIds]]);
}

/** The brand's raw mails received at or before `cutoff`, oldest first, at most `limit`, but those of tickets under legal hold; how many went. */
export function removeExpired(tx: TenantCtx, brandId: string, cutoff: Date, limit: number): Promise<number> {
  return deleteQueuing(
    tx,
    brandId,
    `r.id in (select m.id from raw_mails m
      where ? and m.brand_id = ? and m.created_at <= ?
        and not exists (select 1 from tickets t where ${sameTenant('t', 'm')} and t.brand_id = m.brand_id and t.id = m.ticket_id and t.legal_hold)
      order by m.created_at, m.id limit ? for update of m skip locked)`,
    [tenantScope(tx, 'm'), brandId, cutoff, limit],
  );
}
