import type { Knex } from 'knex';
import objection from 'objection';
import type { BaseCtx, TenantCtx } from './context.js';
import { runInAccount } from './citus.js';

/**
 * Base of every tenant table: rows carry accountId and livemode, and services reach them only
 * through scoped(ctx); SQL written by hand takes its condition from tenantScope below. Those two
 * are the only places the tenant predicate is written.
 */
export class TenantModel extends objection.Model {
  declare accountId: string;
  declare livemode: boolean;

  static scoped<T extends typeof TenantModel>(this: T, ctx: Pick<TenantCtx, 'db' | 'accountId' | 'livemode'>): objection.QueryBuilderType<InstanceType<T>> {
    return this.query(ctx.db).where(`${this.tableName}.accountId`, ctx.accountId).where(`${this.tableName}.livemode`, ctx.livemode) as objection.QueryBuilderType<InstanceType<T>>;
  }
}

/** A row of a raw statement (snake_case column names) with the property names models use. */
export const { parse: columnsToProperties } = objection.snakeCaseMappers();

/**
 * The rows of a read of the caller's account (an objection or knex query, or raw SQL), planned
 * once per connection and given as plain objects with property names, without a model per row:
 * for the reads a dashboard polls, whose rows only become views. On one server a named statement
 * (db.ts prepared); on Citus it runs on the worker holding the account's shards (runInAccount,
 * decision 0106), where the coordinator would plan it and the worker plan it again. So the
 * statement keeps to runInAccount's rules (the caller's account only, its tables named bare or
 * quoted whole), and its rows are JSON there: a view reads a timestamp with `new Date(v)` (a Date
 * on one server, an ISO string on Citus), and a bigint the response shows is selected as text.
 * JSON columns come as PostgreSQL gives them (a JSON string stays a string).
 */
export async function preparedRows<R>(ctx: TenantCtx, query: objection.QueryBuilder<objection.Model, unknown> | Knex.QueryBuilder | Knex.Raw): Promise<R[]> {
  const { sql, bindings } = 'toKnexQuery' in query ? query.toKnexQuery().toSQL() : query.toSQL();
  const rows = await runInAccount<Record<string, unknown>>(ctx, ctx.db.raw(sql, bindings));
  return rows.map((row) => columnsToProperties(row) as R);
}

/** The scope columns a new tenant row must carry. */
export function scopeOf(ctx: TenantCtx): { accountId: string; livemode: boolean } {
  return { accountId: ctx.accountId, livemode: ctx.livemode };
}

const ALIAS = /^[a-z_][a-z0-9_]*$/;

/**
 * The tenant condition for SQL written by hand, as a piece to bind where the text says `?`:
 * `db.raw('select … from tags tg where ? and tg.brand_id = ?', [tenantScope(ctx, 'tg'), brandId])`.
 * The scope is bound as values (not read from another row), so the planner can use indexes that
 * lead with (account_id, livemode) in subqueries too.
 */
export function tenantScope(ctx: TenantCtx, alias: string): Knex.Raw {
  if (!ALIAS.test(alias)) throw new Error(`tenantScope: "${alias}" is not a plain table alias`);
  return ctx.db.raw(`${alias}.account_id = ? and ${alias}.livemode = ?`, [ctx.accountId, ctx.livemode]);
}

/**
 * The condition that a row of `alias` belongs to the same tenant as the row of `other` it is
 * joined or correlated to (`sameTenant('t', 'contacts')` inside a subquery over contacts).
 */
export function sameTenant(alias: string, other: string): string {
  if (!ALIAS.test(alias) || !ALIAS.test(other)) throw new Error(`sameTenant: "${alias}", "${other}" are not plain table aliases`);
  return `${alias}.account_id = ${other}.account_id and ${alias}.livemode = ${other}.livemode`;
}

/**
 * The condition that a row of `alias` belongs to the tenant whose account and mode the SQL
 * expressions `tenant` give (named bindings of a statement, say).
 */
export function tenantIs(alias: string, tenant: { account: string; livemode: string }): string {
  if (!ALIAS.test(alias)) throw new Error(`tenantIs: "${alias}" is not a plain table alias`);
  return `${alias}.account_id = ${tenant.account} and ${alias}.livemode = ${tenant.livemode}`;
}

/** A timestamp column as toISOString writes it, in SQL (UTC, milliseconds cut, not rounded, as the Date read from PostgreSQL); null stays null. */
export const isoText = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * Named placeholders for tenantIs in a subquery of a select list (or of an UPDATE's SET), bound to
 * the caller's tenant by boundToTenant. On Citus such a subquery is routed to the account's shard
 * only when it names the account itself; correlated to the outer row alone, it asks every shard.
 */
export const BOUND_TENANT = { account: ':account', livemode: ':livemode' } as const;

/** SQL written with tenantIs(alias, BOUND_TENANT) (or `alias.account_id = :account`), bound to ctx's tenant. */
export function boundToTenant(ctx: TenantCtx, sql: string): Knex.Raw {
  return ctx.db.raw(sql, { account: ctx.accountId, livemode: ctx.livemode });
}

/** tenantIs for account-wide tables without a mode (members, feature requests). */
export function accountIs(alias: string, account: string): string {
  if (!ALIAS.test(alias)) throw new Error(`accountIs: "${alias}" is not a plain table alias`);
  return `${alias}.account_id = ${account}`;
}

/** sameTenant for account-wide tables without a mode (members, feature requests). */
export function sameAccount(alias: string, other: string): string {
  if (!ALIAS.test(alias) || !ALIAS.test(other)) throw new Error(`sameAccount: "${alias}", "${other}" are not plain table aliases`);
  return `${alias}.account_id = ${other}.account_id`;
}

/** The account condition alone, for account-wide tables without a mode (members). */
export function accountScope(ctx: TenantCtx, alias: string): Knex.Raw {
  if (!ALIAS.test(alias)) throw new Error(`accountScope: "${alias}" is not a plain table alias`);
  return ctx.db.raw(`${alias}.account_id = ?`, [ctx.accountId]);
}

/**
 * Locks rows found without knowing their accounts (by a secret's hash, an address, a provider's
 * user), keyed (account_id, id): one statement per account, in id order, accounts in order, since
 * on Citus a lock must name its account (a statement locking rows of several shards is refused).
 * Read the rows again afterwards: what the caller saw before the lock may have changed.
 */
export async function lockAcrossAccounts(ctx: BaseCtx, table: string, rows: readonly { accountId: string; id: string }[]): Promise<void> {
  const byAccount = new Map<string, string[]>();
  for (const r of rows) byAccount.set(r.accountId, [...(byAccount.get(r.accountId) ?? []), r.id]);
  for (const accountId of [...byAccount.keys()].sort()) {
    await ctx.db.raw('select 1 from ?? where account_id = ? and id = any(?) order by id for update', [table, accountId, byAccount.get(accountId)!]);
  }
}
