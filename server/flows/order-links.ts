import type { Knex } from 'knex';
import type { TenantCtx } from '../core/context.js';
import { ID_PREFIX } from '../core/ids.js';
import { sameTenant, tenantIs } from '../core/model.js';

/**
 * Automatic order links: a new ticket whose subject or body names an order (`#1234`) of its own
 * customer (the order's customer_email is the ticket's customer email) in its brand is linked to
 * it (AUTOMATIC, by nobody). A number of someone else's order, or of no order, links nothing.
 *
 * Creates are the hot path, so this costs nothing unless the text names a number: then the create
 * statement (ticket-create-statement.ts) carries one more part, an INSERT … SELECT joining the
 * brand's orders by number (commerce_orders_number_idx) and email, in the same statement and
 * transaction as the ticket. A brand without a store finds no order there: no extra statement, no
 * extra round trip, whichever path the create takes (API, portal, inbound mail, recurring).
 */

/** A ticket names at most this many order numbers worth looking up. */
const MAX_NAMED = 10;
/** `#` then digits, not part of a longer word (`#1234`, `(#1234)`, `order #1234.`). */
const ORDER_NUMBER = /(?<![\w#])#(\d{1,20})(?!\w)/g;

/** The order numbers the text names, without their `#`, distinct, at most MAX_NAMED. */
export function orderNumbersNamed(...texts: (string | null | undefined)[]): string[] {
  const found = new Set<string>();
  for (const text of texts) {
    if (!text || !text.includes('#')) continue;
    for (const m of text.matchAll(ORDER_NUMBER)) {
      found.add(m[1]!);
      if (found.size >= MAX_NAMED) return [...found];
    }
  }
  return [...found];
}

/** A created ticket's claim to orders: its customer's email and the numbers it names. */
export interface NamedOrders {
  ticketId: string;
  email: string;
  numbers: string[];
}

/**
 * The part of the create statement that links its new tickets (the relation `t` of the inserted
 * tickets) to the orders they name. Only the tickets `t` holds are linked: a create that wrote
 * nothing links nothing.
 */
export function autoLinkStatement(ctx: TenantCtx, named: readonly NamedOrders[]): Knex.Raw {
  return ctx.db.raw(autoLinkSql('?', { account: '?', livemode: '?' }), [namedOrdersJson(named), ctx.accountId, ctx.livemode]);
}

/** autoLinkStatement's text, with SQL expressions for the named orders' JSON (namedOrdersJson) and the tenant. */
export function autoLinkSql(named: string, tenant: { account: string; livemode: string }): string {
  return `insert into commerce_order_tickets (id, account_id, livemode, brand_id, order_id, ticket_id, link_type)
     select ticketd_new_id('${ID_PREFIX.orderLink}'), o.account_id, o.livemode, o.brand_id, o.id, t.id, 'AUTOMATIC'
     from jsonb_to_recordset(${named}::jsonb) as named(ticket_id text, email text, numbers text[])
     join t on t.id = named.ticket_id
     join commerce_orders o on ${tenantIs('o', tenant)} and ${sameTenant('o', 't')} and o.brand_id = t.brand_id
       and o.order_number = any(named.numbers) and o.customer_email = named.email`;
}

export function namedOrdersJson(named: readonly NamedOrders[]): string {
  return JSON.stringify(named.map((n) => ({ ticket_id: n.ticketId, email: n.email, numbers: n.numbers })));
}
