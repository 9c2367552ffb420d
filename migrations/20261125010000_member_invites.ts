import type { Knex } from 'knex';

/**
 * Invitations: an invited person is a pending member row (the spec's "member pending"), its id the
 * invite id. invited_at is when the latest invitation was sent (`sentAt`), invite_expires_at when it
 * stops working; both stay on an accepted member as the record that it came by invitation. The
 * invitation's token is a magic link of the pending member (magic_links), valid until the same time.
 * A pending member without them (made before this migration, or by hand) has no invitation anyone
 * can accept until an owner or admin resends it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('members', (t) => {
    t.timestamp('invited_at', { useTz: true });
    t.timestamp('invite_expires_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('members', (t) => {
    t.dropColumn('invite_expires_at');
    t.dropColumn('invited_at');
  });
}
