import type { Knex } from 'knex';

/**
 * The tenant key in every key, so the schema can be distributed by account (Citus and its kin,
 * account_id as the distribution column) when one server is outgrown:
 * - every tenant table's primary key becomes (account_id, id);
 * - api_keys.secret_hash is unique within its account; authentication, which learns the account
 *   from the key, finds it through a plain index on the hash (a cross-tenant lookup by nature);
 * - attachment_file_deletions carries the account of the attachment whose file it queues (rows
 *   queued before this migration are drained by the next purge; their account is not known: '');
 * - the remaining secondary indexes lead with account_id; GIN ones through btree_gin.
 * Foreign keys between tenant tables and unique keys already included it. The rules, and the
 * tables and indexes exempt from them, are in server/core/tenancy.ts; a catalog test enforces them.
 */

const TABLES = [
  'api_keys',
  'attachments',
  'audit_log',
  'blocked_sources',
  'brands',
  'categories',
  'comments',
  'companies',
  'contacts',
  'field_definitions',
  'inbound_emails',
  'mail_messages',
  'members',
  'outbox',
  'statuses',
  'tags',
  'ticket_watchers',
  'tickets',
  'webhooks',
];

/** [name, the index after, the index before] */
const INDEXES: [string, string, string][] = [
  ['outbox_webhook_idx', 'ON outbox (account_id, livemode, brand_id, webhook_id, id) WHERE webhook_id IS NOT NULL', 'ON outbox (webhook_id, id) WHERE webhook_id IS NOT NULL'],
  ['companies_domain_trgm', 'ON companies USING gin (account_id, domain gin_trgm_ops)', 'ON companies USING gin (domain gin_trgm_ops)'],
  ['companies_name_trgm', 'ON companies USING gin (account_id, name_key gin_trgm_ops)', 'ON companies USING gin (name_key gin_trgm_ops)'],
  ['contacts_email_trgm', 'ON contacts USING gin (account_id, email gin_trgm_ops)', 'ON contacts USING gin (email gin_trgm_ops)'],
  ['contacts_name_trgm', 'ON contacts USING gin (account_id, name_key gin_trgm_ops)', 'ON contacts USING gin (name_key gin_trgm_ops)'],
  ['tickets_search_idx', 'ON tickets USING gin (account_id, search_vector) WHERE deleted_at IS NULL', 'ON tickets USING gin (search_vector) WHERE deleted_at IS NULL'],
];

const QUEUE_FILE_DELETION = (columns: string, values: string) => `
  CREATE OR REPLACE FUNCTION attachments_queue_file_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO attachment_file_deletions (${columns}) VALUES (${values}) ON CONFLICT DO NOTHING;
    RETURN OLD;
  END $$`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE EXTENSION IF NOT EXISTS btree_gin');
  for (const table of TABLES) {
    await knex.raw(`ALTER TABLE ${table} DROP CONSTRAINT ${table}_pkey, ADD CONSTRAINT ${table}_pkey PRIMARY KEY (account_id, id)`);
  }

  await knex.raw('ALTER TABLE api_keys DROP CONSTRAINT api_keys_secret_hash_unique');
  await knex.raw('ALTER TABLE api_keys ADD CONSTRAINT api_keys_secret_hash_unique UNIQUE (account_id, secret_hash)');
  await knex.raw('CREATE INDEX api_keys_secret_hash_idx ON api_keys (secret_hash)');

  await knex.raw(`ALTER TABLE attachment_file_deletions ADD COLUMN account_id text NOT NULL DEFAULT ''`);
  await knex.raw('ALTER TABLE attachment_file_deletions ALTER COLUMN account_id DROP DEFAULT');
  await knex.raw(
    'ALTER TABLE attachment_file_deletions DROP CONSTRAINT attachment_file_deletions_pkey, ADD CONSTRAINT attachment_file_deletions_pkey PRIMARY KEY (account_id, attachment_id)',
  );
  await knex.raw(QUEUE_FILE_DELETION('account_id, attachment_id', 'OLD.account_id, OLD.id'));

  for (const [name, after] of INDEXES) {
    await knex.raw(`DROP INDEX ${name}`);
    await knex.raw(`CREATE INDEX ${name} ${after}`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [name, , before] of INDEXES) {
    await knex.raw(`DROP INDEX ${name}`);
    await knex.raw(`CREATE INDEX ${name} ${before}`);
  }

  await knex.raw(QUEUE_FILE_DELETION('attachment_id', 'OLD.id'));
  await knex.raw('ALTER TABLE attachment_file_deletions DROP CONSTRAINT attachment_file_deletions_pkey, ADD CONSTRAINT attachment_file_deletions_pkey PRIMARY KEY (attachment_id)');
  await knex.raw('ALTER TABLE attachment_file_deletions DROP COLUMN account_id');

  await knex.raw('DROP INDEX api_keys_secret_hash_idx');
  await knex.raw('ALTER TABLE api_keys DROP CONSTRAINT api_keys_secret_hash_unique');
  await knex.raw('ALTER TABLE api_keys ADD CONSTRAINT api_keys_secret_hash_unique UNIQUE (secret_hash)');

  for (const table of TABLES) {
    await knex.raw(`ALTER TABLE ${table} DROP CONSTRAINT ${table}_pkey, ADD CONSTRAINT ${table}_pkey PRIMARY KEY (id)`);
  }
  // btree_gin stays, like pg_trgm: the operator may use it.
}
