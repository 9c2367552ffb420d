import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('api_keys', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.boolean('livemode').notNullable();
    t.text('name').notNullable();
    // SHA-256 of the secret: the secret has 256 bits of entropy, so a slow hash buys nothing.
    t.text('secret_hash').notNullable().unique({ indexName: 'api_keys_secret_hash_unique' });
    t.text('key_preview').notNullable();
    t.boolean('all_brands').notNullable().defaultTo(true);
    t.specificType('brand_ids', 'text[]').notNullable().defaultTo('{}');
    t.timestamp('last_used_at', { useTz: true });
    t.timestamp('expires_at', { useTz: true });
    t.timestamp('revoked_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['account_id', 'livemode', 'id'], 'api_keys_scope_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('api_keys');
}
