import type { Knex } from 'knex';
import pgUtils from 'pg/lib/utils.js';
import type { BaseCtx, TenantCtx } from './context.js';
import { nativeQuery, pgErrorCode, prepared, type NativeStatement } from './db.js';
import { part } from './services.js';
import { COORDINATOR_TABLES, REFERENCE_TABLES } from './tenancy.js';

/**
 * ticketd on a Citus cluster (decision 0091). When the database has the citus extension, every
 * tenant table is distributed by account_id, co-located with `accounts` (distributed by id), so
 * an account's rows of every table sit on one shard group; the global tables a tenant table's
 * foreign key names are reference tables (a copy on every node); the other global tables stay
 * plain tables on the coordinator (COORDINATOR_TABLES says why). Without the extension nothing
 * here runs.
 */

export type Placement = 'distributed' | 'reference' | 'coordinator';

export interface TablePlacement {
  table: string;
  placement: Placement;
  /** The distribution column of a distributed table. */
  column?: string;
}

/** Whether this process's database is a Citus coordinator, asked once per Services. */
const distributedDatabase = part('db.citus', () => ({ answer: null as Promise<boolean> | null }));
export function onCitus(ctx: Pick<BaseCtx, 'services'>): Promise<boolean> {
  const known = ctx.services.get(distributedDatabase);
  known.answer ??= forgottenIfFailed(hasCitus(ctx.services.db), () => (known.answer = null));
  return known.answer;
}

/** A question's answer, kept unless it failed (the database away a moment): then asked again next time. */
function forgottenIfFailed<T>(answer: Promise<T>, forget: () => void): Promise<T> {
  return answer.catch((err: unknown) => {
    forget();
    throw err;
  });
}

/** Asks what onCitus and runInAccount need to know of the database, so that no request pays for the questions. */
export async function learnTheDatabase(ctx: Pick<BaseCtx, 'services'>): Promise<void> {
  if (await onCitus(ctx)) await distributedTableNames(ctx);
}

/**
 * SET LOCAL lock_timeout, holding on every node: on Citus the locks are waited for on the workers,
 * and SET LOCAL reaches them only while citus.propagate_set_commands is 'local'.
 */
export async function setLocalLockTimeout(tx: BaseCtx, timeout: string): Promise<void> {
  if (await onCitus(tx)) await tx.db.raw(`set local citus.propagate_set_commands = 'local'`);
  await tx.db.raw(`set local lock_timeout = '${timeout}'`);
}

export async function hasCitus(db: Knex): Promise<boolean> {
  const { rows } = await db.raw<{ rows: unknown[] }>(`select 1 from pg_extension where extname = 'citus'`);
  return rows.length > 0;
}

/** Where each table of the schema belongs: the one rule `distribute` applies and `doctor` checks. */
export async function intendedPlacements(db: Knex): Promise<TablePlacement[]> {
  const { rows } = await db.raw<{ rows: { table: string; tenant: boolean }[] }>(`
    select c.relname as "table", exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'account_id' and not a.attisdropped) as tenant
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
    order by c.relname`);
  return rows.map(({ table, tenant }): TablePlacement => {
    if (table === 'accounts') return { table, placement: 'distributed', column: 'id' };
    if (tenant) return { table, placement: 'distributed', column: 'account_id' };
    if (table in REFERENCE_TABLES) return { table, placement: 'reference' };
    if (table in COORDINATOR_TABLES) return { table, placement: 'coordinator' };
    throw new Error(`table ${table} has no account_id and is neither a reference table nor a coordinator table (server/core/tenancy.ts)`);
  });
}

/** The tables Citus knows already, as it placed them. */
async function placedTables(db: Knex): Promise<Map<string, Placement>> {
  const { rows } = await db.raw<{ rows: { table: string; method: string }[] }>(`select logicalrelid::regclass::text as "table", partmethod as method from pg_dist_partition`);
  return new Map(rows.map((r) => [r.table, r.method === 'n' ? 'reference' : 'distributed']));
}

