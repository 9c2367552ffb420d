import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import {
  StoreFailed,
  StoreRefused,
  type CommerceConnector,
  type ConnectorOptions,
  type Notice,
  type Page,
  type PageQuery,
  type PlatformOrder,
  type PlatformProduct,
  type StoreCredentials,
  type StoreInfo,
} from './commerce.js';
import { eachAtOnce } from '../core/each-at-once.js';

/**
 * BigCommerce's documented REST API, as integrations/commerce.ts asks it: v2 /store, /orders
 * (with /orders/{id}/products), v3 /customers, /catalog/products and /hooks, at
 * `<base>/stores/{hash}/`, authenticated by `X-Auth-Token`. A 429 says in X-Rate-Limit-Time-Reset-Ms
 * how long until the store's quota refills: the call waits that long and is made again.
 */

const SECRET_HEADER = 'x-ticketd-notify-secret';
/** How often one call meets a 429 and waits before it counts as failed. */
const MAX_RATE_LIMITED = 10;
const DEFAULT_MAX_WAIT_MS = 60_000;
/** BigCommerce's largest page. */
const MAX_LIMIT = 250;

/**
 * BigCommerce's order status ids (status_id) in the dashboard's words (PENDING, PROCESSING,
 * SHIPPED, DELIVERED, COMPLETED, CANCELLED, REFUNDED, DISPUTED), and the shipping state each says.
 * The store's own word stays in platformStatus ("Awaiting Pickup", "Partially Refunded").
 */
const STATUS_OF: Readonly<Record<number, { status: string; fulfillment: string | null }>> = {
  0: { status: 'PENDING', fulfillment: null }, // Incomplete
  1: { status: 'PENDING', fulfillment: null },
  2: { status: 'SHIPPED', fulfillment: 'shipped' },
  3: { status: 'PROCESSING', fulfillment: 'partially_shipped' },
  4: { status: 'REFUNDED', fulfillment: null },
  5: { status: 'CANCELLED', fulfillment: null },
  6: { status: 'CANCELLED', fulfillment: null }, // Declined
  7: { status: 'PENDING', fulfillment: null }, // Awaiting Payment
  8: { status: 'PROCESSING', fulfillment: 'unfulfilled' }, // Awaiting Pickup
  9: { status: 'PROCESSING', fulfillment: 'unfulfilled' }, // Awaiting Shipment
  10: { status: 'COMPLETED', fulfillment: 'fulfilled' },
  11: { status: 'PROCESSING', fulfillment: 'unfulfilled' }, // Awaiting Fulfillment
  12: { status: 'PENDING', fulfillment: null }, // Manual Verification Required
  13: { status: 'DISPUTED', fulfillment: null },
  14: { status: 'REFUNDED', fulfillment: null }, // Partially Refunded: refundTotal says how much
};

interface BcAddress {
  first_name?: string;
  last_name?: string;
  email?: string;
}

interface BcOrder {
  id: number;
  customer_id?: number;
  date_created?: string;
  date_modified?: string;
  status_id?: number;
  status?: string;
  custom_status?: string;
  subtotal_ex_tax?: string;
  subtotal_inc_tax?: string;
  shipping_cost_ex_tax?: string;
  base_shipping_cost?: string;
  total_tax?: string;
  discount_amount?: string;
  coupon_discount?: string;
  total_inc_tax?: string;
  refunded_amount?: string;
  payment_method?: string;
  payment_status?: string;
  currency_code?: string;
  default_currency_code?: string;
  billing_address?: BcAddress;
}

interface BcOrderProduct {
  id: number;
  product_id?: number;
  name?: string;
  sku?: string;
  quantity?: number;
  price_inc_tax?: string;
  base_price?: string;
  total_inc_tax?: string;
}

interface BcCustomer {
  id: number;
  email?: string;
  first_name?: string;
  last_name?: string;
}

interface BcProduct {
  id: number;
  name?: string;
  sku?: string;
  price?: number;
  is_visible?: boolean;
  inventory_level?: number;
  custom_url?: { url?: string };
  date_modified?: string;
  images?: { url_standard?: string; is_thumbnail?: boolean }[];
}

interface Answer {
  status: number;
  body: unknown;
}

