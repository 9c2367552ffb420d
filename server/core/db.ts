import knexFactory, { type Knex } from 'knex';
import objection from 'objection';
import { distRoot } from './paths.js';
import { createHash } from 'node:crypto';
import path from 'node:path';

export type Db = Knex;

export interface DbOptions {
  poolMax?: number;
  poolMin?: number;
  /** How long a query may wait for a free connection before failing. */
  acquireTimeoutMs?: number;
  /**
   * The URL reaches PostgreSQL through a pooler in transaction mode (PgBouncer): a connection is
   * a server session only for the length of a transaction, so nothing may rely on session state:
   * no startup options (PgBouncer refuses them) and no named prepared statements (another
   * transaction's session does not know the name).
   */
  transactionPooling?: boolean;
  /** How the connections show in pg_stat_activity. */
  applicationName?: string;
}

interface DbConfig extends Knex.Config {
  /** Read by prepared(): false behind a transaction pooler. */
  namedStatements: boolean;
}

/**
 * One knex instance per process. Identifiers are camelCase in code and snake_case in the
 * database: knex converts them both ways, so models and queries never spell snake_case.
 */
export function createDb(connectionString: string, options: DbOptions = {}): Db {
  const config: DbConfig = {
    client: 'pg',
    // No parallel query: on the few cores a ticketd host has, workers' start-up (tens of ms) and
    // their CPU cost concurrent requests more than they save one (a rare-tag list at 1M tickets:
    // 24 ms serial, 35-80 ms with workers). Behind a pooler, set it on the role instead (operations.md).
    connection: {
      connectionString,
      application_name: options.applicationName ?? 'ticketd',
      ...(options.transactionPooling ? {} : { options: '-c max_parallel_workers_per_gather=0' }),
    },
    pool: { min: options.poolMin ?? 1, max: options.poolMax ?? 10, ...droppingDeadConnections() },
    acquireConnectionTimeout: options.acquireTimeoutMs ?? 10_000,
    migrations: migrationConfig,
    namedStatements: !options.transactionPooling,
    ...objection.knexSnakeCaseMappers(),
  };
  return knexFactory.default(config);
}

/** The most connections a pool opens. */
export function poolMaxOf(db: Knex): number {
  return (db.client.config as DbConfig).pool?.max ?? 10;
}

/** The connection string a pool was made with. */
export function connectionStringOf(db: Knex): string {
  return (db.client.config as DbConfig & { connection: { connectionString: string } }).connection.connectionString;
}

/**
 * A connection whose server sent a FATAL error (terminated by an administrator, a restart) is never
 * handed out again. node-postgres gives that error to the running query and only later sees the
 * socket close; a request arriving in between would otherwise get the dead connection and fail too.
 */
function droppingDeadConnections() {
  const dead = new WeakSet<object>();
  type PgConnection = { connection?: { on(event: 'errorMessage', listener: (msg: { severity?: string }) => void): void } };
  return {
    afterCreate(conn: PgConnection, done: (err: Error | null, conn: PgConnection) => void) {
      conn.connection?.on('errorMessage', (msg) => {
        if (msg.severity === 'FATAL' || msg.severity === 'PANIC') dead.add(conn);
      });
      done(null, conn);
    },
    validate: (conn: object) => !dead.has(conn),
  };
}

/** SQL with `?` placeholders and their values: a piece a service hands out for another's statement. */
export interface SqlFragment {
  sql: string;
  bindings: readonly unknown[];
}

/**
 * `query` as a named prepared statement: PostgreSQL parses and plans it once per connection (then
 * keeps a generic plan when that costs no more than planning each time), where an unnamed one is
 * parsed and planned on every run. For the hot statement whose planning costs as much as running
 * it (ticket create: ~0.9 ms of ~2 ms). The name is a hash of the text, so each variant of the
 * text is its own statement and a name never meets another text. Behind a transaction pooler
 * (createDb's transactionPooling) the query stays unnamed.
 */
export function prepared(db: Knex | Knex.Transaction, query: Knex.Raw): Knex.Raw {
  if ((db.client.config as DbConfig).namedStatements === false) return query;
  const { sql, bindings } = query.toSQL();
  return preparedSql(db, sql, bindings);
}

