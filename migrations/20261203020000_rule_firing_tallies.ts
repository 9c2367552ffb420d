import type { Knex } from 'knex';

/**
 * A rule's firedCount and lastFiredAt, kept as ticket counts are: each write its triggers or
 * automations fired on appends one row naming them (rule_ids, a rule once per ticket it fired on),
 * instead of updating the rules' rows in the writer's transaction, so concurrent writes of one
 * brand never queue on a busy rule's row and a create pays one small insert for its firings. The
 * dispatcher moves committed tallies into rules.fired_count and rules.last_fired_at every tick
 * (server/domains/rules/tallies.ts); reads add the ones not moved yet, so a count is exact as soon
 * as its write commits.
 *
 * No foreign key: deleting a rule, a brand or an account never waits on its tallies, and the
 * roll-up drops those of rules that are gone. The primary key leads with the brand: a brand's
 * rules read their pending tallies from it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE rule_firing_tallies (
      account_id text NOT NULL,
      livemode boolean NOT NULL,
      brand_id text NOT NULL,
      id bigint GENERATED ALWAYS AS IDENTITY,
      rule_ids text[] NOT NULL,
      fired_at timestamptz NOT NULL,
      CONSTRAINT rule_firing_tallies_pkey PRIMARY KEY (account_id, livemode, brand_id, id)
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE rule_firing_tallies');
}
