import type { Knex } from 'knex';

/**
 * Webhooks and the transactional outbox.
 *
 * webhooks: a brand's subscriptions. `secret` is kept as given (not hashed): the server must
 * compute HMACs with it on every delivery, so a one-way hash would be useless; it is never
 * returned except by create and rotate. During a rotation's grace period `previous_secret` also
 * signs (Standard Webhooks allows several signatures). failure_count counts consecutive failed
 * attempts and resets on a success; disabled_reason says why the dispatcher turned a webhook off.
 *
 * outbox: one row per message to deliver, of any kind ('webhook' now, 'mail' later: a kind is a
 * handler in the dispatcher, the table does not change). Rows are inserted in the same
 * transaction as the change they announce, so a rolled-back change leaves none, and a committed
 * one is never lost. payload is the exact body to send, built at event time. status:
 *   pending  → never attempted;  retrying → failed, next attempt at available_at;
 *   success  → delivered;        failed   → permanent failure (no retry); dead → attempts exhausted.
 * A dispatcher claims due rows by setting lease_owner and lease_expires_at AND moving available_at
 * to the lease expiry: a leased row is not due until its lease runs out, so the claim query is one
 * range of the due index, and a killed dispatcher's rows come back by themselves. attempts counts
 * claims (so a message that crashes every dispatcher still runs out of attempts).
 *
 * ticketd_new_id(prefix): the ids of ids.ts (10 base32 characters of milliseconds, 16 random), made
 * in SQL, so one INSERT … SELECT can fan an event out to every subscribed webhook.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION ticketd_new_id(prefix text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      alphabet constant text := '0123456789abcdefghjkmnpqrstvwxyz';
      ms bigint := floor(extract(epoch from clock_timestamp()) * 1000)::bigint;
      rnd bytea := decode(md5(gen_random_uuid()::text || clock_timestamp()::text), 'hex');
      result text := '';
    BEGIN
      FOR i IN 1..10 LOOP
        result := substr(alphabet, (ms % 32)::int + 1, 1) || result;
        ms := ms / 32;
      END LOOP;
      FOR i IN 0..15 LOOP
        result := result || substr(alphabet, (get_byte(rnd, i) % (CASE WHEN i = 0 THEN 16 ELSE 32 END)) + 1, 1);
      END LOOP;
      RETURN prefix || '_' || result;
    END $$`);

  await knex.schema.createTable('webhooks', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('url').notNullable();
    t.specificType('events', 'text[]').notNullable();
    t.text('secret').notNullable();
    t.text('previous_secret');
    t.timestamp('previous_secret_expires_at', { useTz: true });
    t.boolean('enabled').notNullable().defaultTo(true);
    t.integer('failure_count').notNullable().defaultTo(0);
    t.timestamp('last_triggered_at', { useTz: true });
    t.text('last_failure');
    t.timestamp('last_failure_at', { useTz: true });
    t.text('disabled_reason');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.foreign(['account_id', 'livemode', 'brand_id'], 'webhooks_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    // The brand's list, and the fan-out's lookup of a brand's webhooks.
    t.unique(['account_id', 'livemode', 'brand_id', 'id'], { indexName: 'webhooks_scope_id_unique' });
    t.check('cardinality(events) > 0', [], 'webhooks_events_check');
  });

  await knex.schema.createTable('outbox', (t) => {
    t.text('id').primary();
    t.text('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.boolean('livemode').notNullable();
    t.text('brand_id');
    t.text('kind').notNullable();
    t.text('event').notNullable();
    t.text('webhook_id');
    t.jsonb('payload').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('available_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text('lease_owner');
    t.timestamp('lease_expires_at', { useTz: true });
    t.text('last_error');
    t.integer('response_code');
    t.text('response_body');
    t.timestamp('last_attempt_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('delivered_at', { useTz: true });
    t.foreign(['account_id', 'livemode', 'brand_id'], 'outbox_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    // Deleting a webhook drops its delivery log and anything it still had to send.
    t.foreign(['account_id', 'livemode', 'brand_id', 'webhook_id'], 'outbox_webhook_fk')
      .references(['account_id', 'livemode', 'brand_id', 'id'])
      .inTable('webhooks')
      .onDelete('CASCADE');
    t.check("kind in ('webhook', 'mail')", [], 'outbox_kind_check');
    t.check("status in ('pending', 'retrying', 'success', 'failed', 'dead')", [], 'outbox_status_check');
    t.check("kind <> 'webhook' or webhook_id is not null", [], 'outbox_webhook_id_check');
  });
  // The claim: due rows in order of due time (leased rows are not due: see above).
  await knex.raw("CREATE INDEX outbox_due_idx ON outbox (available_at, id) WHERE status IN ('pending', 'retrying')");
  // A webhook's deliveries, newest first.
  await knex.raw('CREATE INDEX outbox_webhook_idx ON outbox (webhook_id, id) WHERE webhook_id IS NOT NULL');
  // Operators: list by status, purge old delivered and dead rows.
  await knex.raw('CREATE INDEX outbox_status_idx ON outbox (status, created_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('outbox');
  await knex.schema.dropTable('webhooks');
  await knex.raw('DROP FUNCTION ticketd_new_id(text)');
}
