import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { embeddedBinDir } from '../../server/integrations/embedded-postgres.js';
import { connectionFor, findTool, toolDirs } from '../../server/integrations/pg-tools.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'ticketd-pg-tools-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

/** A directory holding a pg_dump that only tells its version. */
function fakeTools(name: string, version: string): string {
  const dir = path.join(root, name);
  mkdirSync(dir);
  writeFileSync(path.join(dir, 'pg_dump'), `#!/bin/sh\necho "pg_dump (PostgreSQL) ${version}"\n`);
  chmodSync(path.join(dir, 'pg_dump'), 0o755);
  return dir;
}

const old = fakeTools('old', '15.20 (Debian 15.20-0+deb12u1)');
const current = fakeTools('current', '18.4');
const empty = path.join(root, 'empty');
mkdirSync(empty);

t.test('the first pg_dump at least as new as the server is used', async (t) => {
  t.match(await findTool('pg_dump', 18, [empty, old, current]), { path: path.join(current, 'pg_dump'), major: 18, version: '18.4' });
  t.match(await findTool('pg_dump', 15, [empty, old, current]), { path: path.join(old, 'pg_dump'), major: 15 }, 'an older server: the first that can');
  t.match(await findTool('pg_dump', 14, [current, old]), { major: 18 }, 'order wins over closeness');
});

t.test('none new enough: the error names what is needed and what was found', async (t) => {
  const err = (await findTool('pg_dump', 19, [old, current]).catch((e: Error) => e)) as Error;
  t.match(err.message, /pg_dump 19 or newer is needed/);
  t.match(err.message, `${path.join(old, 'pg_dump')} (15.20)`);
  t.match(err.message, `${path.join(current, 'pg_dump')} (18.4)`);
  t.match(err.message, /postgresql-client-19/);
  t.match((await findTool('pg_restore', 15, [old]).catch((e: Error) => e)) as Error, { message: /found none/ });
});

t.test('the embedded distribution is searched first for the embedded database, after PATH otherwise', async (t) => {
  const bundled = await embeddedBinDir();
  t.ok(bundled, 'the embedded binaries are installed');
  const env = { PATH: `${old}${path.delimiter}${current}` };
  t.same((await toolDirs(true, env)).slice(0, 3), [bundled, old, current]);
  t.same((await toolDirs(false, env)).slice(0, 3), [old, current, bundled]);
});

t.test('the password goes to PGPASSWORD, never into the arguments', async (t) => {
  const { dbname, env } = connectionFor('postgres://ticketd:p%40ss%3Aword@db.example:5433/ticketd?sslmode=require');
  t.equal(dbname, 'postgres://ticketd@db.example:5433/ticketd?sslmode=require');
  t.equal(env.PGPASSWORD, 'p@ss:word');
  const query = connectionFor('postgresql://ticketd@db.example/ticketd?password=s3cret&sslmode=verify-full');
  t.equal(query.dbname, 'postgresql://ticketd@db.example/ticketd?sslmode=verify-full');
  t.equal(query.env.PGPASSWORD, 's3cret');
});
