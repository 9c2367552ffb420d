/**
 * What PostgreSQL row-level security would cost as a backstop under the tenant scope the code
 * already writes: the raw one-statement create and a list page read, at concurrency 1 and 16, as
 * a role that RLS applies to (a superuser bypasses it), in three shapes:
 *  - today: autocommit, the scope in the SQL;
 *  - transaction: BEGIN, set_config of the tenant, the statement, COMMIT (what RLS needs per
 *    request: the setting must be local to a transaction on a pooled connection), no policies;
 *  - RLS: the same with a policy `account_id = current_setting(...)` (and livemode) on every table
 *    with an account_id column, enabled and forced.
 * Run at the end of `npm run bench` (it leaves the policies dropped and the role removed).
 */
import pg from 'pg';
import { oneStatementOp, runLoad, type FloorInput, type LoadResult } from './floor.js';
import { sql } from './server.js';

const ROLE = 'ticketd_bench_rls';

export interface RlsRow {
  scenario: string;
  concurrency: number;
  'ops/s': number;
  'p50 ms': number;
  'p99 ms': number;
  errors: number;
  'vs today': string;
}

/** The tickets list's first page, as the service reads it (createdAt desc), without the related columns. */
function listOp(input: FloorInput) {
  return async (c: pg.Client) => {
    const r = await c.query({
      name: 'ticketd_bench_rls_list',
      text: `select * from tickets where account_id = $1 and livemode = $2 and brand_id = $3 and deleted_at is null and not is_spam order by id desc limit 50`,
      values: [input.accountId, true, input.brandIds[0]],
    });
    if (!r.rowCount) throw new Error('the page is empty');
  };
}

/** `op` inside BEGIN; set_config(tenant); …; COMMIT: one transaction per operation, as RLS would need. */
function inTenantTransaction(input: FloorInput, op: (c: pg.Client, w: number) => Promise<void>) {
  return async (c: pg.Client, w: number) => {
    await c.query('BEGIN');
    await c.query({
      name: 'ticketd_bench_rls_scope',
      text: `select set_config('ticketd.account_id', $1, true), set_config('ticketd.livemode', $2, true)`,
      values: [input.accountId, 'true'],
    });
    await op(c, w);
    await c.query('COMMIT');
  };
}

async function tenantTables(url: string): Promise<{ table: string; livemode: boolean }[]> {
  const rows = await sql<{ table_name: string; livemode: boolean }>(
    url,
    `
    select c.table_name, exists (select 1 from information_schema.columns l where l.table_schema = 'public' and l.table_name = c.table_name and l.column_name = 'livemode') as livemode
    from information_schema.columns c join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
    where c.table_schema = 'public' and c.column_name = 'account_id' and t.table_type = 'BASE TABLE' order by 1`,
  );
  return rows.map((r) => ({ table: r.table_name, livemode: r.livemode }));
}

export async function runRlsBench(dbUrl: string, input: FloorInput, durationMs: number, log: (s: string) => void): Promise<RlsRow[]> {
  const database = new URL(dbUrl).pathname.slice(1);
  await sql(dbUrl, `DROP ROLE IF EXISTS ${ROLE}`).catch(() => undefined);
  await sql(dbUrl, `CREATE ROLE ${ROLE} LOGIN NOSUPERUSER PASSWORD 'bench-only'`);
  await sql(
    dbUrl,
    `GRANT CONNECT ON DATABASE ${database} TO ${ROLE}; GRANT USAGE ON SCHEMA public TO ${ROLE};
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${ROLE}; GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ${ROLE}`,
  );
  const roleUrl = new URL(dbUrl);
  roleUrl.username = ROLE;
  roleUrl.password = 'bench-only';
  const url = roleUrl.toString();
  const tables = await tenantTables(dbUrl);

  const rows: RlsRow[] = [];
  const today = new Map<string, number>();
  const run = async (shape: string, what: string, c: number, op: (client: pg.Client, w: number) => Promise<void>) => {
    await runLoad(url, c, 1000, op);
    const r: LoadResult = await runLoad(url, c, durationMs, op);
    const key = `${what} ${c}`;
    if (shape === 'today') today.set(key, r.perSec);
    const base = today.get(key);
    const row = {
      scenario: `${what}, ${shape}`,
      concurrency: c,
      'ops/s': r.perSec,
      'p50 ms': Math.round(r.p50 * 100) / 100,
      'p99 ms': Math.round(r.p99 * 100) / 100,
      errors: r.errors,
      'vs today': shape === 'today' || !base ? '' : `${Math.round((r.perSec / base) * 100)}%`,
    };
    rows.push(row);
    log(`  ${row.scenario} c${c}: ${r.perSec}/s p50 ${row['p50 ms']} p99 ${row['p99 ms']}${r.errors ? ` errors ${r.errors}` : ''}`);
  };
  const create = oneStatementOp({ ...input, brandIds: input.brandIds.slice(0, 1) });
  const list = listOp(input);
  const shapes = async (shape: string, wrap: (op: (c: pg.Client, w: number) => Promise<void>) => (c: pg.Client, w: number) => Promise<void>) => {
    for (const c of [1, 16]) {
      await run(shape, 'create, one statement', c, wrap(create));
      await run(shape, 'list first page', c, wrap(list));
    }
  };

  try {
    await shapes('today', (op) => op);
    await shapes('transaction + set_config', (op) => inTenantTransaction(input, op));
    for (const { table, livemode } of tables) {
      const condition = `account_id = current_setting('ticketd.account_id', true)${livemode ? ` and livemode = (current_setting('ticketd.livemode', true))::boolean` : ''}`;
      await sql(
        dbUrl,
        `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY; ALTER TABLE ${table} FORCE ROW LEVEL SECURITY;
        CREATE POLICY ticketd_bench_tenant ON ${table} USING (${condition}) WITH CHECK (${condition})`,
      );
    }
    await shapes('RLS', (op) => inTenantTransaction(input, op));
  } finally {
    for (const { table } of tables) {
      await sql(dbUrl, `DROP POLICY IF EXISTS ticketd_bench_tenant ON ${table}; ALTER TABLE ${table} NO FORCE ROW LEVEL SECURITY; ALTER TABLE ${table} DISABLE ROW LEVEL SECURITY`);
    }
    await sql(dbUrl, `DROP OWNED BY ${ROLE}; DROP ROLE ${ROLE}`).catch(() => undefined);
  }
  return rows;
}
