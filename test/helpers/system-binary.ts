import { accessSync, constants } from 'node:fs';
import path from 'node:path';

/** A server program from Debian's packages (dovecot, clamd), on PATH or in /usr/sbin where Debian puts daemons: its path, else null. */
export function systemBinary(name: string): string | null {
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin']) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}
