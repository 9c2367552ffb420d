/**
 * `npm run bench -- --bulk [--duration 10]`: bulk actions (POST /tickets/bulk) of 50 tickets each.
 * Prints a table; asserts nothing.
 *
 * One API process; 8 brands of 200 tickets, each with a webhook on ticket.updated (its deliveries
 * queue: no dispatcher runs). Each connection keeps to a brand of its own and alternates two
 * actions, so every bulk changes every ticket it names: close and resolve (the status, its audit
 * entries, counts and tag copies), assign to a member and back to nobody, two sets of tags. At
 * concurrency 1 and 4, in turns; bulks a second and tickets a second.
 */
import { randomBytes } from 'node:crypto';
import { adminDatabase, requestsPerSecond, sql, startTicketd, stop, withDatabase } from './server.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const TURNS = 3;
const BRANDS = 8;
const TICKETS_PER_BRAND = 200;
const PER_BULK = 50;

export async function runBulkBench(opts: { duration: number }): Promise<void> {
  const { adminUrl, cleanup } = await adminDatabase({ shared_buffers: '1GB', max_connections: '100' });
  const database = `ticketd_bench_bulk_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const api = await startTicketd('api', dbUrl, {
    TICKETD_DB_POOL_MAX: '20',
    TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000',
    TICKETD_RATE_LIMIT_PER_IP: '1000000000',
    TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true',
  });
  try {
    const { url } = api.info;
    const headers = { authorization: `Bearer ${api.info.bootstrap.apiKeys.live.key}`, 'content-type': 'application/json' };
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(`${url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string } & Record<string, unknown>;
    };
    const members = (await call('GET', '/v1/accounts/me/members')) as unknown as { data?: { id: string }[] } | { id: string }[];
    const memberId = (Array.isArray(members) ? members : members.data!)[0]!.id;
    log(`making ${BRANDS} brands of ${TICKETS_PER_BRAND} tickets…`);
    const ticketsOf = new Map<string, string[]>();
    for (let i = 0; i < BRANDS; i++) {
      const brand = (await call('POST', '/v1/brands', { name: `Bulk ${i}`, slug: `bulk-${i}-${randomBytes(3).toString('hex')}` })).id;
      await call('POST', `/v1/brands/${brand}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['ticket.updated'] });
      const ids: string[] = [];
      for (let n = 0; n < TICKETS_PER_BRAND; n++)
        ids.push((await call('POST', `/v1/brands/${brand}/tickets`, { title: `Printer ${n}`, customerEmail: `c${n}@bulk.example`, tags: ['printer'] })).id);
      ticketsOf.set(brand, ids);
    }
    const brands = [...ticketsOf.keys()];
    // Each bulk names the next 50 of the brand's tickets; the action alternates every 4 bulks, when the names come round again.
    const slice = (brand: string, n: number) => {
      const ids = ticketsOf.get(brand)!;
      const from = ((n - 1) % (TICKETS_PER_BRAND / PER_BULK)) * PER_BULK;
      return ids.slice(from, from + PER_BULK);
    };
    const second = (n: number) => Math.floor((n - 1) / (TICKETS_PER_BRAND / PER_BULK)) % 2 === 1;
    const scenarios: [string, (brand: string, n: number) => unknown][] = [
      ['close / resolve', (brand, n) => ({ action: second(n) ? 'resolve' : 'close', ticketIds: slice(brand, n) })],
      ['assign / unassign', (brand, n) => ({ action: 'assign', assigneeId: second(n) ? null : memberId, ticketIds: slice(brand, n) })],
      ['setTags', (brand, n) => ({ action: 'setTags', tags: second(n) ? ['printer'] : ['printer', 'urgent-care'], ticketIds: slice(brand, n) })],
    ];
    // The tag both sets name exists before: a new name goes the step-by-step way.
    await call('POST', `/v1/brands/${brands[0]}/tickets/bulk`, { action: 'setTags', tags: ['printer', 'urgent-care'], ticketIds: slice(brands[0]!, 1) });
    for (const brand of brands.slice(1)) await call('POST', `/v1/brands/${brand}/tags`, { name: 'urgent-care' });

    const measured = new Map<string, number[]>();
    for (let turn = 0; turn <= TURNS; turn++) {
      for (const [name, bodies] of turn % 2 ? [...scenarios].reverse() : scenarios) {
        for (const c of [1, 4]) {
          const load = { connections: c, seconds: opts.duration, brandIds: brands.slice(0, c), keyed: false };
          const rate = await requestsPerSecond(url, headers, load, (brand, n) => ({ method: 'POST', path: `/v1/brands/${brand}/tickets/bulk`, body: bodies(brand, n) }));
          log(`  ${name} c${c} (${turn ? `turn ${turn}` : 'warm-up'}): ${rate.toFixed(1)} bulks/s`);
          if (turn) measured.set(`${name} c${c}`, [...(measured.get(`${name} c${c}`) ?? []), rate]);
        }
      }
    }
    const rows = [...measured].map(([scenario, rates]) => ({
      scenario,
      'bulks/s (median)': Math.round(median(rates) * 10) / 10,
      'tickets/s': Math.round(median(rates) * PER_BULK),
      turns: rates.map((r) => r.toFixed(1)).join(' '),
    }));
    process.stdout.write(`\nBulk actions of ${PER_BULK} tickets, ${opts.duration} s each, medians of ${TURNS} turns:\n`);
    console.table(rows);
    process.stdout.write(`${JSON.stringify({ perBulk: PER_BULK, duration: opts.duration, rows })}\n`);
  } finally {
    await stop([api.child]);
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
  }
}
