import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { testNow } from './clock.js';

/**
 * A BigCommerce store on a loopback port, answering the documented endpoints ticketd calls (v2
 * /store, /orders with page, limit, sort and min_date_modified, /orders/count, /orders/{id},
 * /orders/{id}/products; v3 /customers, /catalog/products with meta.pagination, /hooks) from
 * fixtures, under /stores/{hash}/ with X-Auth-Token. It can answer 429 with
 * X-Rate-Limit-Time-Reset-Ms, refuse a revoked token (401), fail with a 500, and send its order
 * notifications to the hooks registered at it, as BigCommerce does (a POST with the hook's headers).
 */

export interface FakeOrder {
  id: number;
  customer_id: number;
  date_created: string;
  date_modified: string;
  status_id: number;
  status: string;
  subtotal_ex_tax: string;
  shipping_cost_ex_tax: string;
  total_tax: string;
  discount_amount: string;
  coupon_discount: string;
  total_inc_tax: string;
  refunded_amount: string;
  payment_method: string;
  payment_status: string;
  currency_code: string;
  billing_address: { first_name: string; last_name: string; email: string };
}

export interface Hook {
  id: number;
  scope: string;
  destination: string;
  is_active: boolean;
  headers: Record<string, string>;
}

export interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  status: number;
  at: number;
}

export interface FakeStoreOptions {
  hash?: string;
  token?: string;
  name?: string;
  orders?: number;
  products?: number;
  /** Delivers a notification to ticketd; by default a POST to the hook's destination. */
  deliver?: (hook: Hook, body: string) => Promise<{ status: number; body: string }>;
}

const STATUS_WORDS: Record<number, string> = { 1: 'Pending', 2: 'Shipped', 5: 'Cancelled', 10: 'Completed', 11: 'Awaiting Fulfillment' };
const BASE_TIME = Date.UTC(2026, 0, 1);

export class FakeBigCommerceStore {
  readonly hash: string;
  token: string;
  readonly name: string;
  readonly orders = new Map<number, FakeOrder>();
  readonly products: { id: number; name: string; sku: string; price: number; is_visible: boolean; inventory_level: number; date_modified: string }[] = [];
  readonly hooks = new Map<number, Hook>();
  readonly seen: Seen[] = [];
  url = '';
  /** Requests whose path matches: answered 429 (with the reset header) `times` times. */
  private rateLimits: { match: RegExp; times: number; resetMs: number }[] = [];
  private failures: { match: RegExp; times: number; status: number }[] = [];
  private nextHookId = 1;
  private readonly server = createServer((req, res) => void this.handle(req, res));
  private readonly deliver: NonNullable<FakeStoreOptions['deliver']>;

  private readonly firstToken: string;

  constructor(options: FakeStoreOptions = {}) {
    this.hash = options.hash ?? 'abc123';
    this.token = this.firstToken = options.token ?? 'bc-token-good';
    this.name = options.name ?? 'Fake Outfitters';
    this.reset(options);
    this.deliver =
      options.deliver ??
      (async (hook, body) => {
        const res = await request(hook.destination, { method: 'POST', headers: { 'content-type': 'application/json', ...hook.headers }, body });
        return { status: res.statusCode, body: await res.body.text() };
      });
  }

  /** Back to a store of `orders` orders and `products` products, its first token, no hooks, nothing seen. */
  reset(options: { orders?: number; products?: number } = {}): this {
    this.token = this.firstToken;
    this.orders.clear();
    this.products.length = 0;
    this.hooks.clear();
    this.seen.length = 0;
    this.rateLimits = [];
    this.failures = [];
    for (let i = 1; i <= (options.orders ?? 0); i++) this.addOrder(i);
    for (let i = 1; i <= (options.products ?? 0); i++) {
      this.products.push({
        id: i,
        name: `Product ${i}`,
        sku: `SKU-${i}`,
        price: 10 + i,
        is_visible: i % 7 !== 0,
        inventory_level: i * 3,
        date_modified: new Date(BASE_TIME).toISOString(),
      });
    }
    return this;
  }

