/**
 * `npm run bench -- --agents`: how many agents with the dashboard open one small machine serves.
 *
 * The real server (`bin/ticketd start --role all`, API and dispatcher in one process, or with
 * --dispatcher-apart a `--role api` and a `--role dispatcher` process) on a fresh
 * database of N tickets over 5 brands (--tickets, default 1,000,000), and this process playing
 * the agents: each a member of the account signed in with a session of their own, with one ticket
 * page open, sending what the dashboard sends (dashboard.ts: mentions, the brands' email
 * connections and newest tickets, the open ticket and its comments), and writing: a comment on
 * the open ticket every 2 minutes, a status change of it every 3 minutes, and, for each agent, a
 * new ticket from a customer every 5 minutes (through the API key, as an integration creates
 * them). Every poll and write of every agent runs at a random phase of its period, so the load is
 * even from the moment an agent joins.
 *
 * Each agent's browser cache is emulated (unless --no-etags): a GET of a URL it holds goes with
 * If-None-Match and a 304 is answered from the cache; a server that sends no ETag leaves this
 * without effect. 304s are counted per route.
 *
 * Open loop (open-loop.ts): latency counts from a request's slot, so a server falling behind shows.
 * The ramp starts at --agents-start and adds --agents-step agents every --step-seconds to the
 * running load until a step has a route whose p99 passes 200 ms or any error (non-2xx/304,
 * timeout, connection error, a slot skipped), or --agents-max passed; the largest number that
 * passed then runs --sustain-minutes and is measured again (if that longer run misses the bar,
 * one step fewer runs it, and so on): its CPU per agent-minute (server, the PostgreSQL cluster,
 * this load generator) and p50/p99/304s per route.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { eachAtOnce } from '../server/core/each-at-once.js';
import { systemCtx, tenantCtx } from '../server/core/context.js';
import * as members from '../server/domains/members/service.js';
import { dashboardPolls, type DashboardGet, type OpenTicket, type Poll } from './dashboard.js';
import { percentile, pick, text } from './floor.js';
import { Client, type HttpCache, type Op, type Sample } from './open-loop.js';
import { clusterCpuMicros, cpuMicros, findCluster, type Cluster } from './proc.js';
import { seed } from './seed.js';
import { adminDatabase, BENCH_POSTGRES_SETTINGS, inProcessServices, metricValue, sessionTokenInProcess, sql, startTicketd, stop, withDatabase } from './server.js';
import { FIRST_NAMES, LAST_NAMES, vocabulary } from './vocabulary.js';

export interface CapacityOptions {
  tickets: number;
  agentsStart: number;
  agentsStep: number;
  agentsMax: number;
  stepSeconds: number;
  sustainMinutes: number;
  /** Emulate the browsers' HTTP caches (conditional GETs). */
  etags: boolean;
  /** The dispatcher in a process of its own beside the API (`--role api` and `--role dispatcher`), not one `--role all`. */
  dispatcherApart: boolean;
  /** Run the server processes under `node --cpu-prof`, their profiles written here when they stop. */
  profileDir?: string;
}

const BRANDS = 5;
/** A step passes when every route's p99 is at most this, and nothing failed. */
const P99_LIMIT_MS = 200;
const COMMENT_EVERY_MS = 120_000;
const STATUS_EVERY_MS = 180_000;
const CREATE_EVERY_MS = 300_000;
/** Connections from this process to the server. */
const CONNECTIONS = 64;
const REQUEST_TIMEOUT_MS = 10_000;
/** Members and sessions made at once while agents join (each a few statements on a pool of 8). */
const SETUP_CONCURRENCY = 16;
/** After the failed step's agents leave: time for the server to catch up before the sustained run. */
const RECOVERY_MS = 15_000;
/** Before the first step: the server's first requests (JIT, caches, the pool's connections) are not what it serves in the long run. */
const WARM_UP_MS = 10_000;
const log = (s: string) => process.stderr.write(`${s}\n`);

interface Agent {
  name: string;
  auth: Record<string, string>;
  open: OpenTicket & { status: string };
  /** The browser's HTTP cache; none with --no-etags. */
  cache?: HttpCache;
  /** False once the agent left: its slots are dropped. */
  active: boolean;
}

