import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { client, testConfig } from '../helpers/app.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { adminQuery, adminUrl, freshDatabase, shippedMigrations } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// The real bin/ticketd against this file's own database (external PostgreSQL mode).
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url };
const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { ...env, ...extra });
// The real app on the same database: keys the CLI prints must authenticate here.
const app = await buildApp({ clock: testNow, config: testConfig({ DATABASE_URL: url }), db });
t.teardown(() => app.close());

const SECRET = /sk_(live|test)_[0-9A-Za-z]{43}/;

/** Fails the test with the command's output when the exit code is not the expected one. */
function exits(t: Test, res: CliResult, code: number, what: string) {
  t.equal(res.code, code, `${what}: exit ${code}`, { stdout: res.stdout, stderr: res.stderr });
}

async function brandsSeenBy(key: string) {
  const res = await client(app, key)('GET', '/v1/brands');
  return res;
}

async function adminCount(table: string): Promise<number> {
  const [{ n }] = await db(table).count({ n: '*' });
  return Number(n);
}

// Filled in by the first subtests, used by later ones.
let accountA = '';
let brandA = '';
let liveKeyA = '';

t.test('help and usage errors', async (t) => {
  const [help, nope, revoke] = await Promise.all([cli(['--help']), cli(['nope']), cli(['keys', 'revoke'])]);
  exits(t, help, 0, '--help');
  for (const command of ['start', 'init', 'db', 'accounts', 'brands', 'keys', 'mail']) t.match(help.stdout, new RegExp(`^\\s+${command}\\b`, 'm'), `help lists ${command}`);
  exits(t, nope, 2, 'unknown command');
  t.match(nope.stderr, /nope/, 'names the unknown command');
  exits(t, revoke, 2, 'keys revoke without its argument');
  t.match(revoke.stderr, /keyId/, 'names the missing argument');
});

t.test('accounts create prints the account, owner, brand and working keys', async (t) => {
  const res = await cli(['accounts', 'create', '--email', 'ci@example.com', '--brand', 'CI Brand', '--json']);
  exits(t, res, 0, 'accounts create');
  const out = res.json();
  t.match(out.account.id, /^acct_/);
  t.equal(out.owner.email, 'ci@example.com');
  t.match(out.brand.id, /^br_/);
  t.equal(out.brand.name, 'CI Brand');
  t.equal(out.brand.livemode, true, 'brand is in live mode by default');
  t.match(out.apiKeys.live.key, /^sk_live_/);
  t.match(out.apiKeys.test.key, /^sk_test_/);
  accountA = out.account.id;
  brandA = out.brand.id;
  liveKeyA = out.apiKeys.live.key;

  const live = await brandsSeenBy(out.apiKeys.live.key);
  t.equal(live.status, 200, 'the live key authenticates');
  t.same(
    live.body.map((b: { id: string }) => b.id),
    [brandA],
    'the live key lists the new brand',
  );
  const test = await brandsSeenBy(out.apiKeys.test.key);
  t.equal(test.status, 200, 'the test key authenticates');
  t.same(test.body, [], 'test mode sees no live brand');
});

t.test('accounts create --brand-mode test puts the brand in test mode', async (t) => {
  const res = await cli(['accounts', 'create', '--email', 'ci-test@example.com', '--brand', 'Sandbox', '--brand-mode', 'test', '--json']);
  exits(t, res, 0, 'accounts create --brand-mode test');
  const out = res.json();
  t.equal(out.brand.livemode, false);
  t.same((await brandsSeenBy(out.apiKeys.live.key)).body, [], 'live key sees nothing');
  t.same(
    (await brandsSeenBy(out.apiKeys.test.key)).body.map((b: { id: string }) => b.id),
    [out.brand.id],
    'test key sees the brand',
  );
});

t.test('missing input without a terminal is a usage error naming the flag', async (t) => {
  const res = await cli(['accounts', 'create', '--json']);
  exits(t, res, 2, 'accounts create without --email');
  t.match(res.stderr, /--email/);
  t.equal(await adminCount('accounts'), 2, 'nothing was created');
});