/** A decimal string of what the store sent (a number or a numeric string); "0" for nothing. */
function decimal(value: unknown): string {
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : '';
  return /^-?\d+(\.\d+)?$/.test(text) ? text : '0';
}

/** Two decimal strings added, to the 4 places commerce_orders keeps. */
function sum(a: string, b: string): string {
  if (b === '0') return a;
  if (a === '0') return b;
  const scale = (x: string) => BigInt(Math.round(Number(x) * 10_000));
  const total = scale(a) + scale(b);
  const sign = total < 0n ? '-' : '';
  const abs = total < 0n ? -total : total;
  return `${sign}${abs / 10_000n}.${String(abs % 10_000n).padStart(4, '0')}`;
}

function dateOf(value: unknown): Date | null {
  if (typeof value !== 'string' || !value) return null;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

const text = (value: unknown): string | null => (typeof value === 'string' && value.trim() ? value.trim() : null);

/** The store's own words for a refusal: v2 answers [{ status, message }], v3 { title, detail }. */
function messageOf(body: unknown): string | null {
  const first = Array.isArray(body) ? (body[0] as unknown) : body;
  if (first && typeof first === 'object') {
    const o = first as { message?: unknown; title?: unknown; detail?: unknown };
    return text(o.message) ?? text(o.detail) ?? text(o.title);
  }
  return null;
}

export class BigCommerceConnector implements CommerceConnector {
  readonly platform = 'BIGCOMMERCE';
  readonly secretHeader = SECRET_HEADER;
  private readonly base: string;

  constructor(private readonly options: ConnectorOptions) {
    this.base = options.bigcommerceApiUrl.replace(/\/+$/, '');
  }

  private async call(creds: StoreCredentials, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<Answer> {
    const url = `${this.base}/stores/${encodeURIComponent(creds.storeHash)}/${path}`;
    const maxWait = this.options.maxRateLimitWaitMs ?? DEFAULT_MAX_WAIT_MS;
    for (let attempt = 0; ; attempt++) {
      let status: number;
      let raw: string;
      let resetMs: number | null = null;
      try {
        const res = await request(url, {
          method,
          headers: {
            'x-auth-token': creds.accessToken,
            accept: 'application/json',
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          headersTimeout: this.options.timeoutMs,
          bodyTimeout: this.options.timeoutMs,
        });
        status = res.statusCode;
        raw = await res.body.text();
        const reset = Number(res.headers['x-rate-limit-time-reset-ms']);
        if (Number.isFinite(reset) && reset >= 0) resetMs = reset;
      } catch (err) {
        throw new StoreFailed(`BigCommerce could not be reached (${(err as Error).message})`);
      }
      let parsed: unknown = null;
      try {
        parsed = raw ? JSON.parse(raw) : null;
      } catch {
        // Not JSON: judged by its status alone.
      }
      if (status === 429) {
        const wait = resetMs ?? 1_000;
        if (attempt >= MAX_RATE_LIMITED || wait > maxWait) throw new StoreFailed(`BigCommerce's rate limit: try again in ${wait} ms`);
        await sleep(wait);
        continue;
      }
      if (status === 401 || status === 403) {
        throw new StoreRefused(`BigCommerce refused the access token (${status}${messageOf(parsed) ? `: ${messageOf(parsed)}` : ''})`);
      }
      if (status >= 500) throw new StoreFailed(`BigCommerce answered ${status}${messageOf(parsed) ? `: ${messageOf(parsed)}` : ''}`);
      return { status, body: parsed };
    }
  }

  /** A call that must answer 2xx (204: an empty listing). */
  private async expectOk(creds: StoreCredentials, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<unknown> {
    const answer = await this.call(creds, method, path, body);
    if (answer.status >= 200 && answer.status < 300) return answer.body;
    throw new StoreFailed(`BigCommerce answered ${answer.status} to ${method} ${path.split('?')[0]}${messageOf(answer.body) ? `: ${messageOf(answer.body)}` : ''}`);
  }

  async verify(creds: StoreCredentials): Promise<StoreInfo> {
    const answer = await this.call(creds, 'GET', 'v2/store');
    // An unknown store hash: these credentials name no store.
    if (answer.status === 404) throw new StoreRefused(`BigCommerce knows no store ${creds.storeHash}${messageOf(answer.body) ? ` (${messageOf(answer.body)})` : ''}`);
    if (answer.status !== 200 || !answer.body || typeof answer.body !== 'object') throw new StoreFailed(`BigCommerce answered ${answer.status} to GET v2/store`);
    const store = answer.body as { name?: unknown; secure_url?: unknown; domain?: unknown };
    const storeUrl = text(store.secure_url) ?? (text(store.domain) ? `https://${text(store.domain)}` : null);
    return { name: text(store.name) ?? creds.storeHash, storeUrl: storeUrl?.replace(/\/+$/, '') ?? null };
  }

  async orders(creds: StoreCredentials, query: PageQuery): Promise<Page<PlatformOrder>> {
    const limit = Math.min(query.limit, MAX_LIMIT);
    const params = new URLSearchParams({ page: String(query.page), limit: String(limit) });
    if (query.modifiedSince) {
      params.set('min_date_modified', query.modifiedSince.toISOString());
      params.set('sort', 'date_modified:asc');
    } else params.set('sort', 'id:asc');
    const listed = ((await this.expectOk(creds, 'GET', `v2/orders?${params}`)) ?? []) as BcOrder[];
    if (!Array.isArray(listed)) throw new StoreFailed('BigCommerce listed orders in a shape ticketd does not know');
    const orders = await this.complete(creds, listed);
    return { items: orders, more: listed.length >= limit };
  }

  async order(creds: StoreCredentials, platformOrderId: string): Promise<PlatformOrder | null> {
    if (!/^\d{1,18}$/.test(platformOrderId)) return null;
    const answer = await this.call(creds, 'GET', `v2/orders/${platformOrderId}`);
    if (answer.status === 404) return null;
    if (answer.status !== 200 || !answer.body || typeof answer.body !== 'object') throw new StoreFailed(`BigCommerce answered ${answer.status} to GET v2/orders/{id}`);
    const [order] = await this.complete(creds, [answer.body as BcOrder]);
    return order ?? null;
  }

  /** Orders with their lines, and the customer's address and name when the order's billing address has none. */
  private async complete(creds: StoreCredentials, listed: readonly BcOrder[]): Promise<PlatformOrder[]> {
    const lines = await eachAtOnce(listed, 8, async (o) => ((await this.expectOk(creds, 'GET', `v2/orders/${o.id}/products?limit=${MAX_LIMIT}`)) ?? []) as BcOrderProduct[]);
    const missing = [...new Set(listed.filter((o) => !text(o.billing_address?.email) && (o.customer_id ?? 0) > 0).map((o) => o.customer_id!))];
    const customers = new Map<number, BcCustomer>();
    for (let i = 0; i < missing.length; i += 50) {
      const ids = missing.slice(i, i + 50).join(',');
      const page = (await this.expectOk(creds, 'GET', `v3/customers?id:in=${ids}&limit=50`)) as { data?: BcCustomer[] } | null;
      for (const c of page?.data ?? []) customers.set(c.id, c);
    }
    return listed.map((o, i) => this.normalize(o, Array.isArray(lines[i]) ? lines[i] : [], customers.get(o.customer_id ?? 0)));
  }

  private normalize(o: BcOrder, lines: readonly BcOrderProduct[], customer: BcCustomer | undefined): PlatformOrder {
    const { status, fulfillment } = STATUS_OF[o.status_id ?? -1] ?? { status: 'PENDING', fulfillment: null };
    const email = text(o.billing_address?.email) ?? text(customer?.email);
    const billingName = [text(o.billing_address?.first_name), text(o.billing_address?.last_name)].filter(Boolean).join(' ');
    const customerName = [text(customer?.first_name), text(customer?.last_name)].filter(Boolean).join(' ');
    return {
      platformOrderId: String(o.id),
      orderNumber: String(o.id),
      platformCustomerId: (o.customer_id ?? 0) > 0 ? String(o.customer_id) : null,
      customerEmail: email ? email.toLowerCase() : null,
      customerName: billingName || customerName || null,
      status,
      platformStatus: text(o.custom_status) ?? text(o.status),
      currency: (text(o.currency_code) ?? text(o.default_currency_code) ?? 'USD').toUpperCase(),
      subtotal: decimal(o.subtotal_ex_tax ?? o.subtotal_inc_tax),
      shippingTotal: decimal(o.shipping_cost_ex_tax ?? o.base_shipping_cost),
      taxTotal: decimal(o.total_tax),
      discountTotal: sum(decimal(o.discount_amount), decimal(o.coupon_discount)),
      total: decimal(o.total_inc_tax),
      refundTotal: decimal(o.refunded_amount),
      paymentStatus: text(o.payment_status),
      paymentMethod: text(o.payment_method),
      fulfillmentStatus: fulfillment,
      shippingMethod: null,
      items: lines.map((p) => ({
        id: String(p.id),
        platformItemId: String(p.id),
        productId: p.product_id ? String(p.product_id) : null,
        sku: text(p.sku),
        name: text(p.name) ?? `Product ${p.product_id ?? p.id}`,
        quantity: Number.isInteger(p.quantity) ? p.quantity! : 0,
        price: decimal(p.price_inc_tax ?? p.base_price),
        total: decimal(p.total_inc_tax),
      })),
      platformCreatedAt: dateOf(o.date_created),
      platformUpdatedAt: dateOf(o.date_modified),
    };
  }

  async products(creds: StoreCredentials, query: PageQuery): Promise<Page<PlatformProduct>> {
    const limit = Math.min(query.limit, MAX_LIMIT);
    const params = new URLSearchParams({ page: String(query.page), limit: String(limit), include: 'images' });
    if (query.modifiedSince) params.set('date_modified:min', query.modifiedSince.toISOString());
    const page = (await this.expectOk(creds, 'GET', `v3/catalog/products?${params}`)) as {
      data?: BcProduct[];
      meta?: { pagination?: { current_page?: number; total_pages?: number } };
    } | null;
    const data = Array.isArray(page?.data) ? page.data : [];
    const pagination = page?.meta?.pagination;
    const more = pagination?.total_pages !== undefined ? (pagination.current_page ?? query.page) < pagination.total_pages : data.length >= limit;
    return {
      items: data.map((p) => ({
        platformProductId: String(p.id),
        name: text(p.name) ?? `Product ${p.id}`,
        sku: text(p.sku),
        price: typeof p.price === 'number' ? decimal(p.price) : null,
        currency: null,
        isActive: p.is_visible !== false,
        inventoryLevel: Number.isInteger(p.inventory_level) ? p.inventory_level! : null,
        url: text(p.custom_url?.url),
        imageUrl: text((p.images ?? []).find((i) => i.is_thumbnail)?.url_standard ?? p.images?.[0]?.url_standard),
        platformUpdatedAt: dateOf(p.date_modified),
      })),
      more,
    };
  }

  async registerHooks(creds: StoreCredentials, destination: string, secret: string): Promise<string[]> {
    const created = (await this.expectOk(creds, 'POST', 'v3/hooks', {
      scope: 'store/order/*',
      destination,
      is_active: true,
      headers: { [SECRET_HEADER]: secret },
    })) as { data?: { id?: unknown } } | null;
    const id = created?.data?.id;
    if (id === undefined || id === null) throw new StoreFailed('BigCommerce registered the hook without an id');
    return [String(id)];
  }

  async removeHooks(creds: StoreCredentials, hookIds: readonly string[]): Promise<void> {
    for (const id of hookIds) {
      const answer = await this.call(creds, 'DELETE', `v3/hooks/${encodeURIComponent(id)}`);
      if (answer.status !== 404 && (answer.status < 200 || answer.status >= 300)) throw new StoreFailed(`BigCommerce answered ${answer.status} to DELETE v3/hooks/{id}`);
    }
  }

  notice(body: unknown): Notice {
    const b = body as { scope?: unknown; data?: { type?: unknown; id?: unknown } } | null;
    const scope = typeof b?.scope === 'string' ? b.scope : '';
    const id = b?.data?.id;
    if (scope.startsWith('store/order/') && (typeof id === 'number' || typeof id === 'string') && /^\d{1,18}$/.test(String(id))) {
      return { kind: 'order', platformOrderId: String(id) };
    }
    return { kind: 'ignored' };
  }
}
