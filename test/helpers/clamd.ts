import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { ClamdScanner } from '../../server/integrations/clamd.js';
import { systemBinary } from './system-binary.js';
import { freePort } from '../../server/integrations/embedded-postgres.js';
import { until } from './wait.js';

/** The EICAR test file: harmless, and what every virus scanner reports as a virus by agreement. */
export const EICAR = 'X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*';
/** What clamd names it with the test's database (unsigned databases' names end in .UNOFFICIAL). */
export const EICAR_SIGNATURE = 'Eicar-Test-Signature.UNOFFICIAL';

export const clamdBinary = () => systemBinary('clamd');

/** Why a test needing clamd is skipped here, or false when it can run. */
export function noClamd(): string | false {
  return clamdBinary() ? false : 'clamd is not installed (apt-get install clamav-daemon)';
}

export interface TestClamd {
  host: string;
  port: number;
  socket: string;
  /** clamd stops answering (SIGSTOP): it still accepts connections, as a stalled daemon does. */
  pause(): void;
  resume(): void;
  /** Stops it and removes its directory. */
  stop(): Promise<void>;
}

/** A clamd of the test's own (launchClamd), stopped at the test's end. */
export async function startClamd(t: Test): Promise<TestClamd> {
  const clamd = await launchClamd();
  t.teardown(() => clamd.stop());
  return clamd;
}

/**
 * A clamd of its own: its configuration and a one-signature database (EICAR, as a body signature
 * matched anywhere in a file) in a temporary directory, a free loopback port and a Unix socket, in
 * the foreground. No signatures are downloaded. It runs as the user that starts it (root included).
 */
export async function launchClamd(): Promise<TestClamd> {
  const binary = clamdBinary();
  if (!binary) throw new Error('clamd is not installed');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-clamd-'));
  const db = path.join(dir, 'db');
  mkdirSync(db);
  writeFileSync(path.join(db, 'eicar.ndb'), `Eicar-Test-Signature:0:*:${Buffer.from(EICAR).toString('hex')}\n`);
  const port = await freePort();
  const socket = path.join(dir, 'clamd.sock');
  writeFileSync(
    path.join(dir, 'clamd.conf'),
    [
      'Foreground yes',
      `DatabaseDirectory ${db}`,
      `TemporaryDirectory ${dir}`,
      `LocalSocket ${socket}`,
      'TCPAddr 127.0.0.1',
      `TCPSocket ${port}`,
      // Bench files go up to 50 MB; clamd's own default refuses streams over 25 MB.
      'StreamMaxLength 100M',
      'MaxFileSize 100M',
      'MaxScanSize 100M',
      ...(process.getuid?.() === 0 ? ['User root'] : []),
      '',
    ].join('\n'),
  );
  const child = spawn(binary, ['-c', path.join(dir, 'clamd.conf')], { stdio: 'ignore' });
  let paused = false;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      if (paused) child.kill('SIGCONT');
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const scanner = new ClamdScanner({ host: '127.0.0.1', port }, 2000);
  try {
    await until(
      'clamd answers PING',
      () =>
        scanner.ping().then(
          () => true,
          () => (child.exitCode === null && child.signalCode === null ? false : Promise.reject(new Error('clamd exited'))),
        ),
      30_000,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    stop,
    host: '127.0.0.1',
    port,
    socket,
    pause: () => {
      paused = true;
      child.kill('SIGSTOP');
    },
    resume: () => {
      paused = false;
      child.kill('SIGCONT');
    },
  };
}
