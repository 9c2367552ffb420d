/**
 * A database on a Citus cluster, for the suite's Citus mode and the bench's --citus: Citus keeps
 * its node list per database, so a new database needs the extension on every node and the nodes
 * registered on its coordinator. `adminUrl` is the coordinator's administrator URL.
 */
import pg from 'pg';

async function onConnection(url: string, statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const sql of statements) await client.query(sql);
  } finally {
    await client.end();
  }
}

function at(url: string, host: string, port: number, database: string): string {
  const u = new URL(url);
  u.hostname = host;
  u.port = String(port);
  u.pathname = `/${database}`;
  return u.toString();
}

const PROPAGATED = 'set citus.enable_create_database_propagation = on';

/** Creates `name` on every node of the cluster with `settings` (ALTER DATABASE … SET); returns its URL and how to drop it. */
export async function createClusterDatabase(adminUrl: string, name: string, settings: Record<string, string> = {}): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = new URL(adminUrl);
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  const nodes = await client
    .query<{
      host: string;
      port: number;
      group: number;
    }>(`select nodename as host, nodeport as port, groupid as "group" from pg_dist_node where noderole = 'primary' order by groupid`)
    .finally(() => client.end());
  await onConnection(adminUrl, [PROPAGATED, `create database "${name}"`]);
  const url = at(adminUrl, admin.hostname, Number(admin.port || 5432), name);
  const workers = nodes.rows.filter((n) => n.group !== 0);
  for (const n of workers) await onConnection(at(adminUrl, n.host, n.port, name), ['create extension if not exists citus']);
  await onConnection(url, [
    'create extension if not exists citus',
    `select citus_set_coordinator_host('${admin.hostname}', ${Number(admin.port || 5432)})`,
    ...workers.map((n) => `select citus_add_node('${n.host}', ${n.port})`),
    ...Object.entries(settings).map(([k, v]) => `alter database "${name}" set ${k} = '${v}'`),
  ]);
  const everyNode = [{ host: admin.hostname, port: Number(admin.port || 5432) }, ...workers];
  return { url, drop: () => dropClusterDatabase(adminUrl, name, everyNode) };
}

/**
 * Drops a database of the cluster. FORCE ends the coordinator's sessions at once, but a worker may
 * still hold the coordinator's connections to it for a moment, and the propagated drop then
 * leaves the worker's copy behind: that copy is dropped on the node itself, asked again while
 * it is in use (55006).
 */
async function dropClusterDatabase(adminUrl: string, name: string, nodes: { host: string; port: number }[]): Promise<void> {
  const drop = `drop database if exists "${name}" with (force)`;
  try {
    await onConnection(adminUrl, [PROPAGATED, drop]);
    return;
  } catch {
    // dropped on some nodes only: the rest below
  }
  for (const node of nodes) {
    for (let attempt = 0; ; attempt++) {
      try {
        await onConnection(at(adminUrl, node.host, node.port, 'postgres'), [drop]);
        break;
      } catch (err) {
        if ((err as { code?: string }).code !== '55006' || attempt >= 100) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}
