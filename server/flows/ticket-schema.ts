import { withTx, type TenantCtx } from '../core/context.js';
import * as brands from '../domains/brands/service.js';
import type { PutTicketSchemaInput, TicketSchemaView } from '../domains/fields/schemas.js';
import * as fields from '../domains/fields/service.js';

/**
 * PUT /schema: the brand's hand-written ticket schema (a brand column, checked by brands: 400
 * invalid_ticket_schema) answered with the effective schema, which the brand's field definitions
 * (fields) complete. DELETE /schema sends null.
 */
export async function putTicketSchema(ctx: TenantCtx, brandId: string, body: PutTicketSchemaInput): Promise<TicketSchemaView> {
  const schema = fields.ticketSchemaOfBody(body);
  return withTx(ctx, async (tx) => {
    await brands.update(tx, brandId, { ticketSchema: schema });
    return fields.getTicketSchema(tx, brandId);
  });
}
