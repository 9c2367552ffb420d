/**
 * `npm test`: prepares PostgreSQL, then runs the compiled test files (tap tests), one more than the cores.
 * - With TEST_DATABASE_URL (an administrator URL), tests use that server.
 * - Without it, an embedded cluster is started in a temporary directory for this run.
 * - With TEST_CITUS_URL (a Citus coordinator), the HTTP tests run on that cluster (citusMain).
 * - With TICKETD_TEST_NOW (an ISO instant), the run happens on that day: see onAnotherDay.
 * - With --dates, the date-sensitive files run once on each of test/dates.ts's days (datesMain).
 * A template database is migrated once; each test file clones it (see test/helpers/db.ts).
 * Ends with the failed tests (if any), the ten slowest test files, then the line
 * "N passed, N failed" (always the last), so a log cut to its tail still names what failed.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createDb } from '../server/core/db.js';
import { migrateLatest } from '../server/core/migrate.js';
import { packageRoot } from '../server/core/paths.js';
import { EmbeddedPostgres } from '../server/integrations/embedded-postgres.js';
import { DATE_FILES, DAYS } from './dates.js';
import { fakeTimeEnv, libfaketime } from './helpers/faketime.js';

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

const TAP = path.join(packageRoot, 'node_modules', '.bin', 'tap');
/** A file that runs longer has hung (package.json's tap.timeout said the same to tap's runner). */
const TIMEOUT_MS = 180_000;

async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

interface FileTime {
  file: string;
  ms: number;
  /** Its assertions that passed. */
  pass: number;
}

/** The slowest files and their seconds, so the suite's time is watched as it grows. */
function slowest(files: FileTime[], n = 10): string {
  const top = [...files].sort((a, b) => b.ms - a.ms).slice(0, n);
  return top.length ? `# slowest test files:\n${top.map((f) => `# ${(f.ms / 1000).toFixed(1).padStart(7)} s  ${f.file}\n`).join('')}` : '';
}

/**
 * tap rebuilds itself when package.json's `tap.plugin` differs from its build (as after `npm ci`),
 * but that very run still starts every test file with the old build's module loaders (TypeScript and
 * mock: about a second of CPU each per file). Rebuilding first spares that run.
 */
async function buildTapIfStale(): Promise<void> {
  const built = readFileSync(new URL(import.meta.resolve('@tapjs/test/test-built')), 'utf8');
  const signature = /export const signature = `([^`]*)`/.exec(built)?.[1]?.split('\n') ?? [];
  const wanted = (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { tap?: { plugin?: string[] } }).tap?.plugin ?? [];
  if (wanted.every((p) => (p.startsWith('!') ? !signature.includes(p.slice(1)) : signature.includes(p)))) return;
  const code = await new Promise((resolve) => spawn(TAP, ['build'], { cwd: packageRoot, stdio: ['ignore', 2, 2] }).on('close', resolve));
  if (code !== 0) throw new Error(`tap build failed (exit ${code})`);
}

/**
 * Follows tap's nested output and keeps each failure as "file > subtest > assertion" with its
 * diagnostics. Only the innermost failure of a branch is kept: its parents fail because of it.
 */
class FailureCollector {
  readonly failed: string[] = [];
  private subtests: string[] = [];
  private inFile: { path: string; diagnostics: string[] }[] = [];
  private open: string[] | undefined;
  private inYaml = false;

  line(line: string): void {
    const indent = /^ */.exec(line)![0].length;
    const text = line.trim();
    if (this.open) {
      if (!this.inYaml && text === '---') return void (this.inYaml = true);
      if (this.inYaml && text !== '...') return void (this.open.length < 12 && this.open.push(text));
      this.open = undefined;
      this.inYaml = false;
    }
    const subtest = /^# Subtest: (.*)$/.exec(text);
    if (subtest) return void this.subtests.splice(indent / 4, Infinity, subtest[1]!);
    const result = /^(not )?ok \d+ - (.*?)(?: # time=[\d.]+ms)?$/.exec(text);
    if (!result) return;
    const depth = indent / 4;
    if (depth === 0) {
      if (result[1]) {
        const entries = this.inFile.length ? this.inFile : [{ path: '', diagnostics: [] }];
        // A file that timed out ends "not ok N - timeout!": its name is in its Subtest line.
        const file = this.subtests[0] ?? result[2];
        for (const e of entries) this.failed.push([file, e.path].filter(Boolean).join(' > ') + e.diagnostics.map((d) => `\n  ${d}`).join(''));
      }
      this.inFile = [];
      return;
    }
    if (!result[1]) return;
    const path = [...this.subtests.slice(1, depth), result[2]!].join(' > ');
    if (this.inFile.some((f) => f.path.startsWith(`${path} > `))) return;
    const entry = { path, diagnostics: [] as string[] };
    this.inFile.push(entry);
    this.open = entry.diagnostics;
  }

  report(): string {
    return this.failed.length ? `# failed:\n${this.failed.map((f) => `#   ${f.replace(/\n/g, '\n#   ')}\n`).join('')}` : '';
  }
}

