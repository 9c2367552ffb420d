import type { Knex } from 'knex';
import { randomBytes } from 'node:crypto';

/**
 * Per-brand ticket statuses and custom field definitions.
 *
 * Both tables carry the tenant scope (account_id, livemode) and brand_id NOT NULL, with a
 * composite foreign key to brands(account_id, livemode, id): a row can only point at a brand of
 * its own account and mode, and deleting the brand removes its rows (ON DELETE CASCADE).
 *
 * Existing brands get the four system statuses here (new brands get them from the statuses
 * service, inside the transaction that creates the brand). The list is copied, not imported:
 * a migration must keep doing what it did when it shipped.
 */
const SYSTEM_STATUSES = [
  { key: 'open', name: 'Open', color: '#3b82f6' },
  { key: 'pending', name: 'Pending', color: '#f59e0b' },
  { key: 'resolved', name: 'Resolved', color: '#10b981' },
  { key: 'closed', name: 'Closed', color: '#6b7280' },
];

function brandScoped(knex: Knex, t: Knex.CreateTableBuilder, table: string): void {
  t.text('id').primary();
  t.text('account_id').notNullable();
  t.boolean('livemode').notNullable();
  t.text('brand_id').notNullable();
  t.foreign(['account_id', 'livemode', 'brand_id'], `${table}_brand_fk`).references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
  t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
}

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('statuses', (t) => {
    brandScoped(knex, t, 'statuses');
    t.text('key').notNullable();
    t.text('name').notNullable();
    t.text('color').notNullable();
    t.text('description');
    t.boolean('is_system').notNullable().defaultTo(false);
    t.boolean('is_active').notNullable().defaultTo(true);
    t.integer('sort_order').notNullable().defaultTo(0);
    t.unique(['account_id', 'livemode', 'brand_id', 'key'], { indexName: 'statuses_key_unique' });
    t.index(['account_id', 'livemode', 'brand_id', 'sort_order'], 'statuses_scope_order_idx');
  });

  await knex.schema.createTable('field_definitions', (t) => {
    brandScoped(knex, t, 'field_definitions');
    t.text('entity_type').notNullable();
    t.text('key').notNullable();
    t.text('label').notNullable();
    t.text('type').notNullable();
    t.boolean('required').notNullable().defaultTo(false);
    t.jsonb('default_value');
    t.text('description');
    t.text('placeholder');
    t.specificType('options', 'text[]');
    t.boolean('visible').notNullable().defaultTo(true);
    t.boolean('show_on_create').notNullable().defaultTo(true);
    t.boolean('show_in_table').notNullable().defaultTo(true);
    t.boolean('show_in_detail').notNullable().defaultTo(true);
    t.integer('sort_order').notNullable().defaultTo(0);
    t.text('source');
    t.unique(['account_id', 'livemode', 'brand_id', 'entity_type', 'key'], { indexName: 'field_definitions_key_unique' });
    t.index(['account_id', 'livemode', 'brand_id', 'entity_type', 'sort_order'], 'field_definitions_scope_order_idx');
  });
  await knex.raw(`ALTER TABLE field_definitions ADD CONSTRAINT field_definitions_entity_type_check CHECK (entity_type IN ('ticket', 'customer', 'company'))`);
  await knex.raw(
    `ALTER TABLE field_definitions ADD CONSTRAINT field_definitions_type_check CHECK (type IN ('text', 'number', 'boolean', 'date', 'select', 'multiselect', 'url', 'array', 'object'))`,
  );

  // Backfill: every existing brand gets the system statuses.
  // Spelled so it works with or without knex's snake_case mappers.
  const brands: { id: string; accountId: string; livemode: boolean }[] = await knex('brands').select({ id: 'id', accountId: 'account_id', livemode: 'livemode' }).orderBy('id');
  const rows = brands.flatMap((b) =>
    SYSTEM_STATUSES.map((s, i) => ({
      id: statusId(),
      account_id: b.accountId,
      livemode: b.livemode,
      brand_id: b.id,
      ...s,
      is_system: true,
      sort_order: i,
    })),
  );
  if (rows.length) await knex.batchInsert('statuses', rows, 500);
}

/**
 * A status id as ticketd makes them (`st_`, 10 base32 characters of milliseconds, 16 random ones),
 * spelled out here: a migration never changes when the server's code does.
 */
function statusId(now = Date.now()): string {
  const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
  let time = '';
  for (let ms = now, i = 0; i < 10; i++, ms = Math.floor(ms / 32)) time = alphabet[ms % 32] + time;
  const random = [...randomBytes(16)].map((b) => alphabet[b % 32]).join('');
  return `st_${time}${random}`;
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('field_definitions');
  await knex.schema.dropTable('statuses');
}