/**
 * Places every table that is not placed yet, in one transaction: the foreign keys that touch
 * those tables are dropped, the tables distributed (`accounts` first, the others co-located with
 * it) or made reference tables, and the keys added back. Foreign-key order alone cannot place the
 * schema (docs/citus-inventory.md). Rows already there are copied to the shards, then the
 * coordinator's local copies are truncated. Returns the tables placed; none without Citus.
 */
export async function distribute(db: Knex): Promise<TablePlacement[]> {
  if (!(await hasCitus(db))) return [];
  const placed = await placedTables(db);
  const todo = (await intendedPlacements(db)).filter((p) => p.placement !== 'coordinator' && !placed.has(p.table));
  if (todo.length) await placeTables(db, todo);
  await delegateFunctions(db);
  return todo;
}

async function placeTables(db: Knex, todo: TablePlacement[]): Promise<void> {
  const names = todo.map((p) => p.table);
  await db.transaction(async (trx) => {
    // Citus adds foreign keys between shards over one connection per node.
    await trx.raw(`set local citus.multi_shard_modify_mode to 'sequential'`);
    const { rows: keys } = await trx.raw<{ rows: { table: string; name: string; definition: string }[] }>(
      `select conrelid::regclass::text as "table", conname as name, pg_get_constraintdef(oid) as definition
      from pg_constraint where contype = 'f' and (conrelid::regclass::text = any(?) or confrelid::regclass::text = any(?))
      order by conrelid::regclass::text, conname`,
      [names, names],
    );
    for (const k of keys) await trx.raw(`alter table ?? drop constraint ??`, [k.table, k.name]);
    await dropSingleNodeGuards(trx, names);
    const ordered = [...todo].sort((a, b) => rank(a) - rank(b) || a.table.localeCompare(b.table));
    for (const p of ordered) {
      if (p.placement === 'reference') await trx.raw('select create_reference_table(?)', [p.table]);
      else if (p.table === 'accounts') await trx.raw('select create_distributed_table(?, ?)', [p.table, p.column!]);
      else await trx.raw(`select create_distributed_table(?, ?, colocate_with => 'accounts')`, [p.table, p.column!]);
    }
    for (const k of keys) await trx.raw(`alter table ?? add constraint ?? ${k.definition}`, [k.table, k.name]);
  });
  for (const p of todo) await db.raw('select truncate_local_data_after_distributing_table(?)', [p.table]);
}

/**
 * Functions whose first argument is an account: distributed by it, co-located with `accounts`,
 * with forced delegation, so that a call goes whole to the worker holding that account's shard
 * group, inside the caller's transaction too (runInAccount).
 */
const DELEGATED_FUNCTIONS = ['ticketd_in_account(text,text[],text[],text[])'];

async function delegateFunctions(db: Knex): Promise<void> {
  for (const fn of await undelegatedFunctions(db)) await db.raw(`select create_distributed_function(?, '$1', colocate_with => 'accounts', force_delegation => true)`, [fn]);
}

async function undelegatedFunctions(db: Knex): Promise<string[]> {
  const { rows } = await db.raw<{ rows: { fn: string }[] }>(
    `select f as fn from unnest(?::text[]) f
    where not exists (select 1 from pg_dist_object o where o.classid = 'pg_proc'::regclass and o.objid = to_regprocedure(f) and o.colocationid is not null)`,
    [DELEGATED_FUNCTIONS],
  );
  return rows.map((r) => r.fn);
}

/** The distributed tables, asked once per Services (a migration that adds one restarts the process). */
const distributedTables = part('db.citus.tables', () => ({ names: null as Promise<Set<string>> | null }));
function distributedTableNames(ctx: Pick<BaseCtx, 'services'>): Promise<Set<string>> {
  const known = ctx.services.get(distributedTables);
  known.names ??= forgottenIfFailed(
    ctx.services.db
      .raw<{ rows: { name: string }[] }>(`select logicalrelid::regclass::text as name from pg_dist_partition where partmethod = 'h'`)
      .then(({ rows }) => new Set(rows.map((r) => r.name))),
    () => (known.names = null),
  );
  return known.names;
}

