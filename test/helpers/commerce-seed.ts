import type { Db } from '../../server/core/db.js';
import { ID_PREFIX, newId } from '../../server/core/ids.js';

/**
 * Fixture rows of connected stores, their orders and products, written straight to the tables
 * as the sync would leave them (the sync itself is tested on its own): tests of what reads and
 * links orders start from these. The access token is a placeholder, never opened.
 */

export interface Scope {
  accountId: string;
  livemode: boolean;
  brandId: string;
}

export interface SeededStore extends Scope {
  id: string;
}

let seq = 0;

export async function seedStore(db: Db, scope: Scope, fields: Record<string, unknown> = {}): Promise<SeededStore> {
  const id = newId(ID_PREFIX.commerceStore);
  await db('commerceStores').insert({
    ...scope,
    id,
    platform: 'BIGCOMMERCE',
    storeHash: `hash${++seq}`,
    name: 'Fixture store',
    storeUrl: 'https://fixture-store.example',
    accessToken: 'sealed-placeholder',
    status: 'ACTIVE',
    ...fields,
  });
  return { ...scope, id };
}

export interface OrderFields {
  orderNumber?: string;
  customerEmail?: string | null;
  customerName?: string | null;
  status?: string;
  total?: string;
  platformCreatedAt?: Date | null;
  items?: unknown[];
  [column: string]: unknown;
}

/** An order of the store; the number and times follow a sequence unless given. */
export async function seedOrder(db: Db, store: SeededStore, fields: OrderFields = {}): Promise<{ id: string; orderNumber: string }> {
  const n = ++seq;
  const id = newId(ID_PREFIX.commerceOrder);
  const orderNumber = fields.orderNumber ?? String(10_000 + n);
  await db('commerceOrders').insert({
    accountId: store.accountId,
    livemode: store.livemode,
    brandId: store.brandId,
    storeId: store.id,
    id,
    platformOrderId: `p${n}`,
    orderNumber,
    customerEmail: 'buyer@shop.example',
    customerName: 'Bea Buyer',
    status: 'COMPLETED',
    platformStatus: 'Completed',
    currency: 'USD',
    subtotal: '10.00',
    total: '12.50',
    platformCreatedAt: new Date(Date.UTC(2026, 0, 1) + n * 60_000),
    platformUpdatedAt: new Date(Date.UTC(2026, 0, 2) + n * 60_000),
    ...fields,
    items: JSON.stringify(
      fields.items ?? [{ id: `it${n}`, platformItemId: `pi${n}`, productId: null, sku: 'SKU-1', name: 'Blue mug', quantity: 2, price: '5.0000', total: '10.0000' }],
    ),
  });
  return { id, orderNumber };
}

export async function seedProduct(db: Db, store: SeededStore, fields: Record<string, unknown> = {}): Promise<{ id: string }> {
  const n = ++seq;
  const id = newId(ID_PREFIX.commerceProduct);
  await db('commerceProducts').insert({
    accountId: store.accountId,
    livemode: store.livemode,
    brandId: store.brandId,
    storeId: store.id,
    id,
    platformProductId: `pp${n}`,
    name: `Product ${n}`,
    sku: `SKU-${n}`,
    price: '9.9900',
    currency: 'USD',
    ...fields,
  });
  return { id };
}
