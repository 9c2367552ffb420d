import type { BaseCtx } from './context.js';

/**
 * A table of this schema with at least this many rows written and no planner statistics yet is
 * analyzed. Autovacuum would do it at 50, but only when it first visits the database, which on a
 * new one can be minutes into its first load.
 */
export const FIRST_ANALYZE_ROWS = 200;

/**
 * ANALYZE of each table that has grown but was never analyzed, by anyone (autovacuum included).
 * Until then PostgreSQL guesses every column's selectivity: it takes (account, brand) for a
 * narrow key and may read a brand's every row per lookup, through an index that leads with them,
 * instead of the primary key (a ticket's tags, its customer). On a new install under load the
 * pages slow down as the tables grow, until the first analyze. Once analyzed, a table is left to
 * autovacuum. SKIP_LOCKED: with several dispatchers, a table another one is analyzing is skipped.
 * Returns the tables analyzed.
 */
export async function analyzeNewTables(ctx: BaseCtx, minRows = FIRST_ANALYZE_ROWS): Promise<string[]> {
  const { rows } = (await ctx.db.raw(
    `select relname from pg_stat_user_tables
     where schemaname = current_schema() and last_analyze is null and last_autoanalyze is null and n_mod_since_analyze >= ?
     order by relname`,
    [minRows],
  )) as { rows: { relname: string }[] };
  for (const { relname } of rows) await ctx.db.raw('analyze (skip_locked) ??', [relname]);
  return rows.map((r) => r.relname);
}
