/**
 * The schema's tenancy rules (test/migrations/catalog.test.ts reads the catalog against them):
 * every table not listed here carries account_id, leads its primary key with it, includes it in
 * every unique key and in every foreign key to another tenant table, and leads every secondary
 * index with it. Then the schema can be distributed by account on a sharded PostgreSQL.
 */

/** Tables that belong to no tenant, with why. */
export const GLOBAL_TABLES: Readonly<Record<string, string>> = {
  accounts: 'the tenants themselves',
  server_secrets: "the server's own keys (signing grants), one set per installation",
  coupons: "coupons are the installation's (the configuration's codes, one count over every account): no tenant owns one",
  rate_limit_counters: 'request counts by credential, client address or (hashed) email address, shared by the API processes; an address belongs to no account',
  billing_events: "the billing provider's event ids already applied: an event is verified and recorded before its account is known",
  signup_checkouts: "a paid sign-up under way: its account does not exist until the checkout completes, and it is found by its token or the provider's checkout id alone",
  identity_notifications: "the identity provider's message ids already applied: a provider's user may be a member of several accounts",
  knex_migrations: "knex's record of applied migrations",
  knex_migrations_lock: "knex's migration lock",
};

/**
 * On a Citus cluster (server/core/citus.ts), the global tables a tenant table's foreign key
 * names: a copy on every node (a reference table), so the key holds on each shard. None today.
 */
export const REFERENCE_TABLES: Readonly<Record<string, string>> = {};

/** On a Citus cluster, the global tables that stay plain tables on the coordinator, with why. */
export const COORDINATOR_TABLES: Readonly<Record<string, string>> = {
  server_secrets: 'read by each process once at start; no tenant table refers to it',
  coupons:
    'one row per code, locked and counted by every redemption, never joined: as a reference table each redemption would write every node (and Citus refuses that write after a read of several shards in the same transaction)',
  rate_limit_counters: 'written on every request, and never joined: a reference table would write every node each time, a distributed one has no account to be distributed by',
  billing_events: 'one insert per provider event, never joined',
  signup_checkouts: 'found by token or checkout id alone, never joined; the account it makes does not exist yet',
  identity_notifications: 'one insert per provider message, never joined',
  knex_migrations: "knex's own bookkeeping, read by the migrating process only",
  knex_migrations_lock: "knex's own bookkeeping, read by the migrating process only",
};

/** Secondary indexes that serve work across every tenant, so they cannot lead with account_id. */
export const CROSS_TENANT_INDEXES: Readonly<Record<string, string>> = {
  api_keys_secret_hash_idx: 'authentication learns the account from the key: it finds the key by its hash alone',
  sessions_token_hash_idx: 'authentication learns the account from the session token: it finds the session by its hash alone',
  magic_links_token_hash_idx: 'sign-in learns the account from the link: it finds the link by its hash alone',
  portal_tokens_token_hash_idx: 'authentication learns the account from the portal token: it finds the token by its hash alone',
  portal_links_token_hash_idx: "a customer's sign-in learns the account from the link: it finds the link by its hash alone",
  members_identity_idx: "an identity provider's notification names its user alone: it finds that person's memberships in every account",
  members_email_idx: "sign-in starts from an email address alone: it finds that person's memberships in every account",
  outbox_due_idx: 'the dispatcher claims the due messages of every account',
  outbox_status_idx: 'operators count and list the outbox across accounts (ticketd outbox stats)',
  outbox_lease_owner_idx: 'the dispatchers find the leases of a dispatcher that is gone, whatever their accounts',
  ticket_feedback_token_hash_idx: 'a rating link names only its token: it finds the rating request by the token hash alone',
  ticket_feedback_due_idx: 'the dispatcher sends the due rating requests of every account',
  checkout_sessions_token_hash_idx: "a checkout page is opened by a browser without the member's session: it finds the checkout by its token hash alone",
  billing_customers_ref_idx: "a billing provider's notification names its customer alone: it finds the customer's account by the customer id",
  subscriptions_period_end_idx: 'the dispatcher renews the subscriptions whose period ended, of every account',
  held_inbound_emails_held_at_idx: 'the dispatcher receives the held inbound mail of every account, oldest first, when its plan has room',
  forms_token_idx: 'a submission to a public web form names only its token: it finds the form by the token alone',
  idempotency_keys_expires_idx: 'the expired-key purge sweeps every account',
  attachments_cleanup_idx: 'the abandoned-upload purge sweeps every account',
  raw_mails_created_idx: 'the raw mail retention purge sweeps every account, oldest first',
  brand_domains_recheck_idx: 'the dispatcher checks again the verified mail domains of every account, those checked longest ago first',
  brand_domains_inbound_idx: 'inbound mail names a domain, not an account: the brand a verified INBOUND domain routes to is found by the domain',
  tickets_overdue_idx: 'the dispatcher announces the tickets of every account that passed their dueAt, earliest first',
  sso_connections_domains_idx: "single sign-on from an email address alone finds the organizations whose identity provider vouches for the address's domain",
  sso_attempts_state_hash_idx: "a single sign-on callback names only its state: it finds the attempt by the state's hash alone",
  recurring_tickets_due_idx: 'the dispatcher runs the due recurring tickets of every account, the longest due first',
  commerce_stores_due_idx: 'the dispatcher syncs the due connected stores of every account, the longest due first',
};
