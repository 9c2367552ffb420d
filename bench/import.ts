/**
 * `npm run bench -- --import [--tickets 100000]`: `ticketd import dispatch` of one brand of N
 * tickets with 3 comments each, from a source ticketd (an `--role api` process on its own
 * database) into an account of a second database, both on one PostgreSQL cluster. The source's
 * members exist in the target (same emails), as an operator would invite them first. Measures
 * the import's wall time, tickets a second, the importer process's peak RSS and its growth
 * (/proc, every 100 ms) and the CPU the importer, the source server and PostgreSQL spent per
 * ticket; then a second run, which must find every ticket unchanged. Asserts nothing.
 * Goal: 500 tickets/s or more on this machine, memory flat.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { packageRoot } from '../server/core/paths.js';
import { seed } from './seed.js';
import { adminDatabase, BENCH_POSTGRES_SETTINGS, sql, startTicketd, stop, withDatabase } from './server.js';
import { clusterCpuMicros, cpuMicros, findCluster, rssMiB } from './proc.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const bin = path.join(packageRoot, 'bin', 'ticketd');

interface ImportRun {
  seconds: number;
  firstRss: number;
  peakRss: number;
  /** The RSS sampled every 100 ms, in order: where it stands a quarter, half, three quarters through. */
  samples: number[];
  importerCpu: number;
  report: { counts: Record<string, { created: number; updated: number; unchanged: number; skipped: number }> };
}

/** One `ticketd import dispatch` run to its end, its RSS sampled and its CPU read just before it exits. */
function importOnce(targetUrl: string, accountId: string, sourceUrl: string, apiKey: string): Promise<ImportRun> {
  const started = process.hrtime.bigint();
  // Without --json: a line an object would be most of the importer's work (stdout to a pipe is synchronous).
  const child = spawn(process.execPath, [bin, 'import', 'dispatch', '--from-url', sourceUrl, '--account', accountId, '--keep-numbers'], {
    env: { ...process.env, DATABASE_URL: targetUrl, TICKETD_IMPORT_API_KEY: apiKey, TICKETD_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const pid = child.pid!;
  let firstRss = 0;
  let peakRss = 0;
  const samples: number[] = [];
  let cpu = 0;
  const sampler = setInterval(() => {
    try {
      const rss = rssMiB(pid);
      if (!firstRss) firstRss = rss;
      peakRss = Math.max(peakRss, rss);
      samples.push(rss);
      cpu = cpuMicros(pid);
    } catch {
      // exited between two samples
    }
  }, 100);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => {
      clearInterval(sampler);
      if (code !== 0) return reject(new Error(`ticketd import dispatch exited with ${code}`));
      // The report's lines "  ticket      2972 created, 0 updated, 0 unchanged, 0 skipped".
      const counts: ImportRun['report']['counts'] = {};
      for (const [, kind, c, u, n, sk] of out.matchAll(/^ {2}(\w+) +(\d+) created, (\d+) updated, (\d+) unchanged, (\d+) skipped$/gm))
        counts[kind!] = { created: Number(c), updated: Number(u), unchanged: Number(n), skipped: Number(sk) };
      resolve({ seconds: Number(process.hrtime.bigint() - started) / 1e9, firstRss, peakRss, samples, importerCpu: cpu, report: { counts } });
    });
  });
}

