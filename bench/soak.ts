/**
 * `npm run bench -- --soak [--minutes 30] [--rate 50]`: the real server (`bin/ticketd start --role
 * all`: API and dispatcher in one process, as a small install runs it) on a fresh database under a
 * steady mixed load for a long time, to see whether memory, latency or webhook delivery drift.
 *
 * Open loop: requests go out on a timetable (`--rate` per second, evenly spaced) whether or not
 * earlier ones were answered, and each latency counts from the request's slot in the timetable, so
 * a server that falls behind shows it instead of slowing the load down.
 *
 *  - Through an API key over three brands: ticket creates 30%, comments 25%, list pages 30% (sorts,
 *    filters, next pages by cursor, the cross-brand list), searches 15%. The database grows.
 *  - Webhooks on every brand (ticket.created, comment.created) to a receiver in this process: every
 *    ticket and comment created must arrive. After the load, the outbox gets DRAIN_MS to drain.
 *  - The owner's dashboard session polls as the admin dashboard does (see dashboard.ts).
 *  - Every 10 s, the server's /metrics: RSS, V8 heap used, event-loop delay p99, outbox backlog.
 *
 * Prints a table a minute and the goals with PASS/FAIL at the end; asserts nothing.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { dashboardTimetable } from './dashboard.js';
import { percentile, pick, text } from './floor.js';
import { Client, timetable, type Op, type Sample } from './open-loop.js';
import { adminDatabase, metricValue, RECEIVER_ON_LOOPBACK, sessionTokenFor, sql, startTicketd, stop, withDatabase } from './server.js';
import { FIRST_NAMES, LAST_NAMES, vocabulary } from './vocabulary.js';

const OPS: readonly Op[] = ['create', 'comment', 'list', 'search', 'dashboard'];
/** The API-key load: a third writes, so the database grows as a busy install's does. */
const MIX: readonly [Op, number][] = [
  ['create', 0.3],
  ['comment', 0.25],
  ['list', 0.3],
  ['search', 0.15],
];
const BRANDS = 3;
const SCRAPE_EVERY_MS = 10_000;
/** After the load, how long the outbox may take to deliver what is left (a failed delivery's first retry comes a minute later). */
const DRAIN_MS = 300_000;
/** A window with fewer answers than this gives no p99 worth comparing. */
const MIN_SAMPLES = 20;
const log = (s: string) => process.stderr.write(`${s}\n`);

interface Scrape {
  at: number;
  rssMiB: number;
  heapMiB: number;
  loopP99Ms: number;
  cpuSeconds: number;
  backlog: number;
  /** The dispatcher's pool: connections in use, and queries waiting for one (a queue in front of the deliveries). */
  dispatcherPool: { used: number; waiting: number };
}

