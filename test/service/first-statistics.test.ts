import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { analyzeNewTables, FIRST_ANALYZE_ROWS } from '../../server/core/first-statistics.js';
import { requestFingerprint } from '../../server/core/idempotency.js';
import { createAccount } from '../../server/flows/accounts.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { servicesOf } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';

// A database cloned from the migrated template: no table of it has been analyzed yet.
const { db } = await freshDatabase(t);
const ctx = systemCtx(servicesOf(db));
const quietLog = { info() {}, error() {} };
const created = await createAccount(ctx, { email: 'first-statistics@example.com' });
const tenant = tenantCtx(ctx, created.account.id, true);

/** Rows written in one transaction whose statistics counters are flushed at its commit, not up to 10 s later. */
async function writeKeys(from: number, count: number): Promise<void> {
  await db.transaction(async (tx) => {
    await tx('idempotency_keys').insert(
      Array.from({ length: count }, (_, i) => ({
        accountId: tenant.accountId,
        livemode: true,
        key: `k${from + i}`,
        fingerprint: requestFingerprint('POST', '/x', { i: from + i }),
        resourceId: `res_${from + i}`,
        expiresAt: tx.raw("now() + interval '1 day'"),
      })),
    );
    await tx.raw('select pg_stat_force_next_flush()');
  });
}

async function statsOf(table: string): Promise<{ lastAnalyze: Date | null; reltuples: number }> {
  const { rows } = await db.raw(
    `select s.last_analyze as "lastAnalyze", c.reltuples::float8 as reltuples
     from pg_stat_user_tables s join pg_class c on c.oid = s.relid where s.relname = ?`,
    [table],
  );
  return rows[0];
}

t.test('a table grown past the threshold without statistics is analyzed once; the others are left alone', async (t) => {
  await writeKeys(0, FIRST_ANALYZE_ROWS - 1);
  t.same(await analyzeNewTables(ctx), [], `${FIRST_ANALYZE_ROWS - 1} rows: nothing yet`);
  t.equal((await statsOf('idempotency_keys')).lastAnalyze, null);

  await writeKeys(FIRST_ANALYZE_ROWS - 1, 51);
  t.same(await analyzeNewTables(ctx), ['idempotency_keys'], 'only the table that grew past the threshold (the account rows are fewer)');
  const analyzed = await statsOf('idempotency_keys');
  t.ok(analyzed.lastAnalyze instanceof Date, 'its last analyze is recorded');
  t.equal(analyzed.reltuples, FIRST_ANALYZE_ROWS + 50, 'and the planner now knows its rows');
  t.equal((await statsOf('accounts')).lastAnalyze, null, 'a table of a few rows is not analyzed');

  await writeKeys(FIRST_ANALYZE_ROWS + 50, 2 * FIRST_ANALYZE_ROWS);
  t.same(await analyzeNewTables(ctx), [], 'once analyzed, the table is left to autovacuum however it grows');
  t.same((await new Dispatcher(servicesOf(db), quietLog).tick()).analyzedTables, [], "the dispatcher's tick runs it: nothing new to analyze");
});
