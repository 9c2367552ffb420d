import type { Knex } from 'knex';

/**
 * Commerce: a brand's connected online stores and the orders and products ticketd keeps of them.
 *
 * commerce_stores: one row per store connected to a brand (`platform` names the connector;
 * `store_hash` is the platform's id of the store). The access token is sealed (core/sealed.ts);
 * the secret the store's notifications carry is kept only as its SHA-256. A sync's progress lives
 * in the row (`sync_cursor`: what the running full sync has done, so a crash resumes it;
 * `synced_through`: the platform modification time every order up to is known), claimed by the
 * dispatcher with a lease (`sync_lease_until`) and due again at `next_sync_at`.
 *
 * commerce_orders: an order as the store last told it; totals are numeric (decimal strings out),
 * items a jsonb array (written and read with their order, always whole). Matched to the brand's
 * contact by `customer_email` (trimmed, lower-cased, like contacts.email), not by a stored id,
 * so a contact added after the order still finds it.
 *
 * commerce_order_tickets: an order linked to a ticket, by a member (MANUAL), by an API key (API),
 * or because the ticket named the order when it was created (AUTOMATIC). Goes with its order and with its ticket.
 *
 * commerce_products: the store's catalog, for the agent's lookup.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('commerce_stores', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('platform').notNullable();
    t.text('store_hash').notNullable();
    t.text('name').notNullable();
    t.text('store_url');
    t.text('access_token').notNullable();
    t.text('notify_secret_hash');
    /** The platform's ids of the notification hooks registered on connect, removed on disconnect. */
    t.jsonb('hook_ids').notNullable().defaultTo('[]');
    t.text('status').notNullable().defaultTo('PENDING_SETUP');
    t.text('error_message');
    t.integer('error_count').notNullable().defaultTo(0);
    t.jsonb('sync_cursor');
    t.timestamp('synced_through', { useTz: true });
    t.timestamp('last_sync_at', { useTz: true });
    t.timestamp('next_sync_at', { useTz: true });
    t.timestamp('sync_lease_until', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'commerce_stores_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id'], 'commerce_stores_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'commerce_stores_scope_id_unique' });
    // One connection of a given store per brand; the brand's list reads this index.
    t.unique(['account_id', 'livemode', 'brand_id', 'platform', 'store_hash'], { indexName: 'commerce_stores_store_unique' });
  });
  await knex.raw(`ALTER TABLE commerce_stores ADD CONSTRAINT commerce_stores_platform_check CHECK (platform IN ('BIGCOMMERCE', 'SHOPIFY', 'WOOCOMMERCE'))`);
  await knex.raw(`ALTER TABLE commerce_stores ADD CONSTRAINT commerce_stores_status_check CHECK (status IN ('PENDING_SETUP', 'SYNCING', 'ACTIVE', 'ERROR', 'DISCONNECTED'))`);
  // The dispatcher syncs the due stores of every account, the longest due first.
  await knex.raw(`CREATE INDEX commerce_stores_due_idx ON commerce_stores (next_sync_at) WHERE status <> 'DISCONNECTED'`);

  await knex.schema.createTable('commerce_orders', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('store_id').notNullable();
    t.text('platform_order_id').notNullable();
    t.text('order_number').notNullable();
    t.text('platform_customer_id');
    t.text('customer_email');
    t.text('customer_name');
    t.text('status').notNullable();
    t.text('platform_status');
    t.text('currency').notNullable();
    for (const column of ['subtotal', 'shipping_total', 'tax_total', 'discount_total', 'total', 'refund_total']) {
      t.decimal(column, 19, 4).notNullable().defaultTo(0);
    }
    t.text('payment_status');
    t.text('payment_method');
    t.text('fulfillment_status');
    t.text('shipping_method');
    t.jsonb('items').notNullable().defaultTo('[]');
    t.timestamp('platform_created_at', { useTz: true });
    t.timestamp('platform_updated_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'commerce_orders_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id', 'store_id'], 'commerce_orders_store_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('commerce_stores')
      .onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'commerce_orders_scope_id_unique' });
    // The sync's upsert key.
    t.unique(['account_id', 'livemode', 'store_id', 'platform_order_id'], { indexName: 'commerce_orders_platform_unique' });
  });
  // The brand's list, newest first, and a customer's orders, newest first.
  await knex.raw('CREATE INDEX commerce_orders_brand_idx ON commerce_orders (account_id, livemode, brand_id, platform_created_at DESC, id DESC)');
  await knex.raw('CREATE INDEX commerce_orders_customer_idx ON commerce_orders (account_id, livemode, brand_id, customer_email, platform_created_at DESC, id DESC)');
  // A ticket names an order by its number (#1234).
  await knex.raw('CREATE INDEX commerce_orders_number_idx ON commerce_orders (account_id, livemode, brand_id, order_number)');

  await knex.schema.createTable('commerce_order_tickets', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('order_id').notNullable();
    t.text('ticket_id').notNullable();
    t.text('link_type').notNullable();
    t.text('created_by');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'commerce_order_tickets_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id', 'order_id'], 'commerce_order_tickets_order_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('commerce_orders')
      .onDelete('CASCADE');
    t.foreign(['account_id', 'livemode', 'brand_id', 'ticket_id'], 'commerce_order_tickets_ticket_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('tickets')
      .onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'order_id', 'ticket_id'], { indexName: 'commerce_order_tickets_unique' });
    // A ticket's orders.
    t.index(['account_id', 'livemode', 'ticket_id'], 'commerce_order_tickets_ticket_idx');
  });
  await knex.raw(`ALTER TABLE commerce_order_tickets ADD CONSTRAINT commerce_order_tickets_link_type_check CHECK (link_type IN ('MANUAL', 'AUTOMATIC', 'API'))`);

  await knex.schema.createTable('commerce_products', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('store_id').notNullable();
    t.text('platform_product_id').notNullable();
    t.text('name').notNullable();
    t.text('sku');
    t.decimal('price', 19, 4);
    t.text('currency');
    t.boolean('is_active').notNullable().defaultTo(true);
    t.integer('inventory_level');
    t.text('url');
    t.text('image_url');
    t.timestamp('platform_updated_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'commerce_products_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id', 'store_id'], 'commerce_products_store_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('commerce_stores')
      .onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'store_id', 'platform_product_id'], { indexName: 'commerce_products_platform_unique' });
    t.index(['account_id', 'livemode', 'brand_id', 'name', 'id'], 'commerce_products_brand_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('commerce_products');
  await knex.schema.dropTable('commerce_order_tickets');
  await knex.schema.dropTable('commerce_orders');
  await knex.schema.dropTable('commerce_stores');
}
