import t from 'tap';
import { clusterReport } from '../../server/core/citus.js';
import { mustCreate, servicesOf, testApp } from '../helpers/app.js';
import { onCitusCluster, queryAt } from '../helpers/db.js';
import { buildWorld, fillPath, INBOUND_SECRET, pathValues, routeKey, type Payload } from '../helpers/world.js';

/**
 * On a Citus cluster (the suite's Citus mode), an account's requests each touch one shard group.
 * Reads: every GET route under /v1/brands/:brandId, called with the owner's API key and the
 * world's ids, runs no statement over several shards; citus_stat_statements tells (a statement
 * Citus routed to one shard carries that shard's distribution value, partition_key; a call of
 * ticketd_in_account, which the polled reads are (decision 0106), carries none, and the second
 * test shows it goes to the node holding the account). Writes: every
 * other route there, with Citus set to fail a statement it would run as several tasks
 * (citus.multi_task_query_log_level). Ticket create and updateTickets go whole to the worker
 * holding the account (decision 0092). Authentication finds a key by its hash in every account
 * (decision 0091), so the key is read before each sweep and served from the cache during it. Off a
 * cluster the file is skipped; so are the reads on a cluster that does not track statements
 * (pg_stat_statements not preloaded, as test/citus/cluster.sh does).
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
    t.same(
      (await overSeveralShards()).filter((q) => !q.includes('ticketd_in_account(')),
      [],
      `${key}: every statement on one shard group (but calls handed to the account's node, the next test)`,
    );
  }

  // Ticket create is one statement of many inserts: on a cluster it is a call of
  // ticketd_in_account, which Citus hands whole to the node holding the account (the next test).
  await db.raw('select citus_stat_statements_reset()');
  const ticket = await mustCreate(owner.live, `${owner.base}/tickets`, { title: 'Routed', customerEmail: 'routed@example.com', priority: 'high' });
  t.equal(ticket.title, 'Routed');
  const statements = await overSeveralShards();
  t.same(
    statements.filter((q) => !q.includes('ticketd_in_account(')),
    [],
    'POST /v1/brands/:brandId/tickets: no statement over several shards but the call handed to one node',
  );
  t.equal(statements.length, 1, 'the create: one call');
});

t.test(
  "on a cluster, an account's statement goes to the node holding the account; on another node it writes nothing and says so",
  { skip: !onCitusCluster && 'not on a Citus cluster' },
  async (t) => {
    const { app, db, url } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_INBOUND_SECRET: INBOUND_SECRET });
    const world = await buildWorld(app, servicesOf(db));
    const account = world.owner.accountId;
    const { rows: nodes } = await db.raw(
      `select n.nodename as host, n.nodeport as port,
      n.groupid = (select p.groupid from pg_dist_placement p where p.shardid = get_shard_id_for_distribution_column('accounts', ?::text)) as holder
    from pg_dist_node n where n.noderole = 'primary' and n.groupid <> 0`,
      [account],
    );
    t.same((await clusterReport(db))!.misplaced, [], "every table placed, and the function handed to the account's node delegated (doctor's check)");
    const holder = nodes.find((n: { holder: boolean }) => n.holder);
    const other = nodes.find((n: { holder: boolean }) => !n.holder);
    const at = (node: { host: string; port: number }) => {
      const u = new URL(url);
      u.hostname = node.host;
      u.port = String(node.port);
      return u.toString();
    };
    const statement = ['select count(*) as n from ', ' where account_id = $1'];
    const call = `select r from ticketd_in_account($1, $2, array['tickets'], array[$1]) r`;

    const plan = (await queryAt(url, `explain ${call}`, [account, statement])).rows.map((r) => r['QUERY PLAN']).join('\n');
    t.match(plan, /Task Count: 1/, 'the coordinator makes the call one task');
    t.match(plan, new RegExp(`port=${holder.port}\\b`), 'sent to the node holding the account');
    const counted = await queryAt(at(holder), call, [account, statement]);
    t.ok(Number(counted.rows[0].r.n) > 0, "there: the account's tickets, read from that node's shard");
    // A WHERE keeps Citus from handing the call on: it runs where it arrived, as when the account's
    // shards moved away while the call was on its way.
    const refused = await queryAt(at(other), `${call} where r is not null`, [account, statement]).catch((err: { code?: string }) => err);
    t.equal((refused as { code?: string }).code, 'TQ003', 'on another node: TQ003, for the caller to call again');
  },
);

t.test("on a cluster, each write route of a brand runs one task at a time, on the account's node", { skip: !onCitusCluster && 'not on a Citus cluster' }, async (t) => {
  const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_INBOUND_SECRET: INBOUND_SECRET });
  const world = await buildWorld(app, servicesOf(db));
  const { owner } = world;
  await owner.live('GET', owner.base);
  // From here on a statement Citus would run as several tasks fails instead (so the request
  // answers 500): the pool's connections are made again with that setting.
  await db.raw(`alter database "${(await db.raw('select current_database() as d')).rows[0].d}" set citus.multi_task_query_log_level = 'error'`);
  await db.destroy();
  db.initialize();
  const acrossAccounts = await db.raw('select count(*) from tickets').catch((err: Error) => err);
  t.type(acrossAccounts, Error, 'a statement over every shard now fails');

  const BRAND_PATH = /^\/v1\/brands\/:brandId(\/|$)/;
  // Deletions last, so that each write finds what the world made.
  const order: Record<string, number> = { POST: 0, PUT: 1, PATCH: 2, DELETE: 3 };
  const routes = [...new Map(app.routeCatalog.map((r) => [`${r.method} ${r.url}`, r])).values()]
    .filter((r) => r.method in order && BRAND_PATH.test(r.url) && r.auth.includes('api-key') && r.url !== '/v1/brands/:brandId')
    .sort((a, b) => order[a.method]! - order[b.method]!);
  t.ok(routes.length > 60, `${routes.length} write routes of a brand`);
  for (const r of routes) {
    const key = routeKey(r.method, r.url);
    const url = `${fillPath(r.url, pathValues(world, key, r.url))}${world.queries[key] ?? ''}`;
    const payload: Payload = world.requests[key] ?? {};
    const res = await owner.live(r.method, url, payload.body, { ...payload.headers });
    t.ok(res.status < 500, `${key}: no statement over several shards`, { got: `${res.status} ${JSON.stringify(res.body).slice(0, 200)}` });
  }
});
