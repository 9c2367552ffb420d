import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../server/core/paths.js';

/**
 * libfaketime (Debian's `libfaketime`, which the `faketime` command preloads), for the processes of
 * a test run on another day that read the time from the system rather than from the app's clock:
 * PostgreSQL (now(), column defaults) and the `bin/ticketd` processes CLI tests start.
 */
const SYSTEM_DIRS = ['/usr/lib/x86_64-linux-gnu/faketime', '/usr/lib/aarch64-linux-gnu/faketime', '/usr/lib/faketime'];
/** Where the runner unpacks the Debian package when the machine has none installed (no root needed). */
const UNPACKED = path.join(packageRoot, 'node_modules', '.cache', 'libfaketime');
const LIBRARY = 'libfaketime.so.1';

function findIn(dir: string): string | null {
  if (!existsSync(dir)) return null;
  const found = (readdirSync(dir, { recursive: true }) as string[]).find((f) => path.basename(f) === LIBRARY);
  return found ? path.join(dir, found) : null;
}

/** The library's path: the system's, else one unpacked from `apt-get download libfaketime`. Throws, saying why, when neither can be had. */
export function libfaketime(): string {
  for (const dir of [...SYSTEM_DIRS, UNPACKED]) {
    const found = findIn(dir);
    if (found) return found;
  }
  const download = path.join(UNPACKED, 'download');
  try {
    mkdirSync(download, { recursive: true });
    execFileSync('apt-get', ['download', 'libfaketime'], { cwd: download, stdio: 'pipe' });
    const deb = readdirSync(download).find((f) => f.endsWith('.deb'));
    if (!deb) throw new Error('apt-get download libfaketime wrote no package');
    execFileSync('dpkg-deb', ['-x', path.join(download, deb), UNPACKED], { stdio: 'pipe' });
  } catch (err) {
    throw new Error(`libfaketime is not installed (Debian: apt-get install faketime) and could not be unpacked from Debian's package: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    rmSync(download, { recursive: true, force: true });
  }
  const found = findIn(UNPACKED);
  if (!found) throw new Error(`Debian's libfaketime package holds no ${LIBRARY}`);
  return found;
}

/**
 * The environment that makes a process's clock run `offsetMs` (whole seconds) from the real one.
 * Monotonic clocks stay real: timers and timeouts keep their length.
 */
export function fakeTimeEnv(library: string, offsetMs: number): Record<string, string> {
  return { LD_PRELOAD: library, FAKETIME: `${offsetMs >= 0 ? '+' : '-'}${Math.round(Math.abs(offsetMs) / 1000)}`, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
}
