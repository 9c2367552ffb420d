import type { Knex } from 'knex';

/**
 * Mentions: a member named in a comment (`@[Name](memberId)` in its body or in
 * `metadata.mentions`), unread until that member acknowledges it. One row per comment and member.
 * The row follows its comment: deleted with it, and moved with it when a merge moves the comment
 * to another ticket (ON UPDATE CASCADE). A removed member's mentions go with the member.
 * Unread mentions are read per member, newest first: a partial index holds only those.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('mentions', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('ticket_id').notNullable();
    t.text('comment_id').notNullable();
    t.text('member_id').notNullable();
    t.text('mentioned_by');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('acknowledged_at', { useTz: true });
    t.primary(['account_id', 'id'], { constraintName: 'mentions_pkey' });
    t.unique(['account_id', 'comment_id', 'member_id'], { indexName: 'mentions_comment_member_unique' });
  });
  await knex.raw(`ALTER TABLE mentions ADD CONSTRAINT mentions_comment_fk
    FOREIGN KEY (account_id, livemode, brand_id, ticket_id, comment_id) REFERENCES comments (account_id, livemode, brand_id, ticket_id, id)
    ON DELETE CASCADE ON UPDATE CASCADE`);
  await knex.raw(`ALTER TABLE mentions ADD CONSTRAINT mentions_member_fk
    FOREIGN KEY (account_id, member_id) REFERENCES members (account_id, id) ON DELETE CASCADE`);
  await knex.raw('CREATE INDEX mentions_unread_idx ON mentions (account_id, member_id, created_at) WHERE acknowledged_at IS NULL');
  await knex.raw('CREATE INDEX mentions_comment_idx ON mentions (account_id, livemode, brand_id, ticket_id, comment_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('mentions');
}
