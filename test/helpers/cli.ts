import { spawn } from 'node:child_process';
import path from 'node:path';
import { packageRoot } from '../../server/core/paths.js';
import { emptyDir } from './app.js';

export const BIN = path.join(packageRoot, 'bin', 'ticketd');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  json(): any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Runs the real bin/ticketd with a clean environment (only what the test passes, plus PATH). */
export function runCli(args: string[], env: Record<string, string> = {}, options: { cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    // Under tap, every child gets tap's processinfo loader in NODE_OPTIONS; it declares extensionless
    // files CommonJS, so the ESM bin/ticketd fails to load (ERR_REQUIRE_CYCLE_MODULE). `env -u` drops it.
    const child = spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, BIN, ...args], {
      cwd: options.cwd ?? emptyDir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', TICKETD_LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, json: () => JSON.parse(stdout.trim().split('\n').pop()!) });
    });
  });
}
