import type { Knex } from 'knex';

/**
 * Team members in the dashboard sign in by magic link and then hold a session.
 *
 * members gain brand assignments (all brands, or the listed ones), the bound of what a member's
 * session sees; owners and admins see every brand whatever is stored. Sign-in finds a person's
 * memberships by email across accounts, so email gets an index of its own (cross-tenant).
 *
 * magic_links: single-use sign-in tokens, stored as the SHA-256 of the token, each for one member
 * and the dashboard origin it was asked from. sessions: opaque bearer tokens, stored the same way,
 * with a sliding expiry (expires_at, pushed forward by use) under a fixed cap (max_expires_at).
 * Both are found by their hash alone (the token names no account), and both go with their member.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('members', (t) => {
    t.boolean('all_brands').notNullable().defaultTo(true);
    t.specificType('brand_ids', 'text[]').notNullable().defaultTo('{}');
  });
  await knex.raw('CREATE INDEX members_email_idx ON members (email)');

  await knex.schema.createTable('magic_links', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.text('member_id').notNullable();
    t.text('token_hash').notNullable();
    t.text('origin').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true });
    t.primary(['account_id', 'id'], { constraintName: 'magic_links_pkey' });
    t.foreign(['account_id', 'member_id'], 'magic_links_member_fk').references(['account_id', 'id']).inTable('members').onDelete('CASCADE');
    t.index(['account_id', 'member_id'], 'magic_links_member_idx');
  });
  await knex.raw('CREATE INDEX magic_links_token_hash_idx ON magic_links (token_hash)');

  await knex.schema.createTable('sessions', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.text('member_id').notNullable();
    t.text('token_hash').notNullable();
    t.text('ip');
    t.text('user_agent');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_used_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('max_expires_at', { useTz: true }).notNullable();
    t.timestamp('revoked_at', { useTz: true });
    t.primary(['account_id', 'id'], { constraintName: 'sessions_pkey' });
    t.foreign(['account_id', 'member_id'], 'sessions_member_fk').references(['account_id', 'id']).inTable('members').onDelete('CASCADE');
    t.index(['account_id', 'member_id'], 'sessions_member_idx');
  });
  await knex.raw('CREATE INDEX sessions_token_hash_idx ON sessions (token_hash)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('sessions');
  await knex.schema.dropTable('magic_links');
  await knex.raw('DROP INDEX members_email_idx');
  await knex.schema.alterTable('members', (t) => {
    t.dropColumn('brand_ids');
    t.dropColumn('all_brands');
  });
}
