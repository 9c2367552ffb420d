import { TenantModel } from '../../core/model.js';

/** What a platform calls a store ticketd connected to a brand. */
export type CommercePlatform = 'BIGCOMMERCE' | 'SHOPIFY' | 'WOOCOMMERCE';
/** PENDING_SETUP: connected, its first sync not finished; ACTIVE: synced; SYNCING: a sync runs now. */
export type StoreStatus = 'PENDING_SETUP' | 'SYNCING' | 'ACTIVE' | 'ERROR' | 'DISCONNECTED';
/** MANUAL: linked by a member; API: by an API key; AUTOMATIC: the ticket named the order (#1234) when created. */
export type OrderLinkType = 'MANUAL' | 'AUTOMATIC' | 'API';

export class CommerceStore extends TenantModel {
  static override tableName = 'commerce_stores';
  static override jsonAttributes = ['hookIds', 'syncCursor'];

  declare id: string;
  declare brandId: string;
  declare platform: CommercePlatform;
  /** The platform's id of the store (BigCommerce's store hash). */
  declare storeHash: string;
  declare name: string;
  declare storeUrl: string | null;
  /** Sealed (core/sealed.ts); opened only to call the store. */
  declare accessToken: string;
  /** SHA-256 of the secret the store's notifications carry. */
  declare notifySecretHash: string | null;
  declare hookIds: string[];
  declare status: StoreStatus;
  declare errorMessage: string | null;
  declare errorCount: number;
  /** What the running full sync has done; null when none runs. */
  declare syncCursor: Record<string, unknown> | null;
  /** Every order modified up to this instant on the platform is known. */
  declare syncedThrough: Date | null;
  declare lastSyncAt: Date | null;
  declare nextSyncAt: Date | null;
  declare syncLeaseUntil: Date | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}

/**
 * An order's status, the same for every platform, in the dashboard's words (the platform's own
 * word is kept as platformStatus).
 */
export const ORDER_STATUSES = ['PENDING', 'PROCESSING', 'SHIPPED', 'DELIVERED', 'COMPLETED', 'CANCELLED', 'REFUNDED', 'DISPUTED'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export interface OrderItem {
  id: string;
  platformItemId: string;
  productId: string | null;
  sku: string | null;
  name: string;
  quantity: number;
  price: string;
  total: string;
}

export class CommerceOrder extends TenantModel {
  static override tableName = 'commerce_orders';
  static override jsonAttributes = ['items'];

  declare id: string;
  declare brandId: string;
  declare storeId: string;
  declare platformOrderId: string;
  declare orderNumber: string;
  declare platformCustomerId: string | null;
  /** Trimmed and lower-cased, like contacts.email: the match to the brand's contact. */
  declare customerEmail: string | null;
  declare customerName: string | null;
  declare status: OrderStatus;
  declare platformStatus: string | null;
  declare currency: string;
  /** Decimal strings, as numeric comes out of PostgreSQL. */
  declare subtotal: string;
  declare shippingTotal: string;
  declare taxTotal: string;
  declare discountTotal: string;
  declare total: string;
  declare refundTotal: string;
  declare paymentStatus: string | null;
  declare paymentMethod: string | null;
  declare fulfillmentStatus: string | null;
  declare shippingMethod: string | null;
  declare items: OrderItem[];
  declare platformCreatedAt: Date | null;
  declare platformUpdatedAt: Date | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}

export class CommerceOrderTicket extends TenantModel {
  static override tableName = 'commerce_order_tickets';

  declare id: string;
  declare brandId: string;
  declare orderId: string;
  declare ticketId: string;
  declare linkType: OrderLinkType;
  declare createdBy: string | null;
  declare createdAt: Date;
}

export class CommerceProduct extends TenantModel {
  static override tableName = 'commerce_products';

  declare id: string;
  declare brandId: string;
  declare storeId: string;
  declare platformProductId: string;
  declare name: string;
  declare sku: string | null;
  declare price: string | null;
  declare currency: string | null;
  declare isActive: boolean;
  declare inventoryLevel: number | null;
  declare url: string | null;
  declare imageUrl: string | null;
  declare platformUpdatedAt: Date | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
