/**
 * `npm run bench -- --sla [--tickets 1000000]`: what service levels cost. Prints tables; asserts nothing.
 *
 *  - Ticket create with a dueAt computed (brands with an SLA in business hours) and without (brands
 *    without one), on one API process, in turns; the cost is the median of the turns' ratios.
 *  - The brand list at N tickets (each with the dueAt of a 24/7 SLA): sort=dueAt, first page and a
 *    deep page by cursor, next to sort=createdAt; and overdue=true.
 *  - The dispatcher's overdue scan with 10,000 tickets past their dueAt not yet announced (the
 *    statement of domains/tickets/overdue.ts, run repeatedly), then the time one `--role
 *    dispatcher` process takes to announce them all.
 */
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { percentile, readLatency } from './floor.js';
import { seed } from './seed.js';
import { adminDatabase, requestsPerSecond, sql, startTicketd, stop, withDatabase } from './server.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const round = (x: number) => Math.round(x * 100) / 100;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const TURNS = 5;
const LIST_TURNS = 3;
const BRANDS = 16;
const OVERDUE = 10_000;
const BUSINESS_HOURS = { start: '09:00', end: '17:00', days: [1, 2, 3, 4, 5], timezone: 'Europe/Paris', holidays: ['2026-12-25', '2027-01-01'] };

/** Creates per second over `seconds`, `connections` at once, each connection keeping to one of `brandIds`. */
async function createsPerSecond(url: string, headers: Record<string, string>, brandIds: readonly string[], connections: number, seconds: number): Promise<number> {
  const load = { connections, seconds, brandIds, keyed: true };
  return Math.round(
    await requestsPerSecond(url, headers, load, (brand) => {
      const n = Math.floor(Math.random() * 200);
      const body = { title: `Printer ${n} is on fire`, customerEmail: `customer${n}@sla.example`, priority: ['urgent', 'high', 'normal', 'low'][n % 4] };
      return { method: 'POST', path: `/v1/brands/${brand}/tickets`, body };
    }),
  );
}

