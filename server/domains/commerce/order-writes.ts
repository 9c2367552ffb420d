import type { TenantCtx } from '../../core/context.js';
import { ID_PREFIX, newId } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import type { PlatformOrder, PlatformProduct } from '../../integrations/commerce.js';
import { CommerceOrder, CommerceProduct, ORDER_STATUSES, type CommerceStore, type OrderStatus } from './model.js';

/**
 * Orders and products as the store told them, written by its sync and its notifications: one
 * statement a batch, an upsert on the platform's id within the store, so a page written again
 * (a sync resumed after a crash) changes rows and adds none. An order the store reports as
 * modified earlier than the row already holds is left as it is (a notification's fresher copy
 * wins over a page fetched before it).
 */

const MAX_TEXT = 1_000;
const clip = (s: string | null) => (s && s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) : s);
const statusOf = (s: string): OrderStatus => ((ORDER_STATUSES as readonly string[]).includes(s) ? (s as OrderStatus) : 'PENDING');

const ORDER_COLUMNS = [
  'orderNumber',
  'platformCustomerId',
  'customerEmail',
  'customerName',
  'status',
  'platformStatus',
  'currency',
  'subtotal',
  'shippingTotal',
  'taxTotal',
  'discountTotal',
  'total',
  'refundTotal',
  'paymentStatus',
  'paymentMethod',
  'fulfillmentStatus',
  'shippingMethod',
  'items',
  'platformCreatedAt',
  'platformUpdatedAt',
  'updatedAt',
] as const;

export async function upsertOrders(tx: TenantCtx, store: Pick<CommerceStore, 'id' | 'brandId'>, orders: readonly PlatformOrder[]): Promise<number> {
  // The same order twice in one statement would be an error of ON CONFLICT: the later copy is kept.
  const unique = [...new Map(orders.map((o) => [o.platformOrderId, o])).values()];
  if (!unique.length) return 0;
  const now = new Date(tx.services.now());
  const rows = unique.map((o) => ({
    ...scopeOf(tx),
    id: newId(ID_PREFIX.commerceOrder),
    brandId: store.brandId,
    storeId: store.id,
    platformOrderId: o.platformOrderId,
    orderNumber: o.orderNumber,
    platformCustomerId: o.platformCustomerId,
    customerEmail: o.customerEmail?.trim().toLowerCase() || null,
    customerName: clip(o.customerName),
    status: statusOf(o.status),
    platformStatus: clip(o.platformStatus),
    currency: o.currency.slice(0, 8),
    subtotal: o.subtotal,
    shippingTotal: o.shippingTotal,
    taxTotal: o.taxTotal,
    discountTotal: o.discountTotal,
    total: o.total,
    refundTotal: o.refundTotal,
    paymentStatus: clip(o.paymentStatus),
    paymentMethod: clip(o.paymentMethod),
    fulfillmentStatus: clip(o.fulfillmentStatus),
    shippingMethod: clip(o.shippingMethod),
    items: JSON.stringify(o.items),
    platformCreatedAt: o.platformCreatedAt,
    platformUpdatedAt: o.platformUpdatedAt,
    createdAt: now,
    updatedAt: now,
  }));
  const written = (await tx
    .db(CommerceOrder.tableName)
    .insert(rows)
    .onConflict(['accountId', 'livemode', 'storeId', 'platformOrderId'])
    .merge([...ORDER_COLUMNS])
    .whereRaw('commerce_orders.platform_updated_at is null or excluded.platform_updated_at is null or excluded.platform_updated_at >= commerce_orders.platform_updated_at')
    .returning('id')) as unknown[];
  return written.length;
}

const PRODUCT_COLUMNS = ['name', 'sku', 'price', 'currency', 'isActive', 'inventoryLevel', 'url', 'imageUrl', 'platformUpdatedAt', 'updatedAt'] as const;

export async function upsertProducts(tx: TenantCtx, store: Pick<CommerceStore, 'id' | 'brandId'>, products: readonly PlatformProduct[]): Promise<number> {
  const unique = [...new Map(products.map((p) => [p.platformProductId, p])).values()];
  if (!unique.length) return 0;
  const now = new Date(tx.services.now());
  const rows = unique.map((p) => ({
    ...scopeOf(tx),
    id: newId(ID_PREFIX.commerceProduct),
    brandId: store.brandId,
    storeId: store.id,
    platformProductId: p.platformProductId,
    name: clip(p.name)!,
    sku: clip(p.sku),
    price: p.price,
    currency: p.currency,
    isActive: p.isActive,
    inventoryLevel: p.inventoryLevel,
    url: clip(p.url),
    imageUrl: clip(p.imageUrl),
    platformUpdatedAt: p.platformUpdatedAt,
    createdAt: now,
    updatedAt: now,
  }));
  const written = (await tx
    .db(CommerceProduct.tableName)
    .insert(rows)
    .onConflict(['accountId', 'livemode', 'storeId', 'platformProductId'])
    .merge([...PRODUCT_COLUMNS])
    .returning('id')) as unknown[];
  return written.length;
}
