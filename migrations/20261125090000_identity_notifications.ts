import type { Knex } from 'knex';

/**
 * Notifications from an identity provider (the hosted product's sign-in vendor), at
 * POST /v1/webhooks/{provider}.
 *
 * identity_notifications: the message ids already applied, per provider, so a redelivered message
 * changes nothing (Standard Webhooks' webhook-id). They name no account (a provider's user may be a
 * member of several): a table of no tenant.
 *
 * members.identity_provider and identity_user_id: the provider's user a member is, linked by the
 * first notification about a user whose address is the member's; found by the user alone (a
 * notification names no account): a cross-tenant index.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('identity_notifications', (t) => {
    t.text('provider').notNullable();
    t.text('message_id').notNullable();
    t.text('event').notNullable();
    t.timestamp('received_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['provider', 'message_id'], { constraintName: 'identity_notifications_pkey' });
  });
  await knex.schema.alterTable('members', (t) => {
    t.text('identity_provider');
    t.text('identity_user_id');
  });
  await knex.raw('CREATE INDEX members_identity_idx ON members (identity_provider, identity_user_id) WHERE identity_user_id IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX members_identity_idx');
  await knex.schema.alterTable('members', (t) => {
    t.dropColumn('identity_user_id');
    t.dropColumn('identity_provider');
  });
  await knex.schema.dropTable('identity_notifications');
}
