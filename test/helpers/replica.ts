import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createDb } from '../../server/core/db.js';
import { migrateLatest } from '../../server/core/migrate.js';
import { walPosition } from '../../server/core/read-replica.js';
import { EmbeddedPostgres, freePort } from '../../server/integrations/embedded-postgres.js';
import { queryAt } from './db.js';

/** A migrated primary and a hot standby streaming from it: two clusters of the embedded PostgreSQL, for one test file. */
export interface Replicated {
  primaryUrl: string;
  standbyUrl: string;
  /** SQL as the superuser. */
  query(url: string, sql: string): Promise<Record<string, unknown>[]>;
  /** Waits until the standby has replayed everything committed on the primary so far. */
  caughtUp(): Promise<void>;
  /** Stops replaying (the standby keeps answering, with what it had), or starts again. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  stopStandby(): Promise<void>;
  /** Stops both clusters and removes them. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const query = async (url: string, sql: string) => (await queryAt(url, sql)).rows as Record<string, unknown>[];

function run(file: string, args: string[], owner: { uid: number; gid: number } | null): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...(owner ?? {}), stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${path.basename(file)} exited with ${code}: ${err}`))));
  });
}

export async function primaryWithStandby(): Promise<Replicated> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-replica-'));
  chmodSync(dir, 0o755); // as root, the postgres user must reach the clusters inside
  const primaryDir = path.join(dir, 'primary');
  const primary = new EmbeddedPostgres({ dataDir: primaryDir, settings: { fsync: 'off', full_page_writes: 'off', max_wal_senders: '4', wal_keep_size: '256MB' } });

  // Initialise and migrate, stop it (a copy of a cleanly stopped cluster needs no backup
  // protocol), copy it as the standby, then start both.
  let handle = await primary.acquire();
  const db = createDb(handle.url, { poolMax: 2, poolMin: 0 });
  await migrateLatest(db);
  await db.destroy();
  await handle.release();
  const standbyCluster = path.join(dir, 'standby');
  execFileSync('cp', ['-a', path.join(primaryDir, 'postgres'), standbyCluster]);
  handle = await primary.acquire();
  const primaryUrl = handle.url;
  const password = (JSON.parse(readFileSync(path.join(primaryDir, 'embedded-postgres.json'), 'utf8')) as { password: string }).password;

  const { uid, gid } = statSync(standbyCluster);
  const owner = process.getuid?.() === 0 ? { uid, gid } : null;
  const primaryPort = new URL(primaryUrl).port;
  appendFileSync(path.join(standbyCluster, 'postgresql.auto.conf'), `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres password=${password}'\n`);
  writeFileSync(path.join(standbyCluster, 'standby.signal'), '');
  if (owner) chownSync(path.join(standbyCluster, 'standby.signal'), uid, gid);
  const { pg_ctl } = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as { pg_ctl: string };
  const standbyPort = await freePort();
  const options = `-p ${standbyPort} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c hot_standby=on -c fsync=off`;
  await run(pg_ctl, ['start', '-D', standbyCluster, '-w', '-t', '60', '-l', path.join(standbyCluster, 'server.log'), '-o', options], owner);
  const standbyUrl = new URL(primaryUrl);
  standbyUrl.port = String(standbyPort);

  let standbyRunning = true;
  const stopStandby = async () => {
    if (!standbyRunning) return;
    standbyRunning = false;
    await run(pg_ctl, ['stop', '-D', standbyCluster, '-m', 'immediate', '-w', '-t', '60'], owner);
  };
  const position = async (url: string, expression: string) => walPosition(String((await query(url, `select (${expression})::text as lsn`))[0]!.lsn));
  const replayState = async () => String((await query(standbyUrl.toString(), 'select pg_get_wal_replay_pause_state() as state'))[0]!.state);

  return {
    primaryUrl,
    standbyUrl: standbyUrl.toString(),
    query,
    async caughtUp() {
      const target = await position(primaryUrl, 'pg_current_wal_insert_lsn()');
      for (let polls = 1; (await position(standbyUrl.toString(), 'pg_last_wal_replay_lsn()')) < target; polls++) {
        if (polls > 1500) throw new Error('the standby did not catch up within 30 s');
        // A position just past a page header is only reached by the next record: write one.
        if (polls % 50 === 0) await query(primaryUrl, 'select pg_current_xact_id()');
        await sleep(20);
      }
    },
    async pauseReplay() {
      await query(standbyUrl.toString(), 'select pg_wal_replay_pause()');
      while ((await replayState()) !== 'paused') await sleep(20);
    },
    async resumeReplay() {
      await query(standbyUrl.toString(), 'select pg_wal_replay_resume()');
    },
    stopStandby,
    async stop() {
      await stopStandby().catch(() => undefined);
      await handle.release();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
