import type { Knex } from 'knex';

/**
 * Invitations: an invited person is a pending member row (the spec's "member pending"), its id the
 * invite id. invited_at is when the latest invitation was sent (`sentAt`), invite_expires_at when it
 * stops working; both stay on an accepted member as the record that it came by invitation. The
 * invitation's token is a magic link of the pending member (magic_links), valid until the same time.
 *
 * A pending member without an invitation would be one nobody can ever accept: the check refuses
 * it. Pending rows from before this migration get an invitation that has already expired (an owner
 * or admin resends it).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('members', (t) => {
    t.timestamp('invited_at', { useTz: true });
    t.timestamp('invite_expires_at', { useTz: true });
  });
  await knex.raw(`UPDATE members SET invited_at = created_at, invite_expires_at = created_at WHERE status = 'pending'`);
  await knex.raw(`ALTER TABLE members ADD CONSTRAINT members_pending_invited_check CHECK (status <> 'pending' OR (invited_at IS NOT NULL AND invite_expires_at IS NOT NULL))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE members DROP CONSTRAINT members_pending_invited_check');
  await knex.schema.alterTable('members', (t) => {
    t.dropColumn('invite_expires_at');
    t.dropColumn('invited_at');
  });
}