interface Slot {
  at: number;
  poll: Poll;
  agent: Agent;
}

/**
 * Every agent's polls and writes in one queue ordered by slot (a binary heap), and one loop that
 * fires what is due and puts each back at its next slot: no timer per agent.
 */
class Scheduler {
  private readonly heap: Slot[] = [];
  /** How late each slot fired (ms) since the last takeLateness: the load generator falling behind, not the server. */
  private lateness: number[] = [];
  private running = true;
  private loop: Promise<void> = Promise.resolve();

  /** The agent's polls from now on, each first at a random point of its period. */
  add(agent: Agent, polls: readonly Poll[]): void {
    const now = performance.now();
    for (const poll of polls) this.push({ at: now + Math.random() * poll.everyMs, poll, agent });
  }

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  takeLateness(): number[] {
    const taken = this.lateness;
    this.lateness = [];
    return taken;
  }

  private async run(): Promise<void> {
    while (this.running) {
      let fired = 0;
      for (let now = performance.now(); this.heap.length && this.heap[0]!.at <= now; now = performance.now()) {
        const slot = this.pop();
        if (!slot.agent.active) continue;
        this.lateness.push(now - slot.at);
        slot.poll.fire(slot.at);
        slot.at += slot.poll.everyMs;
        this.push(slot);
        // A long burst yields now and then, so answers are read while it is sent.
        if (++fired % 200 === 0) await new Promise((r) => setImmediate(r));
      }
      const next = this.heap[0]?.at ?? Infinity;
      await sleep(Math.max(1, Math.min(100, next - performance.now())));
    }
  }

  private push(slot: Slot): void {
    const h = this.heap;
    h.push(slot);
    for (let i = h.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.at <= h[i]!.at) break;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  private pop(): Slot {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length) {
      h[0] = last;
      for (let i = 0; ; ) {
        const [l, r] = [2 * i + 1, 2 * i + 2];
        let least = i;
        if (l < h.length && h[l]!.at < h[least]!.at) least = l;
        if (r < h.length && h[r]!.at < h[least]!.at) least = r;
        if (least === i) break;
        [h[least], h[i]] = [h[i]!, h[least]!];
        i = least;
      }
    }
    return top;
  }
}

interface RouteStats {
  route: string;
  count: number;
  p50: number;
  p99: number;
  notModified: number;
  errors: number;
  bytes: number;
}

/** One measured stretch of the load: a ramp step, or the sustained run. */
interface Window {
  agents: number;
  seconds: number;
  requests: number;
  errors: number;
  errorKinds: Map<string, number>;
  routes: RouteStats[];
  worst: RouteStats | undefined;
  /** CPU time over the window, ms: the server process, the PostgreSQL cluster (null: not on this machine), this process. */
  cpuMs: { server: number; db: number | null; bench: number };
  /** How late slots fired here (the load generator behind), ms. */
  lateness: { p99: number; max: number };
  /** The server's event-loop delay over the window (its /metrics), ms: a stalled server, or a busy one. */
  serverLoop: { p99: number; max: number };
  /** The server's API pool over the window, sampled each second: connections in use (mean), queries waiting for one (mean, max). */
  pool: { used: number; waiting: { mean: number; max: number } };
  passed: boolean;
}

interface ServerWatch {
  loop: { p99: number; max: number };
  poolUsed: number;
  poolWaiting: { mean: number; max: number };
}

interface CpuReading {
  at: number;
  server: number;
  db: number | null;
  bench: number;
}

const round1 = (x: number) => Math.round(x * 10) / 10;
const percent = (part: number, whole: number) => (whole ? `${Math.round((part / whole) * 100)}%` : '');
/** CPU time over a window as a share of one core. */
const ofACore = (ms: number | null, w: Window) => (ms === null ? 'n/a' : percent(ms, w.seconds * 1000));
/** The share of a window's requests answered 304. */
const notModifiedShare = (w: Window) =>
  percent(
    w.routes.reduce((sum, r) => sum + r.notModified, 0),
    w.requests,
  );

