import type { TenantCtx } from '../../core/context.js';
import { tenantScope } from '../../core/model.js';

/** What stands in a comment's body once retention removed it. */
export const REDACTED_BODY = '[removed by retention]';

/**
 * The comments of tickets retention anonymizes: bodies replaced, a customer author's name and the
 * mail's addresses (metadata.email) and source data dropped. Agents' names stay: they are the team's.
 */
export async function redactOfTickets(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<void> {
  await tx.db.raw(
    `update comments c set body = ?, author_name = case when c.author_type = 'CUSTOMER' then null else c.author_name end,
      metadata = c.metadata - 'email', source_data = null, links = '[]'
    where ? and c.brand_id = ? and c.ticket_id = any(?::text[])`,
    [REDACTED_BODY, tenantScope(tx, 'c'), brandId, [...ticketIds]],
  );
}

/** Marks the comments whose attachments retention removed (metadata.attachmentsRemovedByRetention: how many). */
export async function markAttachmentsRemoved(tx: TenantCtx, brandId: string, removed: ReadonlyMap<string, number>): Promise<void> {
  if (!removed.size) return;
  await tx.db.raw(
    // jsonb_set of the number's text, not jsonb_build_object: Citus takes no STABLE function of a column in an UPDATE.
    `update comments c set metadata = jsonb_set(c.metadata, '{attachmentsRemovedByRetention}',
        ((coalesce((c.metadata ->> 'attachmentsRemovedByRetention')::int, 0) + r.n::int)::text)::jsonb)
    from jsonb_each_text(?::jsonb) r(id, n)
    where ? and c.brand_id = ? and c.id = r.id`,
    [JSON.stringify(Object.fromEntries(removed)), tenantScope(tx, 'c'), brandId],
  );
}
