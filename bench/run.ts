/**
 * `npm run bench`: starts the real server (bin/ticketd start) on loopback against a fresh database,
 * seeds one brand with N tickets, and drives it with autocannon from this process. Prints tables;
 * asserts nothing (timings are never a test).
 *
 *   npm run bench -- [--tickets 1000000] [--duration 5] [--connections 32] [--read-connections 2]
 *   npm run bench -- --quick            (20,000 tickets, 2 s per scenario: for development)
 *   BENCH_ONLY=creates npm run bench    (the seed and the create scenarios alone: a before/after of the write path)
 *   BENCH_DATABASE_URL=postgres://admin@host/postgres npm run bench   (else an embedded cluster)
 *   npm run bench -- --events          (webhook delivery latency and throughput instead: see events.ts)
 *   npm run bench -- --rate-limits     (only the cost of rate limiting, on an empty database)
 *   npm run bench -- --cross-brand     (only the cross-brand dashboard: N tickets over 20 brands)
 *   npm run bench -- --quotas          (only ticket create with the plan's ticket allowance counted and not)
 *   npm run bench -- --soak [--minutes 30] [--rate 50] [--dispatcher-apart]   (a long mixed load at a fixed rate: see soak.ts)
 *   npm run bench -- --mail            (DKIM signing cost and the mail lists the dashboard polls: see mail.ts)
 *   npm run bench -- --scan            (what scanning uploads with clamd costs per MB: see scanning.ts)
 *   BENCH_ONLY=ingestion BENCH_TURNS=3 npm run bench -- --mail   (the IMAP ingestion alone, one dispatcher, 3 turns)
 *   npm run bench -- --sla             (service levels: dueAt at create, sort=dueAt, the overdue scan: see service-levels.ts)
 *   npm run bench -- --recurring [--schedules 10000]   (recurring tickets due in one minute, one dispatcher: see recurring.ts)
 *   npm run bench -- --export [--tickets 1000000]   (the ticket export of one brand, NDJSON and CSV, with and without comments: tickets/s and the server's RSS growth; see export.ts)
 *   npm run bench -- --import [--tickets 100000]   (`ticketd import dispatch` of one brand of N tickets × 3 comments from a ticketd source: tickets/s, the importer's RSS; see import.ts)
 *   npm run bench -- --bulk [--duration 10]   (bulk actions of 50 tickets: close/resolve, assign, setTags, at concurrency 1 and 4; see bulk.ts)
 *   npm run bench -- --rules [--tickets 1000000] [--sweep-tickets 100000]   (a brand's rules: create and update with 50 triggers next to none, the counts of 20 views, then one dispatcher's automation sweep of that many matching tickets; see rules.ts and automations.ts)
 *   npm run bench -- --commerce [--orders 100000] [--sync-orders 10000]   (a store's first full sync; a brand's orders on every ticket and contact page, with and without a store: see commerce.ts)
 *   npm run bench -- --citus postgres://postgres@127.0.0.1:9700/postgres [--tickets 100000]   (creates, the first page, search and the capacity mix's GETs on a Citus coordinator next to plain PostgreSQL: see citusComparison)
 *   npm run bench -- --agents [--tickets 1000000] [--agents-start 250] [--agents-step 250] [--step-seconds 60] [--agents-max 4000] [--sustain-minutes 5] [--no-etags] [--dispatcher-apart] [--profile DIR]
 *                                      (how many agents with the dashboard open one machine serves: a ramp of signed-in agents polling and writing, then the largest that passed sustained; see capacity.ts)
 *   npm run bench -- --agents --quick  (20,000 tickets, 15 s steps, 30 s sustained: for development)
 *
 * Measured: create throughput (idempotency keys; concurrency 1, 16, 32 on one brand, 16 across 16
 * brands) next to the raw database floor (plain pg clients, one create at a time: in one statement,
 * writes only, and step by step) and, at concurrency 1, a trivial authenticated read; list first
 * page and page 2,000 by cursor for every sort key;
 * the first page with 1 and 2 API processes (scale.ts);
 * a filtered list; search (common word, rare word, prefix); the cost of rate limiting on an API-key
 * read (limits off vs on); and the server's peak RSS. The cross-brand dashboard, in an account of its own
 * with N tickets over 20 brands: the same list on one brand and across the 20 (every sort, first page
 * and a deep page by cursor; three sorts with the 20 brands named), and stats, trends and team
 * metrics next to a list page.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { oneStatementOp, percentile, runLoad, statementsOp, writesOnlyOp, type FloorInput, type LoadResult } from './floor.js';
import { runEventsBench } from './events.js';
import { runRlsBench, type RlsRow } from './rls.js';
import { listWithApiProcesses } from './scale.js';
import { seed } from './seed.js';
import { adminDatabase, BENCH_POSTGRES_SETTINGS, sessionTokenFor, sql, startTicketd, stop, withDatabase } from './server.js';
import { createClusterDatabase } from '../test/citus/database.js';
import { runSoak } from './soak.js';
import { runMailBench } from './mail.js';
import { runScanBench } from './scanning.js';
import { runServiceLevelBench } from './service-levels.js';
import { runRecurringBench } from './recurring.js';
import { runRulesBench } from './rules.js';
import { runBulkBench } from './bulk.js';
import { runExportBench } from './export.js';
import { runImportBench } from './import.js';
import { runAutomationSweepBench } from './automations.js';
import { runCommerceBench } from './commerce.js';
import { runCapacityBench } from './capacity.js';
import { cpuMicros } from './proc.js';

const { values } = parseArgs({
  options: {
    tickets: { type: 'string' },
    duration: { type: 'string' },
    connections: { type: 'string', default: '32' },
    'read-connections': { type: 'string', default: '2' },
    quick: { type: 'boolean', default: false },
    events: { type: 'boolean', default: false },
    'rate-limits': { type: 'boolean', default: false },
    'cross-brand': { type: 'boolean', default: false },
    quotas: { type: 'boolean', default: false },
    soak: { type: 'boolean', default: false },
    mail: { type: 'boolean', default: false },
    scan: { type: 'boolean', default: false },
    sla: { type: 'boolean', default: false },
    recurring: { type: 'boolean', default: false },
    rules: { type: 'boolean', default: false },
    bulk: { type: 'boolean', default: false },
    export: { type: 'boolean', default: false },
    import: { type: 'boolean', default: false },
    schedules: { type: 'string', default: '10000' },
    'sweep-tickets': { type: 'string', default: '100000' },
    commerce: { type: 'boolean', default: false },
    orders: { type: 'string', default: '100000' },
    'sync-orders': { type: 'string', default: '10000' },
    minutes: { type: 'string', default: '30' },
    rate: { type: 'string', default: '50' },
    citus: { type: 'string' },
    agents: { type: 'boolean', default: false },
    'agents-start': { type: 'string', default: '250' },
    'agents-step': { type: 'string', default: '250' },
    'agents-max': { type: 'string', default: '4000' },
    'step-seconds': { type: 'string' },
    'sustain-minutes': { type: 'string' },
    'no-etags': { type: 'boolean', default: false },
    'dispatcher-apart': { type: 'boolean', default: false },
    profile: { type: 'string' },
  },
});
const quick = values.quick!;
const ticketCount = Number(values.tickets ?? (quick ? 20_000 : 1_000_000));
const duration = Number(values.duration ?? (quick ? 2 : 5));
const connections = Number(values.connections);
const readConnections = Number(values['read-connections']);
const log = (s: string) => process.stderr.write(`${s}\n`);

function memory(pid: number): { rss: number; peak: number } {
  const lines = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n');
  const kb = (key: string) => Number(lines.find((l) => l.startsWith(key))?.split(/\s+/)[1] ?? 0);
  return { rss: Math.round(kb('VmRSS:') / 1024), peak: Math.round(kb('VmHWM:') / 1024) };
}

async function startServer(databaseUrl: string): Promise<{ child: ChildProcess; url: string; liveKey: string; brandId: string; accountId: string; startupMs: number }> {
  const started = Date.now();
  const { child, info } = await startTicketd('all', databaseUrl, {
    TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000000',
    TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000',
    TICKETD_RATE_LIMIT_PER_IP: '1000000000',
    TICKETD_DB_POOL_MAX: '20',
  });
  return {
    child,
    url: info.url,
    liveKey: info.bootstrap.apiKeys.live.key,
    brandId: info.bootstrap.brand.id,
    accountId: info.bootstrap.account.id,
    startupMs: Date.now() - started,
  };
}

interface Row {
  scenario: string;
  'req/s': number;
  'p50 ms': number;
  'p99 ms': number;
  non2xx: number;
  errors: number;
  /** CPU time the server process spent per request: unlike req/s, it holds when other work shares the cores. */
  'server CPU µs/req'?: number;
}

