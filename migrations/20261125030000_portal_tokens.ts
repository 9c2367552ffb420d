import type { Knex } from 'knex';

/**
 * Customers in an embedding application (the third kind of caller) hold portal tokens.
 *
 * portal_tokens: bearer tokens (`pt_…`) of one contact of one brand, stored as the SHA-256 of the
 * token, with a fixed expiry. Each names who granted it: the API key or the member whose session
 * minted it (a token dies with its grantor, checked when it is used). They go with their contact
 * (and so with the brand and the account): foreign key, cascade.
 *
 * portal_links: single-use sign-in tokens (`pl_…`) mailed to a customer, pointing at a page of the
 * brand's portal; spending one mints a portal token. Same storage, same cascade.
 *
 * Both are found by their hash alone (the token names no account): cross-tenant indexes.
 *
 * attachments.portal_customer_id: the contact whose portal token declared an upload, so a pending
 * upload (no ticket yet) belongs to the customer who made it and to no one else.
 */
export async function up(knex: Knex): Promise<void> {
  for (const table of ['portal_tokens', 'portal_links']) {
    await knex.schema.createTable(table, (t) => {
      t.text('account_id').notNullable();
      t.boolean('livemode').notNullable();
      t.text('brand_id').notNullable();
      t.text('id').notNullable();
      t.text('contact_id').notNullable();
      t.text('token_hash').notNullable();
      t.text('api_key_id');
      t.text('member_id');
      if (table === 'portal_links') t.text('portal_url').notNullable();
      t.integer('lifetime_seconds').notNullable();
      t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      t.timestamp('expires_at', { useTz: true }).notNullable();
      t.timestamp(table === 'portal_links' ? 'used_at' : 'revoked_at', { useTz: true });
      t.primary(['account_id', 'id'], { constraintName: `${table}_pkey` });
      t.foreign(['account_id', 'livemode', 'brand_id', 'contact_id'], `${table}_contact_fk`)
        .references(['account_id', 'livemode', 'brand_id', 'id'])
        .inTable('contacts')
        .onDelete('CASCADE');
      t.index(['account_id', 'livemode', 'brand_id', 'contact_id'], `${table}_contact_idx`);
    });
    await knex.raw(`CREATE INDEX ${table}_token_hash_idx ON ${table} (token_hash)`);
  }
  await knex.schema.alterTable('attachments', (t) => {
    t.text('portal_customer_id');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('attachments', (t) => {
    t.dropColumn('portal_customer_id');
  });
  await knex.schema.dropTable('portal_links');
  await knex.schema.dropTable('portal_tokens');
}