  addOrder(id: number): FakeOrder {
    const created = new Date(BASE_TIME + id * 60_000).toUTCString();
    // Every fifth order has no billing address email: its customer's (v3 /customers) is the one.
    const email = id % 5 === 0 ? '' : ` Customer${id % 50}@Example.com `;
    const order: FakeOrder = {
      id,
      customer_id: 1000 + (id % 50),
      date_created: created,
      date_modified: created,
      status_id: 11,
      status: 'Awaiting Fulfillment',
      subtotal_ex_tax: '20.0000',
      shipping_cost_ex_tax: '5.0000',
      total_tax: '2.5000',
      discount_amount: '1.0000',
      coupon_discount: '0.5000',
      total_inc_tax: `${26 + (id % 10)}.0000`,
      refunded_amount: '0.0000',
      payment_method: 'Credit Card',
      payment_status: 'captured',
      currency_code: 'USD',
      billing_address: { first_name: 'Pat', last_name: `Buyer ${id}`, email },
    };
    this.orders.set(id, order);
    return order;
  }

  /** Changes an order as the store's staff would; it is modified now. */
  updateOrder(id: number, change: Partial<FakeOrder>): FakeOrder {
    const order = { ...this.orders.get(id)!, ...change, date_modified: new Date(testNow()).toUTCString() };
    if (change.status_id !== undefined && change.status === undefined) order.status = STATUS_WORDS[change.status_id] ?? 'Pending';
    this.orders.set(id, order);
    return order;
  }

  /** The next `times` requests whose path matches answer 429 with X-Rate-Limit-Time-Reset-Ms: resetMs. */
  rateLimit(match: RegExp, resetMs: number, times = 1): void {
    this.rateLimits.push({ match, times, resetMs });
  }

  /** The next `times` requests whose path matches answer `status`. */
  fail(match: RegExp, status = 500, times = 1): void {
    this.failures.push({ match, times, status });
  }

  /** The store's owner revokes the token: every call with it is 401 from now on. */
  revoke(): void {
    this.token = `revoked-${Math.random()}`;
  }

