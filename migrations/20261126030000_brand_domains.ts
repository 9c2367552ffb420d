import type { Knex } from 'knex';

/**
 * A brand's own mail domains. OUTBOUND: its replies go out from an address at the domain, signed
 * with the domain's DKIM key (RSA 2048, made by ticketd; the private key sealed, see
 * core/sealed.ts). INBOUND: mail to any address at the domain, pointed at ticketd by its MX, comes
 * in as the brand's. A domain is used only once its DNS records are verified; record_status keeps
 * each record's outcome of the last check (key: the record's role). At most one primary OUTBOUND
 * domain per brand (the one replies use).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('brand_domains', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('domain').notNullable();
    t.text('type').notNullable();
    t.boolean('verified').notNullable().defaultTo(false);
    t.timestamp('verified_at', { useTz: true });
    t.timestamp('checked_at', { useTz: true });
    t.text('check_error');
    t.jsonb('record_status').notNullable().defaultTo('{}');
    t.text('from_name');
    t.text('from_email');
    t.text('reply_mode').notNullable().defaultTo('SINGLE');
    t.boolean('is_primary').notNullable().defaultTo(false);
    t.text('dkim_selector');
    t.text('dkim_public_key');
    t.text('dkim_private_key');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'brand_domains_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id'], 'brand_domains_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    t.unique(['account_id', 'livemode', 'brand_id', 'type', 'domain'], { indexName: 'brand_domains_domain_unique' });
    // The brand's list, oldest first.
    t.index(['account_id', 'livemode', 'brand_id', 'id'], 'brand_domains_brand_idx');
  });
  await knex.raw(`ALTER TABLE brand_domains ADD CONSTRAINT brand_domains_type_check CHECK (type IN ('OUTBOUND', 'INBOUND'))`);
  await knex.raw(`ALTER TABLE brand_domains ADD CONSTRAINT brand_domains_reply_mode_check CHECK (reply_mode IN ('SINGLE', 'MATCH'))`);
  await knex.raw(`ALTER TABLE brand_domains ADD CONSTRAINT brand_domains_primary_check CHECK (NOT is_primary OR type = 'OUTBOUND')`);
  await knex.raw('CREATE UNIQUE INDEX brand_domains_one_primary ON brand_domains (account_id, livemode, brand_id) WHERE is_primary');
  // The scheduled check takes the verified domains checked longest ago, over every account.
  await knex.raw('CREATE INDEX brand_domains_recheck_idx ON brand_domains (checked_at) WHERE verified');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('brand_domains');
}