/** prepared, for SQL already formatted (`?` placeholders, e.g. a query builder's toSQL()). */
export function preparedSql(db: Knex | Knex.Transaction, sql: string, bindings: readonly Knex.Value[]): Knex.Raw {
  const query = db.raw(sql, bindings);
  if ((db.client.config as DbConfig).namedStatements === false) return query;
  return query.options({ name: statementName(sql) });
}

/** A statement in PostgreSQL's own form, ready to send: `$n` placeholders, their values, the name it is prepared under. */
export interface NativeStatement {
  sql: string;
  values: readonly unknown[];
  name: string;
}

/**
 * A statement's text made once for many runs (ticket create's, per shape): SQL with knex's named
 * placeholders (`:name`) turned into PostgreSQL's `$n` form by knex (as it would on every run),
 * with the slot each `$n` takes its value from, and its prepared statement's name (see prepared).
 */
export interface StatementText {
  sql: string;
  slots: readonly string[];
  name: string;
}

export function statementText(db: Knex | Knex.Transaction, namedSql: string, slots: readonly string[]): StatementText {
  // Each slot bound to a marker naming it: the markers come back in the order of their `$n`.
  const markers = Object.fromEntries(slots.map((s) => [s, `\u0000${s}`]));
  const { sql, bindings } = db.raw(namedSql, markers).toSQL().toNative();
  // knex.raw would take a literal `?` for a placeholder when the text runs (nativeQuery).
  if (sql.includes('?')) throw new Error('statementText: the text holds a `?`');
  return { sql, slots: bindings.map((b) => String(b).slice(1)), name: statementName(sql) };
}

/** The text with these values for its slots; every slot it names must have one (null included). */
export function withValues(text: StatementText, values: Readonly<Record<string, unknown>>): NativeStatement {
  return {
    sql: text.sql,
    name: text.name,
    values: text.slots.map((slot) => {
      const value = values[slot];
      if (value === undefined) throw new Error(`withValues: no value for :${slot}`);
      return value;
    }),
  };
}

/**
 * A NativeStatement as a knex query, so that it runs on the caller's connection or transaction and
 * shows in knex's query events, without knex formatting its text again: the values go to pg as its
 * query config (knex's `options`), named as prepared unless behind a transaction pooler.
 */
export function nativeQuery(db: Knex | Knex.Transaction, statement: NativeStatement): Knex.Raw {
  const named = (db.client.config as DbConfig).namedStatements !== false;
  return db.raw(statement.sql).options({ values: statement.values, ...(named ? { name: statement.name } : {}) });
}

const statementName = (sql: string) => `ticketd_${createHash('sha1').update(sql).digest('hex').slice(0, 32)}`;

export const migrationConfig: Knex.MigratorConfig = {
  directory: path.join(distRoot, 'migrations'),
  loadExtensions: ['.js'],
  tableName: 'knex_migrations',
};

/** Postgres error codes we translate into client errors. */
export const PG = { uniqueViolation: '23505', foreignKeyViolation: '23503' } as const;

/** The PostgreSQL error code: objection wraps driver errors, and the code sits on the native one. */
export function pgErrorCode(err: unknown): string | undefined {
  const e = err as { nativeError?: { code?: string }; code?: string } | null;
  return e?.nativeError?.code ?? e?.code;
}

export function isPgError(err: unknown, code: string, constraint?: string): boolean {
  return pgErrorCode(err) === code && (constraint === undefined || constraintOf(err) === constraint);
}

/**
 * The constraint an error names. Citus relays a worker's error without the constraint field, and
 * the name in its message is the shard's: the constraint's name with `_<shard id>` appended.
 */
function constraintOf(err: unknown): string | undefined {
  const e = (err as { nativeError?: { constraint?: string; message?: string }; constraint?: string; message?: string } | null) ?? {};
  const native = e.nativeError ?? e;
  if (native.constraint) return native.constraint;
  const named = /constraint "([^"]+)"/.exec(native.message ?? '')?.[1];
  return named?.replace(/_\d+$/, '');
}
