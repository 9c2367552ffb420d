/**
 * `npm run bench -- --rules [--tickets 1000000]`: what a brand's rules cost. Prints tables; asserts nothing.
 *
 *  - Ticket create and ticket update in brands with 50 enabled triggers, of which 5 match every
 *    create and update, next to brands with none, on one API process, at concurrency 1 and 16 (16
 *    brands of each kind), in turns; the cost is the median of the turns' ratios.
 *  - GET …/views/counts for 20 views of the brand holding the N tickets (statuses alone, and
 *    priority, assignee, tag, search and date filters) next to a trivial authenticated read (GET
 *    the brand), one request at a time, in turns, with a dispatcher running (it rolls the count
 *    changes up, as in production); goal: within 3x at p50. `BENCH_ONLY=views` measures these alone,
 *    `BENCH_ONLY=triggers` the creates and updates alone.
 */
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { readLatency } from './floor.js';
import { seed } from './seed.js';
import { adminDatabase, requestsPerSecond, sql, startTicketd, stop, withDatabase } from './server.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const TURNS = 5;
const BRANDS = 16;
const TRIGGERS = 50;
const MATCHING = 5;
const TICKETS_PER_BRAND = 200;
const PRIORITIES = ['urgent', 'high', 'normal', 'low'];
const VIEW_TURNS = 5;

/** 20 views a team keeps: queues by status, by priority and owner, by tag, by words, by age. */
function views(tagId: string): Record<string, unknown>[] {
  const filters: Record<string, unknown>[] = [
    { status: 'open' },
    { status: 'pending' },
    { status: 'active' },
    { status: 'resolved,closed' },
    { status: 'all' },
    { status: 'open', priority: 'urgent' },
    { status: 'open', priority: 'high' },
    { status: 'active', assigneeId: 'unassigned' },
    { status: 'active', priority: 'urgent', assigneeId: 'unassigned' },
    { status: 'pending', priority: 'low' },
    { tagIds: tagId },
    { status: 'open', tagIds: tagId },
    { search: 'printer' },
    { status: 'open', search: 'invoice' },
    { createdAfter: '2026-01-01T00:00:00Z' },
    { status: 'active', createdBefore: '2025-06-01T00:00:00Z' },
    { priority: 'normal' },
    { status: 'closed', priority: 'urgent' },
    { hasAttachments: true },
    { isSpam: true },
  ];
  return filters.map((f, i) => ({ name: `View ${i}`, visibility: 'brand', filters: f }));
}

/**
 * The rules of a busy brand: 50 triggers on ticket.created and ticket.updated, in position order;
 * the first 45 test text no ticket has, the last 5 match every create and update (a priority set
 * or changed): one tags the ticket, the others set what it already has (a firing all the same,
 * with its audit entry and count).
 */
function triggers(): Record<string, unknown>[] {
  const rules: Record<string, unknown>[] = [];
  for (let i = 0; i < TRIGGERS - MATCHING; i++) {
    rules.push({
      name: `Never ${i}`,
      on: ['ticket.created', 'ticket.updated'],
      conditions: {
        all: [{ field: 'title', operator: 'contains', value: `no ticket says ${i}` }],
        any: [{ field: 'customerDomain', operator: 'is', value: `nowhere-${i}.example` }],
      },
      actions: [{ type: 'set_priority', value: 'low' }],
    });
  }
  const matching: [Record<string, unknown>, Record<string, unknown>][] = [
    [
      { field: 'customerDomain', operator: 'ends_with', value: '.example' },
      { type: 'add_tags', value: ['customer'] },
    ],
    [
      { field: 'priority', operator: 'in', value: ['urgent', 'high'] },
      { type: 'set_status', value: 'open' },
    ],
    [
      { field: 'priority', operator: 'changed' },
      { type: 'set_category', value: null },
    ],
    [
      { field: 'status', operator: 'is', value: 'open' },
      { type: 'remove_tags', value: ['cold'] },
    ],
    [
      { field: 'title', operator: 'contains', value: 'printer' },
      { type: 'assign', value: null },
    ],
  ];
  matching.forEach(([condition, action], i) => rules.push({ name: `Match ${i}`, on: ['ticket.created', 'ticket.updated'], conditions: { all: [condition] }, actions: [action] }));
  return rules;
}

