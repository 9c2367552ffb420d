import type { Knex } from 'knex';

/**
 * A brand's rules: triggers (run on a ticket's events) and automations (run on time), one table
 * by `kind`, in `position` order. Conditions and actions are jsonb as the API takes them (checked
 * against the brand's schema when saved). `disabled_reason`: why ticketd disabled it (something it
 * names was deleted). brands.rules_revision is bumped by every change of a brand's rules: a ticket
 * create that evaluated the rules it remembered checks the brand still has that revision.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('rules', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.boolean('livemode').notNullable();
    t.text('brand_id').notNullable();
    t.text('kind').notNullable();
    t.text('name').notNullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.integer('position').notNullable();
    t.specificType('on_events', 'text[]').notNullable().defaultTo('{}');
    t.jsonb('conditions').notNullable();
    t.jsonb('actions').notNullable();
    t.integer('fired_count').notNullable().defaultTo(0);
    t.timestamp('last_fired_at', { useTz: true });
    t.text('disabled_reason');
    t.text('created_by');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'rules_pkey' });
    t.foreign(['account_id', 'livemode', 'brand_id'], 'rules_brand_fk').references(['account_id', 'livemode', 'id']).inTable('brands').onDelete('CASCADE');
    // Rules as code find a rule by its name: one of each name per brand and kind.
    t.unique(['account_id', 'livemode', 'brand_id', 'kind', 'name'], { indexName: 'rules_name_key' });
    t.index(['account_id', 'livemode', 'brand_id', 'kind', 'position'], 'rules_brand_idx');
  });
  await knex.raw(`ALTER TABLE rules ADD CONSTRAINT rules_kind_check CHECK (kind IN ('trigger', 'automation'))`);
  await knex.schema.alterTable('brands', (t) => {
    t.integer('rules_revision').notNullable().defaultTo(0);
  });
  await setMailKinds(knex, [...MAIL_KINDS, 'rule']);
}

/** The kinds of queued mail before this migration; it adds the mail rules send. */
const MAIL_KINDS = ['agent_reply', 'autoresponse', 'watcher_notification', 'mention', 'overdue'];

async function setMailKinds(knex: Knex, kinds: readonly string[]): Promise<void> {
  await knex.raw('ALTER TABLE mail_messages DROP CONSTRAINT mail_messages_kind_check');
  await knex.raw(`ALTER TABLE mail_messages ADD CONSTRAINT mail_messages_kind_check CHECK (kind in (${kinds.map((k) => `'${k}'`).join(', ')}))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("DELETE FROM mail_messages WHERE kind = 'rule'");
  await setMailKinds(knex, MAIL_KINDS);
  await knex.schema.alterTable('brands', (t) => {
    t.dropColumn('rules_revision');
  });
  await knex.schema.dropTable('rules');
}
