import type { TenantCtx } from '../../core/context.js';
import { tenantScope } from '../../core/model.js';

/**
 * The mail records of tickets retention anonymizes (flows/retention.ts): the sender of each
 * inbound message and the stored copy of each message sent go; the Message-IDs stay, so a late
 * reply still threads onto its ticket.
 */
export async function redactOfTickets(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<void> {
  await tx.db.raw(`update inbound_emails i set from_email = '' where ? and i.brand_id = ? and i.ticket_id = any(?::text[])`, [tenantScope(tx, 'i'), brandId, [...ticketIds]]);
  await tx.db.raw(`update mail_messages m set message = '{"removedBy": "retention"}' where ? and m.brand_id = ? and m.ticket_id = any(?::text[])`, [
    tenantScope(tx, 'm'),
    brandId,
    [...ticketIds],
  ]);
}
