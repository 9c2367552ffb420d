/**
 * `npm test`: prepares PostgreSQL, then runs tap over the compiled test files.
 * - With TEST_DATABASE_URL (an administrator URL), tests use that server.
 * - Without it, an embedded cluster is started in a temporary directory for this run.
 * A template database is migrated once; each test file clones it (see test/helpers/db.ts).
 * Ends with the failed tests (if any), the ten slowest test files, then the line
 * "N passed, N failed" (always the last), so a log cut to its tail still names what failed.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createDb } from '../server/core/db.js';
import { migrateLatest } from '../server/core/migrate.js';
import { packageRoot } from '../server/core/paths.js';
import { EmbeddedPostgres } from '../server/integrations/embedded-postgres.js';

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

const TAP = path.join(packageRoot, 'node_modules', '.bin', 'tap');

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

async function runTap(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; pass: number; fail: number; summarised: boolean; files: FileTime[]; failures: FailureCollector }> {
  return new Promise((resolve, reject) => {
    // tap's default leaves one core of two (or up to four) idle, but a test file waits on
    // PostgreSQL and on the processes it starts for much of its time: one file per core.
    const child = spawn(TAP, ['-R', 'tap', `--jobs=${os.availableParallelism()}`, ...args], { cwd: packageRoot, env, stdio: ['ignore', 'pipe', 'inherit'] });
    let pass = 0;
    let fail = 0;
    let summarised = false;
    const files: FileTime[] = [];
    const failures = new FailureCollector();
    let pending = '';
    child.stdout.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        failures.line(line);
        // tap's closing summary: "# { total: 12, pass: 11, fail: 1 }"
        if (/^# \{ total: \d+/.test(line)) {
          summarised = true;
          pass = Number(/pass: (\d+)/.exec(line)?.[1] ?? 0);
          fail = Number(/fail: (\d+)/.exec(line)?.[1] ?? 0);
        }
        // A file's result, at the top level: "ok 3 - dist/test/http/brands.test.js # time=2345.6ms"
        const file = /^(?:not )?ok \d+ - (\S+) # time=([\d.]+)ms/.exec(line);
        if (file) files.push({ file: file[1]!, ms: Number(file[2]) });
      }
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, pass, fail, summarised, files, failures }));
  });
}

/** Compiled test files (tap skips dist/ when it searches on its own). */
function testFiles(): string[] {
  const dir = path.join(packageRoot, 'dist', 'test');
  return (readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.js'))
    .sort()
    .map((f) => path.join('dist', 'test', f));
}

async function main(): Promise<number> {
  let adminUrl = process.env.TEST_DATABASE_URL;
  let stopCluster = async () => undefined as void;
  if (!adminUrl) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-test-'));
    chmodSync(dataDir, 0o755); // as root, the postgres user must reach the cluster inside
    const cluster = new EmbeddedPostgres({
      dataDir,
      // A throwaway cluster: durability off, room for parallel test files and CLI processes.
      settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '300' },
    });
    const handle = await cluster.acquire();
    adminUrl = withDatabase(handle.url, 'postgres');
    stopCluster = async () => {
      await handle.release();
      rmSync(dataDir, { recursive: true, force: true });
    };
    // Interrupted (Ctrl-C, a kill, or a reader that closed the pipe): stop the throwaway cluster first.
    const interrupted = (code: number) => () => {
      void stopCluster().finally(() => process.exit(code));
    };
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, interrupted(130));
    process.stdout.on('error', interrupted(1));
    process.stdout.write(`# embedded PostgreSQL for this run in ${dataDir}\n`);
  } else {
    process.stdout.write(`# tests use TEST_DATABASE_URL (${new URL(adminUrl).host})\n`);
  }

  const template = `ticketd_tpl_${process.pid}_${Date.now().toString(36)}`;
  try {
    await adminQuery(adminUrl, `CREATE DATABASE "${template}"`);
    const db = createDb(withDatabase(adminUrl, template), { poolMin: 0 });
    await migrateLatest(db);
    await db.destroy();

    const env: NodeJS.ProcessEnv = { ...process.env, TICKETD_TEST_ADMIN_URL: adminUrl, TICKETD_TEST_TEMPLATE: template };
    delete env.DATABASE_URL;
    await buildTapIfStale();
    const args = process.argv.slice(2);
    const result = await runTap(args.some((a) => !a.startsWith('-')) ? args : [...args, ...testFiles()], env);
    const failed = result.fail + (result.code !== 0 && result.fail === 0 ? 1 : 0);
    process.stdout.write(result.failures.report());
    process.stdout.write(slowest(result.files));
    process.stdout.write(`${result.pass} passed, ${failed} failed\n`);
    return result.code;
  } finally {
    await adminQuery(adminUrl, `DROP DATABASE IF EXISTS "${template}" WITH (FORCE)`).catch(() => undefined);
    await stopCluster();
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
