/**
 * What ticketd asks of an online store platform, whichever it is (BigCommerce first,
 * integrations/bigcommerce.ts; Shopify and WooCommerce later): check the credentials a brand
 * gives, read its orders and products page by page, fetch one order, and register the store's
 * notifications to ticketd (and remove them). The routes, the flows and the dispatcher speak of
 * this interface only; the platform's answers come out normalized, in ticketd's words.
 */

/** A store's credentials as the platform takes them; the token is opened from its seal only to call. */
export interface StoreCredentials {
  /** The platform's id of the store (BigCommerce's store hash). */
  storeHash: string;
  accessToken: string;
}

export interface StoreInfo {
  name: string;
  /** The storefront's address; an order's page in the store's control panel hangs off it. */
  storeUrl: string | null;
}

/** An order line, as commerce_orders.items keeps it. */
export interface PlatformOrderItem {
  id: string;
  platformItemId: string;
  productId: string | null;
  sku: string | null;
  name: string;
  quantity: number;
  /** Decimal strings. */
  price: string;
  total: string;
}

/** An order as the platform last told it, normalized. Totals are decimal strings. */
export interface PlatformOrder {
  platformOrderId: string;
  orderNumber: string;
  platformCustomerId: string | null;
  /** Trimmed and lower-cased. */
  customerEmail: string | null;
  customerName: string | null;
  /** PENDING, PROCESSING, SHIPPED, DELIVERED, COMPLETED, CANCELLED, REFUNDED or DISPUTED (the domain's ORDER_STATUSES). */
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
  items: PlatformOrderItem[];
  platformCreatedAt: Date | null;
  platformUpdatedAt: Date | null;
}

export interface PlatformProduct {
  platformProductId: string;
  name: string;
  sku: string | null;
  price: string | null;
  currency: string | null;
  isActive: boolean;
  inventoryLevel: number | null;
  url: string | null;
  imageUrl: string | null;
  platformUpdatedAt: Date | null;
}

/** A page of a listing; `more`: another page follows. */
export interface Page<T> {
  items: T[];
  more: boolean;
}

export interface PageQuery {
  /** 1-based. */
  page: number;
  limit: number;
  /** Only what was modified at or after this instant (an incremental sync); none: everything, oldest id first. */
  modifiedSince?: Date;
}

/** What a notification the platform sent says, once read: an order to fetch again, or nothing ticketd keeps. */
export type Notice = { kind: 'order'; platformOrderId: string } | { kind: 'ignored' };

/** The store refused the credentials (revoked or wrong token, a store that is not theirs): the brand must connect again. */
export class StoreRefused extends Error {
  override name = 'StoreRefused';
}

/** The store could not be reached, or answered something other than what was asked; tried again later. */
export class StoreFailed extends Error {
  override name = 'StoreFailed';
}

export interface CommerceConnector {
  readonly platform: string;
  /** The header the store's notifications carry ticketd's secret in (set at registration). */
  readonly secretHeader: string;
  /** The store's name and address: the credentials work. StoreRefused with the store's own words when they do not. */
  verify(creds: StoreCredentials): Promise<StoreInfo>;
  orders(creds: StoreCredentials, query: PageQuery): Promise<Page<PlatformOrder>>;
  /** One order as it is now; null when the store has none by that id (any more). */
  order(creds: StoreCredentials, platformOrderId: string): Promise<PlatformOrder | null>;
  products(creds: StoreCredentials, query: PageQuery): Promise<Page<PlatformProduct>>;
  /** Registers the order notifications to `destination`, each carrying `secret` in secretHeader; returns the platform's hook ids. */
  registerHooks(creds: StoreCredentials, destination: string, secret: string): Promise<string[]>;
  /** Removes those hooks; one already gone is no failure. */
  removeHooks(creds: StoreCredentials, hookIds: readonly string[]): Promise<void>;
  /** Reads a notification's body (already authenticated by its secret). */
  notice(body: unknown): Notice;
}

export interface ConnectorOptions {
  /** The platform API's base (BigCommerce: https://api.bigcommerce.com); a test points it at a fake store. */
  bigcommerceApiUrl: string;
  timeoutMs: number;
  /** The longest wait a rate limit's reset may ask for before the call counts as failed. */
  maxRateLimitWaitMs?: number;
}