/** The middle value (the upper one of an even count). */
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** autocannon for `duration` seconds after a 1 s warm-up; latencies recorded to 0.01 ms; with `serverPid`, its CPU time per request. */
async function measure(scenario: string, opts: autocannon.Options, serverPid?: number): Promise<Row> {
  const run = (o: autocannon.Options, latencies?: number[]) =>
    new Promise<autocannon.Result>((resolve, reject) => {
      const instance = autocannon(o, (err, result) => (err ? reject(err) : resolve(result)));
      if (latencies)
        instance.on('response', (_c: unknown, status: number, _b: number, ms: number) => {
          if (status < 300) latencies.push(ms);
        });
    });
  await run({ connections: readConnections, ...opts, duration: 1 });
  const latencies: number[] = [];
  const cpuBefore = serverPid ? cpuMicros(serverPid) : 0;
  const result = await run({ connections: readConnections, ...opts, duration }, latencies);
  const cpuPerRequest = serverPid ? Math.round((cpuMicros(serverPid) - cpuBefore) / Math.max(1, result.requests.total)) : undefined;
  latencies.sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 100) / 100;
  const row = {
    scenario,
    'req/s': Math.round(result.requests.average),
    'p50 ms': round(percentile(latencies, 50)),
    'p99 ms': round(percentile(latencies, 99)),
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    ...(cpuPerRequest === undefined ? {} : { 'server CPU µs/req': cpuPerRequest }),
  };
  const cpu = cpuPerRequest === undefined ? '' : ` server CPU ${cpuPerRequest} µs/req`;
  log(`  ${scenario}: ${row['req/s']}/s p50 ${row['p50 ms']} p99 ${row['p99 ms']}${cpu}${row.non2xx ? ` non2xx ${row.non2xx}` : ''}`);
  return row;
}

/**
 * The same read on two fresh API processes on one database, one with limits off and one with them
 * on (so high that nothing is refused, but every request is counted and synced), in turns so
 * that drift in the machine's speed falls on both.
 */
interface RateLimitCost {
  rows: Row[];
  /** How many fewer requests per second with limits on, and how much more server CPU per request (medians of the turns). */
  costPercent: { throughput: number; cpu: number };
}

const RATE_LIMIT_TURNS = 5;

async function measureRateLimitCost(databaseUrl: string, route: string, headers: Record<string, string>): Promise<RateLimitCost> {
  const env = (limit: string) => ({ TICKETD_DB_POOL_MAX: '20', TICKETD_RATE_LIMIT_PER_API_KEY: limit, TICKETD_RATE_LIMIT_PER_IP: limit });
  const servers = { off: await startTicketd('api', databaseUrl, env('0')), on: await startTicketd('api', databaseUrl, env('1000000000')) };
  const rows: Row[] = [];
  const perSec = { off: [] as number[], on: [] as number[] };
  const cpu = { off: [] as number[], on: [] as number[] };
  try {
    // Turn 0 warms both processes up (JIT, caches, pool) and is not counted; the medians of the
    // others, so one turn disturbed by the machine's other work does not decide the figure.
    for (let round = 0; round <= RATE_LIMIT_TURNS; round++) {
      for (const mode of ['off', 'on'] as const) {
        const row = await measure(
          `GET /v1/brands/:id, limits ${mode} (${round ? `turn ${round}` : 'warm-up'})`,
          { url: `${servers[mode].info.url}${route}`, headers },
          servers[mode].child.pid,
        );
        if (round === 0) continue;
        rows.push(row);
        perSec[mode].push(row['req/s']);
        cpu[mode].push(row['server CPU µs/req']!);
      }
    }
  } finally {
    for (const { child } of Object.values(servers)) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  }
  const percent = (x: number) => Math.round(x * 1000) / 10;
  return { rows, costPercent: { throughput: percent(1 - median(perSec.on) / median(perSec.off)), cpu: percent(median(cpu.on) / median(cpu.off) - 1) } };
}

