import { readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import type { Db } from '../../server/core/db.js';
import { newId } from '../../server/core/ids.js';
import { migrateLatest, migrationStatus, rollback } from '../../server/core/migrate.js';
import { distRoot } from '../../server/core/paths.js';
import { freshDatabase } from '../helpers/db.js';

const DOMAIN_TABLES = ['accounts', 'api_keys', 'brands', 'members'];
const KNEX_TABLES = ['knex_migrations', 'knex_migrations_lock'];
const MIGRATIONS_DIR = path.join(distRoot, 'migrations');
const migrationFiles = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.js')).sort();

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
  t.same(await tables(db), KNEX_TABLES, 'only knex\'s own tables remain');
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
  await db('accounts').insert([{ id: accountId, name: 'A' }, { id: otherAccountId, name: 'B' }]);

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
    const brand = (account: string, livemode: boolean) => ({ id: newId('br'), accountId: account, livemode, name: 'Support', slug: 'support', ticketPrefix: 'SUPP', nextTicketNumber: 1000 });
    await db('brands').insert(brand(accountId, true));
    t.same(await pgCode(db('brands').insert(brand(accountId, true))), { code: '23505', constraint: 'brands_slug_unique' }, 'the same slug twice in one account and mode is refused');
    await db('brands').insert(brand(accountId, false));
    await db('brands').insert(brand(otherAccountId, true));
    t.equal(Number((await db('brands').count({ n: '*' }))[0]!.n), 3, 'the same slug in the other mode, or in another account, is fine');
  });
});
