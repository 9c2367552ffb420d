/**
 * `npm run bench -- --export [--tickets 1000000] [--quick]`: the ticket export (GET …/tickets/export)
 * of one brand of N tickets, each ticket with the comments its commentCount says (0-7, about 3.5
 * on average), as NDJSON and CSV, without and with comments, in turns. Per run: tickets a second,
 * MB a second, the API process's resident memory before, at its peak and its growth (from
 * /proc/<pid>/status, sampled every 50 ms), and the CPU the API process and PostgreSQL spent per
 * ticket. The client reads as fast as it can on loopback and counts the lines. Prints a table;
 * asserts nothing. Goal: at 1M tickets, RSS growth under 50 MB at 20,000 tickets/s or more.
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { seed } from './seed.js';
import { adminDatabase, BENCH_POSTGRES_SETTINGS, sql, startTicketd, stop, withDatabase } from './server.js';
import { clusterCpuMicros, cpuMicros, findCluster, rssMiB } from './proc.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
/** BENCH_TURNS: how many times each scenario runs (default 2, the order reversed every other turn). */
const TURNS = Number(process.env.BENCH_TURNS ?? 2);

interface Run {
  lines: number;
  bytes: number;
  seconds: number;
  trailer: string | undefined;
  peakRss: number;
}

/** One export read to its end, counting its lines, with the server's RSS sampled meanwhile. */
function exportOnce(url: string, key: string, pid: number): Promise<Run> {
  const started = process.hrtime.bigint();
  let peakRss = rssMiB(pid);
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMiB(pid))), 50);
  return new Promise<Run>((resolve, reject) => {
    const req = http.get(url, { headers: { authorization: `Bearer ${key}` } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`export: ${res.statusCode}`));
      let lines = 0;
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
      });
      res.on('end', () => {
        clearInterval(sampler);
        peakRss = Math.max(peakRss, rssMiB(pid));
        resolve({ lines, bytes, seconds: Number(process.hrtime.bigint() - started) / 1e9, trailer: res.trailers['x-ticket-count'], peakRss });
      });
      res.on('error', reject);
    });
    req.on('error', (err) => {
      clearInterval(sampler);
      reject(err);
    });
  });
}

export async function runExportBench(opts: { tickets: number }): Promise<void> {
  const { adminUrl, cleanup } = await adminDatabase(BENCH_POSTGRES_SETTINGS);
  const database = `ticketd_bench_export_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const api = await startTicketd('api', dbUrl, { TICKETD_DB_POOL_MAX: '20', TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000', TICKETD_RATE_LIMIT_PER_IP: '1000000000' });
  try {
    const pid = api.child.pid!;
    const key = api.info.bootstrap.apiKeys.live.key as string;
    const brandId = api.info.bootstrap.brand.id as string;
    const accountId = api.info.bootstrap.account.id as string;
    const seeded = await seed(dbUrl, { accountId, brandId, tickets: opts.tickets, log });
    log(`seed: ${seeded.liveTickets.toLocaleString('en')} live tickets in ${seeded.seconds.toFixed(0)} s; comments…`);
    const commentsStarted = Date.now();
    // As many comments as each ticket's commentCount, a sentence or two each, the first by the customer.
    await sql(
      dbUrl,
      `INSERT INTO comments (id, account_id, livemode, brand_id, ticket_id, body, author_name, author_type, created_at, updated_at)
       SELECT 'cmt_' || substr(t.id, 5) || lpad(k::text, 2, '0'), t.account_id, t.livemode, t.brand_id, t.id,
              'Thanks for getting back to us. The printer on the third floor still jams after the update (reply ' || k || ').',
              CASE WHEN k = 1 THEN 'Customer' ELSE 'Agent ' || (k % 5) END, CASE WHEN k = 1 THEN 'CUSTOMER' ELSE 'AGENT' END,
              t.created_at + k * interval '1 hour', t.created_at + k * interval '1 hour'
       FROM tickets t CROSS JOIN LATERAL generate_series(1, t.comment_count) AS k
       WHERE t.account_id = $1 AND t.livemode AND t.brand_id = $2`,
      [accountId, brandId],
    );
    await sql(dbUrl, 'VACUUM (ANALYZE) comments');
    const [{ n: commentCount }] = await sql<{ n: string }>(dbUrl, 'SELECT count(*) AS n FROM comments');
    log(`seed: ${Number(commentCount).toLocaleString('en')} comments in ${((Date.now() - commentsStarted) / 1000).toFixed(0)} s`);
    const cluster = await findCluster(dbUrl);
    const base = `${api.info.url}/v1/brands/${brandId}/tickets/export`;

    // A warm-up: the route compiled, the pool and the statements made, before the baseline is read.
    await exportOnce(`${base}?priority=urgent&comments=true`, key, pid);
    await exportOnce(`${base}?priority=urgent&format=csv`, key, pid);

    const scenarios: [string, string][] = [
      ['ndjson', ''],
      ['csv', '?format=csv'],
      ['ndjson + comments', '?comments=true'],
    ];
    const baseline = rssMiB(pid);
    const rows: Record<string, string | number>[] = [];
    for (let turn = 1; turn <= TURNS; turn++) {
      for (const [name, query] of turn % 2 ? scenarios : [...scenarios].reverse()) {
        const rssBefore = rssMiB(pid);
        const cpuBefore = cpuMicros(pid);
        const pgBefore = cluster ? clusterCpuMicros(cluster) : 0;
        const run = await exportOnce(`${base}${query}`, key, pid);
        const tickets = Number(run.trailer ?? NaN);
        const row = {
          scenario: `${name} (turn ${turn})`,
          tickets,
          lines: run.lines,
          seconds: Math.round(run.seconds * 10) / 10,
          'tickets/s': Math.round(tickets / run.seconds),
          MB: Math.round(run.bytes / 1e6),
          'MB/s': Math.round(run.bytes / 1e6 / run.seconds),
          'RSS before MiB': Math.round(rssBefore),
          'RSS peak MiB': Math.round(run.peakRss),
          'RSS growth MiB': Math.round(run.peakRss - rssBefore),
          'peak over baseline MiB': Math.round(run.peakRss - baseline),
          'API CPU µs/ticket': Math.round((cpuMicros(pid) - cpuBefore) / tickets),
          'PostgreSQL CPU µs/ticket': cluster ? Math.round((clusterCpuMicros(cluster) - pgBefore) / tickets) : 'n/a',
        };
        log(`  ${row.scenario}: ${row['tickets/s']} tickets/s, ${row['MB/s']} MB/s, RSS ${row['RSS before MiB']} → peak ${row['RSS peak MiB']} MiB`);
        rows.push(row);
      }
    }
    process.stdout.write(`\nThe API process after the warm-up exports (the baseline): ${Math.round(baseline)} MiB RSS.`);
    process.stdout.write(
      `\nTicket export of one brand: ${seeded.liveTickets.toLocaleString('en')} live tickets (${opts.tickets.toLocaleString('en')} seeded), ${Number(commentCount).toLocaleString('en')} comments, loopback, ${TURNS} turns:\n`,
    );
    console.table(rows);
    process.stdout.write(`${JSON.stringify({ tickets: opts.tickets, live: seeded.liveTickets, baselineRssMiB: Math.round(baseline), comments: Number(commentCount), rows })}\n`);
  } finally {
    await stop([api.child]);
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
  }
}
