import type { Knex } from 'knex';

/**
 * Categories and tags of a brand. Both carry the brand's scope (account_id, livemode, brand_id)
 * and reference the brand through it, so a row cannot point into another account, mode or brand,
 * and deleting a brand cascades to them. Names are unique per brand ignoring case.
 * Tickets reference these tables through (account_id, livemode, brand_id, id), so a ticket
 * cannot carry a category or tag of another brand either.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('categories', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('name').notNullable();
    t.text('color').notNullable();
    t.text('description');
    t.integer('sort_order').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'categories_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'categories_scope_id_unique' });
    t.index(['account_id', 'livemode', 'brand_id', 'sort_order'], 'categories_brand_sort_idx');
  });
  await knex.raw('CREATE UNIQUE INDEX categories_name_unique ON categories (account_id, livemode, brand_id, lower(name))');

  await knex.schema.createTable('tags', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('name').notNullable();
    t.text('color').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'tags_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'tags_scope_id_unique' });
  });
  // Serves both the uniqueness rule and name lookups (list order, findOrCreateByNames).
  await knex.raw('CREATE UNIQUE INDEX tags_name_unique ON tags (account_id, livemode, brand_id, lower(name))');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('tags');
  await knex.schema.dropTable('categories');
}
