import { tenantCtx, type BaseCtx, type TenantCtx } from './context.js';
import { accountScope, sameAccount, sameTenant, tenantScope } from './model.js';

/**
 * Tickets carry the names they are listed and searched by (customer_sort, customer_text,
 * company_sort, assignee_sort, category_sort, search_vector; migration 1300). When a contact,
 * company, member or category is renamed, the service that renames it runs one of these in the
 * same transaction, after the rename: they rewrite the live tickets that show the row (deleted
 * tickets are never listed again). Each statement names the account (and the brand, but for
 * members, who are account-wide) on every table, so on Citus it stays on one shard group.
 * The expressions are the ones ticket create and updateTickets (ticket-writes.ts) use.
 */

const LIVE = 't.deleted_at is null';

/** The contacts' tickets: customer name, search text and company, after a change of name, email or company. */
export async function contactsChanged(ctx: TenantCtx, brandId: string, contactIds: readonly string[]): Promise<void> {
  if (!contactIds.length) return;
  await ctx.db.raw(
    `update tickets t set
        customer_sort = ticketd_person_sort(c.name, c.email),
        customer_text = ticketd_person_text(c.name, c.email),
        company_sort = coalesce(lower(co.name), ''),
        search_vector = ticketd_ticket_vector(t.title, ticketd_person_text(c.name, c.email), t.body)
      from contacts c
      left join companies co on ${sameTenant('co', 'c')} and co.brand_id = c.brand_id and co.id = c.company_id
      where ? and c.brand_id = ? and c.id = any(?)
        and ${sameTenant('t', 'c')} and t.brand_id = c.brand_id and t.customer_id = c.id and ${LIVE}`,
    [tenantScope(ctx, 'c'), brandId, [...contactIds]],
  );
}

/** The tickets of the company's contacts: the company's name. `deleted` when the company is about to be deleted ('' for none). */
export async function companyChanged(ctx: TenantCtx, brandId: string, companyId: string, deleted = false): Promise<void> {
  await ctx.db.raw(
    `update tickets t set company_sort = ${deleted ? "''" : 'lower(co.name)'}
      from companies co
      join contacts c on ${sameTenant('c', 'co')} and c.brand_id = co.brand_id and c.company_id = co.id
      where ? and co.brand_id = ? and co.id = ?
        and ${sameTenant('t', 'c')} and t.brand_id = c.brand_id and t.customer_id = c.id and ${LIVE}`,
    [tenantScope(ctx, 'co'), brandId, companyId],
  );
}

/** The tickets assigned to the member, in every brand and mode of its account: the member's name. */
export async function memberChanged(ctx: BaseCtx, accountId: string, memberId: string): Promise<void> {
  await ctx.db.raw(
    `update tickets t set assignee_sort = ticketd_person_sort(m.name, m.email)
      from members m
      where ? and m.id = ?
        and ${sameAccount('t', 'm')} and t.assignee_id = m.id and ${LIVE}`,
    // Members are account-wide: the mode given here is not read.
    [accountScope(tenantCtx(ctx, accountId, true), 'm'), memberId],
  );
}

/** The category's tickets: its name. */
export async function categoryChanged(ctx: TenantCtx, brandId: string, categoryId: string): Promise<void> {
  await ctx.db.raw(
    `update tickets t set category_sort = lower(ca.name)
      from categories ca
      where ? and ca.brand_id = ? and ca.id = ?
        and ${sameTenant('t', 'ca')} and t.brand_id = ca.brand_id and t.category_id = ca.id and ${LIVE}`,
    [tenantScope(ctx, 'ca'), brandId, categoryId],
  );
}

/**
 * Before a contact, category or member is deleted: every ticket that names it (deleted tickets
 * too) loses it and its names, as the foreign key's ON DELETE SET NULL would leave them, so that
 * the key never has a row to act on (Citus refuses SET NULL on a key that holds the distribution
 * column: decision 0090).
 */
export async function contactDeleting(ctx: TenantCtx, brandId: string, contactId: string): Promise<void> {
  await ctx.db.raw(
    `update tickets t set customer_id = null, customer_sort = '', customer_text = '', company_sort = '',
        search_vector = ticketd_ticket_vector(t.title, '', t.body)
      where ? and t.brand_id = ? and t.customer_id = ?`,
    [tenantScope(ctx, 't'), brandId, contactId],
  );
}

export async function categoryDeleting(ctx: TenantCtx, brandId: string, categoryId: string): Promise<void> {
  await ctx.db.raw(`update tickets t set category_id = null, category_sort = '' where ? and t.brand_id = ? and t.category_id = ?`, [tenantScope(ctx, 't'), brandId, categoryId]);
}

/** Members are account-wide: their tickets in every brand and mode. */
export async function memberDeleting(ctx: BaseCtx, accountId: string, memberId: string): Promise<void> {
  await ctx.db.raw(`update tickets t set assignee_id = null, assignee_sort = '' where ? and t.assignee_id = ?`, [accountScope(tenantCtx(ctx, accountId, true), 't'), memberId]);
}
