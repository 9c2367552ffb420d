import type { Knex } from 'knex';

/**
 * ticketd_in_account runs one statement over one account's rows, on the node that holds them, and
 * returns its rows as JSON. On one server nothing calls it. On a Citus cluster (decision 0092) it
 * is distributed by its first argument, co-located with `accounts`, with forced delegation (placed
 * by core/citus.ts): the coordinator hands the call to the worker that holds the account's shard
 * group. There the statement, given as text split at each table it names (`p_parts` around
 * `p_tables`), is put together with each table's shard for that account and run by PostgreSQL
 * alone, as a prepared statement of the session (`p_values`: its parameters as text), so that
 * its plan is made once per connection, not at each call: Citus would plan a statement of several
 * inserts as subplans whose results are copied between nodes, tens of milliseconds where
 * PostgreSQL takes one or two. A session keeps its 20 latest such statements.
 *
 * Like Citus's own writes it first takes its shards' metadata locks (shared), so that a shard move
 * or split waits for it or it for them; if the shards left this node meanwhile it raises TQ003
 * and writes nothing (the caller runs it again).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION ticketd_in_account(p_account text, p_parts text[], p_tables text[], p_values text[]) RETURNS SETOF jsonb
    LANGUAGE plpgsql AS $$
    DECLARE
      v_shards bigint[];
      v_statement text := p_parts[1];
      v_name text;
      v_oldest text;
      r record;
    BEGIN
      SELECT coalesce(array_agg(get_shard_id_for_distribution_column(x.t::regclass, p_account) ORDER BY x.n), '{}')
      INTO v_shards FROM unnest(p_tables) WITH ORDINALITY AS x(t, n);
      IF cardinality(v_shards) > 0 THEN
        PERFORM lock_shard_metadata(5, ARRAY(SELECT DISTINCT s FROM unnest(v_shards) s ORDER BY s)); -- 5: ShareLock
        IF EXISTS (SELECT 1 FROM unnest(v_shards) s WHERE NOT EXISTS (
            SELECT 1 FROM pg_dist_placement p WHERE p.shardid = s AND p.groupid = (SELECT groupid FROM pg_dist_local_group))) THEN
          RAISE EXCEPTION 'the account''s shards are not on this node: they moved while the statement was on its way' USING ERRCODE = 'TQ003';
        END IF;
      END IF;
      FOR i IN 1 .. cardinality(p_tables) LOOP
        v_statement := v_statement || shard_name(p_tables[i]::regclass, v_shards[i]) || p_parts[i + 1];
      END LOOP;

      v_name := 'ticketd_shard_' || md5(v_statement);
      IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = v_name) THEN
        FOR v_oldest IN SELECT name FROM pg_prepared_statements WHERE left(name, 14) = 'ticketd_shard_' ORDER BY prepare_time DESC OFFSET 19 LOOP
          EXECUTE format('DEALLOCATE %I', v_oldest);
        END LOOP;
        EXECUTE format('PREPARE %I AS %s', v_name, v_statement);
      END IF;

      FOR r IN EXECUTE CASE WHEN cardinality(p_values) > 0
          THEN format('EXECUTE %I(%s)', v_name, (SELECT string_agg(quote_nullable(v), ', ' ORDER BY n) FROM unnest(p_values) WITH ORDINALITY AS x(v, n)))
          ELSE format('EXECUTE %I', v_name) END LOOP
        RETURN NEXT to_jsonb(r);
      END LOOP;
    END $$`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION ticketd_in_account(text, text[], text[], text[])');
}