t.test('--account is required with several accounts, optional with one', async (t) => {
  const [without, withAccount] = await Promise.all([cli(['brands', 'list', '--json']), cli(['brands', 'list', '--account', accountA, '--json'])]);
  exits(t, without, 2, 'brands list without --account (2 accounts)');
  t.match(without.stderr, /--account/);
  exits(t, withAccount, 0, 'brands list --account');
  t.same(
    withAccount.json().map((b: { id: string }) => b.id),
    [brandA],
  );

  const single = await freshDatabase(t);
  const created = await runCli(['accounts', 'create', '--email', 'solo@example.com', '--brand', 'Solo', '--json'], { DATABASE_URL: single.url });
  exits(t, created, 0, 'accounts create (single)');
  const listed = await runCli(['brands', 'list', '--json'], { DATABASE_URL: single.url });
  exits(t, listed, 0, 'brands list without --account (1 account)');
  t.same(
    listed.json().map((b: { id: string }) => b.id),
    [created.json().brand.id],
  );
});

t.test('brands create', async (t) => {
  const res = await cli(['brands', 'create', '--name', 'Numbered', '--slug', 'numbered', '--ticket-prefix', 'ab', '--ticket-number-start', '500', '--account', accountA, '--json']);
  exits(t, res, 0, 'brands create');
  const brand = res.json();
  t.equal(brand.ticketPrefix, 'AB', 'prefix upper-cased');
  t.equal(brand.nextTicketNumber, 500);
  t.equal(brand.livemode, true);
  t.equal(brand.accountId, accountA);

  const [negative, duplicate] = await Promise.all([
    cli(['brands', 'create', '--name', 'Negative', '--ticket-number-start', '-3', '--account', accountA, '--json']),
    cli(['brands', 'create', '--name', 'Other', '--slug', 'numbered', '--account', accountA, '--json']),
  ]);
  exits(t, negative, 2, '--ticket-number-start -3');
  t.match(negative.stderr, /--ticket-number-start/);
  exits(t, duplicate, 1, 'duplicate --slug');
  t.match(duplicate.json(), { error: { code: 'slug_taken', message: String } });
  t.match(duplicate.stderr, /numbered/);
  const names = (await brandsSeenBy(liveKeyA)).body.map((b: { name: string }) => b.name).sort();
  t.same(names, ['CI Brand', 'Numbered'], 'neither failed command created a brand');

  // Without --slug, a taken slug derived from the name gets a short suffix instead of failing.
  const derived = await cli(['brands', 'create', '--name', 'Numbered', '--account', accountA, '--json']);
  exits(t, derived, 0, 'brands create with a name whose slug is taken');
  t.match(derived.json().slug, /^numbered-[0-9a-z]{4}$/);
});

let testBrandA = '';
t.test('brands list --mode test lists only test brands', async (t) => {
  const created = await cli(['brands', 'create', '--name', 'Staging', '--mode', 'test', '--account', accountA, '--json']);
  exits(t, created, 0, 'brands create --mode test');
  testBrandA = created.json().id;
  t.equal(created.json().livemode, false);
  const [testList, liveList] = await Promise.all([
    cli(['brands', 'list', '--mode', 'test', '--account', accountA, '--json']),
    cli(['brands', 'list', '--account', accountA, '--json']),
  ]);
  exits(t, testList, 0, 'brands list --mode test');
  t.same(
    testList.json().map((b: { id: string }) => b.id),
    [testBrandA],
  );
  t.notOk(
    liveList.json().some((b: { id: string }) => b.id === testBrandA),
    'live list leaves the test brand out',
  );
});