function routeStats(samples: readonly Sample[]): RouteStats[] {
  const byRoute = new Map<string, Sample[]>();
  for (const s of samples) {
    const list = byRoute.get(s.route);
    if (list) list.push(s);
    else byRoute.set(s.route, [s]);
  }
  return [...byRoute]
    .map(([route, ss]) => {
      const ms = ss
        .filter((s) => s.ok)
        .map((s) => s.ms)
        .sort((a, b) => a - b);
      return {
        route,
        count: ss.length,
        p50: round1(percentile(ms, 50)),
        p99: round1(percentile(ms, 99)),
        notModified: ss.filter((s) => s.notModified).length,
        errors: ss.filter((s) => !s.ok).length,
        bytes: ss.reduce((sum, s) => sum + s.bytes, 0),
      };
    })
    .sort((a, b) => b.count - a.count);
}

/** Rows as a markdown table (pastes into bench/RESULTS.md as it is). */
function markdownTable(rows: readonly Record<string, string | number>[]): string {
  if (!rows.length) return '(none)\n';
  const keys = Object.keys(rows[0]!);
  const line = (cells: readonly (string | number)[]) => `| ${cells.map((c) => (typeof c === 'number' ? c.toLocaleString('en') : c)).join(' | ')} |`;
  return [line(keys), line(keys.map(() => '---')), ...rows.map((r) => line(keys.map((k) => r[k] ?? '')))].join('\n') + '\n';
}

