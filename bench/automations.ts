/**
 * `npm run bench -- --rules [--tickets 1000000] [--sweep-tickets 100000]`, its second part: the
 * automation sweep. Prints tables; asserts nothing (timings are never a test).
 *
 * The automation sweep: one brand of `--tickets` tickets with the documented "close resolved
 * tickets after 4 days" automation: `--sweep-tickets` resolved tickets that match it, a quarter as
 * many resolved lately, a quarter open or pending, and the rest closed long ago, written straight
 * into the database (INSERT … SELECT generate_series, test/helpers/bulk-tickets.ts). Printed: the
 * candidate query's plan (EXPLAIN ANALYZE) before the sweep, and once none is left (what every
 * later minute costs). Measured: one `--role dispatcher` process, from its start to the last
 * matching ticket closed, and tickets per second once it runs. Checked: every matching ticket
 * closed with one audit entry of the automation, none other touched.
 */
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { systemCtx, tenantCtx } from '../server/core/context.js';
import { compile } from '../server/domains/rules/engine.js';
import { candidateQuery } from '../server/flows/automations.js';
import { CLOSE_RESOLVED_AFTER_4_DAYS } from '../test/helpers/automation-examples.js';
import { bulkTickets } from '../test/helpers/bulk-tickets.js';
import { adminDatabase, BENCH_POSTGRES_SETTINGS, inProcessServices, post, sql, startTicketd, stop, withDatabase } from './server.js';

const log = (s: string) => process.stderr.write(`${s}\n`);

/** bulkTickets' statement with pg's numbered placeholders. */
function numbered(statement: { sql: string; bindings: unknown[] }): [string, unknown[]] {
  let n = 0;
  return [statement.sql.replace(/\?/g, () => `$${++n}`), statement.bindings];
}

export async function runAutomationSweepBench(opts: { tickets: number; sweepTickets: number }): Promise<void> {
  const { adminUrl, cleanup } = await adminDatabase(BENCH_POSTGRES_SETTINGS);
  const database = `ticketd_bench_rules_${randomBytes(4).toString('hex')}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const children: ChildProcess[] = [];
  try {
    const api = await startTicketd('api', dbUrl, { TICKETD_RATE_LIMIT_PER_API_KEY: '1000000000' });
    children.push(api.child);
    const key: string = api.info.bootstrap.apiKeys.live.key;
    const brand = { accountId: api.info.bootstrap.account.id as string, livemode: true, brandId: api.info.bootstrap.brand.id as string };
    const rule = await post(api.info.url, key, `/v1/brands/${brand.brandId}/automations`, CLOSE_RESOLVED_AFTER_4_DAYS);
    await stop(children.splice(0));

    const n = opts.sweepTickets;
    log(`${n.toLocaleString('en')} matching tickets of ${Math.max(opts.tickets, 1.5 * n).toLocaleString('en')}…`);
    const daysAgo = (from: number, spread: number) => `now() - interval '${from} days' - (i % ${spread * 24}) * interval '1 hour'`;
    const seeds: [number, Record<string, string>][] = [
      [n, { status: "'resolved'", created_at: daysAgo(10, 20), updated_at: daysAgo(5, 1), resolved_at: daysAgo(5, 1), status_changed_at: daysAgo(5, 1) }],
      [n / 4, { status: "'resolved'", created_at: daysAgo(3, 5), updated_at: daysAgo(1, 1), resolved_at: daysAgo(1, 1) }],
      [n / 4, { status: "(array['open', 'pending'])[1 + i % 2]", created_at: daysAgo(10, 60), updated_at: daysAgo(5, 30) }],
      [Math.max(0, opts.tickets - 1.5 * n), { status: "'closed'", created_at: daysAgo(300, 300), updated_at: daysAgo(200, 100), resolved_at: daysAgo(200, 100) }],
    ];
    const total = seeds.reduce((sum, [count]) => sum + count, 0);
    const started = Date.now();
    for (const [count, columns] of seeds) await sql(dbUrl, ...numbered(bulkTickets(brand, count, columns)));
    await sql(dbUrl, 'ANALYZE tickets');
    log(`seeded in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const setup = inProcessServices(dbUrl);
    const explain = async (when: string) => {
      const query = candidateQuery(
        tenantCtx(systemCtx(setup.services), brand.accountId, brand.livemode),
        brand.brandId,
        compile({ ...CLOSE_RESOLVED_AFTER_4_DAYS, id: rule.id, position: 0 } as unknown as Parameters<typeof compile>[0]),
        ['open', 'pending', 'resolved', 'closed'],
        Date.now(),
      )!;
      const plan = (await sql<{ 'QUERY PLAN': string }>(dbUrl, `EXPLAIN (ANALYZE, COSTS OFF) ${query.toQuery()}`)).map((r) => r['QUERY PLAN']);
      console.log(`\nThe candidate query of "${CLOSE_RESOLVED_AFTER_4_DAYS.name}", ${when}:\n${plan.join('\n')}`);
    };
    await explain(`${n.toLocaleString('en')} to find`);

    log('one dispatcher…');
    const closedCount = async () =>
      Number((await sql<{ n: string }>(dbUrl, `select count(*) as n from tickets where status = 'closed' and created_at > now() - interval '100 days'`))[0]!.n);
    const dispatcherStart = Date.now();
    children.push((await startTicketd('dispatcher', dbUrl)).child);
    const deadline = dispatcherStart + 10 * 60_000;
    let done = Date.now();
    while ((await closedCount()) < n) {
      if (Date.now() > deadline) throw new Error(`only ${await closedCount()} of ${n} tickets closed after 10 minutes`);
      await new Promise((r) => setTimeout(r, 250));
      done = Date.now();
    }
    const [times] = await sql<{ first: Date; last: Date; entries: string; fired: string; others: string }>(
      dbUrl,
      `select min(t.updated_at) as first, max(t.updated_at) as last,
         (select count(*) from audit_log a where a.performer_id = $1 and a.event = 'ticket.updated') as entries,
         (select r.fired_count from rules r where r.id = $1)
           + (select count(*) from rule_firing_tallies f, unnest(f.rule_ids) as x (id) where x.id = $1) as fired,
         (select count(*) from tickets o where o.status <> 'closed' and o.updated_at > now() - interval '1 hour') as others
       from tickets t where t.status = 'closed' and t.updated_at > now() - interval '1 hour'`,
      [rule.id],
    );
    await stop(children.splice(0));
    await sql(dbUrl, 'ANALYZE tickets');
    await explain('none left');
    await setup.close();
    const running = (times!.last.getTime() - times!.first.getTime()) / 1000;
    console.log(`\nAutomation sweep: ${n.toLocaleString('en')} matching tickets of ${total.toLocaleString('en')}, one dispatcher (goal: under 2 minutes):`);
    console.table([
      {
        matching: n,
        'seconds from dispatcher start': ((done - dispatcherStart) / 1000).toFixed(1),
        'seconds first to last close': running.toFixed(1),
        'tickets/s once running': Math.round(n / Math.max(running, 0.001)),
        'one entry each': Number(times!.entries) === n && Number(times!.fired) === n ? 'yes' : 'NO',
        'others touched': Number(times!.others),
      },
    ]);
  } finally {
    await stop(children);
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    await cleanup();
  }
}