interface FileRun {
  file: string;
  ms: number;
  ok: boolean;
  pass: number;
  fail: number;
  lines: string[];
}

/**
 * Runs one test file as a plain node process: it prints TAP and ends with tap's summary line
 * ("# { total: 12, pass: 11, fail: 1 }"). Not through tap's runner: that starts every test
 * process, and every process a test starts (each `bin/ticketd`), with its processinfo loader in
 * NODE_OPTIONS, about 0.6 s of CPU each, for coverage reports we take from NODE_V8_COVERAGE.
 */
function runFile(file: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<FileRun> {
  return new Promise((resolve) => {
    const started = performance.now();
    // tap's own limit for the file (its default is 30 s when no runner sets it), ours a little later.
    const child = spawn(process.execPath, ['--enable-source-maps', file], {
      cwd: packageRoot,
      env: { ...env, TAP_TIMEOUT: String(timeoutMs / 1000) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => void (out += chunk.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
    }, timeoutMs + 10_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const lines = out.split('\n');
      if (lines.at(-1) === '') lines.pop();
      // The file's own summary is its last unindented "# { total: … }" line.
      const summary = lines.findLast((l) => /^# \{ total: \d+/.test(l));
      const pass = Number(/pass: (\d+)/.exec(summary ?? '')?.[1] ?? 0);
      let fail = Number(/fail: (\d+)/.exec(summary ?? '')?.[1] ?? 0);
      const ok = code === 0 && !timedOut && summary !== undefined && fail === 0;
      if (!ok && fail === 0) fail = 1;
      if (timedOut) lines.push(`not ok 1 - timeout! (${timeoutMs / 1000} s)`);
      else if (code !== 0 && fail === 1 && !summary) lines.push(`not ok 1 - exited with ${signal ?? `code ${code}`} before its summary`);
      resolve({ file, ms: performance.now() - started, ok, pass, fail, lines });
    });
  });
}

/**
 * Runs the files `jobs` at a time, the longest first (by test/durations.json, a new file as
 * a long one), and prints each file's TAP when it ends, indented under its own line as tap's
 * runner did, so FailureCollector reads it the same way.
 */
async function runFiles(
  files: string[],
  env: NodeJS.ProcessEnv,
  jobs: number,
  envOf: (file: string) => NodeJS.ProcessEnv = () => ({}),
  options: { print: boolean } = { print: true },
): Promise<{ pass: number; fail: number; files: FileTime[]; failures: FailureCollector }> {
  const known = readDurations();
  const queue = [...files].sort((a, b) => (known[testName(b)] ?? 60) - (known[testName(a)] ?? 60));
  const failures = new FailureCollector();
  const times: FileTime[] = [];
  let pass = 0;
  let fail = 0;
  let n = 0;
  const worker = async () => {
    for (let file = queue.shift(); file; file = queue.shift()) {
      const run = await runFile(file, { ...env, ...envOf(file) }, TIMEOUT_MS);
      n += 1;
      pass += run.pass;
      fail += run.fail;
      times.push({ file, ms: run.ms, pass: run.pass });
      const block = [`# Subtest: ${file}`, ...run.lines.map((l) => (l ? `    ${l}` : l)), `${run.ok ? 'ok' : 'not ok'} ${n} - ${file} # time=${run.ms.toFixed(3)}ms`, ''];
      for (const line of block) failures.line(line);
      if (options.print) process.stdout.write(`${block.join('\n')}\n`);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, jobs) }, worker));
  return { pass, fail, files: times, failures };
}

/** A test file's name in test/durations.json: its path under test/, as written. */
const testName = (file: string) => path.relative(path.join('dist', 'test'), file).replace(/\.js$/, '.ts');
const DURATIONS = path.join(packageRoot, 'test', 'durations.json');

function readDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(DURATIONS, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/** Seconds per file, rounded, for the next run's order (written by `TICKETD_TEST_WRITE_DURATIONS=1 npm test`). */
function writeDurations(files: FileTime[]): void {
  const entries = files.map((f) => [testName(f.file), Math.round(f.ms / 100) / 10] as const).sort(([a], [b]) => a.localeCompare(b));
  writeFileSync(DURATIONS, `${JSON.stringify(Object.fromEntries(entries), null, 2)}\n`);
}

/** Compiled test files (tap skips dist/ when it searches on its own). */
function testFiles(): string[] {
  const dir = path.join(packageRoot, 'dist', 'test');
  return (readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.js'))
    .sort()
    .map((f) => path.join('dist', 'test', f));
}

/**
 * The Citus mode: with TEST_CITUS_URL (a coordinator's administrator URL), the HTTP tests (or the
 * files named) run against databases made on that cluster, each migrated and distributed by the
 * test itself (test/helpers/db.ts: Citus copies no template). No coordinator there: skipped.
 */
async function citusMain(coordinatorUrl: string): Promise<number> {
  const where = new URL(coordinatorUrl).host;
  const workers = await (async () => {
    const client = new pg.Client({ connectionString: coordinatorUrl, connectionTimeoutMillis: 3000 });
    await client.connect();
    try {
      return (await client.query(`select count(*)::int as n from pg_dist_node where groupid <> 0 and isactive`)).rows[0].n as number;
    } finally {
      await client.end();
    }
  })().catch(() => null);
  if (workers === null) {
    process.stdout.write(`# Citus mode: no Citus coordinator answers at ${where}; skipped\n0 passed, 0 failed\n`);
    return 0;
  }
  process.stdout.write(`# Citus mode: coordinator ${where} with ${workers} workers\n`);
  const env: NodeJS.ProcessEnv = { ...process.env, TICKETD_TEST_ADMIN_URL: coordinatorUrl, TICKETD_TEST_TEMPLATE: 'none', TICKETD_TEST_CITUS: '1' };
  delete env.DATABASE_URL;
  const args = process.argv.slice(2);
  const jobs = jobsArg(args);
  const named = args.filter((a) => !a.startsWith('-'));
  const files = named.length ? named : testFiles().filter((f) => f.startsWith(path.join('dist', 'test', 'http') + path.sep));
  await buildTapIfStale();
  const started = performance.now();
  const result = await runFiles(files, env, jobs);
  process.stdout.write(result.failures.report());
  process.stdout.write(`# time=${(performance.now() - started).toFixed(0)}ms\n`);
  process.stdout.write(slowest(result.files));
  process.stdout.write(`${result.pass} passed, ${result.fail} failed\n`);
  return result.fail === 0 ? 0 : 1;
}

/**
 * A run on another day: the app's clock (test/helpers/clock.ts) and every process that reads the
 * system's time, PostgreSQL first, stand on that day and run on at the real pace. PostgreSQL sees
 * the same day as the app, as it does in production (the two agree within the skew `doctor`
 * checks): now() and column defaults write rows the app then compares with its own clock. So the
 * run needs its own embedded cluster, under libfaketime (an external server keeps its own date),
 * which reads its offset from a file, again every second: one cluster serves each day in turn.
 */
class DayClock {
  readonly library = libfaketime();
  readonly offsetFile: string;

  constructor(dir: string) {
    this.offsetFile = path.join(dir, 'faketime');
    writeFileSync(this.offsetFile, '+0\n');
    chmodSync(dir, 0o755); // as root, the postgres user reads it
  }

  /** What the cluster runs under. */
  clusterEnv(): Record<string, string> {
    return { LD_PRELOAD: this.library, FAKETIME_TIMESTAMP_FILE: this.offsetFile, FAKETIME_CACHE_DURATION: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' };
  }

  /** Moves the cluster to `instant` and returns what each test file is told of it. */
  async moveTo(instant: string, zone: string | undefined): Promise<Record<string, string>> {
    const at = Date.parse(instant);
    if (Number.isNaN(at)) throw new Error(`not a date: ${instant}`);
    // Whole seconds: libfaketime's offset is in seconds, and the app's clock must match it.
    const offsetMs = Math.round((at - Date.now()) / 1000) * 1000;
    if (offsetMs > 0) process.stderr.write(`# ${instant} is ahead of today: PostgreSQL's own timers (lock_timeout, deadlock checks) may not fire under libfaketime\n`);
    const env = fakeTimeEnv(this.library, offsetMs);
    writeFileSync(this.offsetFile, `${env.FAKETIME}\n`);
    await new Promise((r) => setTimeout(r, 2_000)); // every backend reads the file again within a second
    return { TICKETD_TEST_CLOCK_OFFSET_MS: String(offsetMs), TICKETD_TEST_LIBFAKETIME: this.library, ...(zone ? { TZ: zone } : {}) };
  }
}

interface TestDatabase {
  adminUrl: string;
  /** The migrated database each test file clones. */
  template: string;
  /** How the day is set, on a cluster of the run's own started under libfaketime. */
  days: DayClock | null;
  close(): Promise<void>;
}

/**
 * The run's database server: a throwaway embedded cluster (under libfaketime with `onAnotherDay`)
 * or TEST_DATABASE_URL's, with a template migrated once and cloned by each test file.
 */
async function testDatabase(options: { onAnotherDay: boolean; say: (line: string) => void }): Promise<TestDatabase> {
  let adminUrl = options.onAnotherDay ? undefined : process.env.TEST_DATABASE_URL;
  let stopCluster = async () => undefined as void;
  let days: DayClock | null = null;
  if (!adminUrl) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-test-'));
    chmodSync(dataDir, 0o755); // as root, the postgres user must reach the cluster inside
    days = options.onAnotherDay ? new DayClock(dataDir) : null;
    const cluster = new EmbeddedPostgres({
      dataDir,
      // A throwaway cluster: durability off, room for parallel test files and CLI processes.
      settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '300' },
      env: days?.clusterEnv(),
    });
    const handle = await cluster.acquire();
    adminUrl = withDatabase(handle.url, 'postgres');
    // Interrupted (Ctrl-C, a kill, or a reader that closed the pipe): stop the throwaway cluster first.
    const interrupted = (code: number) => () => {
      void stopCluster().finally(() => process.exit(code));
    };
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, interrupted(130));
    process.stdout.on('error', interrupted(1));
    stopCluster = async () => {
      await handle.release();
      rmSync(dataDir, { recursive: true, force: true });
    };
    options.say(`# embedded PostgreSQL for this run in ${dataDir}\n`);
  } else {
    options.say(`# tests use TEST_DATABASE_URL (${new URL(adminUrl).host})\n`);
  }
  const url = adminUrl;
  const template = `ticketd_tpl_${process.pid}_${Date.now().toString(36)}`;
  const close = async () => {
    await adminQuery(url, `DROP DATABASE IF EXISTS "${template}" WITH (FORCE)`).catch(() => undefined);
    await stopCluster();
  };
  try {
    await adminQuery(url, `CREATE DATABASE "${template}"`);
    const db = createDb(withDatabase(url, template), { poolMin: 0 });
    await migrateLatest(db);
    await db.destroy();
    await buildTapIfStale();
  } catch (err) {
    await close();
    throw err;
  }
  return { adminUrl: url, template, days, close };
}

/** What every test file is given: the database to clone, and no DATABASE_URL of the developer's. */
function testEnv(database: TestDatabase): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, TICKETD_TEST_ADMIN_URL: database.adminUrl, TICKETD_TEST_TEMPLATE: database.template };
  delete env.DATABASE_URL;
  return env;
}