  /** Sends an order notification to every hook registered for it (BigCommerce's payload), and what each answered. */
  async notify(orderId: number, scope = 'store/order/updated'): Promise<{ status: number; body: string }[]> {
    const body = JSON.stringify({
      scope,
      store_id: '1001',
      data: { type: 'order', id: orderId },
      hash: 'x',
      created_at: Math.floor(testNow() / 1000),
      producer: `stores/${this.hash}`,
    });
    const answers = [];
    for (const hook of this.hooks.values()) if (hook.is_active && (hook.scope === scope || hook.scope === 'store/order/*')) answers.push(await this.deliver(hook, body));
    return answers;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /** Requests seen to a path (without the /stores/{hash}/ prefix) matching `match`. */
  requests(match: RegExp, method = 'GET'): Seen[] {
    return this.seen.filter((s) => s.method === method && match.test(s.path));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://store');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const prefix = `/stores/${this.hash}/`;
    const path = url.pathname.startsWith(prefix) ? url.pathname.slice(prefix.length) : url.pathname;
    const send = (status: number, body?: unknown, headers: Record<string, string> = {}) => {
      this.seen.push({ method: req.method ?? 'GET', path, query: url.searchParams, status, at: Date.now() });
      res.writeHead(status, { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers });
      res.end(body === undefined ? undefined : JSON.stringify(body));
    };
    if (!url.pathname.startsWith(prefix)) return send(404, [{ status: 404, message: 'The requested store was not found.' }]);
    if (req.headers['x-auth-token'] !== this.token) return send(401, [{ status: 401, message: 'You are not authorized to access this resource. Check the X-Auth-Token.' }]);
    const limited = this.rateLimits.find((r) => r.times > 0 && r.match.test(path));
    if (limited) {
      limited.times--;
      return send(429, [{ status: 429, message: 'Too many requests' }], { 'X-Rate-Limit-Time-Reset-Ms': String(limited.resetMs), 'X-Rate-Limit-Requests-Left': '0' });
    }
    const failing = this.failures.find((f) => f.times > 0 && f.match.test(path));
    if (failing) {
      failing.times--;
      return send(failing.status, [{ status: failing.status, message: 'Internal error at the fake store' }]);
    }
    const q = url.searchParams;
    let m: RegExpExecArray | null;
    if (req.method === 'GET' && path === 'v2/store') {
      return send(200, { id: this.hash, domain: 'shop.fake-outfitters.example', secure_url: 'https://shop.fake-outfitters.example', name: this.name, currency: 'USD' });
    }
    if (req.method === 'GET' && path === 'v2/orders/count') return send(200, { count: this.orders.size });
    if (req.method === 'GET' && path === 'v2/orders') {
      const since = q.get('min_date_modified') ? new Date(q.get('min_date_modified')!).getTime() : null;
      let list = [...this.orders.values()].filter((o) => since === null || new Date(o.date_modified).getTime() >= since);
      const sort = q.get('sort') ?? 'id:asc';
      list = sort.startsWith('date_modified')
        ? list.sort((a, b) => new Date(a.date_modified).getTime() - new Date(b.date_modified).getTime() || a.id - b.id)
        : list.sort((a, b) => a.id - b.id);
      const limit = Math.min(Number(q.get('limit') ?? 50), 250);
      const page = Number(q.get('page') ?? 1);
      const slice = list.slice((page - 1) * limit, page * limit);
      // BigCommerce answers an empty listing with 204 No Content.
      return slice.length ? send(200, slice) : send(204);
    }
    if (req.method === 'GET' && (m = /^v2\/orders\/(\d+)$/.exec(path))) {
      const order = this.orders.get(Number(m[1]));
      return order ? send(200, order) : send(404, [{ status: 404, message: 'The requested resource was not found.' }]);
    }
    if (req.method === 'GET' && (m = /^v2\/orders\/(\d+)\/products$/.exec(path))) {
      const id = Number(m[1]);
      if (!this.orders.has(id)) return send(404, [{ status: 404, message: 'The requested resource was not found.' }]);
      return send(200, [
        {
          id: id * 10 + 1,
          order_id: id,
          product_id: 1 + (id % 20),
          name: `Product ${1 + (id % 20)}`,
          sku: `SKU-${1 + (id % 20)}`,
          quantity: 1,
          price_inc_tax: '12.0000',
          total_inc_tax: '12.0000',
        },
        {
          id: id * 10 + 2,
          order_id: id,
          product_id: 2 + (id % 20),
          name: `Product ${2 + (id % 20)}`,
          sku: `SKU-${2 + (id % 20)}`,
          quantity: 2,
          price_inc_tax: '4.0000',
          total_inc_tax: '8.0000',
        },
      ]);
    }
    if (req.method === 'GET' && path === 'v3/customers') {
      const ids = (q.get('id:in') ?? '').split(',').filter(Boolean).map(Number);
      const data = ids.map((id) => ({ id, email: `member${id}@example.com`, first_name: 'Member', last_name: String(id) }));
      return send(200, { data, meta: { pagination: { total: data.length, count: data.length, per_page: 50, current_page: 1, total_pages: 1 } } });
    }
    if (req.method === 'GET' && path === 'v3/catalog/products') {
      const limit = Math.min(Number(q.get('limit') ?? 50), 250);
      const page = Number(q.get('page') ?? 1);
      const since = q.get('date_modified:min') ? new Date(q.get('date_modified:min')!).getTime() : null;
      const list = this.products.filter((p) => since === null || new Date(p.date_modified).getTime() >= since);
      const data = list.slice((page - 1) * limit, page * limit).map((p) => ({ ...p, custom_url: { url: `/products/${p.id}/` }, images: [] }));
      const totalPages = Math.max(1, Math.ceil(list.length / limit));
      return send(200, { data, meta: { pagination: { total: list.length, count: data.length, per_page: limit, current_page: page, total_pages: totalPages } } });
    }
    if (req.method === 'POST' && path === 'v3/hooks') {
      const body = JSON.parse(raw || '{}') as Partial<Hook>;
      const hook: Hook = { id: this.nextHookId++, scope: body.scope ?? '', destination: body.destination ?? '', is_active: body.is_active ?? true, headers: body.headers ?? {} };
      this.hooks.set(hook.id, hook);
      return send(200, { data: { ...hook, store_hash: this.hash, created_at: Math.floor(testNow() / 1000) }, meta: {} });
    }
    if (req.method === 'GET' && path === 'v3/hooks') return send(200, { data: [...this.hooks.values()], meta: {} });
    if (req.method === 'DELETE' && (m = /^v3\/hooks\/(\d+)$/.exec(path))) {
      const hook = this.hooks.get(Number(m[1]));
      if (!hook) return send(404, { status: 404, title: 'Hook not found', type: 'https://developer.bigcommerce.com/api-docs/getting-started/api-status-codes' });
      this.hooks.delete(hook.id);
      return send(200, { data: hook, meta: {} });
    }
    return send(404, [{ status: 404, message: `No route ${req.method} ${path} at the fake store.` }]);
  }
}

/** A started fake store; the caller closes it (t.teardown). */
export async function fakeBigCommerceStore(options: FakeStoreOptions = {}): Promise<FakeBigCommerceStore> {
  return new FakeBigCommerceStore(options).start();
}
