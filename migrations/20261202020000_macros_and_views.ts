import type { Knex } from 'knex';

/**
 * Macros (a named set of actions and a comment template, applied by hand) and views (a named
 * ticket list query). Each is shared in its brand (`owner_id` null) or personal to the member
 * who owns it, and goes with its brand or that member. A name is unique per brand among the
 * brand's ones, and per member among that member's personal ones. view_counts keeps the last
 * count of each view's tickets and when it was taken: the counts route answers from it for up
 * to a minute (flows/views.ts).
 */
/** What macros and views share: the tenant key, the brand, the name and who sees it. */
function savedColumns(knex: Knex, table: 'macros' | 'views', t: Knex.CreateTableBuilder): void {
  t.text('account_id').notNullable();
  t.text('id').notNullable();
  t.boolean('livemode').notNullable();
  t.text('brand_id').notNullable();
  t.text('name').notNullable();
  t.text('visibility').notNullable();
  t.text('owner_id');
  t.text('created_by');
  t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  t.primary(['account_id', 'id'], { constraintName: `${table}_pkey` });
  t.foreign(['account_id', 'livemode', 'brand_id'], `${table}_brand_fk`).references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
  t.foreign(['account_id', 'owner_id'], `${table}_owner_fk`).references(['account_id', 'id']).inTable('members').onDelete('CASCADE');
}

async function savedConstraints(knex: Knex, table: 'macros' | 'views'): Promise<void> {
  await knex.raw(
    `ALTER TABLE ${table} ADD CONSTRAINT ${table}_visibility_check CHECK (visibility IN ('brand', 'personal') AND (visibility = 'personal') = (owner_id IS NOT NULL))`,
  );
  await knex.raw(`CREATE UNIQUE INDEX ${table}_name_key ON ${table} (account_id, livemode, brand_id, (coalesce(owner_id, '')), name)`);
  // A member's removal deletes their personal ones.
  await knex.raw(`CREATE INDEX ${table}_owner_idx ON ${table} (account_id, owner_id) WHERE owner_id IS NOT NULL`);
}

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('macros', (t) => {
    savedColumns(knex, 'macros', t);
    t.jsonb('actions').notNullable();
    t.jsonb('comment');
  });
  await savedConstraints(knex, 'macros');
  await knex.schema.createTable('views', (t) => {
    savedColumns(knex, 'views', t);
    t.jsonb('filters').notNullable();
    t.jsonb('sort').notNullable();
  });
  await savedConstraints(knex, 'views');
  await knex.schema.createTable('view_counts', (t) => {
    t.text('account_id').notNullable();
    t.text('view_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.bigInteger('count').notNullable();
    t.timestamp('counted_at', { useTz: true }).notNullable();
    t.primary(['account_id', 'view_id'], { constraintName: 'view_counts_pkey' });
    t.foreign(['account_id', 'view_id'], 'view_counts_view_fk').references(['account_id', 'id']).inTable('views').onDelete('CASCADE');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('view_counts');
  await knex.schema.dropTable('views');
  await knex.schema.dropTable('macros');
}
