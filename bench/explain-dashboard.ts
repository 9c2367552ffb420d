/**
 * `node dist/bench/explain-dashboard.js [--tickets 1000000]`: the plans of the cross-brand
 * dashboard's statements. Seeds N tickets over 20 brands in a fresh database (as the bench does),
 * runs each dashboard call through the service with the statements captured, and prints
 * EXPLAIN (ANALYZE, BUFFERS) of each: the plan shape (one index range per brand, no sort of every
 * match) and its timing. BENCH_DATABASE_URL as for the bench, else an embedded cluster.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../server/core/config.js';
import { systemCtx, tenantCtx } from '../server/core/context.js';
import { createDb } from '../server/core/db.js';
import { createServices } from '../server/compose.js';
import * as dashboard from '../server/domains/tickets/dashboard.js';
import { seed } from './seed.js';
import { adminDatabase, sql, startTicketd, withDatabase } from './server.js';

const { values } = parseArgs({ options: { tickets: { type: 'string', default: '200000' }, only: { type: 'string' } } });
const log = (s: string) => process.stderr.write(`${s}\n`);

async function main() {
  const { adminUrl, cleanup } = await adminDatabase({ shared_buffers: '1GB', work_mem: '16MB', maintenance_work_mem: '512MB', max_wal_size: '8GB' });
  const database = `ticketd_explain_${Date.now()}`;
  await sql(adminUrl, `CREATE DATABASE ${database}`);
  const dbUrl = withDatabase(adminUrl, database);
  const { child, info } = await startTicketd('api', dbUrl, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '1000' });
  const db = createDb(dbUrl, { applicationName: 'ticketd-explain' });
  const services = createServices({ config: loadConfig({ env: { DATABASE_URL: dbUrl, TICKETD_LOG_LEVEL: 'silent' } }), db });
  try {
    const accountId = info.bootstrap.account.id as string;
    const auth = { authorization: `Bearer ${info.bootstrap.apiKeys.live.key}`, 'content-type': 'application/json' };
    const brands = [info.bootstrap.brand.id as string];
    for (let i = 1; i < 20; i++) {
      const res = await fetch(`${info.url}/v1/brands`, { method: 'POST', headers: auth, body: JSON.stringify({ name: `Brand ${i}`, slug: `brand-${i}` }) });
      brands.push(((await res.json()) as { id: string }).id);
    }
    const tickets = Number(values.tickets);
    await seed(dbUrl, { accountId, brandId: brands[0]!, brandIds: brands, tickets, log });
    const ctx = tenantCtx(systemCtx(services), accountId, true);
    // Without parallel workers, as the server's own connections run (core/db.ts).
    const serialUrl = `${dbUrl}?options=${encodeURIComponent('-c max_parallel_workers_per_gather=0')}`;

    const captured: { sql: string; bindings: unknown[] }[] = [];
    db.on('query', (q: { sql: string; bindings?: unknown[] }) => {
      captured.push({ sql: q.sql, bindings: q.bindings ?? [] });
    });
    const explain = async (label: string, call: () => Promise<unknown>) => {
      if (values.only && !label.includes(values.only)) return;
      captured.length = 0;
      await call();
      const statement = captured.find((c) => /from tickets|lateral|ticket_counts/i.test(c.sql) && !/^select "id", "name"/.test(c.sql)) ?? captured[captured.length - 1]!;
      // The statement as sent: positional ($1) SQL and its values, through a plain client.
      const plan = await sql<{ 'QUERY PLAN': string }>(serialUrl, `explain (analyze, buffers, costs off) ${statement.sql}`, statement.bindings);
      const lines = plan.map((r) => r['QUERY PLAN']);
      process.stdout.write(`\n=== ${label} ===\n${lines.join('\n')}\n`);
    };
    const deep = async (input: Record<string, unknown>, pages: number) => {
      let cursor: string | undefined;
      for (let i = 0; i < pages; i++) cursor = (await dashboard.listAcrossBrands(ctx, { ...input, limit: 100, cursor } as never)).pagination.nextCursor ?? undefined;
      return cursor;
    };
    for (const sort of ['createdAt', 'updatedAt', 'priority', 'ticketNumber', 'title', 'status', 'customer', 'company', 'assignee', 'category', 'dueAt'] as const) {
      await explain(`GET /v1/tickets?sort=${sort} (first page)`, () => dashboard.listAcrossBrands(ctx, { sort } as never));
      const cursor = await deep({ sort }, 100);
      await explain(`GET /v1/tickets?sort=${sort} (after 10,000 rows)`, () => dashboard.listAcrossBrands(ctx, { sort, cursor } as never));
    }
    await explain('GET /v1/tickets?status=active&priority=high', () => dashboard.listAcrossBrands(ctx, { status: 'active', priority: 'high' } as never));
    await explain('GET /v1/tickets?search=<common word>', () => dashboard.listAcrossBrands(ctx, { search: 'the' } as never));
    await explain('GET /v1/tickets/stats', () => dashboard.stats(ctx, {}));
    await explain('GET /v1/tickets/stats?days=30', () => dashboard.stats(ctx, { days: 30 }));
    await explain('GET /v1/tickets/trends?days=30', () => dashboard.trends(ctx, { days: 30 }));
    await explain('GET /v1/tickets/trends?days=365', () => dashboard.trends(ctx, { days: 365 }));
    await explain('GET /v1/tickets/team-metrics', () => dashboard.teamMetrics(ctx, {}));
  } finally {
    await services.close();
    await db.destroy();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await sql(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await cleanup();
  }
}

main().catch((err) => {
  process.stderr.write(`explain failed: ${(err as Error).stack}\n`);
  process.exit(1);
});
