import type { Knex } from 'knex';

/**
 * Six foreign keys lose the action Citus refuses on a key that holds the distribution column
 * (`ON DELETE SET NULL (column)`, `ON UPDATE CASCADE`); the application does their work in the
 * same transaction instead (decision 0090):
 * - a contact, category or member deleted: its tickets lose it first (core/ticket-names.ts);
 * - a company deleted: its contacts lose it first (companies service);
 * - an avatar replaced: the profile points at the new one before the old is deleted (it did already);
 * - comments moved to another ticket: their mentions move in the same statement (comments service).
 * `down` puts the actions back.
 */
const KEYS = [
  ['contacts', 'contacts_company_fk', '(account_id, livemode, brand_id, company_id) REFERENCES companies (account_id, livemode, brand_id, id)', 'ON DELETE SET NULL (company_id)'],
  ['tickets', 'tickets_assignee_fk', '(account_id, assignee_id) REFERENCES members (account_id, id)', 'ON DELETE SET NULL (assignee_id)'],
  ['tickets', 'tickets_customer_fk', '(account_id, livemode, brand_id, customer_id) REFERENCES contacts (account_id, livemode, brand_id, id)', 'ON DELETE SET NULL (customer_id)'],
  [
    'tickets',
    'tickets_category_fk',
    '(account_id, livemode, brand_id, category_id) REFERENCES categories (account_id, livemode, brand_id, id)',
    'ON DELETE SET NULL (category_id)',
  ],
  ['member_profiles', 'member_profiles_avatar_fk', '(account_id, avatar_id) REFERENCES avatars (account_id, id)', 'ON DELETE SET NULL (avatar_id)'],
] as const;

const MENTIONS = 'FOREIGN KEY (account_id, livemode, brand_id, ticket_id, comment_id) REFERENCES comments (account_id, livemode, brand_id, ticket_id, id)';

export async function up(knex: Knex): Promise<void> {
  for (const [table, name, key] of KEYS) {
    await knex.raw(`ALTER TABLE ${table} DROP CONSTRAINT ${name}, ADD CONSTRAINT ${name} FOREIGN KEY ${key}`);
  }
  await knex.raw(`ALTER TABLE mentions DROP CONSTRAINT mentions_comment_fk, ADD CONSTRAINT mentions_comment_fk ${MENTIONS} ON DELETE CASCADE`);
}

export async function down(knex: Knex): Promise<void> {
  for (const [table, name, key, action] of KEYS) {
    await knex.raw(`ALTER TABLE ${table} DROP CONSTRAINT ${name}, ADD CONSTRAINT ${name} FOREIGN KEY ${key} ${action}`);
  }
  await knex.raw(`ALTER TABLE mentions DROP CONSTRAINT mentions_comment_fk, ADD CONSTRAINT mentions_comment_fk ${MENTIONS} ON UPDATE CASCADE ON DELETE CASCADE`);
}
