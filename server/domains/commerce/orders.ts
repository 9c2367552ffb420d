import type { Knex } from 'knex';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { canSeeBrand, withTx, type TenantCtx } from '../../core/context.js';
import { pgErrorCode, prepared } from '../../core/db.js';
import { notFound } from '../../core/errors.js';
import { newId, normalizeBrandId, ID_PREFIX } from '../../core/ids.js';
import { BOUND_TENANT, sameTenant, scopeOf, tenantIs, tenantScope } from '../../core/model.js';
import { decodeCursor, encodeCursor, invalidCursor, keysetPage, PAGE_LIMIT_DEFAULT, type Page } from '../../core/pagination.js';
import { escapeLike } from '../../core/text.js';
import { CommerceOrderTicket, CommerceProduct, type OrderItem } from './model.js';
import type { OrderListInput, OrderStoreView, OrderTicketView, OrderView, ProductListInput, ProductView } from './order-schemas.js';

/**
 * A brand's orders and products, as its connected stores last told them (the sync writes them,
 * stores.ts), and the links between orders and tickets. Read in SQL written here: an order's
 * customerId is the brand's contact of its email, joined on contacts_email_unique, so a contact
 * added after the order still finds it.
 *
 * The two reads every ticket and contact page makes (byTicket, byCustomer) are one statement each,
 * and no read of the brand row: the route's brand check (core/auth.ts) is answered from memory.
 */

/** What a customer's or a ticket's orders show at most, newest first. */
export const ORDERS_BESIDE_MAX = 50;

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

/** The order's columns under their view names, with customerId from the contact joined as `c`. */
const ORDER_COLUMNS = `o.id, o.store_id as "storeId", o.brand_id as "brandId", o.platform_order_id as "platformOrderId",
  o.order_number as "orderNumber", c.id as "customerId", o.customer_email as "customerEmail", o.customer_name as "customerName",
  o.status, o.platform_status as "platformStatus", o.currency, o.subtotal, o.shipping_total as "shippingTotal", o.tax_total as "taxTotal",
  o.discount_total as "discountTotal", o.total, o.refund_total as "refundTotal", o.payment_status as "paymentStatus",
  o.payment_method as "paymentMethod", o.fulfillment_status as "fulfillmentStatus", o.shipping_method as "shippingMethod", o.items,
  o.platform_created_at as "platformCreatedAt", o.platform_updated_at as "platformUpdatedAt", o.created_at as "createdAt", o.updated_at as "updatedAt"`;
/** The brand's contact of the order's email (there is at most one: contacts_email_unique). */
const CUSTOMER_JOIN = `left join contacts c on ${sameTenant('c', 'o')} and c.brand_id = o.brand_id and c.email = o.customer_email`;

