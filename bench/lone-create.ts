/**
 * A lighter probe of the create path than `BENCH_ONLY=creates npm run bench`: one server on a
 * fresh database of N tickets, and the raw one-statement floor (floor.ts) beside it, in alternating
 * turns: a lone create (concurrency 1) and 16 at once on one brand and over 16 brands. Prints each
 * turn's API p50 ÷ floor p50 at concurrency 1 and API rate ÷ floor rate at 16, and their medians.
 *
 *   node dist/bench/lone-create.js [--tickets 20000] [--seconds 5] [--turns 3]
 *   node dist/bench/lone-create.js --profile /tmp/prof [--creates 2000]
 *      (instead: the server under `node --cpu-prof`, driven by that many creates one after another;
 *      its .cpuprofile lands in that folder when it exits)
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { oneStatementOp, percentile, runLoad, type FloorInput } from './floor.js';
import { cpuMicros } from './proc.js';
import { seed } from './seed.js';
import { adminDatabase, BENCH_POSTGRES_SETTINGS, sql, startTicketd, withDatabase } from './server.js';

const { values } = parseArgs({
  options: {
    tickets: { type: 'string', default: '20000' },
    seconds: { type: 'string', default: '5' },
    turns: { type: 'string', default: '3' },
    profile: { type: 'string' },
    creates: { type: 'string', default: '2000' },
  },
});
const seconds = Number(values.seconds);
const log = (s: string) => process.stderr.write(`${s}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (x: number) => Math.round(x * 100) / 100;

interface Measured {
  perSec: number;
  p50: number;
  /** Server CPU per create, µs (API only). */
  cpu?: number;
}

async function apiLoad(url: string, key: string, brandIds: string[], c: number, body: (b: number) => object, ms: number, pid: number): Promise<Measured> {
  let next = 0;
  const latencies: number[] = [];
  const cpuBefore = cpuMicros(pid);
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections: c,
        method: 'POST',
        duration: ms / 1000,
        initialContext: {},
        requests: [
          {
            setupRequest: (req, context) => {
              const ctx = context as { b?: number };
              ctx.b ??= next++ % brandIds.length;
              return {
                ...req,
                path: `/v1/brands/${brandIds[ctx.b]}/tickets`,
                headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-idempotency-key': randomUUID() },
                body: JSON.stringify(body(ctx.b)),
              };
            },
          },
        ],
      },
      (err, r) => (err ? reject(err) : resolve(r)),
    );
    instance.on('response', (_c: unknown, status: number, _b: number, t: number) => {
      if (status < 300) latencies.push(t);
    });
  });
  if (result.non2xx || result.errors) throw new Error(`API creates failed: ${result.non2xx} non-2xx, ${result.errors} errors`);
  latencies.sort((a, b) => a - b);
  return { perSec: Math.round(latencies.length / (ms / 1000)), p50: percentile(latencies, 50), cpu: Math.round((cpuMicros(pid) - cpuBefore) / latencies.length) };
}

