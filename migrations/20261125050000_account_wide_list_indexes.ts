import type { Knex } from 'knex';

/**
 * The ticket list's sorts over a whole account and mode: one index per sort, like the brand
 * list's, without the brand. A caller who sees every brand (an unrestricted key, an owner or
 * admin) lists across brands with one range of one of these, as the brand list reads its own,
 * instead of a range per brand merged (decision 0044). Live, non-spam tickets only, as the list
 * shows by default.
 */
const ACCOUNT_SORT_INDEXES: Record<string, string> = {
  created: 'id',
  updated: `((extract(epoch from (updated_at at time zone 'UTC')) * 1000000)::bigint)`,
  priority: `((case priority when 'low' then 1 when 'normal' then 2 when 'medium' then 3 when 'high' then 4 when 'urgent' then 5 else 0 end))`,
  number: 'ticket_number',
  title: 'lower(title)',
  status: 'status',
  customer: 'customer_sort',
  company: 'company_sort',
  assignee: 'assignee_sort',
  category: 'category_sort',
  due: `(coalesce((extract(epoch from (due_at at time zone 'UTC')) * 1000000)::bigint, 9223372036854775807))`,
};

export async function up(knex: Knex): Promise<void> {
  for (const [name, expr] of Object.entries(ACCOUNT_SORT_INDEXES)) {
    const key = name === 'created' ? 'id' : `${expr}, id`;
    await knex.raw(`CREATE INDEX tickets_account_sort_${name}_idx ON tickets (account_id, livemode, ${key}) WHERE deleted_at IS NULL AND NOT is_spam`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const name of Object.keys(ACCOUNT_SORT_INDEXES)) await knex.raw(`DROP INDEX tickets_account_sort_${name}_idx`);
}
