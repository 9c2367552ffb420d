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
}

/**
 * One knex instance per process. Identifiers are camelCase in code and snake_case in the
 * database: knex converts them both ways, so models and queries never spell snake_case.
 */
export function createDb(connectionString: string, options: DbOptions = {}): Db {
  return knexFactory.default({
    client: 'pg',
    // No parallel query: on the few cores a ticketd host has, workers' start-up (tens of ms) and
    // their CPU cost concurrent requests more than they save one (a rare-tag list at 1M tickets:
    // 24 ms serial, 35-80 ms with workers).
    connection: { connectionString, application_name: 'ticketd', options: '-c max_parallel_workers_per_gather=0' },
    pool: { min: options.poolMin ?? 1, max: options.poolMax ?? 10 },
    acquireConnectionTimeout: options.acquireTimeoutMs ?? 10_000,
    migrations: migrationConfig,
    ...objection.knexSnakeCaseMappers(),
  });
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
 * text is its own statement and a name never meets another text.
 */
export function prepared(db: Knex | Knex.Transaction, query: Knex.Raw): Knex.Raw {
  const { sql, bindings } = query.toSQL();
  return db.raw(sql, bindings).options({ name: `ticketd_${createHash('sha1').update(sql).digest('hex').slice(0, 32)}` });
}

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
  const e = err as { nativeError?: { constraint?: string }; constraint?: string } | null;
  return pgErrorCode(err) === code && (constraint === undefined || (e?.nativeError?.constraint ?? e?.constraint) === constraint);
}
