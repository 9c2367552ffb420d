import type { Knex } from 'knex';

/**
 * The due messages by account, oldest first. The dispatcher's look-out passes over the accounts
 * at their share by stepping from one account to the next through this index, instead of reading
 * every due row of theirs (a backlog of one busy account made each look-out read all of it); an
 * account's claim reads its own rows from it too.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw("CREATE INDEX outbox_account_due_idx ON outbox (account_id, available_at, id) WHERE status IN ('pending', 'retrying')");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX outbox_account_due_idx');
}