/** The receiver: each delivered event by its ticket or comment id, and how late it came. */
async function webhookReceiver() {
  const received = new Map<string, number>();
  const lags: { at: number; ms: number }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const event = JSON.parse(Buffer.concat(chunks).toString()) as { event: string; data: { id?: string; comment?: { id: string } }; timestamp: string };
      const id = `${event.event}:${event.data.comment?.id ?? event.data.id}`;
      received.set(id, (received.get(id) ?? 0) + 1);
      lags.push({ at: Date.now(), ms: Date.now() - Date.parse(event.timestamp) });
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    lags,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/**
 * The figures the soak follows, from the server's Prometheus text. With the dispatcher apart (its
 * own process at `dispatcherUrl`), memory and CPU are the two processes' sum, the event loop the
 * API's, and the dispatcher's pool is that process's only one (`main`).
 */
async function scrape(url: string, at: number, dispatcherUrl?: string): Promise<Scrape | null> {
  const text = async (u: string) => {
    const res = await fetch(`${u}/metrics`).catch(() => null);
    return res?.status === 200 ? res.text() : null;
  };
  const [body, apart] = await Promise.all([text(url), dispatcherUrl ? text(dispatcherUrl) : null]);
  if (body === null || (dispatcherUrl && apart === null)) return null;
  const sum = (name: string) => metricValue(body, name) + (apart ? metricValue(apart, name) : 0);
  const pool = apart ? { text: apart, name: 'main' } : { text: body, name: 'dispatcher' };
  const MiB = 1024 * 1024;
  return {
    at,
    rssMiB: Math.round(sum('process_resident_memory_bytes') / MiB),
    heapMiB: Math.round(sum('nodejs_heap_size_used_bytes') / MiB),
    loopP99Ms: Math.round(metricValue(body, 'nodejs_eventloop_lag_p99_seconds') * 10_000) / 10,
    cpuSeconds: sum('process_cpu_seconds_total'),
    backlog: metricValue(body, 'ticketd_outbox_backlog'),
    dispatcherPool: {
      used: metricValue(pool.text, 'ticketd_db_pool_connections', `pool="${pool.name}",state="used"`),
      waiting: metricValue(pool.text, 'ticketd_db_pool_pending_acquires', `pool="${pool.name}"`),
    },
  };
}

/** The API-key side of the load: what each slot of the timetable sends. */
function apiLoad(client: Client, key: string, brandIds: readonly string[], memberId: string) {
  const words = vocabulary(5000);
  const auth = { authorization: `Bearer ${key}` };
  /** Expected deliveries, `<event>:<id>` of each ticket and comment created. */
  const expected = new Set<string>();
  /** The newest tickets of each brand: what comments go to. */
  const recent = brandIds.map(() => [] as string[]);
  /** Next pages to read: a list's cursor, read by a later slot, as a person paging would. */
  const nextPages: string[] = [];
  const lists = ['', 'status=active', 'sort=updatedAt', 'sort=priority&status=active', 'status=active&priority=high', `assigneeId=${memberId}&status=open`, 'sort=customer'];
  const round = (x: number) => Math.floor(Math.random() * x);

  const create = async (op: Op | null, due: number) => {
    const b = round(brandIds.length);
    const n = round(2000);
    const ticket = await client.send(
      op,
      due,
      'POST',
      `/v1/brands/${brandIds[b]}/tickets`,
      { ...auth, 'x-idempotency-key': randomUUID() },
      {
        title: text(words, 6),
        body: text(words, 40),
        customerEmail: `customer${n}@brand${b}.soak.example`,
        customerName: `${FIRST_NAMES[n % FIRST_NAMES.length]} ${LAST_NAMES[n % LAST_NAMES.length]}`,
        priority: pick(['low', 'normal', 'high', 'urgent']),
        tags: ['billing', 'bug', 'refund', 'shipping', 'vip'].filter(() => Math.random() < 0.2),
        ...(Math.random() < 0.3 ? { assigneeId: memberId } : {}),
      },
    );
    if (!ticket) return;
    expected.add(`ticket.created:${ticket.id}`);
    recent[b]!.push(ticket.id);
    if (recent[b]!.length > 500) recent[b]!.shift();
  };
  const comment = async (due: number) => {
    const b = round(brandIds.length);
    const ticketId = pick(recent[b]!);
    const agent = Math.random() < 0.7;
    const mention = Math.random() < 0.05 ? `@[Owner](${memberId}) ` : '';
    const created = await client.send(
      'comment',
      due,
      'POST',
      `/v1/brands/${brandIds[b]}/tickets/${ticketId}/comments`,
      { ...auth, 'x-idempotency-key': randomUUID() },
      {
        body: mention + text(words, 25),
        authorType: agent ? 'AGENT' : 'CUSTOMER',
        ...(agent && Math.random() < 0.15 ? { metadata: { isInternal: true } } : {}),
        ...(agent && Math.random() < 0.1 ? { setStatus: 'pending' } : {}),
      },
    );
    if (created) expected.add(`comment.created:${created.id}`);
  };
  const list = async (due: number) => {
    const next = Math.random() < 0.25 ? nextPages.shift() : undefined;
    const base = Math.random() < 0.15 ? '/v1/tickets' : `/v1/brands/${pick(brandIds)}/tickets`;
    const route = next ?? `${base}?${pick(lists)}`;
    const page = await client.send('list', due, 'GET', route, auth);
    const cursor = page?.pagination?.nextCursor as string | undefined;
    if (cursor && !next && nextPages.length < 20) nextPages.push(`${route}&cursor=${encodeURIComponent(cursor)}`);
  };
  const search = (due: number) => {
    const word = text(words, 1);
    const q = Math.random() < 0.2 ? `${text(words, 1)} ${word}` : Math.random() < 0.2 ? word.slice(0, 3) : word;
    return client.send('search', due, 'GET', `/v1/brands/${pick(brandIds)}/tickets?search=${encodeURIComponent(q)}`, auth);
  };
  return {
    expected,
    create,
    /** Sends one request of the mix (not awaited: the timetable goes on). */
    fire(due: number) {
      let r = Math.random();
      const op = MIX.find(([, share]) => (r -= share) < 0)?.[0] ?? 'list';
      if (op === 'create') void create('create', due);
      else if (op === 'comment') void comment(due);
      else if (op === 'list') void list(due);
      else void search(due);
    },
  };
}

/** Where the goals look: minute 5, minutes 5-10 and the last 5; runs too short for those get the same fractions of the run (a 30-minute run's). */
function goalWindows(minutes: number) {
  const scale = minutes >= 15 ? 1 : minutes / 30;
  const at = 300 * scale;
  return { scaled: scale !== 1, at, base: [at, 2 * at] as const, last: [minutes * 60 - at, minutes * 60] as const };
}

const fmt = (s: number) => `${Math.floor(s / 60)}:${String(Math.round(s % 60)).padStart(2, '0')}`;
const round1 = (x: number) => Math.round(x * 10) / 10;

function latencies(samples: readonly Sample[], from: number, to: number, op?: Op): number[] {
  return samples
    .filter((s) => s.ok && s.at >= from && s.at < to && (!op || s.op === op))
    .map((s) => s.ms)
    .sort((a, b) => a - b);
}

/** One row a minute: what was sent, errors, the server's memory and event loop, p50/p99 per operation, deliveries. */
function minuteRow(m: number, client: Client, scrapes: readonly Scrape[], lags: readonly { at: number; ms: number }[], wallT0: number) {
  const [from, to] = [m * 60, (m + 1) * 60];
  const inMinute = client.samples.filter((s) => s.at >= from && s.at < to);
  const first = scrapes.filter((s) => s.at <= from).at(-1);
  const last = scrapes.filter((s) => s.at <= to).at(-1);
  const inside = scrapes.filter((s) => s.at > from && s.at <= to);
  const loop = inside.map((s) => s.loopP99Ms);
  const lag = lags
    .filter((l) => l.at - wallT0 >= from * 1000 && l.at - wallT0 < to * 1000)
    .map((l) => l.ms)
    .sort((a, b) => a - b);
  const row: Record<string, string | number> = {
    minute: m + 1,
    requests: inMinute.length,
    errors: inMinute.filter((s) => !s.ok).length,
    'RSS MiB': last?.rssMiB ?? '',
    'heap MiB': last?.heapMiB ?? '',
    'loop p99 ms': loop.length ? Math.max(...loop) : '',
    // Of one core: near 100, the server process is the bottleneck; far below with high latencies, something else is.
    'server CPU %': first && last && last.at > first.at ? Math.round(((last.cpuSeconds - first.cpuSeconds) / (last.at - first.at)) * 100) : '',
    'outbox backlog': last?.backlog ?? '',
    'dispatcher pool used / waiting (max)': inside.length
      ? `${Math.max(...inside.map((s) => s.dispatcherPool.used))} / ${Math.max(...inside.map((s) => s.dispatcherPool.waiting))}`
      : '',
  };
  for (const op of OPS) {
    const l = latencies(client.samples, from, to, op);
    row[`${op} p50/p99 ms`] = l.length ? `${round1(percentile(l, 50))} / ${round1(percentile(l, 99))}` : '';
  }
  row.deliveries = lag.length;
  row['delivery p99 ms'] = lag.length ? Math.round(percentile(lag, 99)) : '';
  return row;
}

export async function runSoak(options: { minutes: number; rate: number; dispatcherApart: boolean }): Promise<void> {
  const { minutes, rate } = options;
  if (!(minutes > 0 && rate > 0)) throw new Error('--minutes and --rate must be positive numbers');
  const seconds = Math.round(minutes * 60);
  const { adminUrl, cleanup } = await adminDatabase({ max_connections: '200' });
  const database = `ticketd_soak_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  // Agent replies mail the customer: the mail files go to a directory of their own.
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-soak-'));
  chmodSync(dataDir, 0o755);
  const receiver = await webhookReceiver();
  const servers: Awaited<ReturnType<typeof startTicketd>>[] = [];
  let client: Client | undefined;
  try {
    const env = { ...RECEIVER_ON_LOOPBACK, TICKETD_DATA_DIR: dataDir, TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000' };
    // The first process bootstraps the account; the dispatcher, when apart, starts on it.
    servers.push(await startTicketd(options.dispatcherApart ? 'api' : 'all', dbUrl, env));
    if (options.dispatcherApart) servers.push(await startTicketd('dispatcher', dbUrl, env));
    const { info } = servers[0]!;
    const url = info.url as string;
    const dispatcherUrl = servers[1]?.info.dispatcherUrl as string | undefined;
    client = new Client(url);
    const key = info.bootstrap.apiKeys.live.key as string;
    const owner = info.bootstrap.owner as { id: string; email: string };
    const auth = { authorization: `Bearer ${key}` };
    const brandIds = [info.bootstrap.brand.id as string];
    for (let i = 1; i < BRANDS; i++) brandIds.push((await client.send(null, 0, 'POST', '/v1/brands', auth, { name: `Soak ${i}` })).id);
    for (const b of brandIds) await client.send(null, 0, 'POST', `/v1/brands/${b}/webhooks`, auth, { url: receiver.url, events: ['ticket.created', 'comment.created'] });
    const load = apiLoad(client, key, brandIds, owner.id);
    // A few tickets in each brand before the clock starts, for the first comments.
    for (let i = 0; i < 10 * BRANDS; i++) await load.create(null, 0);
    const session = await sessionTokenFor(dbUrl, url, owner.email);

    log(
      `soak: ${minutes} min, ${rate} req/s through an API key over ${BRANDS} brands, plus a dashboard session; ${options.dispatcherApart ? 'a --role api and a --role dispatcher process' : 'one --role all process'}; ${os.cpus().length} cores`,
    );
    const start = client.start();
    const wallT0 = Date.now();
    const scrapes: Scrape[] = [];
    await Promise.all([
      timetable(start, 1000 / rate, Math.round(seconds * rate), (_i, due) => load.fire(due)),
      dashboardTimetable(client, start, seconds, { authorization: `Bearer ${session}` }, owner.id, brandIds),
      timetable(start, SCRAPE_EVERY_MS, Math.floor((seconds * 1000) / SCRAPE_EVERY_MS) + 1, async (i) => {
        const s = await scrape(url, (i * SCRAPE_EVERY_MS) / 1000, dispatcherUrl);
        if (s) scrapes.push(s);
        const minute = (i * SCRAPE_EVERY_MS) / 60_000;
        if (i && Number.isInteger(minute)) {
          const row = minuteRow(minute - 1, client!, scrapes, receiver.lags, wallT0);
          log(
            `  ${Object.entries(row)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')}`,
          );
        }
      }),
    ]);
    await client.settle();

    log(`load done; waiting up to ${DRAIN_MS / 1000} s for the outbox to drain…`);
    const drainStart = performance.now();
    const missing = () => [...load.expected].filter((id) => !receiver.received.has(id));
    let drained = await scrape(url, seconds, dispatcherUrl);
    // Until every delivery came, or nothing is left to deliver (the rest failed: lost), or the deadline.
    while (missing().length && drained?.backlog !== 0 && performance.now() - drainStart < DRAIN_MS) {
      await sleep(1000);
      drained = await scrape(url, seconds, dispatcherUrl);
    }
    const drainSeconds = round1((performance.now() - drainStart) / 1000);
    report({ minutes, rate, client, scrapes, receiver, expected: load.expected, lost: missing().length, backlog: drained?.backlog ?? NaN, drainSeconds, wallT0 });
  } finally {
    await client?.close();
    receiver.close();
    await stop(servers.map((s) => s.child));
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function report(r: {
  minutes: number;
  rate: number;
  client: Client;
  scrapes: Scrape[];
  receiver: Awaited<ReturnType<typeof webhookReceiver>>;
  expected: Set<string>;
  lost: number;
  backlog: number;
  drainSeconds: number;
  wallT0: number;
}): void {
  const { minutes, client, scrapes } = r;
  const out = process.stdout;
  const w = goalWindows(minutes);
  const span = (x: readonly [number, number]) => `${fmt(x[0])}-${fmt(x[1])}`;
  out.write(`\nticketd soak: ${minutes} min at ${r.rate} req/s (open loop) + a dashboard session, ${BRANDS} brands, loopback, ${os.cpus().length} cores\n`);
  out.write("\nMinute by minute (RSS, heap: at the minute's end; loop p99: the worst 10 s; p50/p99 from each request's slot; delivery: event to receipt):\n");
  console.table(Array.from({ length: Math.ceil(minutes) }, (_, m) => minuteRow(m, client, scrapes, r.receiver.lags, r.wallT0)));

  const goals: { goal: string; measured: string; result: string }[] = [];
  const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
  const rssAt = scrapes.find((s) => s.at >= w.at);
  const rssEnd = scrapes.at(-1);
  const growth = rssAt && rssEnd ? rssEnd.rssMiB / rssAt.rssMiB - 1 : NaN;
  goals.push({
    goal: `RSS at the end at most 10% above ${fmt(w.at)}`,
    measured: `${rssAt?.rssMiB} MiB → ${rssEnd?.rssMiB} MiB (${growth >= 0 ? '+' : ''}${round1(growth * 100)}%)`,
    result: verdict(growth <= 0.1),
  });

  const opRows = [...OPS, undefined].map((op) => {
    const all = latencies(client.samples, 0, Infinity, op);
    const [base, last] = [latencies(client.samples, ...w.base, op), latencies(client.samples, ...w.last, op)];
    const enough = base.length >= MIN_SAMPLES && last.length >= MIN_SAMPLES;
    const ratio = percentile(last, 99) / percentile(base, 99);
    const row = {
      operation: op ?? 'overall',
      requests: client.samples.filter((s) => !op || s.op === op).length,
      errors: client.samples.filter((s) => !s.ok && (!op || s.op === op)).length,
      'p50 ms': round1(percentile(all, 50)),
      'p99 ms': round1(percentile(all, 99)),
      [`p99 ms ${span(w.base)}`]: round1(percentile(base, 99)),
      [`p99 ms ${span(w.last)}`]: round1(percentile(last, 99)),
      'last / base': enough ? `${ratio.toFixed(2)}×` : `(under ${MIN_SAMPLES} answers)`,
    };
    if (enough)
      goals.push({ goal: `p99 of ${op ?? 'all operations'}, ${span(w.last)} within 1.2× of ${span(w.base)}`, measured: row['last / base'], result: verdict(ratio <= 1.2) });
    return row;
  });
  const errors = client.samples.filter((s) => !s.ok).length;
  goals.push({ goal: 'no errors (non-2xx, network, skipped)', measured: String(errors), result: verdict(errors === 0) });
  goals.push({
    goal: 'no deliveries lost',
    measured: `${r.lost} of ${r.expected.size} not received (outbox backlog ${r.backlog} after ${r.drainSeconds} s)`,
    result: verdict(r.lost === 0),
  });

  out.write('\nPer operation (p50/p99 over the whole run, and the p99 of the two windows the goals compare):\n');
  console.table(opRows);
  const duplicates = [...r.receiver.received.values()].filter((n) => n > 1).length;
  const unexpected = [...r.receiver.received.keys()].filter((id) => !r.expected.has(id)).length;
  const lags = r.receiver.lags.map((l) => l.ms).sort((a, b) => a - b);
  const created = (event: string) => [...r.expected].filter((id) => id.startsWith(event)).length;
  out.write(`\ncreated: ${created('ticket.created')} tickets, ${created('comment.created')} comments (set-up included)`);
  out.write(
    `\nwebhooks: ${r.expected.size} expected, ${r.receiver.received.size} received (${duplicates} more than once, ${unexpected} not expected), delivery p50 ${Math.round(percentile(lags, 50))} ms, p99 ${Math.round(percentile(lags, 99))} ms\n`,
  );
  if (client.errors.size) {
    out.write('\nErrors:\n');
    console.table([...client.errors].map(([error, count]) => ({ error, count })));
  }
  out.write(`\nGoals${w.scaled ? ` (a ${minutes}-minute run: the windows are a 30-minute run's, scaled by ${minutes}/30)` : ''}:\n`);
  console.table(goals);
  out.write(
    `${JSON.stringify({ minutes, rate: r.rate, perOperation: opRows, goals, webhooks: { expected: r.expected.size, received: r.receiver.received.size, lost: r.lost }, scrapes })}\n`,
  );
}