t.test('keys', (t) => {
  t.test('create in test mode and limited to brands', async (t) => {
    const [testKey, limited] = await Promise.all([
      cli(['keys', 'create', '--account', accountA, '--mode', 'test', '--name', 'CI test', '--json']),
      cli(['keys', 'create', '--account', accountA, '--brands', brandA, '--json']),
    ]);
    exits(t, testKey, 0, 'keys create --mode test');
    t.match(testKey.json().key, /^sk_test_/);
    t.equal(testKey.json().livemode, false);
    t.same(
      (await brandsSeenBy(testKey.json().key)).body.map((b: { id: string }) => b.id),
      [testBrandA],
      'the test key sees test brands',
    );
    exits(t, limited, 0, 'keys create --brands');
    t.equal(limited.json().allBrands, false);
    t.same(limited.json().brandIds, [brandA]);
    t.same(
      (await brandsSeenBy(limited.json().key)).body.map((b: { id: string }) => b.id),
      [brandA],
      'the limited key sees only its brand',
    );
  });

  t.test('list never shows a secret', async (t) => {
    const [live, test] = await Promise.all([cli(['keys', 'list', '--account', accountA, '--json']), cli(['keys', 'list', '--account', accountA, '--mode', 'test', '--json'])]);
    for (const res of [live, test]) {
      exits(t, res, 0, 'keys list');
      t.ok(res.json().length >= 2, 'lists the keys');
      t.notMatch(res.stdout, SECRET, 'no secret in the output');
      for (const key of res.json()) t.notOk('key' in key, `${key.id} has no key field`);
    }
    t.ok(live.json().every((k: { livemode: boolean }) => k.livemode) && test.json().every((k: { livemode: boolean }) => !k.livemode), 'each mode lists its own keys');
  });

  t.test('revoke', async (t) => {
    const created = (await cli(['keys', 'create', '--account', accountA, '--json'])).json();
    t.equal((await brandsSeenBy(created.key)).status, 200, 'works before');

    const [noYes, unknown] = await Promise.all([cli(['keys', 'revoke', created.id]), cli(['keys', 'revoke', 'key_00000000000000000000000000', '--yes', '--json'])]);
    exits(t, noYes, 2, 'revoke without --yes and no terminal');
    t.match(noYes.stderr, /--yes/);
    t.equal((await brandsSeenBy(created.key)).status, 200, 'still works after the refused revoke');
    exits(t, unknown, 1, 'revoke an unknown key');
    t.match(unknown.json(), { error: { code: 'not_found' } });

    const revoked = await cli(['keys', 'revoke', created.id, '--yes', '--json']);
    exits(t, revoked, 0, 'revoke --yes');
    t.match(revoked.json(), { success: true, id: created.id, revokedAt: String });
    t.equal((await brandsSeenBy(created.key)).status, 401, 'the key is refused at once');
    const listed = (await cli(['keys', 'list', '--account', accountA, '--json'])).json();
    t.notOk(
      listed.some((k: { id: string }) => k.id === created.id),
      'the revoked key is no longer listed',
    );
    exits(t, await cli(['keys', 'revoke', created.id, '--yes', '--json']), 1, 'revoking it again');
  });

  t.test('rotate with a grace period keeps the old key working', async (t) => {
    const old = (await cli(['keys', 'create', '--account', accountA, '--name', 'rotating', '--brands', brandA, '--json'])).json();
    const before = testNow();
    const res = await cli(['keys', 'rotate', old.id, '--grace', '10', '--json']);
    exits(t, res, 0, 'rotate --grace 10');
    const { newKey, oldKey } = res.json();
    t.match(newKey.key, /^sk_live_/);
    t.not(newKey.id, old.id);
    t.equal(newKey.name, 'rotating', 'same name');
    t.same(newKey.brandIds, [brandA], 'same scope');
    const expires = Date.parse(oldKey.expiresAt);
    t.ok(expires >= before + 10 * 60_000 - 5_000 && expires <= testNow() + 10 * 60_000 + 5_000, `old key expires in ~10 minutes (${oldKey.expiresAt})`);
    t.equal((await brandsSeenBy(newKey.key)).status, 200, 'the new key works');
    t.equal((await brandsSeenBy(old.key)).status, 200, 'the old key still works during the grace period');
  });

  t.test('rotate without grace revokes the old key now', async (t) => {
    const old = (await cli(['keys', 'create', '--account', accountA, '--json'])).json();
    const res = await cli(['keys', 'rotate', old.id, '--json']);
    exits(t, res, 0, 'rotate');
    t.equal((await brandsSeenBy(res.json().newKey.key)).status, 200, 'the new key works');
    t.equal((await brandsSeenBy(old.key)).status, 401, 'the old key is refused');
    const [badGrace] = await Promise.all([cli(['keys', 'rotate', res.json().newKey.id, '--grace', 'soon'])]);
    exits(t, badGrace, 2, 'rotate --grace soon');
  });
  t.end();
});

t.test('db status and db migrate on a migrated database', async (t) => {
  const [status, migrate] = await Promise.all([cli(['db', 'status', '--json']), cli(['db', 'migrate', '--json'])]);
  exits(t, status, 0, 'db status');
  t.same(status.json().completed, shippedMigrations(), 'every migration applied');
  t.match(status.json().completed, [/accounts_and_members/, /api_keys/, /brands/]);
  t.same(status.json().pending, []);
  exits(t, migrate, 0, 'db migrate');
  t.same(migrate.json(), { applied: [] });
});