async function main() {
  const { adminUrl, cleanup } = await adminDatabase(BENCH_POSTGRES_SETTINGS);
  const database = `ticketd_probe_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const { child, info } = await startTicketd(
    'all',
    dbUrl,
    {
      TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000000',
      TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000',
      TICKETD_RATE_LIMIT_PER_IP: '1000000000',
      TICKETD_DB_POOL_MAX: '20',
    },
    values.profile ? ['--cpu-prof', `--cpu-prof-dir=${values.profile}`] : [],
  );
  const key: string = info.bootstrap.apiKeys.live.key;
  const accountId: string = info.bootstrap.account.id;
  const brandIds: string[] = [info.bootstrap.brand.id];
  try {
    const tickets = Number(values.tickets);
    log(`seeding ${tickets} tickets…`);
    const seeded = await seed(dbUrl, { accountId, brandId: brandIds[0]!, tickets, log });
    const api = async (p: string, body: unknown) => {
      const res = await fetch(`${info.url}${p}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (res.status >= 300) throw new Error(`POST ${p}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string };
    };
    // As run.ts: 15 more brands, each with 200 customers and the two tags.
    for (let i = 1; i < 16; i++) brandIds.push((await api('/v1/brands', { name: `Bench ${i}`, slug: `bench-${i}-${randomBytes(3).toString('hex')}` })).id);
    await sql(
      dbUrl,
      `INSERT INTO contacts (id, account_id, livemode, brand_id, email, name, name_key)
      SELECT 'cus_b' || b.i || '_' || g, $1, true, b.id, 'customer' || g || '@brand' || b.i || '.example', 'Customer ' || g, 'customer ' || g
      FROM unnest($2::text[]) WITH ORDINALITY AS b (id, i), generate_series(1, 200) AS g`,
      [accountId, brandIds.slice(1)],
    );
    await sql(
      dbUrl,
      `INSERT INTO tags (id, account_id, livemode, brand_id, name, color)
      SELECT 'tag_b' || b.i || '_' || g, $1, true, b.id, (ARRAY['billing', 'bug'])[g], '#123456'
      FROM unnest($2::text[]) WITH ORDINALITY AS b (id, i), generate_series(1, 2) AS g`,
      [accountId, brandIds.slice(1)],
    );
    const emails = [seeded.contactEmails.slice(0, 5000), ...brandIds.slice(1).map((_, i) => Array.from({ length: 200 }, (_x, g) => `customer${g + 1}@brand${i + 1}.example`))];
    const tagRows = await sql<{ brand_id: string; id: string }>(dbUrl, `SELECT brand_id, id FROM tags WHERE brand_id = ANY($1) AND name IN ('billing', 'bug') ORDER BY name`, [
      brandIds,
    ]);
    const tags = brandIds.map((b) => ({ ids: tagRows.filter((r) => r.brand_id === b).map((r) => r.id), names: ['billing', 'bug'] }));
    const words = seeded.words.slice(0, 5000);
    const floorInput: FloorInput = { url: dbUrl, accountId, brandIds, emails, tags, words };
    const text = (k: number) => Array.from({ length: k }, () => words[Math.floor(Math.exp(Math.random() * Math.log(words.length)))]).join(' ');
    const body = (b: number) => ({
      title: text(6),
      body: text(40),
      customerEmail: emails[b]![Math.floor(Math.random() * emails[b]!.length)],
      tags: tags[b]!.names,
      priority: 'high',
    });

    if (values.profile) {
      const n = Number(values.creates);
      log(`profiling: 200 creates to warm up, then ${n} one after another…`);
      for (let i = 0; i < 200; i++) await api(`/v1/brands/${brandIds[0]}/tickets`, body(0));
      // The window on the monotonic clock (µs), which the profile's timestamps share: samples outside it are start-up and warm-up.
      const from = process.hrtime.bigint() / 1000n;
      for (let i = 0; i < n; i++) await api(`/v1/brands/${brandIds[0]}/tickets`, body(0));
      process.stdout.write(`profile window (µs, monotonic): ${from} ${process.hrtime.bigint() / 1000n}\n`);
      return;
    }

    const pid = child.pid!;
    const floor = (c: number, brands: number, ms: number) => runLoad(dbUrl, c, ms, oneStatementOp({ ...floorInput, brandIds: brandIds.slice(0, brands) }));
    const create = (c: number, brands: number, ms: number) => apiLoad(info.url, key, brandIds.slice(0, brands), c, body, ms, pid);
    // Warm-up, not counted: the server's JIT, pool and caches, the floor's prepared statement.
    for (const [c, b] of [
      [1, 1],
      [16, 1],
      [16, 16],
    ] as const) {
      await floor(c, b, 1000);
      await create(c, b, 1000);
    }
    const ratios: Record<string, number[]> = { 'c1 b1 p50 api/floor': [], 'c16 b1 rate api/floor': [], 'c16 b16 rate api/floor': [] };
    for (let turn = 1; turn <= Number(values.turns); turn++) {
      for (const [c, b] of [
        [1, 1],
        [16, 1],
        [16, 16],
      ] as const) {
        // Which goes first alternates from turn to turn.
        let f: Measured, a: Measured;
        if (turn % 2) {
          f = await floor(c, b, seconds * 1000);
          a = await create(c, b, seconds * 1000);
        } else {
          a = await create(c, b, seconds * 1000);
          f = await floor(c, b, seconds * 1000);
        }
        const ratio = c === 1 ? a.p50 / f.p50 : a.perSec / f.perSec;
        ratios[c === 1 ? 'c1 b1 p50 api/floor' : `c16 b${b} rate api/floor`]!.push(round(ratio));
        log(
          `turn ${turn} c${c} b${b}: floor ${f.perSec}/s p50 ${round(f.p50)} | API ${a.perSec}/s p50 ${round(a.p50)} (server CPU ${a.cpu} µs/create) | ${c === 1 ? 'p50' : 'rate'} ratio ${round(ratio)}`,
        );
      }
    }
    for (const [k, xs] of Object.entries(ratios)) process.stdout.write(`${k}: ${xs.join(', ')} (median ${median(xs)})\n`);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
  }
}

main().catch((err) => {
  process.stderr.write(`probe failed: ${(err as Error).stack}\n`);
  process.exit(1);
});
