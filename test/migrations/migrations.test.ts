import { readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import type { Db } from '../../server/core/db.js';
import { systemCtx } from '../../server/core/context.js';
import { newId } from '../../server/core/ids.js';
import { migrateLatest, migrationStatus, rollback } from '../../server/core/migrate.js';
import { distRoot } from '../../server/core/paths.js';
import { rollUp } from '../../server/domains/tickets/counts.js';
import { makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';

const DOMAIN_TABLES = ['accounts', 'api_keys', 'brands', 'field_definitions', 'members', 'statuses'];
const KNEX_TABLES = ['knex_migrations', 'knex_migrations_lock'];
const MIGRATIONS_DIR = path.join(distRoot, 'migrations');
const migrationFiles = readdirSync(MIGRATIONS_DIR)
  .filter((f) => f.endsWith('.js'))
  .sort();

async function tables(db: Db): Promise<string[]> {
  const rows = await db('information_schema.tables').select('table_name').where({ table_schema: 'public', table_type: 'BASE TABLE' }).orderBy('table_name');
  return rows.map((r: { tableName: string }) => r.tableName);
}

async function pgCode(promise: Promise<unknown>): Promise<{ code?: string; constraint?: string }> {
  try {
    await promise;
    return {};
  } catch (err) {
    const e = err as { code?: string; constraint?: string; nativeError?: { code?: string; constraint?: string } };
    return { code: e.nativeError?.code ?? e.code, constraint: e.nativeError?.constraint ?? e.constraint };
  }
}

t.test('every migration file exports up and down', async (t) => {
  t.ok(migrationFiles.length >= 3, `${migrationFiles.length} migrations`);
  for (const file of migrationFiles) {
    const mod = await import(pathToFileURL(path.join(MIGRATIONS_DIR, file)).href);
    t.type(mod.up, 'function', `${file} exports up`);
    t.type(mod.down, 'function', `${file} exports down`);
  }
});

t.test('up, down, up on an empty database', async (t) => {
  const { db } = await freshDatabase(t, { fromTemplate: false });
  t.same(await tables(db), [], 'starts empty');

  const applied = await migrateLatest(db);
  t.same(applied, migrationFiles, 'applies every migration, in order');
  const created = await tables(db);
  for (const table of [...DOMAIN_TABLES, ...KNEX_TABLES]) t.ok(created.includes(table), `creates ${table}`);
  t.same(await migrateLatest(db), [], 'a second run applies nothing');
  t.same((await migrationStatus(db)).pending, []);

  const rolledBack = await rollback(db, true);
  t.same([...rolledBack].sort(), [...applied].sort(), 'rolls back every migration');
  t.same(await tables(db), KNEX_TABLES, "only knex's own tables remain");
  const indexes = await db.raw(`SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexname LIKE 'members%'`);
  t.same(indexes.rows, [], 'indexes went with their tables');
  t.same((await migrationStatus(db)).completed, [], 'nothing recorded as applied');

  t.same(await migrateLatest(db), applied, 'up again applies them all');
  t.same(await tables(db), created, 'and recreates the same tables');
});

t.test('the schema keeps the invariants the services rely on', async (t) => {
  const { db } = await freshDatabase(t, { fromTemplate: false });
  await migrateLatest(db);
  const accountId = newId('acct');
  const otherAccountId = newId('acct');
  await db('accounts').insert([
    { id: accountId, name: 'A' },
    { id: otherAccountId, name: 'B' },
  ]);

  t.test('one owner per account (members_one_owner)', async (t) => {
    await db('members').insert({ id: newId('mem'), accountId, email: 'owner@example.com', role: 'owner' });
    t.same(
      await pgCode(db('members').insert({ id: newId('mem'), accountId, email: 'second@example.com', role: 'owner' })),
      { code: '23505', constraint: 'members_one_owner' },
      'a second owner is refused',
    );
    await db('members').insert({ id: newId('mem'), accountId, email: 'admin@example.com', role: 'admin' });
    await db('members').insert({ id: newId('mem'), accountId: otherAccountId, email: 'owner@example.com', role: 'owner' });
    t.equal(Number((await db('members').count({ n: '*' }))[0]!.n), 3, 'admins, and owners of other accounts, are fine');
  });

  t.test('brand slugs are unique per account and mode (brands_slug_unique)', async (t) => {
    const brand = (account: string, livemode: boolean) => ({
      id: newId('br'),
      accountId: account,
      livemode,
      name: 'Support',
      slug: 'support',
      ticketPrefix: 'SUPP',
      nextTicketNumber: 1000,
    });
    await db('brands').insert(brand(accountId, true));
    t.same(
      await pgCode(db('brands').insert(brand(accountId, true))),
      { code: '23505', constraint: 'brands_slug_unique' },
      'the same slug twice in one account and mode is refused',
    );
    await db('brands').insert(brand(accountId, false));
    await db('brands').insert(brand(otherAccountId, true));
    t.equal(Number((await db('brands').count({ n: '*' }))[0]!.n), 3, 'the same slug in the other mode, or in another account, is fine');
  });
});

t.test("20261122000400: existing brands get the system statuses; rows cannot point at another tenant's brand", async (t) => {
  const { db } = await freshDatabase(t, { fromTemplate: false });
  const index = migrationFiles.indexOf('20261122000400_statuses_and_fields.js');
  t.ok(index > 0, 'the migration ships');
  for (let i = 0; i < index; i++) await db.migrate.up();
  const accountId = newId('acct');
  const otherAccountId = newId('acct');
  await db('accounts').insert([
    { id: accountId, name: 'A' },
    { id: otherAccountId, name: 'B' },
  ]);
  const brand = (account: string, livemode: boolean, slug: string) => ({
    id: newId('br'),
    accountId: account,
    livemode,
    name: 'Support',
    slug,
    ticketPrefix: 'SUPP',
    nextTicketNumber: 1000,
  });
  const live = brand(accountId, true, 'live');
  const test = brand(accountId, false, 'test');
  await db('brands').insert([live, test]);
  await db.migrate.up();

  for (const b of [live, test]) {
    const rows = await db('statuses').where({ brandId: b.id }).orderBy('sortOrder');
    t.same(
      rows.map((r: { key: string }) => r.key),
      ['open', 'pending', 'resolved', 'closed'],
      `${b.slug}: backfilled in order`,
    );
    t.ok(
      rows.every((r: { isSystem: boolean; accountId: string; livemode: boolean }) => r.isSystem && r.accountId === accountId && r.livemode === b.livemode),
      `${b.slug}: system rows in the brand's scope`,
    );
  }
  const status = (account: string, livemode: boolean, brandId: string) => ({ id: newId('st'), accountId: account, livemode, brandId, key: 'x', name: 'X', color: '#000000' });
  t.equal((await pgCode(db('statuses').insert(status(otherAccountId, true, live.id)))).code, '23503', 'another account cannot reference the brand');
  t.equal((await pgCode(db('statuses').insert(status(accountId, false, live.id)))).code, '23503', 'the other mode cannot reference the brand');
  const field = { id: newId('fld'), accountId, livemode: false, brandId: live.id, entityType: 'ticket', key: 'x', label: 'X', type: 'text' };
  t.equal((await pgCode(db('field_definitions').insert(field))).code, '23503', 'nor a field definition of the other mode');
  t.equal((await pgCode(db('field_definitions').insert({ ...field, livemode: true, entityType: 'user' }))).code, '23514', 'unknown entity types are refused');
  await db('field_definitions').insert({ ...field, livemode: true });
  t.same(
    await pgCode(db('statuses').insert({ ...status(accountId, true, live.id), key: 'open' })),
    { code: '23505', constraint: 'statuses_key_unique' },
    'status keys are unique per brand',
  );
  await db('brands').where({ id: live.id }).delete();
  t.equal(Number((await db('statuses').where({ brandId: live.id }).count({ n: '*' }))[0]!.n), 0, 'statuses cascade with the brand');
  t.equal(Number((await db('field_definitions').where({ brandId: live.id }).count({ n: '*' }))[0]!.n), 0, 'field definitions cascade with the brand');
  await db.migrate.down();
  t.notOk(await db.schema.hasTable('statuses'), 'down drops statuses');
  t.notOk(await db.schema.hasTable('field_definitions'), 'down drops field_definitions');
});

t.test('20261124003700: an attachment names a comment of its own ticket, or none; links stored before are cleared if they point elsewhere', async (t) => {
  const { app, db } = await testApp(t);
  const owner = await signup(app);
  const base = `/v1/brands/${(await makeBrand(owner.live)).id}`;
  const ticket = await makeTicket(owner.live, base);
  const sibling = await makeTicket(owner.live, base);
  const comment = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'With a file' });
  const siblings = await mustCreate(owner.live, `${base}/tickets/${sibling.id}/comments`, { body: 'Elsewhere' });
  const declare = async (url: string, commentId: string | null = null) =>
    (await mustCreate(owner.live, url, { filename: 'a.txt', contentType: 'text/plain', size: 3, commentId })).attachment.id as string;
  const kept = await declare(`${base}/tickets/${ticket.id}/attachments`, comment.id);
  const crossTicket = await declare(`${base}/tickets/${ticket.id}/attachments`);
  const nowhere = await declare(`${base}/tickets/${ticket.id}/attachments`);
  const pending = await declare(`${base}/attachments/pending`);

  const name = migrationFiles.find((f) => f.startsWith('20261124003700'))!;
  await db.migrate.down({ name });
  await db('attachments').where({ id: crossTicket }).update({ commentId: siblings.id });
  await db('attachments').where({ id: nowhere }).update({ commentId: 'cmt_nowhere' });
  await db('attachments').where({ id: pending }).update({ commentId: comment.id });
  await db.migrate.up({ name });
  const commentOf = async (id: string) => (await db('attachments').where({ id }).first()).commentId;
  t.equal(await commentOf(kept), comment.id, 'a comment of its own ticket is kept');
  for (const id of [crossTicket, nowhere, pending]) t.equal(await commentOf(id), null, 'a link to another ticket, to nothing, or from a pending attachment is cleared');

  const set = (id: string, commentId: string) => pgCode(db.transaction(async (trx) => trx('attachments').where({ id }).update({ commentId })));
  t.match(await set(crossTicket, siblings.id), { code: '23503', constraint: 'attachments_comment_fk' }, "another ticket's comment is refused at commit");
  t.match(await set(pending, comment.id), { code: '23514' }, 'a pending attachment names no comment');

  const merged = await owner.live('POST', `${base}/tickets/${sibling.id}/merge`, { sourceTicketIds: [ticket.id] });
  t.equal(merged.status, 200, 'a merge moves comments and their attachments together');
  t.match(await db('attachments').where({ id: kept }).first(), { ticketId: sibling.id, commentId: comment.id });
});

