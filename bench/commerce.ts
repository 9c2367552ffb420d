/**
 * `npm run bench -- --commerce [--orders 100000] [--sync-orders 10000]`: what a brand's orders cost the pages that show
 * them. Prints tables; asserts nothing (timings are never a test).
 *
 * Every ticket page reads `…/ecommerce/orders/by-ticket/{ticketId}` and every contact page
 * `…/ecommerce/orders/by-customer/{contactId}`, whether or not the brand has a store. Measured, one
 * request at a time on one API process, in turns (medians shown): both routes in a brand with a
 * store of N orders (seeded by SQL, as the sync would leave them; the ticket linked to three of its
 * customer's orders), and in a brand with no store, next to a trivial authenticated read (GET the
 * brand). Goals: within 1.5x of the trivial read with a store, within 1.1x without.
 *
 * First, the first full sync of a store of `--sync-orders` orders (10,000; bench/commerce-sync.ts).
 */
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { runCommerceSyncBench } from './commerce-sync.js';
import { readLatency } from './floor.js';
import { adminDatabase, post, sql, startTicketd, stop, withDatabase } from './server.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const round = (x: number) => Math.round(x * 100) / 100;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const TURNS = 3;
/** Customers the orders are spread over (each has orders / CUSTOMERS of them). */
const CUSTOMERS = 20_000;

export async function runCommerceBench(opts: { orders: number; syncOrders: number }): Promise<void> {
  await runCommerceSyncBench(opts.syncOrders);
  const { adminUrl, cleanup } = await adminDatabase({ shared_buffers: '1GB', max_connections: '100' });
  const database = `ticketd_bench_commerce_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const children: ChildProcess[] = [];
  try {
    const api = await startTicketd('api', dbUrl, { TICKETD_DB_POOL_MAX: '20', TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000', TICKETD_RATE_LIMIT_PER_IP: '1000000000' });
    children.push(api.child);
    const { url } = api.info;
    const headers = { authorization: `Bearer ${api.info.bootstrap.apiKeys.live.key}`, 'content-type': 'application/json' };
    const accountId: string = api.info.bootstrap.account.id;
    const shop: string = api.info.bootstrap.brand.id;
    const key: string = api.info.bootstrap.apiKeys.live.key;
    const plain: string = (await post(url, key, '/v1/brands', { name: 'No store', slug: `no-store-${randomBytes(3).toString('hex')}` })).id;

    log(`seeding a store of ${opts.orders.toLocaleString('en')} orders…`);
    const started = performance.now();
    const storeId = `store_bench${randomBytes(4).toString('hex')}`;
    await sql(
      dbUrl,
      `INSERT INTO commerce_stores (account_id, id, livemode, brand_id, platform, store_hash, name, store_url, access_token)
       VALUES ($1, $2, true, $3, 'BIGCOMMERCE', 'benchhash', 'Bench store', 'https://bench-store.example', 'sealed-placeholder')`,
      [accountId, storeId, shop],
    );
    const items = JSON.stringify([
      { id: 'i1', platformItemId: '1', productId: null, sku: 'MUG-1', name: 'Blue mug', quantity: 2, price: '5.0000', total: '10.0000' },
      { id: 'i2', platformItemId: '2', productId: null, sku: 'CAP-1', name: 'Cap', quantity: 1, price: '2.5000', total: '2.5000' },
    ]);
    await sql(
      dbUrl,
      `INSERT INTO commerce_orders (account_id, id, livemode, brand_id, store_id, platform_order_id, order_number, customer_email, customer_name,
         status, platform_status, currency, subtotal, total, items, platform_created_at, platform_updated_at)
       SELECT $1, 'ord_bench' || lpad(g::text, 12, '0'), true, $2, $3, g::text, (100000 + g)::text,
         'customer' || (g % ${CUSTOMERS}) || '@shop.example', 'Customer ' || (g % ${CUSTOMERS}), 'COMPLETED', 'Completed', 'USD', 12.5, 12.5, $4::jsonb,
         now() - g * interval '1 minute', now() - g * interval '1 minute'
       FROM generate_series(1, $5::int) g`,
      [accountId, shop, storeId, items, opts.orders],
    );
    await sql(dbUrl, 'VACUUM (ANALYZE) commerce_orders');
    log(`seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`);

    // The customer's ticket, linked by hand to three of their orders; the same kind of ticket in the brand without a store.
    const ticket = await post(url, key, `/v1/brands/${shop}/tickets`, { title: 'Where is my order?', customerEmail: 'customer1@shop.example' });
    const theirs = await sql<{ id: string }>(dbUrl, `SELECT id FROM commerce_orders WHERE customer_email = 'customer1@shop.example' ORDER BY id LIMIT 3`);
    for (const o of theirs) await post(url, key, `/v1/brands/${shop}/ecommerce/orders/${o.id}/link`, { ticketId: ticket.id });
    const plainTicket = await post(url, key, `/v1/brands/${plain}/tickets`, { title: 'Where is my order?', customerEmail: 'customer1@shop.example' });

    const routes = {
      'trivial read (GET the brand)': `${url}/v1/brands/${shop}`,
      'store: by-ticket': `${url}/v1/brands/${shop}/ecommerce/orders/by-ticket/${ticket.id}`,
      'store: by-customer': `${url}/v1/brands/${shop}/ecommerce/orders/by-customer/${ticket.customer.id}`,
      'no store: by-ticket': `${url}/v1/brands/${plain}/ecommerce/orders/by-ticket/${plainTicket.id}`,
      'no store: by-customer': `${url}/v1/brands/${plain}/ecommerce/orders/by-customer/${plainTicket.customer.id}`,
    };
    const names = Object.keys(routes) as (keyof typeof routes)[];
    const measured = new Map(names.map((n) => [n, [] as { p50: number; p99: number }[]]));
    for (let turn = 0; turn < TURNS; turn++) {
      for (const name of turn % 2 ? [...names].reverse() : names) measured.get(name)!.push(await readLatency(routes[name], headers));
      log(`  turn ${turn + 1} of ${TURNS} done`);
    }
    const trivial = measured.get(names[0]!)!;
    const base = { p50: median(trivial.map((x) => x.p50)), p99: median(trivial.map((x) => x.p99)) };
    const rows = names.map((name) => {
      const xs = measured.get(name)!;
      const p50 = median(xs.map((x) => x.p50));
      const p99 = median(xs.map((x) => x.p99));
      return { route: name, 'p50 ms': p50, 'p99 ms': p99, 'p50 / trivial': round(p50 / base.p50), 'p99 / trivial': round(p99 / base.p99) };
    });

    const out = process.stdout;
    out.write(`\nOrders beside tickets, a store of ${opts.orders.toLocaleString('en')} orders (${CUSTOMERS.toLocaleString('en')} customers), ${new Date().toISOString()}\n`);
    out.write(`One request at a time, medians of ${TURNS} turns of 300; goals: within 1.5x of the trivial read with a store, 1.1x without:\n`);
    console.table(rows);
    out.write(`${JSON.stringify({ orders: opts.orders, rows })}\n`);
  } finally {
    await stop(children);
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    await cleanup();
  }
}
