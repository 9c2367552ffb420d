import type { Knex } from 'knex';

/**
 * Feature requests: the team's own board of ideas, proposed and voted on by members. A board per
 * account, never shared between accounts (docs/decisions/0046). Votes are counted when read (a
 * board holds hundreds of requests, not millions), so a vote that goes with its removed member
 * leaves no stale count behind. A request goes with its author.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('feature_requests', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.text('title').notNullable();
    t.text('feature_details').notNullable();
    t.text('current_behavior');
    t.text('why_it_matters');
    t.text('category');
    t.jsonb('images').notNullable().defaultTo('[]');
    t.text('status').notNullable().defaultTo('new');
    t.text('author_id').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'feature_requests_pkey' });
    t.foreign(['account_id', 'author_id'], 'feature_requests_author_fk').references(['account_id', 'id']).inTable('members').onDelete('CASCADE');
    t.index(['account_id', 'author_id'], 'feature_requests_author_idx');
  });
  await knex.raw(`ALTER TABLE feature_requests ADD CONSTRAINT feature_requests_status_check
    CHECK (status IN ('new', 'under_review', 'planned', 'in_progress', 'completed', 'declined'))`);

  await knex.schema.createTable('feature_request_votes', (t) => {
    t.text('account_id').notNullable();
    t.text('feature_request_id').notNullable();
    t.text('member_id').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'feature_request_id', 'member_id'], { constraintName: 'feature_request_votes_pkey' });
    t.foreign(['account_id', 'feature_request_id'], 'feature_request_votes_request_fk').references(['account_id', 'id']).inTable('feature_requests').onDelete('CASCADE');
    t.foreign(['account_id', 'member_id'], 'feature_request_votes_member_fk').references(['account_id', 'id']).inTable('members').onDelete('CASCADE');
    t.index(['account_id', 'member_id'], 'feature_request_votes_member_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('feature_request_votes');
  await knex.schema.dropTable('feature_requests');
}
