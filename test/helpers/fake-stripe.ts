import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

/**
 * A loopback server that answers the part of Stripe's API the stripe billing provider calls, the
 * way Stripe does (form-encoded requests, Stripe-shaped JSON, `{ error }` with 4xx, idempotency
 * keys replayed), so tests drive the real `stripe` client. A test plays the customer (completes a
 * checkout, saves a card) and Stripe's clock (renews a period), and builds signed notifications.
 */

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export const FAKE_STRIPE_KEY = 'sk_test_fake_0123456789';
export const FAKE_WEBHOOK_SECRET = 'whsec_fake_0123456789abcdef';

const MONTH_S = 30 * 86_400;

/** `a[b][0][c]=v` pairs into nested objects and arrays. */
export function parseForm(text: string): Obj {
  const root: Obj = {};
  for (const pair of text.split('&').filter(Boolean)) {
    const [rawKey, rawValue = ''] = pair.split('=');
    const key = decodeURIComponent(rawKey!.replace(/\+/g, ' '));
    const value = decodeURIComponent(rawValue.replace(/\+/g, ' '));
    const path = key.split(/\[|\]\[|\]/).filter((p) => p !== '');
    let node: Obj = root;
    path.forEach((part, i) => {
      if (i === path.length - 1) {
        node[part] = value;
        return;
      }
      node[part] ??= /^\d+$/.test(path[i + 1]!) ? [] : {};
      node = node[part];
    });
  }
  return root;
}

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

export interface FakeStripe {
  url: string;
  customers: Map<string, Obj>;
  sessions: Map<string, Obj>;
  subscriptions: Map<string, Obj>;
  paymentMethods: Map<string, Obj>;
  invoices: Map<string, Obj>;
  /** Every request received: method, path and parsed params. */
  requests: { method: string; path: string; params: Obj; idempotencyKey: string | null }[];
  /** The next `n` requests answer 500 (Stripe failing). */
  failNext(n?: number): void;
  /**
   * The next `count` requests to `method` `path…` wait for one another (at most `timeoutMs`), then
   * are answered in the order they came: concurrent callers, made to overlap.
   */
  meetAt(count: number, method: string, path: string, timeoutMs?: number): void;
  /** The customer pays the checkout: a subscription to its price, a paid invoice, the card saved as the default. */
  completeCheckout(sessionId: string): Obj;
  /** The customer saves a card (as the default when `makeDefault`). */
  attachCard(customer: string, card?: { brand?: string; last4?: string }, makeDefault?: boolean): Obj;
  /** Stripe renews the subscription: its next period, billed at its price. */
  renew(subscriptionId: string): Obj;
  /** A notification as Stripe sends it: the JSON body and its Stripe-Signature header, signed at `timestamp` (seconds). */
  event(type: string, object: Obj, options?: { id?: string; secret?: string; timestamp?: number }): { id: string; body: string; headers: Record<string, string> };
  close(): Promise<void>;
}

function error(res: ServerResponse, status: number, type: string, message: string, code?: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'request-id': id('req') });
  res.end(JSON.stringify({ error: { type, message, ...(code ? { code } : {}) } }));
}