t.test('20261125020000 and 20261128070000: the backfill, ticketd_rebuild_ticket_counts() and the application count alike', async (t) => {
  const { app, db } = await testApp(t);
  const owner = await signup(app);
  const brands = [(await makeBrand(owner.live)).id, (await makeBrand(owner.live)).id, (await makeBrand(owner.test)).id];
  const callOf = (i: number) => (i === 2 ? owner.test : owner.live);
  const base = (i: number) => `/v1/brands/${brands[i % 3]}`;
  const ids: string[] = [];
  for (let i = 0; i < 18; i++) {
    ids.push((await makeTicket(callOf(i % 3), base(i), { title: `t${i}`, status: ['open', 'pending', 'resolved', 'closed'][i % 4], customerEmail: `c${i}@example.com` })).id);
  }
  // Spread over days and durations by hand, then counted afresh: the baseline.
  await db.raw(`update tickets set created_at = created_at - (ticket_number % 5) * interval '1 day 3 hours 0.25 second'`);
  await db.raw(`update tickets set resolved_at = created_at + ticket_number * interval '1 hour 0.5 second' where resolved_at is not null`);
  await db.raw('select ticketd_rebuild_ticket_counts()');

  /** Per key and day, the rolled-up counts plus the changes not rolled up yet; keys at zero left out (and the every-day rows, which hold no change until it is rolled up). */
  const counts = async () =>
    (
      await db.raw(`
        select account_id, livemode, brand_id, to_char(day, 'YYYY-MM-DD') as day, status,
          sum(created)::int as created, sum(resolved)::int as resolved, sum(resolution_seconds)::numeric(30, 6)::text as seconds
        from (select account_id, livemode, brand_id, day, status, created, resolved, resolution_seconds from ticket_counts where day > '-infinity'
              union all select account_id, livemode, brand_id, day, status, created, resolved, resolution_seconds from ticket_count_changes) as k
        group by 1, 2, 3, 4, 5 having sum(created) <> 0 or sum(resolved) <> 0 or sum(resolution_seconds) <> 0
        order by 1, 2, 3, 4, 5`)
    ).rows;
  const ok = (r: { status: number }, what: string) => t.ok(r.status < 300, what);

  // Every path that changes what a ticket counts for, through the API.
  ok(await callOf(0)('POST', `${base(0)}/tickets/${ids[0]}/spam`, { isSpam: true }), 'spam');
  ok(await callOf(1)('DELETE', `${base(1)}/tickets/${ids[1]}`), 'delete');
  ok(await callOf(2)('PATCH', `${base(2)}/tickets/${ids[5]}`, { status: 'open' }), 'reopened by PATCH');
  await rollUp(systemCtx(servicesOf(db)));
  ok(await callOf(0)('PATCH', `${base(0)}/tickets/${ids[3]}`, { status: 'resolved' }), 'resolved by PATCH');
  ok(await callOf(1)('POST', `${base(1)}/tickets/bulk`, { ticketIds: [ids[4], ids[7], ids[10]], action: 'close' }), 'bulk close');
  ok(await callOf(0)('POST', `${base(0)}/tickets/${ids[6]}/comments`, { body: 'done', setStatus: 'resolved' }), 'resolved by a comment');
  ok(await callOf(0)('POST', `${base(0)}/tickets/${ids[9]}/merge`, { sourceTicketIds: [ids[12]] }), 'merged');
  ok(await callOf(2)('POST', `${base(2)}/tickets/bulk`, { ticketIds: [ids[8], ids[11]], action: 'delete' }), 'bulk delete');
  ok(await callOf(0)('POST', `${base(0)}/tickets/${ids[0]}/spam`, { isSpam: false }), 'unmarked');
  const kept = await counts();
  t.ok(kept.length > 6, 'the application counted the tickets over several days and statuses');
  t.ok(Number((await db('ticket_count_changes').count({ n: '*' }))[0]!.n) > 0, 'some changes are not rolled up');
  await db.raw('select ticketd_rebuild_ticket_counts()');
  t.same(await counts(), kept, 'the rebuild counts what the application counted');

  // The backfill of 20261125020000 (its triggers back while it is down and up again).
  const counting = migrationFiles.find((f) => f.startsWith('20261125020000'))!;
  const withoutTriggers = migrationFiles.find((f) => f.startsWith('20261128070000'))!;
  await db.migrate.down({ name: withoutTriggers });
  await db.migrate.down({ name: counting });
  t.notOk(await db.schema.hasTable('ticket_counts'), 'down drops the counts');
  await db('tickets').where({ id: ids[13] }).update({ status: 'closed' });
  await db.migrate.up({ name: counting });
  t.equal(Number((await db('ticket_count_changes').count({ n: '*' }))[0]!.n), 0, 'the backfill leaves no change to roll up');
  t.notSame(await counts(), kept, 'the backfill counts the change made while there were no counts');
  const everyDay = await db.raw(`
    with every_day as (select account_id, livemode, brand_id, status, created, resolved, resolution_seconds from ticket_counts where day = '-infinity'),
    summed as (select account_id, livemode, brand_id, status, sum(created)::int, sum(resolved)::int, sum(resolution_seconds) from ticket_counts where day > '-infinity' group by 1, 2, 3, 4)
    select (select count(*) from every_day)::int as rows,
      (select count(*) from ((select * from every_day except select * from summed) union all (select * from summed except select * from every_day)) as d)::int as differing`);
  t.ok(everyDay.rows[0].rows >= 3 * 3, 'a row per brand and status counted');
  t.equal(everyDay.rows[0].differing, 0, 'each sums every day of its brand and status');
  await db.migrate.up({ name: withoutTriggers });
  ok(await callOf(1)('PATCH', `${base(1)}/tickets/${ids[13]}`, { status: 'open' }), 'reopened after the backfill');
  const reopened = await counts();
  await db.raw('select ticketd_rebuild_ticket_counts()');
  t.same(await counts(), reopened, 'and the application counts on from there');
});