/** SQLSTATE of ticketd_in_account when the account's shards left the node the call reached. */
const SHARDS_MOVED = 'TQ003';

/**
 * Runs a statement over the caller's account's rows and returns its rows. On one server it is a
 * prepared statement like any other. On Citus it runs inside ticketd_in_account (decision 0092),
 * on the worker holding the account's shards, against those shards, planned by PostgreSQL alone
 * (once per statement and connection). So every table it names must be read or written in the
 * caller's account only, by its bare name, and no column, function or bare output column may
 * share a table's name (it would be renamed with the table; `as "tags"` is kept); its rows arrive as JSON: timestamps as ISO
 * strings, numbers as numbers. `statement`: a knex query, or one in PostgreSQL's form already.
 */
export async function runInAccount<Row>(ctx: TenantCtx, statement: Knex.Raw | NativeStatement): Promise<Row[]> {
  const native = !('toSQL' in statement);
  if (!(await onCitus(ctx))) return ((await (native ? nativeQuery(ctx.db, statement) : prepared(ctx.db, statement))) as unknown as { rows: Row[] }).rows;
  const { sql, bindings } = native ? { sql: statement.sql, bindings: statement.values } : statement.toSQL().toNative();
  const { parts, tables } = splitAtTables(sql, await distributedTableNames(ctx));
  const run = () =>
    ctx.db.raw<{ rows: { row: Row }[] }>('select r as "row" from ticketd_in_account(?, ?, ?, ?) r', [ctx.accountId, parts, tables, bindings.map(asText) as string[]]);
  // A shard move that ended while the call was on its way: once more, to where the shards are now
  // (inside a caller's transaction the error ends that transaction: it goes to the caller).
  const { rows } = await run().catch((err: unknown) => {
    if (pgErrorCode(err) !== SHARDS_MOVED || ctx.db.isTransaction) throw err;
    return run();
  });
  return rows.map((r) => r.row);
}

/** A parameter's value as pg would send it (arrays as array literals, objects as JSON), for ticketd_in_account. */
function asText(value: unknown): string | null {
  const v = pgUtils.prepareValue(value);
  if (v !== null && typeof v !== 'string') throw new Error('a binary value cannot be a parameter of ticketd_in_account');
  return v;
}

/**
 * A statement's text split at each name of a distributed table (not right after a dot, nor right
 * before a parenthesis), which `tables` lists in order as written, for ticketd_in_account to put
 * each table's shard in its place. A name is bare or quoted exactly (`"tickets"`: knex quotes
 * every name of the statements it builds), except a quoted name right after AS, which names an
 * output column (`as "tags"`; a table's alias is written bare). Literals, other quoted names,
 * comments and dollar-quoted bodies are not looked into.
 */
export function splitAtTables(sql: string, distributed: ReadonlySet<string>): { parts: string[]; tables: string[] } {
  const parts: string[] = [];
  const tables: string[] = [];
  let from = 0;
  for (const m of sql.matchAll(STATEMENT_TOKEN)) {
    const name = m[3] ?? m[1];
    const end = m.index + m[0].length;
    if (name === undefined || !distributed.has(name) || sql[m.index - 1] === '.' || sql[end] === '(') continue;
    // `as "tags"`: a quoted name after AS names an output column (a key of the row's JSON).
    if (m[1] !== undefined && AFTER_AS.test(sql.slice(Math.max(0, m.index - 4), m.index))) continue;
    parts.push(sql.slice(from, m.index));
    tables.push(m[0]); // as written: a quoted name is a regclass too
    from = end;
  }
  parts.push(sql.slice(from));
  return { parts, tables };
}

const AFTER_AS = /\bas\s*$/i;

/**
 * What a statement's text is made of, for splitAtTables: a literal, a quoted name (group 1 when
 * it holds no quote), a comment, a dollar-quoted body (its tag: group 2), or a bare name (group 3).
 */
