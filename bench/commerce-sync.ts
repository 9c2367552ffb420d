/**
 * The first full sync of a connected store: a fake BigCommerce store on a loopback port
 * (test/helpers/bigcommerce-store.ts) with `orders` orders, connected through the API, read by one
 * `--role dispatcher` process until the sync is done. Measured: orders synced per second, from the
 * connect to the store's ACTIVE with every order written (each order is one listing row plus one
 * call for its lines, as against BigCommerce). Prints a table and returns the figures; asserts
 * nothing (timings are never a test). Run by `npm run bench -- --commerce`.
 */
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { fakeBigCommerceStore } from '../test/helpers/bigcommerce-store.js';
import { adminDatabase, post, sql, startTicketd, stop, withDatabase } from './server.js';

const log = (s: string) => process.stderr.write(`${s}\n`);

export interface CommerceSyncBenchResult {
  orders: number;
  seconds: number;
  ordersPerSecond: number;
}

export async function runCommerceSyncBench(orders = 10_000): Promise<CommerceSyncBenchResult> {
  const run = randomBytes(4).toString('hex');
  const store = await fakeBigCommerceStore({ orders, products: 100 });
  const { adminUrl, cleanup } = await adminDatabase({ max_connections: '100' });
  const database = `ticketd_bench_commerce_${run}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const env = { TICKETD_COMMERCE_BIGCOMMERCE_API_URL: store.url };
  const children: ChildProcess[] = [];
  try {
    const api = await startTicketd('api', dbUrl, env);
    children.push(api.child);
    const base: string = api.info.url;
    const key = (await post(base, null, '/v1/accounts', { email: `bench-commerce-${run}@example.com` })).apiKeys.live.key as string;
    const brand = await post(base, key, '/v1/brands', { name: 'Store desk' });
    log(`a dispatcher, and a store of ${orders} orders…`);
    children.push((await startTicketd('dispatcher', dbUrl, env)).child);
    const started = Date.now();
    const connected = await post(base, key, `/v1/brands/${brand.id}/ecommerce/stores/connect`, { platform: 'BIGCOMMERCE', accessToken: store.token, storeHash: store.hash });
    const deadline = started + 30 * 60_000;
    for (;;) {
      const [row] = await sql<{ status: string; n: string }>(
        dbUrl,
        'select status, (select count(*) from commerce_orders where store_id = $1) as n from commerce_stores where id = $1',
        [connected.id],
      );
      if (row?.status === 'ACTIVE' && Number(row.n) >= orders) break;
      if (row?.status === 'ERROR' || row?.status === 'DISCONNECTED') throw new Error(`the sync failed: ${row.status}`);
      if (Date.now() > deadline) throw new Error(`only ${row?.n} of ${orders} orders after 30 minutes`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (Date.now() - started) / 1000;
    const result = { orders, seconds: Number(seconds.toFixed(1)), ordersPerSecond: Math.round(orders / seconds) };
    console.log(`\nCommerce: the first full sync of a store of ${orders} orders (and 100 products), one dispatcher, a loopback store:`);
    console.table([{ orders, 'seconds to ACTIVE': result.seconds, 'orders/s': result.ordersPerSecond, 'store requests': store.seen.length }]);
    return result;
  } finally {
    await stop(children);
    await store.close();
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    await cleanup();
  }
}