/**
 * --jobs=N, else one file more than the cores: a file keeps a core busy only in turns (its process,
 * then PostgreSQL or a process it started), so as many files as cores leave them idle at times.
 */
function jobsArg(args: string[]): number {
  return Number(/^--jobs=(\d+)$/.exec(args.find((a) => a.startsWith('--jobs=')) ?? '')?.[1] ?? os.availableParallelism() + 1);
}

async function main(): Promise<number> {
  if (process.env.TEST_CITUS_URL) return citusMain(process.env.TEST_CITUS_URL);
  const args = process.argv.slice(2);
  if (args.includes('--dates')) return datesMain(args);
  const instant = process.env.TICKETD_TEST_NOW;
  if (instant && process.env.TEST_DATABASE_URL) throw new Error('TICKETD_TEST_NOW runs the tests on their own embedded PostgreSQL, under libfaketime; unset TEST_DATABASE_URL');
  const named = args.filter((a) => !a.startsWith('-'));
  const database = await testDatabase({ onAnotherDay: Boolean(instant), say: (line) => process.stdout.write(line) });
  try {
    const day = instant ? await database.days!.moveTo(instant, process.env.TZ) : {};
    if (instant) process.stdout.write(`# on another day: ${instant} (TZ=${process.env.TZ ?? 'unset'}), for the app's clock and PostgreSQL alike\n`);
    const started = performance.now();
    const result = await runFiles(named.length ? named : testFiles(), { ...testEnv(database), ...day }, jobsArg(args));
    if (process.env.TICKETD_TEST_WRITE_DURATIONS === '1' && !instant) writeDurations(result.files);
    process.stdout.write(result.failures.report());
    process.stdout.write(`# time=${(performance.now() - started).toFixed(0)}ms\n`);
    process.stdout.write(slowest(result.files));
    process.stdout.write(`${result.pass} passed, ${result.fail} failed\n`);
    return result.fail === 0 ? 0 : 1;
  } finally {
    await database.close();
  }
}

