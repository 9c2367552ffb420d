import type { Knex } from 'knex';

/**
 * A member's profile in the dashboard, and their avatar files.
 *
 * member_profiles: one row per member (a membership: a person has one per organization), made on
 * the first change; no row means the defaults (the member's name as display name, every
 * notification on). display_name null falls back to the member's name. The avatar is either an
 * uploaded file (avatar_id) or a URL elsewhere (avatar_url), never both.
 *
 * avatars: uploaded avatar files, the bytes in attachment storage under the row's id (`av_` and 256
 * random bits: the id is the capability of its public URL and, while PENDING, of its upload URL).
 * A member has at most one current avatar (the profile's) and at most one PENDING upload; a
 * replaced or deleted one is deleted at once. Deleting a row, however it goes (replaced, the
 * member removed, the account deleted), queues its file in attachment_file_deletions through the
 * attachments' own trigger function, so the file is removed after the commit, never inside it.
 *
 * mail_messages may hold a mention notification (kind 'mention').
 */
const MAIL_KINDS = ['agent_reply', 'autoresponse', 'watcher_notification'];

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('avatars', (t) => {
    t.text('account_id').notNullable();
    t.text('id').notNullable();
    t.text('member_id').notNullable();
    t.text('status').notNullable().defaultTo('PENDING');
    t.text('content_type').notNullable().comment('declared while PENDING; the type its bytes show once UPLOADED');
    t.bigInteger('size').notNullable();
    t.timestamp('expires_at', { useTz: true }).comment('PENDING: the end of its upload URL');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'id'], { constraintName: 'avatars_pkey' });
    t.foreign(['account_id', 'member_id'], 'avatars_member_fk').references(['account_id', 'id']).inTable('members').onDelete('CASCADE');
    t.index(['account_id', 'member_id'], 'avatars_member_idx');
    t.check("status in ('PENDING', 'UPLOADED')", [], 'avatars_status_check');
    t.check('size >= 0', [], 'avatars_size_check');
  });
  await knex.raw('CREATE TRIGGER avatars_queue_file_deletion AFTER DELETE ON avatars FOR EACH ROW EXECUTE FUNCTION attachments_queue_file_deletion()');

  await knex.schema.createTable('member_profiles', (t) => {
    t.text('account_id').notNullable();
    t.text('member_id').notNullable();
    t.text('display_name');
    t.text('avatar_id');
    t.text('avatar_url');
    t.boolean('notify_email').notNullable().defaultTo(true);
    t.boolean('notify_toast').notNullable().defaultTo(true);
    t.boolean('notify_desktop').notNullable().defaultTo(true);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'member_id'], { constraintName: 'member_profiles_pkey' });
    t.foreign(['account_id', 'member_id'], 'member_profiles_member_fk').references(['account_id', 'id']).inTable('members').onDelete('CASCADE');
    t.check('avatar_id is null or avatar_url is null', [], 'member_profiles_one_avatar_check');
  });
  await knex.raw(`ALTER TABLE member_profiles ADD CONSTRAINT member_profiles_avatar_fk
    FOREIGN KEY (account_id, avatar_id) REFERENCES avatars (account_id, id) ON DELETE SET NULL (avatar_id)`);
  await knex.raw('CREATE INDEX member_profiles_avatar_idx ON member_profiles (account_id, avatar_id) WHERE avatar_id IS NOT NULL');

  await knex.raw('ALTER TABLE mail_messages DROP CONSTRAINT mail_messages_kind_check');
  await knex.raw(`ALTER TABLE mail_messages ADD CONSTRAINT mail_messages_kind_check CHECK (kind in (${[...MAIL_KINDS, 'mention'].map((k) => `'${k}'`).join(', ')}))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("DELETE FROM mail_messages WHERE kind = 'mention'");
  await knex.raw('ALTER TABLE mail_messages DROP CONSTRAINT mail_messages_kind_check');
  await knex.raw(`ALTER TABLE mail_messages ADD CONSTRAINT mail_messages_kind_check CHECK (kind in (${MAIL_KINDS.map((k) => `'${k}'`).join(', ')}))`);
  await knex.schema.dropTable('member_profiles');
  // DROP TABLE fires no row trigger: the files of the avatars it drops are queued for removal first.
  await knex.raw('INSERT INTO attachment_file_deletions (account_id, attachment_id) SELECT account_id, id FROM avatars ON CONFLICT DO NOTHING');
  await knex.schema.dropTable('avatars');
}