const STATEMENT_TOKEN = /'(?:[^']|'')*'|"([^"]*)"(?!")|"(?:[^"]|"")*"|--[^\n]*|\/\*[\s\S]*?\*\/|(\$[A-Za-z_]*\$)[\s\S]*?\2|([A-Za-z_][A-Za-z0-9_$]*)/g;

/**
 * Triggers that only guard (they write nothing) and that Citus cannot keep on a distributed
 * table: on a cluster their rule is the application's alone. Any other trigger stops the
 * distribution: it would do work Citus would not do.
 */
const SINGLE_NODE_GUARDS: Readonly<Record<string, string>> = {
  audit_log_append_only:
    "audit_log is append-only: no DELETE statement of audit_log exists in ticketd, and its one UPDATE is the erasure of a person, which keeps each entry's facts (flows/personal-data.ts)",
};

async function dropSingleNodeGuards(trx: Knex.Transaction, tables: string[]): Promise<void> {
  const { rows } = await trx.raw<{ rows: { table: string; name: string }[] }>(
    `select tgrelid::regclass::text as "table", tgname as name from pg_trigger where not tgisinternal and tgrelid::regclass::text = any(?)`,
    [tables],
  );
  for (const trigger of rows) {
    if (!(trigger.name in SINGLE_NODE_GUARDS)) throw new Error(`table ${trigger.table} has trigger ${trigger.name}, which Citus cannot run on a distributed table`);
    await trx.raw('drop trigger ?? on ??', [trigger.name, trigger.table]);
  }
}

const rank = (p: TablePlacement) => (p.table === 'accounts' ? 0 : p.placement === 'reference' ? 1 : 2);

export interface ClusterReport {
  nodes: { name: string; port: number; role: 'coordinator' | 'worker'; active: boolean; shards: number }[];
  tables: { distributed: number; reference: number; coordinator: number };
  /** Tables not where intendedPlacements puts them (or not co-located with accounts), and functions not delegated by account. */
  misplaced: string[];
  unsafeTriggers: boolean;
  shardCount: number;
}

/** What `ticketd doctor` shows of the cluster; null without Citus. */
export async function clusterReport(db: Knex): Promise<ClusterReport | null> {
  if (!(await hasCitus(db))) return null;
  const { rows: nodes } = await db.raw<{ rows: { name: string; port: number; group: number; active: boolean; shards: number }[] }>(`
    select n.nodename as name, n.nodeport as port, n.groupid as "group", n.isactive as active,
      (select count(*) from pg_dist_placement p where p.groupid = n.groupid)::int as shards
    from pg_dist_node n where n.noderole = 'primary' order by n.groupid, n.nodeport`);
  const placed = await placedTables(db);
  const { rows: colocation } = await db.raw<{ rows: { table: string; together: boolean }[] }>(`
    select p.logicalrelid::regclass::text as "table", p.colocationid = (select colocationid from pg_dist_partition where logicalrelid = 'accounts'::regclass) as together
    from pg_dist_partition p where p.partmethod = 'h'`);
  const apart = new Set(colocation.filter((c) => !c.together).map((c) => c.table));
  const intended = await intendedPlacements(db);
  const misplaced = [
    ...intended.filter((p) => (p.placement === 'coordinator' ? placed.has(p.table) : placed.get(p.table) !== p.placement || apart.has(p.table))).map((p) => p.table),
    ...(await undelegatedFunctions(db)),
  ];
  const { rows: settings } = await db.raw<{ rows: { unsafe: string; shards: string }[] }>(
    `select current_setting('citus.enable_unsafe_triggers') as unsafe, current_setting('citus.shard_count') as shards`,
  );
  const count = (placement: Placement) => intended.filter((p) => p.placement === placement).length;
  return {
    nodes: nodes.map((n) => ({ name: n.name, port: n.port, role: n.group === 0 ? 'coordinator' : 'worker', active: n.active, shards: n.shards })),
    tables: { distributed: count('distributed'), reference: count('reference'), coordinator: count('coordinator') },
    misplaced,
    unsafeTriggers: settings[0]!.unsafe === 'on',
    shardCount: Number(settings[0]!.shards),
  };
}