interface OrderRow {
  id: string;
  storeId: string;
  brandId: string;
  platformOrderId: string;
  orderNumber: string;
  customerId: string | null;
  customerEmail: string | null;
  customerName: string | null;
  status: string;
  platformStatus: string | null;
  currency: string;
  subtotal: string;
  shippingTotal: string;
  taxTotal: string;
  discountTotal: string;
  total: string;
  refundTotal: string;
  paymentStatus: string | null;
  paymentMethod: string | null;
  fulfillmentStatus: string | null;
  shippingMethod: string | null;
  items: OrderItem[];
  platformCreatedAt: Date | null;
  platformUpdatedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export function toView(row: OrderRow): OrderView {
  return {
    id: row.id,
    storeId: row.storeId,
    brandId: row.brandId,
    platformOrderId: row.platformOrderId,
    orderNumber: row.orderNumber,
    customerId: row.customerId,
    customerEmail: row.customerEmail,
    customerName: row.customerName,
    status: row.status,
    platformStatus: row.platformStatus,
    currency: row.currency,
    subtotal: row.subtotal,
    shippingTotal: row.shippingTotal,
    taxTotal: row.taxTotal,
    discountTotal: row.discountTotal,
    total: row.total,
    refundTotal: row.refundTotal,
    paymentStatus: row.paymentStatus,
    paymentMethod: row.paymentMethod,
    fulfillmentStatus: row.fulfillmentStatus,
    shippingMethod: row.shippingMethod,
    platformCreatedAt: iso(row.platformCreatedAt),
    platformUpdatedAt: iso(row.platformUpdatedAt),
    createdAt: iso(row.createdAt)!,
    updatedAt: iso(row.updatedAt)!,
    items: (row.items ?? []).map((i) => ({
      id: String(i.id),
      platformItemId: String(i.platformItemId),
      productId: i.productId ?? null,
      sku: i.sku ?? null,
      name: i.name,
      quantity: i.quantity,
      price: String(i.price),
      total: String(i.total),
    })),
  };
}

export function linkView(row: Pick<CommerceOrderTicket, 'id' | 'orderId' | 'ticketId' | 'linkType' | 'createdBy' | 'createdAt'>): OrderTicketView {
  return { id: row.id, orderId: row.orderId, ticketId: row.ticketId, linkType: row.linkType, createdBy: row.createdBy, createdAt: iso(row.createdAt)! };
}

/** The brand id the route names, if the caller may see it (the route already checked it exists in the caller's tenant). */
function visibleBrand(ctx: TenantCtx, brandId: string): string {
  const id = normalizeBrandId(brandId);
  if (!canSeeBrand(ctx.brandScope, id)) throw notFound('Brand');
  return id;
}

async function rowsOf<T>(ctx: TenantCtx, sql: string, bindings: Record<string, unknown>, options: { prepared?: boolean } = {}): Promise<T[]> {
  const query = ctx.db.raw(sql, bindings as Knex.ValueDict);
  return ((await (options.prepared ? prepared(ctx.db, query) : query)) as unknown as { rows: T[] }).rows;
}

/**
 * The ticket's orders (bare array, newest first), or 404 when the brand has no such ticket (a
 * deleted one included, as GET …/tickets/{id}). One statement: the ticket, then its links on
 * commerce_order_tickets_ticket_idx; without a store there are none to find.
 */
export async function byTicket(ctx: TenantCtx, brandId: string, ticketId: string): Promise<OrderView[]> {
  const brand = visibleBrand(ctx, brandId);
  const rows = await rowsOf<OrderRow | { id: null }>(
    ctx,
    `select ${ORDER_COLUMNS} from tickets t
     left join commerce_order_tickets l on ${sameTenant('l', 't')} and l.ticket_id = t.id and l.brand_id = t.brand_id
     left join commerce_orders o on ${sameTenant('o', 'l')} and o.brand_id = l.brand_id and o.id = l.order_id
     ${CUSTOMER_JOIN}
     where :scope and t.brand_id = :brandId and t.id = :ticketId and t.deleted_at is null
     order by o.platform_created_at desc nulls first, o.id desc
     limit ${ORDERS_BESIDE_MAX}`,
    { scope: tenantScope(ctx, 't'), brandId: brand, ticketId },
    // On every ticket page: planned once per connection, not on every read.
    { prepared: true },
  );
  if (!rows.length) throw notFound('Ticket');
  return rows.filter((r): r is OrderRow => r.id !== null).map(toView);
}

/**
 * The contact's orders: those placed with its email (bare array, newest first), or 404 when the
 * brand has no such contact. One statement: the contact, then its orders on commerce_orders_customer_idx.
 */
export async function byCustomer(ctx: TenantCtx, brandId: string, contactId: string): Promise<OrderView[]> {
  const brand = visibleBrand(ctx, brandId);
  const rows = await rowsOf<OrderRow | { id: null }>(
    ctx,
    `select ${ORDER_COLUMNS} from contacts c
     left join lateral (
       select * from commerce_orders o1 where ${tenantIs('o1', BOUND_TENANT)} and o1.brand_id = c.brand_id and o1.customer_email = c.email
       order by o1.platform_created_at desc, o1.id desc limit ${ORDERS_BESIDE_MAX}
     ) o on true
     where :scope and c.brand_id = :brandId and c.id = :contactId
     order by o.platform_created_at desc nulls first, o.id desc`,
    { scope: tenantScope(ctx, 'c'), account: ctx.accountId, livemode: ctx.livemode, brandId: brand, contactId },
    { prepared: true },
  );
  if (!rows.length) throw notFound('Contact');
  return rows.filter((r): r is OrderRow => r.id !== null).map(toView);
}

/**
 * The brand's orders, newest first (platform_created_at, then id: the order of
 * commerce_orders_brand_idx, an order without a platform time first), a page at a time.
 */
export async function list(ctx: TenantCtx, brandId: string, input: OrderListInput): Promise<Page<OrderView>> {
  const brand = (await requireBrand(ctx, brandId)).id;
  const limit = input.limit ?? PAGE_LIMIT_DEFAULT;
  const search = input.search?.trim() || null;
  const filters = { brandId: brand, search, status: input.status ?? null, customerId: input.customerId ?? null, storeId: input.storeId ?? null };
  const where: string[] = [':scope', 'o.brand_id = :brandId'];
  const bindings: Record<string, unknown> = { scope: tenantScope(ctx, 'o'), brandId: brand };
  if (input.status) {
    where.push('o.status = :status');
    bindings.status = input.status;
  }
  if (input.storeId) {
    where.push('o.store_id = :storeId');
    bindings.storeId = input.storeId;
  }
  if (input.customerId) {
    // An unknown contact has no email: no order matches.
    where.push(`o.customer_email = (select cc.email from contacts cc where ${sameTenant('cc', 'o')} and cc.brand_id = o.brand_id and cc.id = :customerId)`);
    bindings.customerId = input.customerId;
  }
  if (search) {
    const number = search.replace(/^#/, '');
    where.push(`(o.order_number = :number or o.customer_email like :emailStart or lower(o.customer_name) like :namePart)`);
    Object.assign(bindings, { number, emailStart: `${escapeLike(search.toLowerCase())}%`, namePart: `%${escapeLike(search.toLowerCase())}%` });
  }
  if (input.cursor) {
    const [at, id] = decodeCursor(input.cursor, filters);
    // Newest first puts the orders without a platform time first (DESC: NULLS FIRST, as the index).
    where.push(
      at === null
        ? '((o.platform_created_at is null and o.id < :afterId) or o.platform_created_at is not null)'
        : '(o.platform_created_at, o.id) < (:afterAt::timestamptz, :afterId)',
    );
    Object.assign(bindings, { afterId: id, afterAt: at === null ? null : String(at) });
  }
  const read = rowsOf<OrderRow & { sortKey: string | null }>(
    ctx,
    `select ${ORDER_COLUMNS}, o.platform_created_at::text as "sortKey" from commerce_orders o ${CUSTOMER_JOIN}
     where ${where.join(' and ')}
     order by o.platform_created_at desc, o.id desc
     limit ${limit + 1}`,
    bindings,
  );
  // A cursor is checksummed, not signed: a well-formed one may still carry a time PostgreSQL cannot read.
  const rows = await read.catch((err: unknown) => {
    throw input.cursor && pgErrorCode(err)?.startsWith('22') ? invalidCursor() : err;
  });
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = hasMore && last ? encodeCursor([last.sortKey, last.id], filters) : null;
  return { data: page.map(toView), pagination: { cursor: nextCursor, nextCursor, hasMore } };
}

function storeView(row: Record<string, unknown>): OrderStoreView {
  return {
    id: row.id as string,
    brandId: row.brandId as string,
    name: row.name as string,
    platform: row.platform as string,
    storeUrl: (row.storeUrl as string | null) ?? null,
    storeId: row.storeHash as string,
    status: row.status as string,
    lastSyncAt: iso(row.lastSyncAt as Date | null),
    errorMessage: (row.errorMessage as string | null) ?? null,
    errorCount: row.errorCount as number,
    createdAt: iso(row.createdAt as Date)!,
    updatedAt: iso(row.updatedAt as Date)!,
  };
}

/** One order with its items, its store and its links to tickets (oldest first). */
export async function get(ctx: TenantCtx, brandId: string, orderId: string): Promise<OrderView> {
  const brand = visibleBrand(ctx, brandId);
  const [row] = await rowsOf<OrderRow & { store: Record<string, unknown>; tickets: Record<string, unknown>[] }>(
    ctx,
    `select ${ORDER_COLUMNS},
       (select json_build_object('id', s.id, 'brandId', s.brand_id, 'name', s.name, 'platform', s.platform, 'storeUrl', s.store_url,
          'storeHash', s.store_hash, 'status', s.status, 'lastSyncAt', s.last_sync_at, 'errorMessage', s.error_message,
          'errorCount', s.error_count, 'createdAt', s.created_at, 'updatedAt', s.updated_at)
        from commerce_stores s where ${tenantIs('s', BOUND_TENANT)} and s.brand_id = o.brand_id and s.id = o.store_id) as store,
       array(select json_build_object('id', l.id, 'orderId', l.order_id, 'ticketId', l.ticket_id, 'linkType', l.link_type,
          'createdBy', l.created_by, 'createdAt', l.created_at)
        from commerce_order_tickets l where ${tenantIs('l', BOUND_TENANT)} and l.order_id = o.id order by l.created_at, l.id) as tickets
     from commerce_orders o ${CUSTOMER_JOIN}
     where :scope and o.brand_id = :brandId and o.id = :orderId`,
    { scope: tenantScope(ctx, 'o'), account: ctx.accountId, livemode: ctx.livemode, brandId: brand, orderId },
  );
  if (!row) throw notFound('Order');
  return {
    ...toView(row),
    store: storeView(row.store),
    tickets: row.tickets.map((l) => linkView({ ...(l as unknown as CommerceOrderTicket), createdAt: new Date(l.createdAt as string) })),
  };
}

export interface LinkResult {
  created: boolean;
  link: OrderTicketView;
}

/** The order and ticket of the brand, or 404 for either (a deleted ticket too). */
async function requireOrderAndTicket(tx: TenantCtx, brandId: string, orderId: string, ticketId: string): Promise<{ orderNumber: string; ticketNumber: number }> {
  const [row] = await rowsOf<{ orderNumber: string | null; ticketNumber: number | null }>(
    tx,
    `select (select o.order_number from commerce_orders o where :orderScope and o.brand_id = :brandId and o.id = :orderId) as "orderNumber",
            (select t.ticket_number from tickets t where :ticketScope and t.brand_id = :brandId and t.id = :ticketId and t.deleted_at is null) as "ticketNumber"`,
    { orderScope: tenantScope(tx, 'o'), ticketScope: tenantScope(tx, 't'), brandId, orderId, ticketId },
  );
  if (row?.orderNumber == null) throw notFound('Order');
  if (row.ticketNumber == null) throw notFound('Ticket');
  return { orderNumber: row.orderNumber, ticketNumber: row.ticketNumber };
}

/**
 * Links the order to a ticket of the same brand (201), as MANUAL or API (by default the caller's
 * kind); linked already, in whatever way, it answers that link (200) and writes nothing.
 */
export async function link(ctx: TenantCtx, brandId: string, orderId: string, ticketId: string, given?: 'MANUAL' | 'API'): Promise<LinkResult> {
  const linkType = given ?? (ctx.actor.type === 'api' ? 'API' : 'MANUAL');
  return withTx(ctx, async (tx) => {
    const brand = (await requireBrand(tx, brandId)).id;
    const { orderNumber, ticketNumber } = await requireOrderAndTicket(tx, brand, orderId, ticketId);
    // Through knex, not the model: a row the conflict kept out must come back as no row.
    const [made] = (await tx
      .db('commerceOrderTickets')
      .insert({ id: newId(ID_PREFIX.orderLink), ...scopeOf(tx), brandId: brand, orderId, ticketId, linkType, createdBy: tx.actor.id })
      .onConflict(['accountId', 'livemode', 'orderId', 'ticketId'])
      .ignore()
      .returning('*')) as unknown as CommerceOrderTicket[];
    if (!made) {
      const existing = await CommerceOrderTicket.scoped(tx).where({ 'commerceOrderTickets.orderId': orderId, 'commerceOrderTickets.ticketId': ticketId }).first();
      // Unlinked by a concurrent request between the two statements: as absent as it looks.
      if (!existing) throw notFound('Order link');
      return { created: false, link: linkView(existing) };
    }
    await audit.record(tx, {
      brandId: brand,
      ticketId,
      entityType: 'order',
      entityId: orderId,
      event: 'order.linked',
      metadata: { orderNumber, ticketNumber, linkType },
    });
    return { created: true, link: linkView(made) };
  });
}

/** Removes the order's link to the ticket, however it was made; 404 when there is none. */
export async function unlink(ctx: TenantCtx, brandId: string, orderId: string, ticketId: string): Promise<void> {
  await withTx(ctx, async (tx) => {
    const brand = (await requireBrand(tx, brandId)).id;
    const [gone] = await rowsOf<{ linkType: string; orderNumber: string }>(
      tx,
      `delete from commerce_order_tickets l using commerce_orders o
       where :scope and l.brand_id = :brandId and l.order_id = :orderId and l.ticket_id = :ticketId
         and ${sameTenant('o', 'l')} and o.brand_id = l.brand_id and o.id = l.order_id
       returning l.link_type as "linkType", o.order_number as "orderNumber"`,
      { scope: tenantScope(tx, 'l'), brandId: brand, orderId, ticketId },
    );
    if (!gone) throw notFound('Order link');
    await audit.record(tx, {
      brandId: brand,
      ticketId,
      entityType: 'order',
      entityId: orderId,
      event: 'order.unlinked',
      metadata: { orderNumber: gone.orderNumber, linkType: gone.linkType },
    });
  });
}

export function productView(row: CommerceProduct): ProductView {
  return {
    id: row.id,
    storeId: row.storeId,
    brandId: row.brandId,
    platformProductId: row.platformProductId,
    name: row.name,
    sku: row.sku,
    price: row.price,
    currency: row.currency,
    isActive: row.isActive,
    inventoryLevel: row.inventoryLevel,
    url: row.url,
    imageUrl: row.imageUrl,
    platformUpdatedAt: iso(row.platformUpdatedAt),
    createdAt: iso(row.createdAt)!,
    updatedAt: iso(row.updatedAt)!,
  };
}

/** The brand's products by name (commerce_products_brand_idx), a page at a time. */
export async function listProducts(ctx: TenantCtx, brandId: string, input: ProductListInput): Promise<Page<ProductView>> {
  const brand = (await requireBrand(ctx, brandId)).id;
  const search = input.search?.trim() || null;
  const q = CommerceProduct.scoped(ctx).where('commerceProducts.brandId', brand);
  if (input.storeId) q.where('commerceProducts.storeId', input.storeId);
  if (input.isActive !== undefined) q.where('commerceProducts.isActive', input.isActive);
  if (search) {
    q.where((w) => w.whereRaw('lower(commerce_products.name) like ?', [`%${escapeLike(search.toLowerCase())}%`]).orWhere('commerceProducts.sku', 'like', `${escapeLike(search)}%`));
  }
  return keysetPage(q, {
    sort: 'commerce_products.name',
    id: 'commerce_products.id',
    order: 'asc',
    limit: input.limit,
    cursor: input.cursor,
    filters: { brandId: brand, storeId: input.storeId ?? null, search, isActive: input.isActive ?? null },
    valueOf: (row) => row.name,
    toView: productView,
  });
}

/**
 * A merge: the target ticket is linked to every order a source was linked to (as it was, with who
 * linked it), so the orders stay beside the conversation, which moved; the sources keep theirs.
 * In the merge's transaction; a pair linked already is left alone.
 */
export async function copyLinksToTicket(tx: TenantCtx, brandId: string, sourceIds: readonly string[], targetId: string): Promise<void> {
  await tx.db.raw(
    `insert into commerce_order_tickets (id, account_id, livemode, brand_id, order_id, ticket_id, link_type, created_by, created_at)
     select ticketd_new_id(:prefix), l.account_id, l.livemode, l.brand_id, l.order_id, :targetId, l.link_type, l.created_by, l.created_at
     from commerce_order_tickets l
     where :scope and l.brand_id = :brandId and l.ticket_id = any(:sourceIds)
     on conflict (account_id, livemode, order_id, ticket_id) do nothing`,
    { prefix: ID_PREFIX.orderLink, targetId, scope: tenantScope(tx, 'l'), brandId, sourceIds: [...sourceIds] } as Knex.ValueDict,
  );
}