export async function runCapacityBench(options: CapacityOptions): Promise<void> {
  const { agentsStart, agentsStep, agentsMax, stepSeconds, sustainMinutes, etags } = options;
  if (!(agentsStart > 0 && agentsStep > 0 && agentsMax >= agentsStart && stepSeconds > 0 && sustainMinutes >= 0)) {
    throw new Error('--agents-start, --agents-step and --step-seconds must be positive, --agents-max at least --agents-start');
  }
  const { adminUrl, cleanup } = await adminDatabase(BENCH_POSTGRES_SETTINGS);
  const database = `ticketd_capacity_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  // Agents' replies mail the customers: the mail files go to a directory of their own.
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-capacity-'));
  chmodSync(dataDir, 0o755);
  let server: Awaited<ReturnType<typeof startTicketd>> | undefined;
  let dispatcher: Awaited<ReturnType<typeof startTicketd>> | undefined;
  let setup: ReturnType<typeof inProcessServices> | undefined;
  let client: Client | undefined;
  const scheduler = new Scheduler();
  try {
    const env = {
      TICKETD_DATA_DIR: dataDir,
      TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000',
      TICKETD_RATE_LIMIT_PER_IP: '1000000000',
      TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: '1000000000',
      TICKETD_AUTH_RATE_LIMIT_PER_EMAIL_PER_HOUR: '1000000000',
      TICKETD_DB_POOL_MAX: '20',
    };
    // The first process bootstraps the account; the dispatcher, when apart, starts on it.
    const nodeArgs = options.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.profileDir}`] : [];
    server = await startTicketd(options.dispatcherApart ? 'api' : 'all', dbUrl, env, nodeArgs);
    if (options.dispatcherApart) dispatcher = await startTicketd('dispatcher', dbUrl, env, nodeArgs);
    const { info } = server;
    const url = info.url as string;
    const serverPids = [server.child.pid!, ...(dispatcher ? [dispatcher.child.pid!] : [])];
    const liveKey = info.bootstrap.apiKeys.live.key as string;
    const accountId = info.bootstrap.account.id as string;
    client = new Client(url, { connections: CONNECTIONS, timeoutMs: REQUEST_TIMEOUT_MS });
    const keyAuth = { authorization: `Bearer ${liveKey}` };
    const brandIds = [info.bootstrap.brand.id as string];
    for (let i = 1; i < BRANDS; i++) {
      brandIds.push((await client.send(null, 0, 'POST', '/v1/brands', keyAuth, { name: `Capacity ${i}`, slug: `capacity-${i}-${randomBytes(3).toString('hex')}` })).id);
    }
    log(`capacity: seeding ${options.tickets.toLocaleString('en')} tickets over ${BRANDS} brands…`);
    const seeded = await seed(dbUrl, { accountId, brandId: brandIds[0]!, brandIds, tickets: options.tickets, log });
    log(`seeded in ${seeded.seconds.toFixed(1)} s: ${seeded.liveTickets.toLocaleString('en')} live, non-spam tickets`);

    // Each agent's open ticket: a distinct open or pending one, anywhere in the 5 brands.
    const openTickets = await sql<{ id: string; brand_id: string; status: string }>(
      dbUrl,
      `SELECT id, brand_id, status FROM tickets WHERE account_id = $1 AND livemode AND deleted_at IS NULL AND NOT is_spam AND status IN ('open', 'pending')
      ORDER BY random() LIMIT $2`,
      [accountId, agentsMax],
    );
    const cluster: Cluster | null = await findCluster(dbUrl);
    setup = inProcessServices(dbUrl, { TICKETD_DATA_DIR: dataDir });
    const { services } = setup;
    const inAccount = tenantCtx(systemCtx(services, 'bench'), accountId, true);
    const words = vocabulary(5000);

    const polls = (agent: Agent): Poll[] => {
      const get: DashboardGet = (due, route, read) => client!.send('dashboard', due, 'GET', route, agent.auth, undefined, { cache: agent.cache, read });
      const ticketPath = `/v1/brands/${agent.open.brandId}/tickets/${agent.open.id}`;
      const write = (op: Op, due: number, method: 'POST' | 'PATCH', route: string, headers: Record<string, string>, body: object) =>
        void client!.send(op, due, method, route, headers, body, { read: null });
      return [
        ...dashboardPolls(get, brandIds, () => agent.open),
        {
          everyMs: COMMENT_EVERY_MS,
          fire: (due) =>
            write('comment', due, 'POST', `${ticketPath}/comments`, agent.auth, {
              body: text(words, 25),
              authorType: 'AGENT',
              authorName: agent.name,
              metadata: { authorName: agent.name },
            }),
        },
        {
          everyMs: STATUS_EVERY_MS,
          fire: (due) => {
            agent.open.status = agent.open.status === 'open' ? 'pending' : 'open';
            write('update', due, 'PATCH', ticketPath, agent.auth, { status: agent.open.status });
          },
        },
        {
          everyMs: CREATE_EVERY_MS,
          fire: (due) => {
            const b = Math.floor(Math.random() * BRANDS);
            const n = Math.floor(Math.random() * 2000);
            write(
              'create',
              due,
              'POST',
              `/v1/brands/${brandIds[b]}/tickets`,
              { ...keyAuth, 'x-idempotency-key': randomUUID() },
              {
                title: text(words, 6),
                body: text(words, 40),
                customerEmail: `customer${n}@brand${b}.capacity.example`,
                customerName: `${FIRST_NAMES[n % FIRST_NAMES.length]} ${LAST_NAMES[n % LAST_NAMES.length]}`,
                priority: pick(['low', 'normal', 'high', 'urgent']),
              },
            );
          },
        },
      ];
    };

    const agents: Agent[] = [];
    /** Agents join the running load up to `count`: a member each (the server's own code, in this process) and a session (verify). */
    const growTo = async (count: number) => {
      const started = performance.now();
      const indexes = Array.from({ length: count - agents.length }, (_, k) => agents.length + k);
      const joined = await eachAtOnce(indexes, SETUP_CONCURRENCY, async (i): Promise<Agent> => {
        const email = `agent${i}@capacity.example`;
        const name = `${FIRST_NAMES[i % FIRST_NAMES.length]} ${LAST_NAMES[Math.floor(i / FIRST_NAMES.length) % LAST_NAMES.length]}`;
        await members.add(inAccount, { email, name, role: 'member' });
        const token = await sessionTokenInProcess(services, url, accountId, email);
        const t = openTickets[i % openTickets.length]!;
        return {
          name,
          auth: { authorization: `Bearer ${token}` },
          open: { brandId: t.brand_id, id: t.id, status: t.status },
          cache: etags ? new Map() : undefined,
          active: true,
        };
      });
      for (const agent of joined) {
        agents.push(agent);
        scheduler.add(agent, polls(agent));
      }
      log(`  ${joined.length} agents joined in ${((performance.now() - started) / 1000).toFixed(1)} s (members and sessions)`);
    };
    const leaveTo = (count: number) => {
      for (const agent of agents.splice(count)) agent.active = false;
    };

    /**
     * The server's /metrics once a second over a window: its event-loop delay (prom-client resets
     * it at each scrape, so the worst second's p99 and the window's max) and its API pool (used
     * connections and queries waiting for one): a queue in the pool shows here, not in the CPU.
     */
    const watchServer = () => {
      const loopP99: number[] = [];
      const loopMax: number[] = [];
      const used: number[] = [];
      const waiting: number[] = [];
      const scrape = async () => {
        const body = await fetch(`${url}/metrics`)
          .then((res) => res.text())
          .catch(() => '');
        if (!body) return;
        loopP99.push(metricValue(body, 'nodejs_eventloop_lag_p99_seconds') * 1000);
        loopMax.push(metricValue(body, 'nodejs_eventloop_lag_max_seconds') * 1000);
        used.push(metricValue(body, 'ticketd_db_pool_connections', 'pool="main",state="used"'));
        waiting.push(metricValue(body, 'ticketd_db_pool_pending_acquires', 'pool="main"'));
      };
      let scraping = scrape();
      const timer = setInterval(() => {
        scraping = scraping.then(scrape);
      }, 1000);
      return async (): Promise<ServerWatch> => {
        clearInterval(timer);
        await scraping;
        const worst = (xs: number[]) => round1(Math.max(...xs.filter(Number.isFinite)));
        const mean = (xs: number[]) => round1(xs.filter(Number.isFinite).reduce((a, b) => a + b, 0) / xs.filter(Number.isFinite).length);
        return { loop: { p99: worst(loopP99), max: worst(loopMax) }, poolUsed: mean(used), poolWaiting: { mean: mean(waiting), max: worst(waiting) } };
      };
    };
    const readCpu = (): CpuReading => {
      const self = process.cpuUsage();
      return {
        at: performance.now(),
        server: serverPids.reduce((sum, pid) => sum + cpuMicros(pid), 0),
        db: cluster ? clusterCpuMicros(cluster) : null,
        bench: self.user + self.system,
      };
    };
    /** The load as it runs for `seconds` with the agents there are now; counted once every request of the window was answered. */
    const measure = async (seconds: number): Promise<Window> => {
      scheduler.takeLateness();
      const watched = watchServer();
      const start = readCpu();
      await sleep(seconds * 1000);
      const end = readCpu();
      const server = await watched();
      const lateness = scheduler.takeLateness().sort((a, b) => a - b);
      await client!.settledBefore(end.at);
      const [from, to] = [(start.at - client!.startedAt) / 1000, (end.at - client!.startedAt) / 1000];
      const samples = client!.takeSamples(to).filter((s) => s.at >= from);
      const routes = routeStats(samples);
      const errorKinds = new Map<string, number>();
      for (const s of samples) if (s.error) errorKinds.set(s.error, (errorKinds.get(s.error) ?? 0) + 1);
      const errors = samples.filter((s) => !s.ok).length;
      const worst = [...routes].sort((a, b) => (b.p99 || 0) - (a.p99 || 0))[0];
      const elapsed = (end.at - start.at) / 1000;
      return {
        agents: agents.length,
        seconds: elapsed,
        requests: samples.length,
        errors,
        errorKinds,
        routes,
        worst,
        cpuMs: { server: (end.server - start.server) / 1000, db: end.db === null ? null : (end.db - start.db!) / 1000, bench: (end.bench - start.bench) / 1000 },
        lateness: { p99: round1(percentile(lateness, 99)), max: round1(lateness.at(-1) ?? NaN) },
        serverLoop: server.loop,
        pool: { used: server.poolUsed, waiting: server.poolWaiting },
        passed: errors === 0 && routes.every((r) => !(r.p99 > P99_LIMIT_MS)),
      };
    };

    log(
      `capacity: ${etags ? 'browser caches emulated (If-None-Match)' : 'no browser caches (--no-etags)'}; ramp from ${agentsStart} agents by ${agentsStep} every ${stepSeconds} s to at most ${agentsMax}; ${os.cpus().length} cores`,
    );
    log(`database CPU: ${cluster ? cluster.how : 'not measured (the database is not a process on this machine)'}`);
    client.start();
    scheduler.start();
    const steps: Window[] = [];
    let passed = 0;
    for (let target = agentsStart; ; target = Math.min(agentsMax, target + agentsStep)) {
      await growTo(target);
      if (!steps.length) {
        log(`  warming up for ${WARM_UP_MS / 1000} s (not counted)`);
        await sleep(WARM_UP_MS);
      }
      const w = await measure(stepSeconds);
      steps.push(w);
      const errorText = w.errors ? `, errors ${w.errors} (${[...w.errorKinds.keys()].slice(0, 3).join('; ')})` : '';
      log(
        `  ${w.agents} agents: ${Math.round(w.requests / w.seconds)} req/s, worst p99 ${w.worst?.p99} ms (${w.worst?.route}), 304s ${notModifiedShare(w)}${errorText}; ` +
          `CPU of a core: server ${ofACore(w.cpuMs.server, w)}, database ${ofACore(w.cpuMs.db, w)}, bench ${ofACore(w.cpuMs.bench, w)}; server event-loop delay p99/max ${w.serverLoop.p99}/${w.serverLoop.max} ms; API pool used ${w.pool.used}, waiting mean/max ${w.pool.waiting.mean}/${w.pool.waiting.max}; slot lateness p99/max ${w.lateness.p99}/${w.lateness.max} ms: ${w.passed ? 'pass' : 'FAIL'}`,
      );
      if (!w.passed) break;
      passed = target;
      if (target >= agentsMax) break;
    }

    // A step lasts a minute; a longer run may still miss the bar: then one step fewer, and again.
    let sustained: Window | undefined;
    const missed: Window[] = [];
    for (let n = passed; n >= agentsStart && sustainMinutes > 0 && !sustained; n -= agentsStep) {
      if (agents.length > n) {
        leaveTo(n);
        log(`  back to ${n} agents; ${RECOVERY_MS / 1000} s for the server to catch up`);
        await client.settledBefore(performance.now());
        await sleep(RECOVERY_MS);
      }
      log(`sustaining ${n} agents for ${sustainMinutes} min…`);
      const w = await measure(sustainMinutes * 60);
      log(`  ${w.agents} agents: ${Math.round(w.requests / w.seconds)} req/s, worst p99 ${w.worst?.p99} ms (${w.worst?.route}), errors ${w.errors}: ${w.passed ? 'pass' : 'FAIL'}`);
      if (w.passed) sustained = w;
      else missed.push(w);
    }
    await scheduler.stop();
    await client.settle();
    report({ options, seeded: { live: seeded.liveTickets, seconds: seeded.seconds }, cluster, steps, passed, sustained, missed, errors: client.errors });
  } finally {
    await scheduler.stop();
    await client?.close();
    await setup?.close();
    await stop([server, dispatcher].flatMap((p) => (p ? [p.child] : [])));
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function report(r: {
  options: CapacityOptions;
  seeded: { live: number; seconds: number };
  cluster: Cluster | null;
  steps: Window[];
  passed: number;
  sustained: Window | undefined;
  /** Sustained runs that missed the bar before `sustained` (each one step fewer than the last). */
  missed: Window[];
  errors: Map<string, number>;
}): void {
  const { options: o, steps, sustained } = r;
  const out = process.stdout;
  out.write(
    `\nticketd capacity: agents with the dashboard open, ${o.tickets.toLocaleString('en')} tickets over ${BRANDS} brands (${r.seeded.live.toLocaleString('en')} live; seeded in ${r.seeded.seconds.toFixed(0)} s), ` +
      `${o.etags ? 'browser caches emulated (If-None-Match)' : 'no browser caches (--no-etags)'}, ${o.dispatcherApart ? 'the API and the dispatcher in two processes (server CPU: both)' : 'one --role all process'}, loopback, ${os.cpus().length} cores, load generator on the same machine\n`,
  );
  out.write(
    `Ramp: from ${o.agentsStart} agents by ${o.agentsStep} every ${o.stepSeconds} s, up to ${o.agentsMax}, until a route's p99 passes ${P99_LIMIT_MS} ms or a request fails. CPU as % of one core.\n\n`,
  );
  out.write(
    markdownTable(
      steps.map((w) => ({
        agents: w.agents,
        'req/s': Math.round(w.requests / w.seconds),
        'worst p99 ms': w.worst ? `${w.worst.p99} (${w.worst.route})` : '',
        errors: w.errors,
        '304s': notModifiedShare(w),
        'server CPU': ofACore(w.cpuMs.server, w),
        'database CPU': ofACore(w.cpuMs.db, w),
        'bench CPU': ofACore(w.cpuMs.bench, w),
        'server loop delay p99/max ms': `${w.serverLoop.p99} / ${w.serverLoop.max}`,
        'API pool used / waiting (mean, max)': `${w.pool.used} / ${w.pool.waiting.mean}, ${w.pool.waiting.max}`,
        'bench slot lateness p99/max ms': `${w.lateness.p99} / ${w.lateness.max}`,
        result: w.passed ? 'pass' : 'FAIL',
      })),
    ),
  );
  out.write(`\nLargest number of agents that passed: ${r.passed || `none (the first step, ${o.agentsStart}, failed)`}\n`);
  for (const w of r.missed)
    out.write(`Sustained ${w.agents} agents for ${round1(w.seconds / 60)} min: missed (worst p99 ${w.worst?.p99} ms, ${w.worst?.route}; errors ${w.errors})\n`);
  if (sustained) {
    const agentMinutes = (sustained.agents * sustained.seconds) / 60;
    const perAgentMinute = (ms: number | null) => (ms === null ? 'n/a' : round1(ms / agentMinutes));
    out.write(`\nSustained: ${sustained.agents} agents for ${round1(sustained.seconds / 60)} min\n\n`);
    out.write(
      markdownTable([
        {
          agents: sustained.agents,
          minutes: round1(sustained.seconds / 60),
          'req/s': Math.round(sustained.requests / sustained.seconds),
          errors: sustained.errors,
          'server CPU ms/agent-min': perAgentMinute(sustained.cpuMs.server),
          'database CPU ms/agent-min': perAgentMinute(sustained.cpuMs.db),
          'bench CPU ms/agent-min': perAgentMinute(sustained.cpuMs.bench),
          '304s': notModifiedShare(sustained),
          'server CPU': ofACore(sustained.cpuMs.server, sustained),
          'database CPU': ofACore(sustained.cpuMs.db, sustained),
          'bench CPU': ofACore(sustained.cpuMs.bench, sustained),
          'server loop delay p99/max ms': `${sustained.serverLoop.p99} / ${sustained.serverLoop.max}`,
          'API pool used / waiting (mean, max)': `${sustained.pool.used} / ${sustained.pool.waiting.mean}, ${sustained.pool.waiting.max}`,
          'bench slot lateness p99/max ms': `${sustained.lateness.p99} / ${sustained.lateness.max}`,
        },
      ]),
    );
    out.write(`database CPU: ${r.cluster ? r.cluster.how : 'not measured (the database is not a process on this machine)'}\n\nPer route (sustained):\n\n`);
    out.write(
      markdownTable(
        sustained.routes.map((x) => ({
          route: x.route,
          requests: x.count,
          'per agent-min': round1(x.count / agentMinutes),
          'p50 ms': x.p50,
          'p99 ms': x.p99,
          '304s': percent(x.notModified, x.count),
          'kB received/s': round1(x.bytes / 1024 / sustained.seconds),
          errors: x.errors,
        })),
      ),
    );
  }
  if (r.errors.size) {
    out.write('\nErrors over the whole run (warm-up and agents joining included):\n\n');
    out.write(markdownTable([...r.errors].map(([error, count]) => ({ error, count }))));
  }
  const plain = (w: Window) => ({ ...w, errorKinds: Object.fromEntries(w.errorKinds) });
  out.write(`${JSON.stringify({ options: o, seeded: r.seeded, passed: r.passed, steps: steps.map(plain), sustained: sustained && plain(sustained) })}\n`);
}