export async function fakeStripe(options: { now?: () => number } = {}): Promise<FakeStripe> {
  const nowS = () => Math.floor((options.now ?? Date.now)() / 1000);
  const customers = new Map<string, Obj>();
  const sessions = new Map<string, Obj>();
  const subscriptions = new Map<string, Obj>();
  const setupIntents = new Map<string, Obj>();
  const paymentMethods = new Map<string, Obj>();
  const invoices = new Map<string, Obj>();
  const replies = new Map<string, { status: number; body: string }>();
  const requests: FakeStripe['requests'] = [];
  let failures = 0;
  let meeting: { count: number; method: string; path: string; arrivals: number; done: Promise<void>; open: () => void } | null = null;
  const signer = new Stripe(FAKE_STRIPE_KEY);

  const list = (data: Obj[], url: string, limit = 10) => ({ object: 'list', data: data.slice(0, limit), has_more: data.length > limit, url });
  const missing = (what: string, key: string) => ({ status: 404, error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such ${what}: '${key}'` } });

  function invoiceFor(sub: Obj, status = 'paid'): Obj {
    const item = sub.items.data[0];
    const price = item.price;
    const inv = {
      id: id('in'),
      object: 'invoice',
      customer: sub.customer,
      number: `FAKE-${String(invoices.size + 1).padStart(4, '0')}`,
      status,
      amount_due: price.unit_amount,
      amount_paid: status === 'paid' ? price.unit_amount : 0,
      currency: price.currency,
      created: nowS() + invoices.size,
      period_start: item.current_period_start,
      period_end: item.current_period_end,
      hosted_invoice_url: `https://invoice.stripe.test/i/${invoices.size + 1}`,
      invoice_pdf: `https://invoice.stripe.test/i/${invoices.size + 1}/pdf`,
      parent: { type: 'subscription_details', subscription_details: { subscription: sub.id, metadata: {} } },
      lines: {
        object: 'list',
        data: [{ id: id('il'), object: 'line_item', pricing: { type: 'price_details', price_details: { price: price.id, product: 'prod_fake' } } }],
        has_more: false,
      },
    };
    invoices.set(inv.id, inv);
    return inv;
  }

  const priceOf = (priceId: string) => {
    const amounts = /_(\d+)$/.exec(priceId);
    return { id: priceId, object: 'price', unit_amount: amounts ? Number(amounts[1]) : 1000, currency: 'usd', recurring: { interval: 'month' } };
  };

  /** One request's answer: { status, body } or { status, error }. */
  function answer(method: string, path: string, params: Obj): { status: number; body?: Obj; error?: Obj } {
    const parts = path.replace(/^\/v1\//, '').split('/');
    const [resource, key, action] = parts[0] === 'checkout' ? [`checkout/${parts[1]}`, parts[2], parts[3]] : parts;
    switch (`${method} ${resource}${key ? '/:id' : ''}${action ? `/${action}` : ''}`) {
      case 'POST customers': {
        const c = { id: id('cus'), object: 'customer', name: params.name ?? null, metadata: params.metadata ?? {}, invoice_settings: { default_payment_method: null } };
        customers.set(c.id, c);
        return { status: 200, body: c };
      }
      case 'GET customers/:id':
        return customers.has(key!) ? { status: 200, body: customers.get(key!)! } : missing('customer', key!);
      case 'POST customers/:id': {
        const c = customers.get(key!);
        if (!c) return missing('customer', key!);
        const wanted = params.invoice_settings?.default_payment_method;
        if (wanted !== undefined) {
          if (paymentMethods.get(wanted)?.customer !== c.id) return { status: 400, error: { type: 'invalid_request_error', message: `No such PaymentMethod: '${wanted}'` } };
          c.invoice_settings.default_payment_method = wanted;
        }
        return { status: 200, body: c };
      }
      case 'POST checkout/sessions': {
        // Without a customer (a sign-up), Stripe makes one from customer_email when the checkout is paid.
        if (params.customer !== undefined && !customers.has(params.customer)) return missing('customer', params.customer);
        if (params.customer === undefined && !params.customer_email) return { status: 400, error: { type: 'invalid_request_error', message: 'customer or customer_email' } };
        const sessionId = id('cs_test');
        const s = {
          id: sessionId,
          object: 'checkout.session',
          mode: params.mode,
          status: 'open',
          payment_status: 'unpaid',
          customer: params.customer ?? null,
          customer_email: params.customer_email ?? null,
          client_reference_id: params.client_reference_id ?? null,
          metadata: params.metadata ?? {},
          subscription: null,
          success_url: params.success_url,
          cancel_url: params.cancel_url,
          url: `https://checkout.stripe.test/c/pay/${sessionId}`,
          expires_at: nowS() + 86_400,
          line_items: params.line_items,
          subscription_data: params.subscription_data ?? {},
        };
        sessions.set(s.id, s);
        return { status: 200, body: s };
      }
      case 'GET checkout/sessions/:id':
        return sessions.has(key!) ? { status: 200, body: sessions.get(key!)! } : missing('checkout.session', key!);
      case 'GET subscriptions/:id':
        return subscriptions.has(key!) ? { status: 200, body: subscriptions.get(key!)! } : missing('subscription', key!);
      case 'POST subscriptions/:id': {
        const sub = subscriptions.get(key!);
        if (!sub) return missing('subscription', key!);
        if (sub.status === 'canceled')
          return { status: 400, error: { type: 'invalid_request_error', message: 'A canceled subscription can only update its cancellation_details and metadata.' } };
        if (params.cancel_at_period_end !== undefined) {
          sub.cancel_at_period_end = params.cancel_at_period_end === 'true';
          sub.canceled_at = sub.cancel_at_period_end ? nowS() : null;
        }
        const change = params.items?.[0];
        if (change?.price) {
          const item = sub.items.data.find((i: Obj) => i.id === change.id) ?? sub.items.data[0];
          item.price = priceOf(change.price);
          if (params.proration_behavior === 'always_invoice') invoiceFor(sub);
        }
        return { status: 200, body: sub };
      }
      case 'DELETE subscriptions/:id': {
        const sub = subscriptions.get(key!);
        if (!sub) return missing('subscription', key!);
        Object.assign(sub, { status: 'canceled', canceled_at: nowS(), ended_at: nowS() });
        return { status: 200, body: sub };
      }
      case 'POST setup_intents': {
        if (!customers.has(params.customer)) return missing('customer', params.customer);
        const si = { id: id('seti'), object: 'setup_intent', customer: params.customer, status: 'requires_payment_method', usage: params.usage ?? 'off_session' };
        setupIntents.set(si.id, { ...si, client_secret: `${si.id}_secret_${randomBytes(8).toString('hex')}` });
        return { status: 200, body: setupIntents.get(si.id)! };
      }
      case 'GET payment_methods': {
        const own = [...paymentMethods.values()].filter((pm) => pm.customer === params.customer && pm.type === (params.type ?? 'card'));
        return { status: 200, body: list(own, '/v1/payment_methods', Number(params.limit ?? 10)) };
      }
      case 'GET payment_methods/:id':
        return paymentMethods.has(key!) ? { status: 200, body: paymentMethods.get(key!)! } : missing('payment_method', key!);
      case 'POST payment_methods/:id/detach': {
        const pm = paymentMethods.get(key!);
        if (!pm?.customer) return { status: 400, error: { type: 'invalid_request_error', message: 'The payment method you provided is not attached to a customer.' } };
        const owner = customers.get(pm.customer);
        if (owner && owner.invoice_settings.default_payment_method === pm.id) owner.invoice_settings.default_payment_method = null;
        pm.customer = null;
        return { status: 200, body: pm };
      }
      case 'GET invoices': {
        const own = [...invoices.values()].filter((i) => i.customer === params.customer).sort((a, b) => b.created - a.created);
        return { status: 200, body: list(own, '/v1/invoices', Number(params.limit ?? 10)) };
      }
      default:
        return { status: 404, error: { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${path})` } };
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? '/', 'http://fake');
    const params = parseForm(req.method === 'GET' || req.method === 'DELETE' ? url.search.slice(1) : Buffer.concat(chunks).toString('utf8'));
    const idempotencyKey = (req.headers['idempotency-key'] as string | undefined) ?? null;
    requests.push({ method: req.method ?? 'GET', path: url.pathname, params, idempotencyKey });
    if (req.headers.authorization !== `Bearer ${FAKE_STRIPE_KEY}`) return error(res, 401, 'invalid_request_error', 'Invalid API Key provided');
    if (failures > 0) {
      failures--;
      return error(res, 500, 'api_error', 'Something went wrong on our end');
    }
    if (meeting && req.method === meeting.method && url.pathname.startsWith(meeting.path)) {
      const m = meeting;
      if (++m.arrivals >= m.count) m.open();
      await m.done;
    }
    const replayKey = idempotencyKey && req.method === 'POST' ? `${url.pathname} ${idempotencyKey}` : null;
    const replayed = replayKey ? replies.get(replayKey) : undefined;
    if (replayed) {
      res.writeHead(replayed.status, { 'content-type': 'application/json', 'idempotent-replayed': 'true' });
      return void res.end(replayed.body);
    }
    const out = answer(req.method ?? 'GET', url.pathname, params);
    const body = JSON.stringify(out.error ? { error: out.error } : out.body);
    if (replayKey) replies.set(replayKey, { status: out.status, body });
    res.writeHead(out.status, { 'content-type': 'application/json', 'request-id': id('req') });
    res.end(body);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => error(res, 500, 'api_error', err.message));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const fake: FakeStripe = {
    url: `http://127.0.0.1:${port}`,
    customers,
    sessions,
    subscriptions,
    paymentMethods,
    invoices,
    requests,
    failNext(n = 1) {
      failures = n;
    },
    meetAt(count, method, path, timeoutMs = 3000) {
      let release = () => undefined as void;
      const done = new Promise<void>((resolve) => (release = resolve));
      const timer = setTimeout(() => m.open(), timeoutMs);
      const m = {
        count,
        method,
        path,
        arrivals: 0,
        done,
        open: () => {
          clearTimeout(timer);
          if (meeting === m) meeting = null;
          release();
        },
      };
      meeting = m;
    },
    attachCard(customer, card = {}, makeDefault = true) {
      const pm = {
        id: id('pm'),
        object: 'payment_method',
        type: 'card',
        customer,
        card: { brand: card.brand ?? 'visa', last4: card.last4 ?? '4242', exp_month: 12, exp_year: 2030 },
      };
      paymentMethods.set(pm.id, pm);
      if (makeDefault) customers.get(customer)!.invoice_settings.default_payment_method = pm.id;
      return pm;
    },
    completeCheckout(sessionId) {
      const session = sessions.get(sessionId)!;
      if (!session.customer) {
        const c = { id: id('cus'), object: 'customer', name: null, email: session.customer_email, metadata: {}, invoice_settings: { default_payment_method: null } };
        customers.set(c.id, c);
        session.customer = c.id;
      }
      const start = nowS();
      const sub = {
        id: id('sub'),
        object: 'subscription',
        customer: session.customer,
        status: 'active',
        cancel_at_period_end: false,
        canceled_at: null,
        ended_at: null,
        start_date: start,
        metadata: session.subscription_data.metadata ?? {},
        items: {
          object: 'list',
          data: [{ id: id('si'), object: 'subscription_item', price: priceOf(session.line_items[0].price), current_period_start: start, current_period_end: start + MONTH_S }],
          has_more: false,
        },
      };
      subscriptions.set(sub.id, sub);
      fake.attachCard(session.customer);
      invoiceFor(sub);
      Object.assign(session, { status: 'complete', payment_status: 'paid', subscription: sub.id });
      return sub;
    },
    renew(subscriptionId) {
      const sub = subscriptions.get(subscriptionId)!;
      const item = sub.items.data[0];
      if (sub.cancel_at_period_end) {
        Object.assign(sub, { status: 'canceled', ended_at: item.current_period_end });
        return sub;
      }
      item.current_period_start = item.current_period_end;
      item.current_period_end += MONTH_S;
      invoiceFor(sub);
      return sub;
    },
    event(type, object, opts = {}) {
      const eventId = opts.id ?? id('evt');
      const body = JSON.stringify({
        id: eventId,
        object: 'event',
        type,
        api_version: '2026-10-28.endive',
        created: nowS(),
        livemode: false,
        data: { object: structuredClone(object) },
      });
      const signature = signer.webhooks.generateTestHeaderString({ payload: body, secret: opts.secret ?? FAKE_WEBHOOK_SECRET, timestamp: opts.timestamp ?? nowS() });
      return { id: eventId, body, headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signature } };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return fake;
}