export async function runServiceLevelBench(opts: { tickets: number; duration: number }): Promise<void> {
  const { adminUrl, cleanup } = await adminDatabase({ shared_buffers: '2GB', work_mem: '16MB', maintenance_work_mem: '512MB', max_wal_size: '8GB', max_connections: '200' });
  const database = `ticketd_bench_sla_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const children: ChildProcess[] = [];
  try {
    // The API alone: the overdue scan is measured before any dispatcher announces what it finds.
    const api = await startTicketd('api', dbUrl, { TICKETD_DB_POOL_MAX: '20', TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000', TICKETD_RATE_LIMIT_PER_IP: '1000000000' });
    children.push(api.child);
    const { url } = api.info;
    const headers = { authorization: `Bearer ${api.info.bootstrap.apiKeys.live.key}`, 'content-type': 'application/json' };
    const brandId: string = api.info.bootstrap.brand.id;
    const accountId: string = api.info.bootstrap.account.id;

    log(`seeding ${opts.tickets.toLocaleString('en')} tickets…`);
    const seeded = await seed(dbUrl, { accountId, brandId, tickets: opts.tickets, log });
    log(`seeded in ${seeded.seconds.toFixed(1)} s`);

    // ---- lists ----
    const base = `${url}/v1/brands/${brandId}/tickets`;
    const depth = Math.min(100_000, seeded.liveTickets - 200);
    const deepCursor = async (query: string) => {
      let cursor: string | null = null;
      for (let seen = 0; seen < depth; seen += 100) {
        const res = await fetch(`${base}?${query}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { headers });
        cursor = ((await res.json()) as { pagination: { nextCursor: string | null } }).pagination.nextCursor;
        if (!cursor) break;
      }
      return cursor;
    };
    // In turns (the order alternating), the medians shown: drift in the machine's speed falls on every list alike.
    const queries = ['sort=createdAt', 'sort=dueAt', 'sort=dueAt&order=asc'] as const;
    const cursors = new Map<string, string | null>();
    for (const query of queries) cursors.set(query, await deepCursor(query));
    const measured = new Map<string, { first: { p50: number; p99: number }[]; deep: { p50: number; p99: number }[] }>(queries.map((q) => [q, { first: [], deep: [] }]));
    for (let turn = 0; turn < LIST_TURNS; turn++) {
      for (const query of turn % 2 ? [...queries].reverse() : queries) {
        const cursor = cursors.get(query);
        measured.get(query)!.first.push(await readLatency(`${base}?${query}`, headers));
        if (cursor) measured.get(query)!.deep.push(await readLatency(`${base}?${query}&cursor=${encodeURIComponent(cursor)}`, headers));
      }
    }
    const mid = (xs: { p50: number; p99: number }[], key: 'p50' | 'p99') => (xs.length ? median(xs.map((x) => x[key])) : '-');
    const lists: Record<string, string | number>[] = queries.map((query) => {
      const { first, deep } = measured.get(query)!;
      const row = { list: query, 'first p50 ms': mid(first, 'p50'), 'first p99 ms': mid(first, 'p99'), 'deep p50 ms': mid(deep, 'p50'), 'deep p99 ms': mid(deep, 'p99') };
      log(`  ${query}: first ${row['first p50 ms']}/${row['first p99 ms']} ms, page ${Math.floor(depth / 50) + 1} ${row['deep p50 ms']}/${row['deep p99 ms']} ms`);
      return row;
    });
    const overdue = await readLatency(`${base}?overdue=true&sort=dueAt`, headers);
    lists.push({ list: 'overdue=true&sort=dueAt', 'first p50 ms': overdue.p50, 'first p99 ms': overdue.p99, 'deep p50 ms': '-', 'deep p99 ms': '-' });

    // ---- the overdue scan, with OVERDUE deadlines passed and not announced ----
    await sql(
      dbUrl,
      `UPDATE tickets SET overdue_at = NULL WHERE (account_id, id) IN (
         SELECT account_id, id FROM tickets WHERE overdue_at IS NOT NULL ORDER BY due_at DESC LIMIT ${OVERDUE})`,
    );
    await sql(dbUrl, 'VACUUM (ANALYZE) tickets');
    const client = new pg.Client({ connectionString: dbUrl });
    await client.connect();
    const scanTimes: number[] = [];
    try {
      for (let i = -20; i < 500; i++) {
        const started = performance.now();
        await client.query(
          `select t.account_id, t.livemode, t.id from tickets t
           where t.due_at <= $1 and t.due_at is not null and t.overdue_at is null and t.resolved_at is null and t.deleted_at is null and not t.is_spam
           order by t.due_at limit 500`,
          [new Date()],
        );
        if (i >= 0) scanTimes.push(performance.now() - started);
      }
    } finally {
      await client.end();
    }
    scanTimes.sort((a, b) => a - b);
    const scan = { p50: round(percentile(scanTimes, 50)), p99: round(percentile(scanTimes, 99)) };
    log(`  overdue scan (500 of ${OVERDUE.toLocaleString('en')}): p50 ${scan.p50} ms, p99 ${scan.p99} ms`);

    const announceStarted = performance.now();
    const dispatcher = await startTicketd('dispatcher', dbUrl, { TICKETD_DB_POOL_MAX: '10' });
    children.push(dispatcher.child);
    const left = async () =>
      Number(
        (
          await sql<{ n: string }>(
            dbUrl,
            'SELECT count(*) AS n FROM tickets WHERE due_at <= now() AND overdue_at IS NULL AND resolved_at IS NULL AND deleted_at IS NULL AND NOT is_spam',
          )
        )[0]!.n,
      );
    while ((await left()) > 0) await new Promise((r) => setTimeout(r, 200));
    const announceSeconds = round((performance.now() - announceStarted) / 1000);
    log(`  ${OVERDUE.toLocaleString('en')} overdue tickets announced by one dispatcher in ${announceSeconds} s (from its start)`);
    await stop([dispatcher.child]);
    children.pop();

    // ---- create with and without a computed dueAt ----
    const post = async (p: string, body: unknown) => {
      const res = await fetch(`${url}${p}`, { method: 'POST', headers, body: JSON.stringify(body) });
      if (res.status !== 201) throw new Error(`POST ${p}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string };
    };
    const sla = {
      slaEnabled: true,
      slaByPriority: { urgent: 4, high: 24, normal: 72, low: 168 },
      slaBusinessHoursOnly: true,
      slaBusinessHours: BUSINESS_HOURS,
      slaPauseOnPending: true,
    };
    const brands = { plain: [] as string[], sla: [] as string[] };
    for (let i = 0; i < BRANDS; i++) {
      brands.plain.push((await post('/v1/brands', { name: `Plain ${i}`, slug: `plain-${i}-${randomBytes(3).toString('hex')}` })).id);
      brands.sla.push((await post('/v1/brands', { name: `SLA ${i}`, slug: `sla-${i}-${randomBytes(3).toString('hex')}`, ...sla })).id);
    }
    const rows: Record<string, string | number>[] = [];
    const ratios: Record<string, number[]> = {};
    for (let turn = 0; turn <= TURNS; turn++) {
      for (const [c, b] of [
        [1, 1],
        [16, 1],
        [16, 16],
      ] as const) {
        const scenario = `create c${c} b${b}`;
        const perSecond: Record<string, number> = {};
        for (const kind of turn % 2 ? (['sla', 'plain'] as const) : (['plain', 'sla'] as const)) {
          perSecond[kind] = await createsPerSecond(url, headers, brands[kind].slice(0, b), c, opts.duration);
        }
        log(`  ${scenario} (${turn ? `turn ${turn}` : 'warm-up'}): ${perSecond.plain}/s without an SLA, ${perSecond.sla}/s with`);
        if (!turn) continue;
        rows.push({ scenario, turn, 'without SLA /s': perSecond.plain!, 'with SLA /s': perSecond.sla! });
        (ratios[scenario] ??= []).push(perSecond.sla! / perSecond.plain!);
      }
    }
    const cost = Object.fromEntries(Object.entries(ratios).map(([k, v]) => [k, Math.round((1 - median(v)) * 1000) / 10]));

    const out = process.stdout;
    out.write(`\nService levels, ${opts.tickets.toLocaleString('en')} tickets (${seeded.liveTickets.toLocaleString('en')} live), ${new Date().toISOString()}\n`);
    out.write(`\nThe brand list, one request at a time, medians of ${LIST_TURNS} turns (deep: page ${Math.floor(depth / 50) + 1} by cursor):\n`);
    console.table(lists);
    const ratio = (a: number | string, b: number | string) => (typeof a === 'number' && typeof b === 'number' ? round(a / b) : '-');
    const [created, due] = [lists[0]!, lists[1]!];
    out.write(
      `sort=dueAt / sort=createdAt (target: within 1.2x): first page p50 ${ratio(due['first p50 ms']!, created['first p50 ms']!)}x, p99 ${ratio(due['first p99 ms']!, created['first p99 ms']!)}x; deep page p50 ${ratio(due['deep p50 ms']!, created['deep p50 ms']!)}x, p99 ${ratio(due['deep p99 ms']!, created['deep p99 ms']!)}x\n`,
    );
    out.write(
      `\nThe dispatcher's overdue scan, ${OVERDUE.toLocaleString('en')} deadlines passed and not announced: p50 ${scan.p50} ms, p99 ${scan.p99} ms (500 rows a statement)\n`,
    );
    out.write(`All ${OVERDUE.toLocaleString('en')} announced (audit entry each, no webhook subscribed) by one dispatcher in ${announceSeconds} s from its start\n`);
    out.write(`\nTicket create with a dueAt computed in business hours (SLA brands) and without (plain brands), ${opts.duration} s each, in turns:\n`);
    console.table(rows);
    out.write(`cost of computing dueAt (target: within 5%), fewer creates/s: ${JSON.stringify(cost)}\n`);
  } finally {
    await stop(children);
    await cleanup();
  }
}