t.test('configuration errors exit 1 and say what is wrong', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-cfg-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const broken = path.join(dir, 'broken.json');
  writeFileSync(broken, '{ "port": 3000, ');
  const [bad, missing, invalidJson, badJsonOut] = await Promise.all([
    cli(['db', 'status'], { PORT: 'abc', TICKETD_LOG_LEVEL: 'loud' }),
    cli(['--config', '/nonexistent.json', 'db', 'status']),
    cli(['--config', broken, 'db', 'status']),
    cli(['db', 'status', '--json'], { PORT: 'abc' }),
  ]);
  exits(t, bad, 1, 'PORT=abc TICKETD_LOG_LEVEL=loud');
  t.match(bad.stderr, /PORT/, 'names PORT');
  t.match(bad.stderr, /logLevel|TICKETD_LOG_LEVEL/, 'names the log level');
  exits(t, missing, 1, '--config /nonexistent.json');
  t.match(missing.stderr, /nonexistent\.json/);
  exits(t, invalidJson, 1, 'config file with invalid JSON');
  t.match(invalidJson.stderr, /broken\.json/);
  exits(t, badJsonOut, 1, 'invalid config with --json');
  t.match(badJsonOut.json(), { error: { code: 'invalid_config', problems: [/PORT/] } });
});

t.test('db provision creates a role and database and prints a working URL', async (t) => {
  const role = `r_${randomBytes(5).toString('hex')}`;
  const database = `d_${randomBytes(5).toString('hex')}`;
  t.teardown(async () => {
    await adminQuery(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await adminQuery(`DROP ROLE IF EXISTS ${role}`);
  });
  const args = ['db', 'provision', '--admin-url', adminUrl(), '--role-name', role, '--database-name', database, '--json'];
  const first = await runCli(args);
  exits(t, first, 0, 'db provision');
  const out = first.json();
  t.match(out, { role, database, createdRole: true, createdDatabase: true });
  const admin = new URL(adminUrl());
  const given = new URL(out.databaseUrl);
  t.equal(given.host, admin.host, 'same host and port as the admin URL');
  t.equal(given.username, role);
  t.equal(given.pathname, `/${database}`);

  async function whoAmI(databaseUrl: string) {
    const conn = new pg.Client({ connectionString: databaseUrl });
    await conn.connect();
    try {
      return (await conn.query('SELECT current_user AS u, current_database() AS d')).rows[0];
    } finally {
      await conn.end();
    }
  }
  t.same(await whoAmI(out.databaseUrl), { u: role, d: database }, 'the printed URL connects as the new role');

  const again = await runCli(args);
  exits(t, again, 1, 'provision again without --reset-password');
  t.match(again.stderr, /--reset-password/);
  t.same(await whoAmI(out.databaseUrl), { u: role, d: database }, 'the old password still works');

  const reset = await runCli([...args, '--reset-password']);
  exits(t, reset, 0, 'provision --reset-password');
  const next = reset.json();
  t.match(next, { createdRole: false, createdDatabase: false });
  t.not(new URL(next.databaseUrl).password, given.password, 'a different password');
  t.same(await whoAmI(next.databaseUrl), { u: role, d: database }, 'the new URL connects');
  // Only meaningful where the server checks passwords: a trust-auth server (as CI's may be) lets any in.
  const wrong = new URL(next.databaseUrl);
  wrong.password = 'certainly-not-the-password';
  const checksPasswords = await whoAmI(wrong.toString()).then(
    () => false,
    () => true,
  );
  if (checksPasswords) await t.rejects(whoAmI(out.databaseUrl), /password authentication failed/, 'the old password no longer works');
  else t.comment('this server trusts loopback connections: password checks skipped');

  const migrated = await runCli(['db', 'migrate', '--json'], { DATABASE_URL: next.databaseUrl });
  exits(t, migrated, 0, 'the provisioned database can be migrated by its role');
  t.same(migrated.json().applied, shippedMigrations());
});

t.test('start refuses to start when migrations fail, and serves nothing', async (t) => {
  // A database whose migration history names a migration this ticketd does not have.
  const broken = await freshDatabase(t);
  await broken.db('knex_migrations').insert({ name: '29990101000000_from_the_future.js', batch: 99, migrationTime: new Date(testNow()) });
  const res = await runCli(['start', '--port', '0', '--json'], { DATABASE_URL: broken.url });
  exits(t, res, 1, 'start on a database with an unknown migration');
  t.match(res.stderr, /29990101000000_from_the_future\.js/, 'stderr names the migration');
  t.same(Object.keys(res.json()), ['error'], 'stdout carries only the JSON error, no start-up summary');
  t.match(res.json().error.message, /migration/i);
});
