import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('accounts', (t) => {
    t.text('id').primary();
    t.text('name').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable('members', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('email').notNullable();
    t.text('name');
    t.text('role').notNullable().checkIn(['owner', 'admin', 'member'], 'members_role_check');
    t.text('status').notNullable().defaultTo('active').checkIn(['active', 'pending'], 'members_status_check');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['account_id', 'email'], { indexName: 'members_account_email_unique' });
  });
  // An account has exactly one owner; the database keeps it so.
  await knex.raw(`CREATE UNIQUE INDEX members_one_owner ON members (account_id) WHERE role = 'owner'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('members');
  await knex.schema.dropTable('accounts');
}
