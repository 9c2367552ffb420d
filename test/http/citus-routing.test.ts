import t from 'tap';
import { servicesOf, testApp } from '../helpers/app.js';
import { onCitusCluster } from '../helpers/db.js';
import { buildWorld, fillPath, INBOUND_SECRET, pathValues, routeKey } from '../helpers/world.js';

/**
 * On a Citus cluster (the suite's Citus mode), an account's reads each touch one shard group:
 * every GET route under /v1/brands/:brandId, called with the owner's API key and the world's ids,
 * runs no statement over several shards. citus_stat_statements tells: a statement Citus routed to
 * one shard carries that shard's distribution value (partition_key). Authentication finds a key by
 * its hash in every account (decision 0091), so the key is read before the sweep and served from
 * the cache during it. Off a cluster, or on one that does not track statements (pg_stat_statements
 * not preloaded, as test/citus/cluster.sh does), the file is skipped.
 */

t.test('on a cluster, each GET route of a brand runs every statement on one shard group', { skip: !onCitusCluster && 'not on a Citus cluster' }, async (t) => {
  const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_INBOUND_SECRET: INBOUND_SECRET });
  const tracked = await db
    .raw("select current_setting('citus.stat_statements_track', true) as track, exists (select 1 from pg_available_extensions where name = 'pg_stat_statements') as available")
    .then((r) => r.rows[0].track === 'all' && r.rows[0].available);
  if (!tracked) {
    t.pass('the cluster does not track statements (pg_stat_statements, citus.stat_statements_track = all): nothing to check');
    return;
  }
  await db.raw('create extension if not exists pg_stat_statements');
  const world = await buildWorld(app, servicesOf(db));
  const { owner } = world;
  await owner.live('GET', owner.base);

  /** The statements of this database Citus ran over more than one shard since the last reset. */
  const overSeveralShards = async (): Promise<string[]> => {
    const { rows } = await db.raw(
      `select s.query from citus_stat_statements s
      where s.dbid = (select oid from pg_database where datname = current_database())
        and s.executor = 'adaptive' and s.partition_key is null`,
    );
    return rows.map((r: { query: string }) => r.query.replace(/\s+/g, ' ').slice(0, 200));
  };

  const BRAND_PATH = /^\/v1\/brands\/:brandId(\/|$)/;
  const routes = [...new Map(app.routeCatalog.map((r) => [`${r.method} ${r.url}`, r])).values()].filter(
    (r) => r.method === 'GET' && BRAND_PATH.test(r.url) && r.auth.includes('api-key'),
  );
  t.ok(routes.length > 40, `${routes.length} GET routes of a brand`);
  for (const r of routes) {
    const key = routeKey(r.method, r.url);
    const url = `${fillPath(r.url, pathValues(world, key, r.url))}${world.queries[key] ?? ''}`;
    await db.raw('select citus_stat_statements_reset()');
    const res = await owner.live('GET', url);
    t.ok(res.status < 500, `${key}: answered`, { got: res.status });
    t.same(await overSeveralShards(), [], `${key}: every statement on one shard group`);
  }
});