/**
 * `npm run test:dates`: the date-sensitive files (test/dates.ts) once on each of its days, each
 * day on its own cluster (libfaketime's offset is set when PostgreSQL starts), a line a day, the
 * failures in full, and "N passed, N failed" last. Without libfaketime it skips, saying why.
 */
async function datesMain(args: string[]): Promise<number> {
  try {
    libfaketime();
  } catch (err) {
    process.stdout.write(`# date sweep skipped: ${(err as Error).message}\n0 passed, 0 failed\n`);
    return 0;
  }
  const known = new Set(testFiles());
  const files = DATE_FILES.map((f) => path.join('dist', 'test', f.file.replace(/\.ts$/, '.js')));
  const missing = files.filter((f) => !known.has(f));
  if (missing.length) throw new Error(`test/dates.ts names files that do not exist: ${missing.join(', ')}`);
  const strayDays = DATE_FILES.flatMap((f) => f.days ?? []).filter((at) => !DAYS.some((d) => d.at === at));
  if (strayDays.length) throw new Error(`test/dates.ts names days it does not list: ${strayDays.join(', ')}`);
  const grepOf = new Map(DATE_FILES.map((f, i) => [files[i]!, f.grep]));
  const onDay = (at: string) => files.filter((_, i) => DATE_FILES[i]!.days?.includes(at) ?? true);
  const envOf = (file: string): NodeJS.ProcessEnv => {
    const grep = grepOf.get(file);
    return grep ? { TAP_GREP: grep.toString() } : {};
  };
  const database = await testDatabase({ onAnotherDay: true, say: () => undefined });
  try {
    process.stdout.write(`# date sweep: ${files.length} files on ${DAYS.length} days (libfaketime: ${database.days!.library})\n`);
    const started = performance.now();
    let pass = 0;
    let fail = 0;
    const report: string[] = [];
    const perFile = new Map<string, FileTime>();
    for (const d of DAYS) {
      const day = await database.days!.moveTo(d.at, d.zone);
      const dayStarted = performance.now();
      const result = await runFiles(onDay(d.at), { ...testEnv(database), ...day }, jobsArg(args), envOf, { print: false });
      // A file whose filter matches no test any more (a test renamed) would pass having tested nothing.
      const idle = result.files.filter((f) => f.pass === 0).map((f) => `#   ${f.file} > no test matched ${grepOf.get(f.file)}\n`);
      pass += result.pass;
      fail += result.fail + idle.length;
      for (const f of result.files) perFile.set(f.file, { file: f.file, ms: (perFile.get(f.file)?.ms ?? 0) + f.ms, pass: 0 });
      const seconds = ((performance.now() - dayStarted) / 1000).toFixed(0);
      process.stdout.write(`# ${d.at} ${d.zone.padEnd(16)} ${String(result.pass).padStart(4)} passed, ${result.fail + idle.length} failed  (${seconds} s)  ${d.why}\n`);
      const failures = (result.fail ? result.failures.report() : '') + (idle.length ? `# files that ran no test:\n${idle.join('')}` : '');
      if (failures) {
        // Printed now for whoever watches, and again at the end for a log cut to its tail.
        process.stdout.write(failures);
        report.push(`# on ${d.at} (${d.zone}):\n${failures}`);
      }
    }
    process.stdout.write(report.join(''));
    process.stdout.write(`# time=${(performance.now() - started).toFixed(0)}ms\n`);
    process.stdout.write(slowest([...perFile.values()], 5)); // each file's seconds on all days together
    process.stdout.write(`${pass} passed, ${fail} failed\n`);
    return fail === 0 ? 0 : 1;
  } finally {
    await database.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`test run failed before tests could run: ${(err as Error).stack}\n`);
    process.stdout.write('0 passed, 1 failed\n');
    process.exit(1);
  },
);
