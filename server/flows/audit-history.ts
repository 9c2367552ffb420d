import type { TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import * as audit from '../domains/audit/service.js';
import type { AuditLogView } from '../domains/audit/schemas.js';
import * as tickets from '../domains/tickets/service.js';

/**
 * A ticket's history, oldest first (its comments', attachments' and watchers' entries included).
 * A deleted or merged ticket's history stays readable: history outlives the ticket. An id that is
 * not a ticket of this brand (never was, or of another brand, account or mode) is 404.
 */
export async function ticketHistory(ctx: TenantCtx, brandId: string, ticketId: string): Promise<AuditLogView[]> {
  const brand = await requireBrand(ctx, brandId);
  const ticket = await tickets.fetchView(ctx, brand.id, ticketId, true);
  return audit.ticketEntries(ctx, ticket.id);
}