type Brands = { plain: string[]; rules: string[] };

export async function runRulesBench(opts: { tickets: number; duration: number }): Promise<void> {
  const { adminUrl, cleanup } = await adminDatabase({ shared_buffers: '2GB', work_mem: '16MB', maintenance_work_mem: '512MB', max_wal_size: '8GB', max_connections: '200' });
  const database = `ticketd_bench_rules_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const children: ChildProcess[] = [];
  try {
    const api = await startTicketd('api', dbUrl, { TICKETD_DB_POOL_MAX: '20', TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000', TICKETD_RATE_LIMIT_PER_IP: '1000000000' });
    children.push(api.child);
    const { url } = api.info;
    const headers = { authorization: `Bearer ${api.info.bootstrap.apiKeys.live.key}`, 'content-type': 'application/json' };
    log(`seeding ${opts.tickets.toLocaleString('en')} tickets…`);
    const seeded = await seed(dbUrl, { accountId: api.info.bootstrap.account.id, brandId: api.info.bootstrap.brand.id, tickets: opts.tickets, log });
    log(`seeded in ${seeded.seconds.toFixed(1)} s`);

    const call = async (method: string, p: string, body: unknown) => {
      const res = await fetch(`${url}${p}`, { method, headers, body: JSON.stringify(body) });
      if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string };
    };
    // BENCH_ONLY=views: the view counts alone (the seed, then the counts).
    const viewsOnly = process.env.BENCH_ONLY === 'views';
    const rows: Record<string, string | number>[] = [];
    let cost: Record<string, string> = {};
    if (!viewsOnly) {
      const brands: Brands = { plain: [], rules: [] };
      for (let i = 0; i < BRANDS; i++) {
        for (const kind of ['plain', 'rules'] as const)
          brands[kind].push((await call('POST', '/v1/brands', { name: `${kind} ${i}`, slug: `${kind}-${i}-${randomBytes(3).toString('hex')}` })).id);
        for (const rule of triggers()) await call('POST', `/v1/brands/${brands.rules[i]}/triggers`, rule);
      }
      // Tickets to update: every brand's own, made through the API.
      const ticketsOf = new Map<string, string[]>();
      for (const brand of [...brands.plain, ...brands.rules]) {
        const ids: string[] = [];
        for (let n = 0; n < TICKETS_PER_BRAND; n++)
          ids.push((await call('POST', `/v1/brands/${brand}/tickets`, { title: `Printer ${n}`, customerEmail: `c${n}@rules.example` })).id);
        ticketsOf.set(brand, ids);
      }
      const create = (brand: string, n: number) => ({
        method: 'POST' as const,
        path: `/v1/brands/${brand}/tickets`,
        body: { title: `Printer ${n % 200} is on fire`, customerEmail: `customer${n % 200}@rules.example`, priority: PRIORITIES[n % 4] },
      });
      const update = (brand: string, n: number) => {
        const ids = ticketsOf.get(brand)!;
        return { method: 'PATCH' as const, path: `/v1/brands/${brand}/tickets/${ids[n % ids.length]}`, body: { priority: PRIORITIES[n % 4] } };
      };

      const ratios: Record<string, number[]> = {};
      for (let turn = 0; turn <= TURNS; turn++) {
        for (const [op, request] of [
          ['create', create],
          ['update', update],
        ] as const) {
          for (const c of [1, 16]) {
            const scenario = `${op} c${c}`;
            const rate: Record<string, number> = {};
            for (const kind of turn % 2 ? (['rules', 'plain'] as const) : (['plain', 'rules'] as const)) {
              const load = { connections: c, seconds: opts.duration, brandIds: brands[kind].slice(0, c === 1 ? 1 : BRANDS), keyed: true };
              rate[kind] = Math.round(await requestsPerSecond(url, headers, load, (brand) => request(brand, Math.floor(Math.random() * 1_000_000))));
            }
            log(`  ${scenario} (${turn ? `turn ${turn}` : 'warm-up'}): ${rate.plain}/s without rules, ${rate.rules}/s with 50 (5 matching)`);
            if (!turn) continue;
            rows.push({ scenario, turn, 'no rules /s': rate.plain!, '50 triggers /s': rate.rules! });
            (ratios[scenario] ??= []).push(rate.rules! / rate.plain!);
          }
        }
      }
      cost = Object.fromEntries(Object.entries(ratios).map(([k, v]) => [k, `${Math.round((1 - median(v)) * 1000) / 10}%`]));
    }

    if (process.env.BENCH_ONLY === 'triggers') {
      console.table(rows);
      process.stdout.write(`cost of the triggers (target: within 10%), fewer requests/s: ${JSON.stringify(cost)}\n`);
      return;
    }
    // ---- view counts at N tickets ----
    // As in production, a dispatcher rolls the count changes the writes appended into the kept counts.
    const dispatcher = await startTicketd('dispatcher', dbUrl, { TICKETD_DB_POOL_MAX: '5' });
    children.push(dispatcher.child);
    const pending = async () => Number((await sql<{ n: string }>(dbUrl, 'SELECT count(*) AS n FROM ticket_count_changes'))[0]!.n);
    for (let waited = 0; (await pending()) > 1000 && waited < 600; waited++) await new Promise((r) => setTimeout(r, 1000));
    const big = api.info.bootstrap.brand.id as string;
    const tag = await call('POST', `/v1/brands/${big}/tags`, { name: `bench-${randomBytes(3).toString('hex')}` });
    for (const view of views(tag.id)) await call('POST', `/v1/brands/${big}/views`, view);
    const reads = { 'trivial read (GET the brand)': `${url}/v1/brands/${big}`, 'GET …/views/counts (20 views)': `${url}/v1/brands/${big}/views/counts` };
    const names = Object.keys(reads) as (keyof typeof reads)[];
    const measured = new Map(names.map((n) => [n, [] as { p50: number; p99: number }[]]));
    for (let turn = 0; turn < VIEW_TURNS; turn++) {
      for (const name of turn % 2 ? [...names].reverse() : names) measured.get(name)!.push(await readLatency(reads[name], headers));
      log(`  view counts, turn ${turn + 1} of ${VIEW_TURNS} done`);
    }
    const mid = (name: (typeof names)[number], key: 'p50' | 'p99') => median(measured.get(name)!.map((x) => x[key]));
    const viewRows = names.map((name) => ({
      read: name,
      'p50 ms': mid(name, 'p50'),
      'p99 ms': mid(name, 'p99'),
      'p50 / trivial': Math.round((mid(name, 'p50') / mid(names[0]!, 'p50')) * 100) / 100,
    }));
    const fired = await sql<{ n: string }>(
      dbUrl,
      "SELECT (SELECT sum(fired_count) FROM rules WHERE kind = 'trigger') + (SELECT coalesce(sum(cardinality(rule_ids)), 0) FROM rule_firing_tallies) AS n",
    );

    const out = process.stdout;
    out.write(`\nRules, ${opts.tickets.toLocaleString('en')} tickets (${seeded.liveTickets.toLocaleString('en')} live), ${new Date().toISOString()}\n`);
    out.write(`\nCreate and update in brands with ${TRIGGERS} enabled triggers (${MATCHING} matching each request) and in brands with none, ${opts.duration} s each, in turns:\n`);
    if (!viewsOnly) console.table(rows);
    out.write(`cost of the triggers (target: within 10%), fewer requests/s: ${JSON.stringify(cost)}; firings counted: ${fired[0]?.n}\n`);
    out.write(
      `\nThe counts of 20 views of the brand of ${opts.tickets.toLocaleString('en')} tickets, one request at a time, medians of ${VIEW_TURNS} turns of 300 (goal: within 3x of the trivial read at p50):\n`,
    );
    console.table(viewRows);
  } finally {
    await stop(children);
    await cleanup();
  }
}
