import type { Knex } from 'knex';

/**
 * Single sign-on with OpenID Connect for an organization's members.
 *
 * sso_connections: one per organization (account), in live mode, where sessions work: the
 * identity provider's issuer, the OAuth client ticketd is there (its secret sealed, see
 * core/sealed.ts), the email domains the provider may vouch for, the role of a member created at
 * sign-in, and whether magic links still work. Sign-in from an email address alone finds the
 * organization by its domain, over every account (a GIN index on allowed_domains).
 *
 * sso_attempts: a sign-in under way, found at the callback by the SHA-256 of its state alone; the
 * PKCE verifier and the nonce are sealed. used_at marks it spent (kept until it expires, so a
 * replay is told apart from a stranger's state); it goes with its connection.
 *
 * sessions.sso: the session was opened by single sign-on, so its address is proven to that
 * organization only.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('sso_connections', (t) => {
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('issuer').notNullable();
    t.text('client_id').notNullable();
    t.text('client_secret').notNullable();
    t.specificType('allowed_domains', 'text[]').notNullable();
    t.text('default_role').notNullable().defaultTo('member');
    t.boolean('allow_magic_links').notNullable().defaultTo(true);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'sso_connections_pkey' });
    t.unique(['account_id', 'livemode'], { indexName: 'sso_connections_account_unique' });
  });
  await knex.raw(`ALTER TABLE sso_connections ADD CONSTRAINT sso_connections_default_role_check CHECK (default_role IN ('admin', 'member'))`);
  await knex.raw('ALTER TABLE sso_connections ADD CONSTRAINT sso_connections_domains_check CHECK (cardinality(allowed_domains) > 0)');
  await knex.raw('CREATE INDEX sso_connections_domains_idx ON sso_connections USING gin (allowed_domains)');

  await knex.schema.createTable('sso_attempts', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('connection_id').notNullable();
    t.text('state_hash').notNullable();
    t.text('secrets').notNullable();
    t.text('origin').notNullable();
    t.text('redirect_uri').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true });
    t.primary(['account_id', 'id'], { constraintName: 'sso_attempts_pkey' });
    t.foreign(['account_id', 'connection_id'], 'sso_attempts_connection_fk').references(['account_id', 'id']).inTable('sso_connections').onDelete('CASCADE');
    // A start deletes its organization's expired attempts.
    t.index(['account_id', 'livemode', 'expires_at'], 'sso_attempts_expiry_idx');
  });
  await knex.raw('CREATE INDEX sso_attempts_state_hash_idx ON sso_attempts (state_hash)');

  await knex.schema.alterTable('sessions', (t) => {
    t.boolean('sso').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('sessions', (t) => {
    t.dropColumn('sso');
  });
  await knex.schema.dropTable('sso_attempts');
  await knex.schema.dropTable('sso_connections');
}
