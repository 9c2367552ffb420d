import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { embeddedBinDir, type DatabaseHandle } from './embedded-postgres.js';

/**
 * Backups with PostgreSQL's own programs: pg_dump's custom format, restored by pg_restore. A
 * pg_dump reads servers of its own major version and older ones, so the program is picked by
 * version: the first one found that is at least as new as the server.
 */

export type ToolName = 'pg_dump' | 'pg_restore';

export interface PgTool {
  path: string;
  major: number;
  version: string;
}

/** Where PostgreSQL's client programs may be, most likely first. */
export async function toolDirs(embedded: boolean, env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const onPath = (env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const bundled = await embeddedBinDir();
  // Debian and Ubuntu keep each major version apart; /usr/bin has only a wrapper that picks one.
  const debian = existsSync('/usr/lib/postgresql')
    ? readdirSync('/usr/lib/postgresql')
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
        .map((v) => `/usr/lib/postgresql/${v}/bin`)
    : [];
  const ordered = embedded ? [bundled, ...onPath, ...debian] : [...onPath, bundled, ...debian];
  // Each directory once, by what it really is (/bin is often /usr/bin).
  const seen = new Set<string>();
  return ordered.filter((dir): dir is string => {
    const real = dir && existsSync(dir) ? realpathSync(dir) : null;
    if (!real || seen.has(real)) return false;
    seen.add(real);
    return true;
  });
}

function output(file: string, args: string[]): Promise<string> {
  return new Promise((resolve) => execFile(file, args, { timeout: 10_000 }, (err, stdout) => resolve(err ? '' : stdout)));
}

async function versionOf(file: string): Promise<PgTool | null> {
  const match = /\(PostgreSQL\)\s+((\d+)[^\s]*)/.exec(await output(file, ['--version']));
  return match ? { path: file, major: Number(match[2]), version: match[1]! } : null;
}

/** The first `name` in `dirs` able to work with a server of major version `serverMajor`. */
export async function findTool(name: ToolName, serverMajor: number, dirs: readonly string[]): Promise<PgTool> {
  const seen: PgTool[] = [];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    if (!existsSync(file)) continue;
    const tool = await versionOf(file);
    if (!tool) continue;
    if (tool.major >= serverMajor) return tool;
    seen.push(tool);
  }
  const found = seen.length ? `found only ${seen.map((t) => `${t.path} (${t.version})`).join(', ')}` : 'found none';
  throw new Error(
    `${name} ${serverMajor} or newer is needed for this PostgreSQL ${serverMajor} server and ${found}. ` +
      `The embedded distribution ships the server only: install PostgreSQL ${serverMajor}'s client programs (e.g. the postgresql-client-${serverMajor} package) so ${name} is on PATH.`,
  );
}

/**
 * libpq's arguments and environment for `url`: the URL without its password on the command line
 * (where any local user could read it), the password in PGPASSWORD.
 */
export function connectionFor(url: string): { dbname: string; env: NodeJS.ProcessEnv } {
  const u = new URL(url);
  const password = u.password ? decodeURIComponent(u.password) : u.searchParams.get('password');
  u.password = '';
  u.searchParams.delete('password');
  return { dbname: u.toString(), env: { ...process.env, ...(password ? { PGPASSWORD: password } : {}) } };
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'ticketd-backup' });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export interface DatabaseFacts {
  database: string;
  serverVersion: string;
  serverMajor: number;
  /** Tables, views and sequences outside PostgreSQL's own schemas. */
  relations: number;
  /** Other sessions connected to the same database. */
  otherSessions: number;
}

export async function inspectDatabase(url: string): Promise<DatabaseFacts> {
  return withClient(url, async (client) => {
    const { rows } = await client.query(`
      select current_database() as database, current_setting('server_version') as version,
        current_setting('server_version_num')::int / 10000 as major,
        (select count(*)::int from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where c.relkind in ('r', 'p', 'v', 'm', 'S', 'f') and n.nspname not in ('pg_catalog', 'information_schema')
            and n.nspname not like 'pg\\_toast%' and n.nspname not like 'pg\\_temp%') as relations,
        (select count(*)::int from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()) as sessions`);
    const row = rows[0] as { database: string; version: string; major: number; relations: number; sessions: number };
    return { database: row.database, serverVersion: row.version, serverMajor: row.major, relations: row.relations, otherSessions: row.sessions };
  });
}

function runTool(tool: PgTool, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(tool.path, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${path.basename(tool.path)} failed (exit ${code}): ${stderr.trim().split('\n').slice(-5).join(' ')}`)),
    );
  });
}

export interface BackupResult {
  file: string;
  bytes: number;
  database: string;
  serverVersion: string;
  tool: string;
}

/** pg_dump in custom format to `file`, written beside it first and renamed when complete. */
export async function backupDatabase(handle: DatabaseHandle, file: string): Promise<BackupResult> {
  const facts = await inspectDatabase(handle.url);
  const tool = await findTool('pg_dump', facts.serverMajor, await toolDirs(handle.embedded));
  const { dbname, env } = connectionFor(handle.url);
  const target = path.resolve(file);
  const partial = `${target}.partial-${process.pid}`;
  try {
    await runTool(tool, ['--format=custom', `--file=${partial}`, `--dbname=${dbname}`], env);
    renameSync(partial, target);
  } finally {
    rmSync(partial, { force: true });
  }
  return { file: target, bytes: statSync(target).size, database: facts.database, serverVersion: facts.serverVersion, tool: `${tool.path} (${tool.version})` };
}

export interface RestoreResult {
  file: string;
  database: string;
  /** Whether what the database held was dropped first. */
  replaced: boolean;
  relations: number;
  tool: string;
}

/**
 * pg_restore of `file` into the database, in one transaction, owned by the connecting role. A
 * database that is not empty is emptied first (schema public dropped and made anew) only with
 * `replace`, and only when nothing else is connected to it: a running ticketd would keep serving
 * from under the restore.
 */
export async function restoreDatabase(handle: DatabaseHandle, file: string, options: { replace: boolean }): Promise<RestoreResult> {
  const source = path.resolve(file);
  if (!existsSync(source)) throw new Error(`${source} does not exist`);
  const facts = await inspectDatabase(handle.url);
  const tool = await findTool('pg_restore', facts.serverMajor, await toolDirs(handle.embedded));
  const { dbname, env } = connectionFor(handle.url);
  // Read the whole table of contents before anything is dropped: a file that is no backup stops here.
  await runTool(tool, ['--list', source], env);
  if (facts.relations > 0) {
    if (!options.replace) throw new Error(`database ${facts.database} is not empty (${facts.relations} tables, views and sequences)`);
    if (facts.otherSessions > 0) {
      throw new Error(`${facts.otherSessions} other session(s) are connected to database ${facts.database}: stop ticketd (and anything else using it) before restoring`);
    }
    await withClient(handle.url, async (client) => {
      await client.query('begin');
      await client.query(`set local lock_timeout = '5s'`);
      await client.query('drop schema public cascade');
      await client.query('create schema public');
      await client.query('grant usage on schema public to public');
      await client.query('commit');
    });
  }
  await runTool(tool, ['--single-transaction', '--no-owner', '--no-privileges', `--dbname=${dbname}`, source], env);
  const after = await inspectDatabase(handle.url);
  return { file: source, database: after.database, replaced: facts.relations > 0, relations: after.relations, tool: `${tool.path} (${tool.version})` };
}