export async function runImportBench(opts: { tickets: number }): Promise<void> {
  const { adminUrl, cleanup } = await adminDatabase(BENCH_POSTGRES_SETTINGS);
  const suffix = randomBytes(4).toString('hex');
  const [sourceDb, targetDb] = [`ticketd_bench_import_src_${suffix}`, `ticketd_bench_import_dst_${suffix}`];
  for (const db of [sourceDb, targetDb]) await sql(adminUrl, `CREATE DATABASE ${db}`);
  const [sourceUrl, targetUrl] = [withDatabase(adminUrl, sourceDb), withDatabase(adminUrl, targetDb)];
  const limits = { TICKETD_DB_POOL_MAX: '20', TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000', TICKETD_RATE_LIMIT_PER_IP: '1000000000' };
  // The target's account is made by its first start; the server is not needed after that.
  const made = await startTicketd('api', targetUrl, limits);
  const target = { accountId: made.info.bootstrap.account.id as string };
  await stop([made.child]);
  const api = await startTicketd('api', sourceUrl, limits);
  try {
    const key = api.info.bootstrap.apiKeys.live.key as string;
    const brandId = api.info.bootstrap.brand.id as string;
    const accountId = api.info.bootstrap.account.id as string;
    const seeded = await seed(sourceUrl, { accountId, brandId, tickets: opts.tickets, log });
    // Exactly 3 comments a ticket (the first the customer's), and no file: the counts say so.
    await sql(sourceUrl, `UPDATE tickets SET comment_count = 3, attachment_count = 0 WHERE account_id = $1 AND brand_id = $2`, [accountId, brandId]);
    await sql(
      sourceUrl,
      `INSERT INTO comments (id, account_id, livemode, brand_id, ticket_id, body, author_name, author_type, created_at, updated_at)
       SELECT 'cmt_' || substr(t.id, 5) || lpad(k::text, 2, '0'), t.account_id, t.livemode, t.brand_id, t.id,
              'Thanks for getting back to us. The printer on the third floor still jams after the update (reply ' || k || ').',
              CASE WHEN k = 1 THEN 'Customer' ELSE 'Agent ' || (k % 5) END, CASE WHEN k = 1 THEN 'CUSTOMER' ELSE 'AGENT' END,
              t.created_at + k * interval '1 hour', t.created_at + k * interval '1 hour'
       FROM tickets t CROSS JOIN generate_series(1, 3) AS k
       WHERE t.account_id = $1 AND t.brand_id = $2`,
      [accountId, brandId],
    );
    await sql(sourceUrl, 'VACUUM (ANALYZE)');
    // The source's members, invited into the target first (assignees are matched by email).
    const members = await sql<{ email: string; name: string }>(sourceUrl, `SELECT email, name FROM members WHERE account_id = $1 AND role <> 'owner'`, [accountId]);
    await sql(targetUrl, `INSERT INTO members (id, account_id, email, name, role) SELECT 'mem_' || md5(e), $1, e, n, 'member' FROM unnest($2::text[], $3::text[]) AS m (e, n)`, [
      target.accountId,
      members.map((m) => m.email),
      members.map((m) => m.name),
    ]);
    const [{ n: tickets }] = await sql<{ n: string }>(sourceUrl, `SELECT count(*) AS n FROM tickets WHERE account_id = $1 AND deleted_at IS NULL`, [accountId]);
    log(`seed: ${Number(tickets).toLocaleString('en')} tickets (${seeded.liveTickets.toLocaleString('en')} live), 3 comments each, in the source`);

    const cluster = await findCluster(sourceUrl);
    const rows: Record<string, string | number>[] = [];
    for (const turn of ['first run', 'second run (nothing new)']) {
      const sourceCpu = cpuMicros(api.child.pid!);
      const pgCpu = cluster ? clusterCpuMicros(cluster) : 0;
      const run = await importOnce(targetUrl, target.accountId, api.info.url as string, key);
      const t = run.report.counts.ticket ?? { created: 0, updated: 0, unchanged: 0, skipped: 0 };
      const n = t.created + t.updated + t.unchanged + t.skipped;
      const row = {
        run: turn,
        tickets: n,
        created: t.created,
        unchanged: t.unchanged,
        skipped: t.skipped,
        comments: run.report.counts.comment?.created ?? 0,
        seconds: Math.round(run.seconds * 10) / 10,
        'tickets/s': Math.round(n / run.seconds),
        'RSS first MiB': Math.round(run.firstRss),
        'RSS at 1/4, 1/2, 3/4 MiB': [1, 2, 3].map((q) => Math.round(run.samples[Math.floor((run.samples.length * q) / 4)] ?? 0)).join(', '),
        'RSS peak MiB': Math.round(run.peakRss),
        'importer CPU µs/ticket': Math.round(run.importerCpu / n),
        'source CPU µs/ticket': Math.round((cpuMicros(api.child.pid!) - sourceCpu) / n),
        'PostgreSQL CPU µs/ticket': cluster ? Math.round((clusterCpuMicros(cluster) - pgCpu) / n) : 'n/a',
      };
      log(`  ${turn}: ${row['tickets/s']} tickets/s, RSS ${row['RSS first MiB']} → peak ${row['RSS peak MiB']} MiB`);
      rows.push(row);
    }
    process.stdout.write(`\nImport of one brand of ${Number(tickets).toLocaleString('en')} tickets × 3 comments from a ticketd source, loopback:\n`);
    console.table(rows);
    process.stdout.write(`${JSON.stringify({ tickets: Number(tickets), rows })}\n`);
  } finally {
    await stop([api.child]);
    for (const db of [sourceDb, targetDb]) await sql(adminUrl, `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => undefined);
    await cleanup();
  }
}
