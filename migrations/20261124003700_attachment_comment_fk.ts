import type { Knex } from 'knex';

/**
 * An attachment's comment_id names a comment of its own ticket, or nothing: a composite foreign
 * key (account, mode, brand, ticket, comment), so a link across ticket, brand, account or mode
 * cannot be stored, whatever the code above it does. DEFERRABLE INITIALLY DEFERRED, like the
 * ticket key: a merge moves comments and attachments to the target in separate statements. A
 * pending attachment (no ticket yet) names no comment. Links stored before, which pointed
 * nowhere valid, are cleared.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`UPDATE attachments a SET comment_id = NULL WHERE comment_id IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM comments c WHERE c.account_id = a.account_id AND c.livemode = a.livemode AND c.brand_id = a.brand_id
      AND c.ticket_id = a.ticket_id AND c.id = a.comment_id)`);
  await knex.raw(`ALTER TABLE attachments ADD CONSTRAINT attachments_comment_fk
    FOREIGN KEY (account_id, livemode, brand_id, ticket_id, comment_id) REFERENCES comments (account_id, livemode, brand_id, ticket_id, id)
    DEFERRABLE INITIALLY DEFERRED`);
  await knex.raw('ALTER TABLE attachments ADD CONSTRAINT attachments_comment_on_ticket_check CHECK (comment_id IS NULL OR ticket_id IS NOT NULL)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE attachments DROP CONSTRAINT attachments_comment_on_ticket_check');
  await knex.raw('ALTER TABLE attachments DROP CONSTRAINT attachments_comment_fk');
}
