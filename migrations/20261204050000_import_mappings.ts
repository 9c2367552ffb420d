import type { Knex } from 'knex';

/**
 * Imports from another help desk (`ticketd import …`, decision 0123).
 *
 * import_mappings: every object an import wrote, by the source's id, under the account and mode it
 * went into: a second run finds it and updates it (when the source's version differs) instead of
 * making a duplicate. `source` names the source (`dispatch:<origin>/<account>`, …), `kind` the
 * object (brand, status, ticket, comment, …); `source_version` is what the source says changed
 * (its updatedAt, else a digest of the object).
 *
 * import_runs: one row per run, its cursor (where each phase is) in `state`, so a run that was
 * killed goes on from there; `counts` is its report so far (created, updated, unchanged, skipped
 * per kind, and why skipped).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE import_mappings (
      account_id text NOT NULL,
      livemode boolean NOT NULL,
      source text NOT NULL,
      kind text NOT NULL,
      source_id text NOT NULL,
      target_id text NOT NULL,
      source_version text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT import_mappings_pkey PRIMARY KEY (account_id, livemode, source, kind, source_id),
      CONSTRAINT import_mappings_account_fk FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE
    )`);
  await knex.raw(`
    CREATE TABLE import_runs (
      account_id text NOT NULL,
      livemode boolean NOT NULL,
      id text NOT NULL,
      source text NOT NULL,
      options jsonb NOT NULL DEFAULT '{}',
      state jsonb NOT NULL DEFAULT '{}',
      counts jsonb NOT NULL DEFAULT '{}',
      started_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      CONSTRAINT import_runs_pkey PRIMARY KEY (account_id, livemode, id),
      CONSTRAINT import_runs_account_fk FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE
    )`);
  // The run a new one resumes: the source's latest unfinished one.
  await knex.raw('CREATE INDEX import_runs_source_idx ON import_runs (account_id, livemode, source, started_at DESC)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE import_runs');
  await knex.raw('DROP TABLE import_mappings');
}
