/**
 * `npm run bench -- --recurring [--schedules 10000]`: recurring tickets due in the same minute,
 * run by one `--role dispatcher` process. Prints a table; asserts nothing (timings are never a test).
 *
 * Ten accounts of ten brands each are made through the API; the schedules (daily, spread over the
 * 100 brands) are written straight into the database, all due at one instant a little ahead, while
 * the dispatcher is already running. Measured: seconds from that instant to the last ticket (the
 * tickets' own created_at), and tickets per second. Checked: one ticket per schedule, none twice.
 */
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { adminDatabase, post, sql, startTicketd, stop, withDatabase } from './server.js';

const ACCOUNTS = 10;
const BRANDS_PER_ACCOUNT = 10;
/** How far ahead of the seeding they are due: the dispatcher is up and ticking by then. */
const DUE_IN_MS = 15_000;
const log = (s: string) => process.stderr.write(`${s}\n`);

export async function runRecurringBench(schedules: number): Promise<void> {
  const run = randomBytes(4).toString('hex');
  const { adminUrl, cleanup } = await adminDatabase({ max_connections: '100' });
  const database = `ticketd_bench_recurring_${run}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const children: ChildProcess[] = [];
  try {
    log(`${ACCOUNTS} accounts of ${BRANDS_PER_ACCOUNT} brands…`);
    const apiProcess = await startTicketd('api', dbUrl, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000', TICKETD_RATE_LIMIT_PER_API_KEY: '100000000' });
    children.push(apiProcess.child);
    const base: string = apiProcess.info.url;
    for (let a = 0; a < ACCOUNTS; a++) {
      const key = (await post(base, null, '/v1/accounts', { email: `bench-recurring-${run}-${a}@example.com` })).apiKeys.live.key as string;
      for (let b = 0; b < BRANDS_PER_ACCOUNT; b++) await post(base, key, '/v1/brands', { name: `Desk ${a}.${b}` });
    }
    await stop(children.splice(0));

    log('the dispatcher…');
    children.push((await startTicketd('dispatcher', dbUrl)).child);
    const due = new Date(Date.now() + DUE_IN_MS);
    const timeOfDay = due.toISOString().slice(11, 16);
    log(`${schedules} recurring tickets due at ${due.toISOString()}…`);
    await sql(
      dbUrl,
      `insert into recurring_tickets (account_id, id, livemode, brand_id, title, body, schedule, timezone, next_run_at)
       select b.account_id, 'rec_bench' || lpad(n::text, 17, '0'), true, b.id, 'Recurring check ' || n, 'Look at the dashboards.',
         jsonb_build_object('frequency', 'daily', 'timeOfDay', $2::text, 'timezone', 'UTC', 'skipWeekends', false), 'UTC', $3
       from generate_series(1, $1::int) n
       join (select account_id, id, row_number() over (order by id) - 1 as i from brands where livemode) b on b.i = n % (select count(*) from brands where livemode)`,
      [schedules, timeOfDay, due],
    );

    const count = async () => Number((await sql<{ n: string }>(dbUrl, "select count(*) as n from tickets where created_by like 'recurring:%'"))[0]!.n);
    const deadline = Date.now() + DUE_IN_MS + 600_000;
    while ((await count()) < schedules) {
      if (Date.now() > deadline) throw new Error(`only ${await count()} of ${schedules} tickets after 10 minutes`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const [times] = await sql<{ first: Date; last: Date; tickets: string; distinct: string; runs: string }>(
      dbUrl,
      `select min(created_at) as first, max(created_at) as last, count(*) as tickets, count(distinct source_id) as distinct,
         (select sum(run_count) from recurring_tickets) as runs
       from tickets where created_by like 'recurring:%'`,
    );
    const seconds = (times!.last.getTime() - due.getTime()) / 1000;
    const running = (times!.last.getTime() - times!.first.getTime()) / 1000;
    console.log(`\nRecurring tickets: ${schedules} due in the same minute, over ${ACCOUNTS * BRANDS_PER_ACCOUNT} brands, one dispatcher (goal: the last ticket within 60 s):`);
    console.table([
      {
        schedules,
        tickets: Number(times!.tickets),
        'one each': Number(times!.distinct) === schedules && Number(times!.runs) === schedules ? 'yes' : 'NO',
        'first ticket after s': ((times!.first.getTime() - due.getTime()) / 1000).toFixed(1),
        'last ticket after s': seconds.toFixed(1),
        'tickets/s once running': Math.round(schedules / Math.max(running, 0.001)),
      },
    ]);
  } finally {
    await stop(children);
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    await cleanup();
  }
}