/** Ticket creates with idempotency keys at concurrency c, each connection keeping to one of the brands (dealt in turn); body(b) is the b-th brand's request. */
function createLoad(url: string, headers: Record<string, string>, brandIds: readonly string[], c: number, body: (b: number) => object): autocannon.Options {
  let next = 0;
  return {
    url,
    connections: c,
    method: 'POST',
    initialContext: {},
    requests: [
      {
        setupRequest: (req, context) => {
          const ctx = context as { b?: number };
          ctx.b ??= next++ % brandIds.length;
          return { ...req, path: `/v1/brands/${brandIds[ctx.b]}/tickets`, headers: { ...headers, 'x-idempotency-key': randomUUID() }, body: JSON.stringify(body(ctx.b)) };
        },
      },
    ],
  };
}

/**
 * Ticket create with the plan's ticket allowance counted (a plan with an allowance so large that
 * nothing is refused, so every create is counted and checked) and without (no plan has one): two
 * API processes on one database, started afresh every turn, measured in turns (the order
 * alternating), for one create at a time, 16 on one brand and 16 over 16 brands.
 */
interface QuotaCost {
  rows: Row[];
  /** How many fewer creates per second with quotas on, per scenario (the median of the turns' on/off ratios). */
  costPercent: Record<string, number>;
}
const QUOTA_TURNS = 7;

async function measureQuotaCost(databaseUrl: string, brandIds: readonly string[], headers: Record<string, string>): Promise<QuotaCost> {
  const configFile = path.join(os.tmpdir(), `ticketd-bench-quota-${process.pid}.json`);
  const metered = {
    slug: 'metered',
    name: 'Metered',
    price: 0,
    currency: 'usd',
    interval: 'month',
    ticketsPerPeriod: 1_000_000_000,
    brands: null,
    members: null,
    customDomain: false,
  };
  writeFileSync(configFile, JSON.stringify({ defaultPlan: 'metered', plans: [metered] }));
  const env = { TICKETD_DB_POOL_MAX: '20', TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000', TICKETD_RATE_LIMIT_PER_IP: '1000000000' };
  type Servers = Record<'off' | 'on', Awaited<ReturnType<typeof startTicketd>>>;
  // Fresh processes every turn, started in alternating order: two identical processes on one
  // database were seen to differ by 15-20% for a whole run, which a turn's ratio must not inherit.
  const start = async (round: number): Promise<Servers> => {
    const off = () => startTicketd('api', databaseUrl, env);
    const on = () => startTicketd('api', databaseUrl, { ...env, TICKETD_CONFIG: configFile });
    if (round % 2) {
      const first = await on();
      return { on: first, off: await off() };
    }
    const first = await off();
    return { off: first, on: await on() };
  };
  const stop = async (servers: Servers) => {
    for (const { child } of Object.values(servers)) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  };
  const rows: Row[] = [];
  const perSec: Record<string, { off: number[]; on: number[] }> = {};
  const createOpts = (url: string, c: number, brands: number) =>
    createLoad(url, headers, brandIds.slice(0, brands), c, () => {
      const n = Math.floor(Math.random() * 200);
      return {
        title: `Printer ${n} is on fire`,
        body: 'It started smoking this morning.',
        customerEmail: `customer${n}@quota.example`,
        tags: ['billing', 'bug'],
        priority: 'high',
      };
    });
  try {
    for (let round = 0; round <= QUOTA_TURNS; round++) {
      const servers = await start(round);
      try {
        for (const [c, brands] of [
          [1, 1],
          [16, 1],
          [16, 16],
        ] as const) {
          const scenario = `create c${c} b${brands}`;
          perSec[scenario] ??= { off: [], on: [] };
          for (const mode of round % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
            const row = await measure(
              `${scenario}, quotas ${mode} (${round ? `turn ${round}` : 'warm-up'})`,
              createOpts(servers[mode].info.url, c, brands),
              servers[mode].child.pid,
            );
            if (round === 0) continue;
            rows.push(row);
            perSec[scenario]![mode].push(row['req/s']);
          }
        }
      } finally {
        await stop(servers);
      }
    }
  } finally {
    rmSync(configFile, { force: true });
  }
  // Each turn's pair is measured back to back, so its ratio is free of the machine's drift over the run: the median of those.
  const costPercent = Object.fromEntries(Object.entries(perSec).map(([k, v]) => [k, Math.round((1 - median(v.on.map((on, i) => on / v.off[i]!))) * 1000) / 10]));
  return { rows, costPercent };
}

function printQuotaCost(cost: QuotaCost): void {
  process.stdout.write('\nTicket create with the plan allowance counted (quotas on) and not (off): two --role api processes started afresh every turn, in turns:\n');
  console.table(cost.rows);
  process.stdout.write(`cost of counting against the allowance (target: under 5%), fewer creates/s: ${JSON.stringify(cost.costPercent)}\n`);
}

const CROSS_BRANDS = 20;
const SORTS = ['createdAt', 'updatedAt', 'priority', 'ticketNumber', 'title', 'status', 'customer', 'company', 'assignee', 'category', 'dueAt'];

interface CrossBrandRow {
  scenario: string;
  'one brand p50 ms': number | string;
  'one brand p99 ms': number | string;
  'across 20 p50 ms': number;
  'across 20 p99 ms': number;
  ratio: string;
  'p99 ratio': string;
  'one brand CPU µs/req': number | string;
  'across 20 CPU µs/req': number;
}
/** Each comparison is measured in this many turns, alternating which side goes first; a row shows medians. */
const CROSS_TURNS = 3;

/** A read by API key and by a member's session, in turns (medians of SESSION_TURNS after a warm-up). */
interface SessionCostRow {
  route: string;
  'API key req/s': number;
  'session req/s': number;
  'API key p50 ms': number;
  'session p50 ms': number;
  'session / API key (p50)': string;
}
const SESSION_TURNS = 3;

/**
 * The cross-brand dashboard in a new account: N tickets dealt over 20 brands. Each list is measured
 * on one brand (/v1/brands/:id/tickets) and across the 20 (/v1/tickets), first page and a page deep
 * by cursor, in turns (see compared); the ratio is across / one brand. The counts are compared
 * with the first page of the cross-brand list (ratio = count / list page).
 */
async function crossBrandBench(serverUrl: string, serverPid: number, dbUrl: string, tickets: number): Promise<CrossBrandResult> {
  const ownerEmail = `cross-${randomBytes(4).toString('hex')}@bench.example`;
  const signup = await fetch(`${serverUrl}/v1/accounts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: ownerEmail, name: 'Cross' }),
  });
  const made = (await signup.json()) as { account: { id: string }; apiKeys: { live: { key: string } } };
  const auth = { authorization: `Bearer ${made.apiKeys.live.key}`, 'content-type': 'application/json' };
  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${serverUrl}${p}`, { method, headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
    const json = (await res.json()) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const brands: string[] = [];
  for (let i = 0; i < CROSS_BRANDS; i++) brands.push((await api('POST', '/v1/brands', { name: `Cross ${i}`, slug: `cross-${i}-${randomBytes(3).toString('hex')}` })).id);
  log(`cross-brand: seeding ${tickets.toLocaleString('en')} tickets over ${CROSS_BRANDS} brands…`);
  const seeded = await seed(dbUrl, { accountId: made.account.id, brandId: brands[0]!, brandIds: brands, tickets, log });
  const perBrand = Math.floor(seeded.liveTickets / CROSS_BRANDS);
  const depth = Math.min(20_000, Math.max(0, perBrand - 200));
  const deepPage = Math.floor(depth / 50) + 1;
  const deepCursor = async (list: string, query: string): Promise<string | null> => {
    let cursor: string | null = null;
    for (let seen = 0; seen < depth; seen += 100) {
      const page: { pagination: { nextCursor: string | null } } = await api('GET', `${list}?${query}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      cursor = page.pagination.nextCursor;
      if (!cursor) return null;
    }
    return cursor;
  };
  const p50 = async (scenario: string, p: string, headers: Record<string, string> = auth) => (await measure(scenario, { url: `${serverUrl}${p}`, headers }, serverPid)) as Row;
  const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}×` : '');
  const rows: CrossBrandRow[] = [];
  /**
   * a (one brand, or the reference page for the counts; null: not measured) against b, in
   * CROSS_TURNS turns back to back, alternating which goes first: each side's median p50, p99 and
   * server CPU, and the median of the turns' ratios (each turn's pair shares the machine's state
   * of the moment, so its ratio is free of the drift over the run).
   */
  const compared = async (scenario: string, a: string | null, b: string, labels = { a: 'one brand', b: `across ${CROSS_BRANDS}` }): Promise<CrossBrandRow> => {
    const turns: { a: Row | null; b: Row }[] = [];
    for (let turn = 1; turn <= CROSS_TURNS; turn++) {
      const runA = async () => (a ? p50(`${labels.a}, ${scenario} (turn ${turn})`, a) : null);
      const runB = () => p50(`${labels.b}, ${scenario} (turn ${turn})`, b);
      if (turn % 2) {
        const ra = await runA();
        turns.push({ a: ra, b: await runB() });
      } else {
        const rb = await runB();
        turns.push({ a: await runA(), b: rb });
      }
    }
    const field = (pick: 'a' | 'b', f: 'p50 ms' | 'p99 ms' | 'server CPU µs/req') => median(turns.map((t) => Number(t[pick]![f])));
    const turnRatio = (f: 'p50 ms' | 'p99 ms') => `${median(turns.map((t) => t.b[f] / t.a![f])).toFixed(2)}×`;
    return {
      scenario,
      'one brand p50 ms': a ? field('a', 'p50 ms') : '',
      'one brand p99 ms': a ? field('a', 'p99 ms') : '',
      'across 20 p50 ms': field('b', 'p50 ms'),
      'across 20 p99 ms': field('b', 'p99 ms'),
      ratio: a ? turnRatio('p50 ms') : '',
      'p99 ratio': a ? turnRatio('p99 ms') : '',
      'one brand CPU µs/req': a ? field('a', 'server CPU µs/req') : '',
      'across 20 CPU µs/req': field('b', 'server CPU µs/req'),
    };
  };
  const one = `/v1/brands/${brands[0]}/tickets`;
  const across = '/v1/tickets';
  log('cross-brand lists:');
  for (const sort of SORTS) {
    for (const order of ['desc', 'asc']) {
      const q = `sort=${sort}&order=${order}`;
      rows.push(await compared(`${q}, first page`, `${one}?${q}`, `${across}?${q}`));
    }
    const q = `sort=${sort}`;
    const [c1, c2] = [await deepCursor(one, q), await deepCursor(across, q)];
    if (!c1 || !c2) continue;
    rows.push(await compared(`${q}, page ${deepPage} (cursor)`, `${one}?${q}&cursor=${encodeURIComponent(c1)}`, `${across}?${q}&cursor=${encodeURIComponent(c2)}`));
  }
  for (const q of ['status=active&priority=high', `assigneeId=${seeded.memberIds[3]}&status=open`, 'status=active&sort=updatedAt', 'source=email&sort=priority']) {
    rows.push(await compared(q, q.startsWith('source') ? null : `${one}?${q}`, `${across}?${q}`));
  }
  // Brands named (as for a member assigned to some): a range per brand, merged (decision 0044).
  const named = `brandIds=${brands.join(',')}`;
  for (const q of ['sort=createdAt', 'sort=customer', 'sort=priority&order=asc']) {
    rows.push(await compared(`${q}, first page, all ${CROSS_BRANDS} brands named`, `${one}?${q}`, `${across}?${q}&${named}`));
  }
  const word = seeded.words[15]!;
  rows.push(await compared(`search "${word}" (relevance)`, `${one}?search=${encodeURIComponent(word)}`, `${across}?search=${encodeURIComponent(word)}`));

  log('cross-brand counts:');
  for (const p of [
    '/v1/tickets/stats',
    '/v1/tickets/stats?days=30',
    '/v1/tickets/trends?days=30',
    '/v1/tickets/trends?days=365',
    '/v1/tickets/team-metrics',
    `/v1/tickets/stats?brandIds=${brands[0]}`,
  ]) {
    const row = await compared(`GET ${p.replace(brands[0]!, '<one>')} (ratios: vs the list page)`, across, p, { a: 'list page', b: 'count' });
    rows.push({ ...row, 'one brand p50 ms': '', 'one brand p99 ms': '', 'one brand CPU µs/req': '' });
  }

  // The same reads by the account's owner signed in to the dashboard, in turns with the API key.
  log('session vs API key:');
  const session = { authorization: `Bearer ${await sessionTokenFor(dbUrl, serverUrl, ownerEmail)}` };
  const sessionRows: SessionCostRow[] = [];
  for (const [label, p] of [
    ['GET /v1/brands/:id', `/v1/brands/${brands[0]}`],
    ['GET /v1/brands/:id/tickets', one],
    ['GET /v1/tickets', across],
  ] as const) {
    const turns = { key: [] as Row[], session: [] as Row[] };
    for (let turn = 0; turn <= SESSION_TURNS; turn++) {
      const warm = turn ? `turn ${turn}` : 'warm-up';
      const k = await p50(`${label}, API key (${warm})`, p);
      const v = await p50(`${label}, session (${warm})`, p, session);
      if (!turn) continue;
      turns.key.push(k);
      turns.session.push(v);
    }
    const medianOf = (rs: Row[], field: 'req/s' | 'p50 ms') => median(rs.map((r) => r[field]));
    sessionRows.push({
      route: label,
      'API key req/s': medianOf(turns.key, 'req/s'),
      'session req/s': medianOf(turns.session, 'req/s'),
      'API key p50 ms': medianOf(turns.key, 'p50 ms'),
      'session p50 ms': medianOf(turns.session, 'p50 ms'),
      'session / API key (p50)': ratio(medianOf(turns.session, 'p50 ms'), medianOf(turns.key, 'p50 ms')),
    });
  }
  return { rows, sessionRows, live: seeded.liveTickets, seconds: seeded.seconds };
}

interface CrossBrandResult {
  rows: CrossBrandRow[];
  sessionRows: SessionCostRow[];
  live: number;
  seconds: number;
}

function printCrossBrand(result: CrossBrandResult): void {
  process.stdout.write(
    `\nCross-brand dashboard: ${result.live.toLocaleString('en')} live tickets over ${CROSS_BRANDS} brands (seeded in ${result.seconds.toFixed(0)} s); ratio = across 20 / one brand, or count / list page:\n`,
  );
  console.table(result.rows);
  process.stdout.write(`\nThe same reads with a member's session and with an API key (medians of ${SESSION_TURNS} turns after a warm-up):\n`);
  console.table(result.sessionRows);
}

function printRateLimitCost(cost: RateLimitCost): void {
  process.stdout.write('\nRate limiting on the API-key read path (two fresh --role api processes, limits off and on, measured in turns):\n');
  console.table(cost.rows);
  process.stdout.write(`cost of rate limiting (target: under 5%): ${cost.costPercent.throughput}% fewer requests/s, ${cost.costPercent.cpu}% more server CPU per request\n`);
}

interface TargetRows {
  target: string;
  rows: Row[];
  seededSeconds: number;
}

/**
 * The same requests on plain PostgreSQL (BENCH_DATABASE_URL, else an embedded cluster) and on a
 * Citus coordinator (--citus: its administrator URL; the database is made on every node, 32
 * shards per table): one account with N tickets, the list's first page, search for a common and
 * a rare word, then creates at concurrency 1 and 16. Each target runs its own ticketd, one after
 * the other; the table puts them side by side.
 */
/**
 * The GETs of the capacity mix (dashboard.ts), as the bootstrap owner signed in to the dashboard:
 * the brand's 20 newest tickets, a ticket and its comments (five, added here), the unread mentions,
 * the brand's mailboxes.
 */
async function capacityGets(server: { url: string; brandId: string; child: ChildProcess }, dbUrl: string, auth: Record<string, string>): Promise<Row[]> {
  const base = `${server.url}/v1/brands/${server.brandId}`;
  const page = (await (await fetch(`${base}/tickets?limit=1`, { headers: auth })).json()) as { data: { id: string }[] };
  const ticket = `${base}/tickets/${page.data[0]!.id}`;
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${ticket}/comments`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ body: `A comment of the bench, number ${i + 1}.`, authorType: 'AGENT', authorName: 'Bench' }),
    });
    if (res.status !== 201) throw new Error(`comment: ${res.status} ${await res.text()}`);
  }
  const session = { authorization: `Bearer ${await sessionTokenFor(dbUrl, server.url, 'owner@example.com')}` };
  const rows: Row[] = [];
  for (const [scenario, url] of [
    ['dashboard: 20 newest tickets', `${base}/tickets?limit=20`],
    ['dashboard: a ticket', ticket],
    ['dashboard: its comments', `${ticket}/comments`],
    ['dashboard: unread mentions', `${server.url}/v1/auth/mentions/unread`],
    ['dashboard: mailboxes', `${base}/email-connections`],
  ] as const)
    rows.push(await measure(scenario, { url, headers: session }, server.child.pid));
  return rows;
}

async function citusComparison(citusAdminUrl: string): Promise<void> {
  const targets: TargetRows[] = [];
  const plain = await adminDatabase({ shared_buffers: '2GB', work_mem: '16MB', maintenance_work_mem: '512MB', max_connections: '200' });
  try {
    for (const target of ['PostgreSQL', 'Citus'] as const) {
      const name = `ticketd_bench_${randomBytes(4).toString('hex')}`;
      let dbUrl: string;
      let drop: () => Promise<void>;
      if (target === 'Citus') {
        ({ url: dbUrl, drop } = await createClusterDatabase(citusAdminUrl, name, { 'citus.shard_count': '32' }));
      } else {
        await sql(plain.adminUrl, `CREATE DATABASE ${name}`);
        dbUrl = withDatabase(plain.adminUrl, name);
        drop = () => sql(plain.adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).then(() => undefined);
      }
      log(`${target}: starting ticketd (migrating${target === 'Citus' ? ' and placing the tables' : ''})…`);
      const server = await startServer(dbUrl);
      try {
        log(`${target}: seeding ${ticketCount.toLocaleString('en')} tickets…`);
        const seeded = await seed(dbUrl, { accountId: server.accountId, brandId: server.brandId, tickets: ticketCount, log });
        const auth = { authorization: `Bearer ${server.liveKey}`, 'content-type': 'application/json' };
        const base = `${server.url}/v1/brands/${server.brandId}`;
        const w = seeded.words;
        const rows: Row[] = [];
        rows.push(await measure('list, first page', { url: `${base}/tickets`, headers: auth }, server.child.pid));
        rows.push(await measure(`search common word "${w[0]}"`, { url: `${base}/tickets?search=${encodeURIComponent(w[0]!)}`, headers: auth }, server.child.pid));
        rows.push(await measure(`search rare word "${w[12_000]}"`, { url: `${base}/tickets?search=${encodeURIComponent(w[12_000]!)}`, headers: auth }, server.child.pid));
        rows.push(await measure('GET /v1/brands/:id', { url: `${server.url}/v1/brands/${server.brandId}`, headers: auth }, server.child.pid));
        rows.push(...(await capacityGets(server, dbUrl, auth)));
        const emails = seeded.contactEmails.slice(0, 5000);
        const text = (k: number) => Array.from({ length: k }, () => w[Math.floor(Math.exp(Math.random() * Math.log(w.length)))]).join(' ');
        for (const c of [1, 16]) {
          const body = () => ({ title: text(6), body: text(40), customerEmail: emails[Math.floor(Math.random() * emails.length)], tags: ['billing', 'bug'], priority: 'high' });
          rows.push(await measure(`POST tickets c${c}`, createLoad(server.url, auth, [server.brandId], c, body), server.child.pid));
        }
        targets.push({ target, rows, seededSeconds: seeded.seconds });
      } finally {
        await stop([server.child]);
        await drop();
      }
    }
  } finally {
    await plain.cleanup();
  }
  const [pg, citus] = targets as [TargetRows, TargetRows];
  const table = pg.rows.map((r, i) => {
    const c = citus.rows[i]!;
    return {
      scenario: r.scenario,
      'PostgreSQL p50 ms': r['p50 ms'],
      'Citus p50 ms': c['p50 ms'],
      'Citus ÷ PostgreSQL p50': Math.round((c['p50 ms'] / r['p50 ms']) * 100) / 100,
      'PostgreSQL p99 ms': r['p99 ms'],
      'Citus p99 ms': c['p99 ms'],
      'PostgreSQL req/s': r['req/s'],
      'Citus req/s': c['req/s'],
      'errors (pg/citus)': `${r.errors + r.non2xx}/${c.errors + c.non2xx}`,
    };
  });
  process.stdout.write(
    `\nticketd on plain PostgreSQL and on Citus: ${ticketCount.toLocaleString('en')} tickets in one account (seeded in ${pg.seededSeconds.toFixed(0)} s and ${citus.seededSeconds.toFixed(0)} s), ${duration} s per scenario, reads at ${readConnections} connections, loopback, ${os.cpus().length} cores\n`,
  );
  console.table(table);
  process.stdout.write(`${JSON.stringify({ tickets: ticketCount, duration, readConnections, citus: table })}\n`);
}

async function main() {
  const { adminUrl, cleanup } = await adminDatabase(BENCH_POSTGRES_SETTINGS);
  const database = `ticketd_bench_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const server = await startServer(dbUrl);
  const pid = server.child.pid!;
  const auth = { authorization: `Bearer ${server.liveKey}`, 'content-type': 'application/json' };
  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${server.url}${p}`, { method, headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
    const json = (await res.json()) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };

  try {
    if (values['rate-limits']) {
      printRateLimitCost(await measureRateLimitCost(dbUrl, `/v1/brands/${server.brandId}`, auth));
      return;
    }
    if (values.quotas) {
      const brandIds = [server.brandId];
      for (let i = 1; i < 16; i++) brandIds.push((await api('POST', '/v1/brands', { name: `Quota ${i}`, slug: `quota-${i}-${randomBytes(3).toString('hex')}` })).id);
      printQuotaCost(await measureQuotaCost(dbUrl, brandIds, auth));
      return;
    }
    if (values['cross-brand']) {
      printCrossBrand(await crossBrandBench(server.url, server.child.pid!, dbUrl, ticketCount));
      return;
    }
    log(`seeding ${ticketCount.toLocaleString('en')} tickets…`);
    const seeded = await seed(dbUrl, { accountId: server.accountId, brandId: server.brandId, tickets: ticketCount, log });
    log(`seeded in ${seeded.seconds.toFixed(1)} s: ${seeded.liveTickets.toLocaleString('en')} live, non-spam tickets`);
    const base = `${server.url}/v1/brands/${server.brandId}`;

    // ---- lists and search (before the creates, on the seeded state) ----
    const readRows: Row[] = [];
    // BENCH_ONLY=creates: the seed and the creates alone (a before/after of the write path).
    const onlyCreates = process.env.BENCH_ONLY === 'creates';
    const get = (scenario: string, url: string) =>
      onlyCreates
        ? Promise.resolve()
        : measure(scenario, { url, headers: auth }).then((r) => {
            readRows.push(r);
          });
    const depth = Math.min(100_000, Math.max(0, seeded.liveTickets - 200));
    const deepPage = Math.floor(depth / 50) + 1;
    /** The cursor after `depth` rows of a list, walked through the API 100 rows at a time. */
    const deepCursor = async (query: string): Promise<string | null> => {
      if (onlyCreates) return null;
      let cursor: string | null = null;
      for (let seen = 0; seen < depth; seen += 100) {
        const page: { pagination: { nextCursor: string | null } } = await api(
          'GET',
          `/v1/brands/${server.brandId}/tickets?${query}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        cursor = page.pagination.nextCursor;
        if (!cursor) return null;
      }
      return cursor;
    };
    log('lists:');
    await get('list, first page (createdAt desc)', `${base}/tickets`);
    for (const sort of ['createdAt', 'updatedAt', 'priority', 'ticketNumber', 'title', 'status', 'customer', 'company', 'assignee', 'category']) {
      if (sort !== 'createdAt') await get(`list sort=${sort}, first page`, `${base}/tickets?sort=${sort}`);
      const cursor = await deepCursor(`sort=${sort}`);
      if (cursor) await get(`list sort=${sort}, page ${deepPage.toLocaleString('en')} (cursor)`, `${base}/tickets?sort=${sort}&cursor=${encodeURIComponent(cursor)}`);
    }
    const hot = seeded.tagIds[0]!;
    await get('list status=active&priority=high&tagIds=<top tag>', `${base}/tickets?status=active&priority=high&tagIds=${hot}`);
    await get('list status=closed&priority=urgent&tagIds=<rare tag>', `${base}/tickets?status=closed&priority=urgent&tagIds=${seeded.tagIds[45]}`);
    await get('list assigneeId=<agent>&status=open', `${base}/tickets?assigneeId=${seeded.memberIds[3]}&status=open`);
    await get('list categoryId=<category>, sort=updatedAt', `${base}/tickets?categoryId=${seeded.categoryIds[2]}&sort=updatedAt`);

    log('search:');
    const w = seeded.words;
    const counts = await sql<{ word: string; n: string }>(
      dbUrl,
      `SELECT w AS word, (SELECT count(*) FROM tickets WHERE search_vector @@ ticketd_search_query(w) AND deleted_at IS NULL AND NOT is_spam) AS n
      FROM unnest($1::text[]) AS w`,
      [[w[0], w[15], w[12_000], 'resume', 'pass']],
    );
    const n = (word: string) => Number(counts.find((c) => c.word === word)?.n ?? 0).toLocaleString('en');
    const s = (q: string) => encodeURIComponent(q);
    await get(`search common word "${w[0]}" (${n(w[0]!)} matches), relevance`, `${base}/tickets?search=${s(w[0]!)}`);
    await get(`search common word "${w[15]}" (${n(w[15]!)} matches), relevance`, `${base}/tickets?search=${s(w[15]!)}`);
    await get(`search common word "${w[0]}", sort=createdAt`, `${base}/tickets?search=${s(w[0]!)}&sort=createdAt`);
    await get(`search rare word "${w[12_000]}" (${n(w[12_000]!)} matches)`, `${base}/tickets?search=${s(w[12_000]!)}`);
    await get(`search prefix "pass" (${n('pass')} matches)`, `${base}/tickets?search=pass`);
    await get(`search two words + prefix "refund order pa"`, `${base}/tickets?search=${s('refund order pa')}`);
    await get(`search accents "resume" (${n('resume')} matches: résumé)`, `${base}/tickets?search=resume`);
    await get('search customer email prefix "ann.lee1"', `${base}/tickets?search=${s('ann.lee1')}`);
    const searchCursor = await (async () => {
      let cursor: string | null = null;
      for (let i = 0; i < 20; i++) {
        const page: { pagination: { nextCursor: string | null } } = await api(
          'GET',
          `/v1/brands/${server.brandId}/tickets?search=${s(w[0]!)}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        cursor = page.pagination.nextCursor;
        if (!cursor) break;
      }
      return cursor;
    })();
    if (searchCursor) await get(`search common word, page 41 (cursor, past the ranked window)`, `${base}/tickets?search=${s(w[0]!)}&cursor=${encodeURIComponent(searchCursor)}`);

    const crossBrand = onlyCreates ? null : await crossBrandBench(server.url, pid, dbUrl, ticketCount);

    log('the first page with 1 and 2 API processes:');
    const scaleRows = onlyCreates
      ? []
      : await listWithApiProcesses(dbUrl, server.url, `/v1/brands/${server.brandId}/tickets`, auth, { duration, env: { TICKETD_DB_POOL_MAX: '20' }, log });

    // ---- creates next to the raw floor ----
    log('creates:');
    const brandIds = [server.brandId];
    for (let i = 1; i < 16; i++) brandIds.push((await api('POST', '/v1/brands', { name: `Bench ${i}`, slug: `bench-${i}-${randomBytes(3).toString('hex')}` })).id);
    // Each extra brand: 200 customers and two tags, like the seeded brand has.
    await sql(
      dbUrl,
      `INSERT INTO contacts (id, account_id, livemode, brand_id, email, name, name_key)
      SELECT 'cus_b' || b.i || '_' || g, $1, true, b.id, 'customer' || g || '@brand' || b.i || '.example', 'Customer ' || g, 'customer ' || g
      FROM unnest($2::text[]) WITH ORDINALITY AS b (id, i), generate_series(1, 200) AS g`,
      [server.accountId, brandIds.slice(1)],
    );
    await sql(
      dbUrl,
      `INSERT INTO tags (id, account_id, livemode, brand_id, name, color)
      SELECT 'tag_b' || b.i || '_' || g, $1, true, b.id, (ARRAY['billing', 'bug'])[g], '#123456'
      FROM unnest($2::text[]) WITH ORDINALITY AS b (id, i), generate_series(1, 2) AS g`,
      [server.accountId, brandIds.slice(1)],
    );
    const emails = [seeded.contactEmails.slice(0, 5000), ...brandIds.slice(1).map((_, i) => Array.from({ length: 200 }, (_x, g) => `customer${g + 1}@brand${i + 1}.example`))];
    const tagRows = await sql<{ brand_id: string; id: string; name: string }>(
      dbUrl,
      `SELECT brand_id, id, name FROM tags WHERE brand_id = ANY($1) AND name IN ('billing', 'bug') ORDER BY name`,
      [brandIds],
    );
    const tags = brandIds.map((b) => ({ ids: tagRows.filter((r) => r.brand_id === b).map((r) => r.id), names: ['billing', 'bug'] }));
    const floorInput: FloorInput = { url: dbUrl, accountId: server.accountId, brandIds, emails, tags, words: seeded.words.slice(0, 5000) };

    interface CreateRow {
      scenario: string;
      concurrency: number;
      brands: number;
      'tickets/s': number;
      'p50 ms': number;
      'p99 ms': number;
      errors: number;
      'vs one-statement floor': string;
      'vs writes-only floor': string;
    }
    const createRows: CreateRow[] = [];
    const floors = new Map<string, number>();
    type FloorLabel = 'step by step' | 'one statement' | 'writes only';
    const floorOps = { 'step by step': statementsOp, 'one statement': oneStatementOp, 'writes only': writesOnlyOp };
    const floor = async (label: FloorLabel, c: number, brands: number) => {
      const op = floorOps[label]({ ...floorInput, brandIds: brandIds.slice(0, brands) });
      await runLoad(dbUrl, c, 1000, op);
      const r: LoadResult = await runLoad(dbUrl, c, duration * 1000, op);
      floors.set(`${label} ${c}/${brands}`, r.perSec);
      push(`raw floor, ${label}`, c, brands, r.perSec, r.p50, r.p99, r.errors);
    };
    const push = (scenario: string, c: number, brands: number, perSec: number, p50: number, p99: number, errors: number) => {
      const ratio = (label: FloorLabel) => {
        const base = floors.get(`${label} ${c}/${brands}`);
        return base && !scenario.endsWith(label) ? `${Math.round((perSec / base) * 100)}%` : '';
      };
      const row = {
        scenario,
        concurrency: c,
        brands,
        'tickets/s': perSec,
        'p50 ms': Math.round(p50 * 100) / 100,
        'p99 ms': Math.round(p99 * 100) / 100,
        errors,
        'vs one-statement floor': ratio('one statement'),
        'vs writes-only floor': ratio('writes only'),
      };
      createRows.push(row);
      log(`  ${scenario} c${c} b${brands}: ${perSec}/s p50 ${row['p50 ms']} p99 ${row['p99 ms']}${errors ? ` errors ${errors}` : ''}`);
    };
    const create = async (c: number, brands: number) => {
      const words = floorInput.words;
      const text = (k: number) => Array.from({ length: k }, () => words[Math.floor(Math.exp(Math.random() * Math.log(words.length)))]).join(' ');
      const opts = createLoad(server.url, auth, brandIds.slice(0, brands), c, (b) => ({
        title: text(6),
        body: text(40),
        customerEmail: emails[b]![Math.floor(Math.random() * emails[b]!.length)],
        tags: tags[b]!.names,
        priority: 'high',
      }));
      const row = await measure(`POST tickets c${c} b${brands}`, opts, pid);
      push('API create (idempotency key)', c, brands, row['req/s'], row['p50 ms'], row['p99 ms'], row.errors + row.non2xx);
    };
    /** What HTTP and authentication cost a lone request: a lone create is this plus its statement. */
    const trivialRead = async () => {
      const row = await measure('GET /v1/brands/:id c1', { url: `${server.url}/v1/brands/${server.brandId}`, headers: auth, connections: 1 }, pid);
      push('API trivial read (GET a brand)', 1, 1, row['req/s'], row['p50 ms'], row['p99 ms'], row.errors + row.non2xx);
    };
    for (const [c, brands] of [
      [1, 1],
      [16, 1],
      [16, 16],
      [connections, 1],
    ] as const) {
      await floor('writes only', c, brands);
      await floor('one statement', c, brands);
      if (c === 1 || c === 16) await floor('step by step', c, brands);
      await create(c, brands);
      if (c === 1) await trivialRead();
    }

    if (onlyCreates) return;
    // ---- the API-key path and small reads ----
    log('small requests:');
    const smallRows: Row[] = [];
    smallRows.push(await measure('GET /v1/health/live (no auth, no SQL)', { url: `${server.url}/v1/health/live` }));
    smallRows.push(await measure('GET /v1/brands/:id (API key from cache + one read)', { url: `${server.url}/v1/brands/${server.brandId}`, headers: auth }));
    smallRows.push(await measure('GET /v1/brands (401, bad key)', { url: `${server.url}/v1/brands`, headers: { authorization: 'Bearer sk_live_nope' } }));

    log('rate limiting on the API-key read path:');
    const limitRows = await measureRateLimitCost(dbUrl, `/v1/brands/${server.brandId}`, auth);

    const mem = memory(pid);
    // Last: it changes the database under the server (policies on, then off again).
    log('row-level security (measured, not adopted):');
    const rlsRows: RlsRow[] = await runRlsBench(dbUrl, floorInput, duration * 1000, log);
    const out = process.stdout;
    out.write(
      `\nticketd bench: ${seeded.liveTickets.toLocaleString('en')} live tickets in one brand (${ticketCount.toLocaleString('en')} seeded in ${seeded.seconds.toFixed(0)} s), `,
    );
    out.write(`${duration} s per scenario, loopback, ${os.cpus().length} cores; reads at ${readConnections} connections\n`);
    out.write(`server start-up on an empty database (migrate + bootstrap): ${server.startupMs} ms\n\nLists and search (p50/p99 per request):\n`);
    console.table(readRows);
    printCrossBrand(crossBrand!);
    out.write('\nThe first page with 1 and 2 API processes on one database (round robin):\n');
    console.table(scaleRows);
    out.write('\nCreates (tickets/s; API vs the raw database floor at the same concurrency and brands):\n');
    console.table(createRows);
    out.write('\nSmall requests:\n');
    console.table(smallRows);
    printRateLimitCost(limitRows);
    out.write('\nRow-level security as a backstop (raw SQL as a non-superuser role; see bench/rls.ts):\n');
    console.table(rlsRows);
    out.write(`\nserver memory: peak RSS ${mem.peak} MiB, RSS now ${mem.rss} MiB\n`);
    out.write(
      `${JSON.stringify({ tickets: ticketCount, live: seeded.liveTickets, duration, readConnections, reads: readRows, crossBrand: crossBrand!.rows, sessionVsApiKey: crossBrand!.sessionRows, creates: createRows, scaleOut: scaleRows, small: smallRows, rateLimits: limitRows, rls: rlsRows, peakRssMiB: mem.peak })}\n`,
    );
  } finally {
    server.child.kill('SIGTERM');
    await new Promise((r) => server.child.once('exit', r));
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
  }
}

(values.events
  ? runEventsBench()
  : values.mail
    ? runMailBench()
    : values.scan
      ? runScanBench()
      : values.sla
        ? runServiceLevelBench({ tickets: ticketCount, duration })
        : values.recurring
          ? runRecurringBench(Number(values.schedules))
          : values.bulk
            ? runBulkBench({ duration: Number(values.duration ?? 10) })
            : values.rules
              ? runRulesBench({ tickets: ticketCount, duration }).then(() =>
                  process.env.BENCH_ONLY ? undefined : runAutomationSweepBench({ tickets: ticketCount, sweepTickets: Number(values['sweep-tickets']) }),
                )
              : values.commerce
                ? runCommerceBench({ orders: Number(values.orders), syncOrders: Number(values['sync-orders']) })
                : values.soak
                  ? runSoak({ minutes: Number(values.minutes), rate: Number(values.rate), dispatcherApart: values['dispatcher-apart'] })
                  : values.agents
                    ? runCapacityBench({
                        tickets: ticketCount,
                        agentsStart: Number(values['agents-start']),
                        agentsStep: Number(values['agents-step']),
                        agentsMax: Number(values['agents-max']),
                        stepSeconds: Number(values['step-seconds'] ?? (quick ? 15 : 60)),
                        sustainMinutes: Number(values['sustain-minutes'] ?? (quick ? 0.5 : 5)),
                        etags: !values['no-etags'],
                        dispatcherApart: values['dispatcher-apart'],
                        profileDir: values.profile,
                      })
                    : values.citus
                      ? citusComparison(values.citus)
                      : values.export
                        ? runExportBench({ tickets: ticketCount })
                        : values.import
                          ? runImportBench({ tickets: Number(values.tickets ?? (quick ? 5_000 : 100_000)) })
                          : main()
).catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack}\n`);
  process.exit(1);
});
