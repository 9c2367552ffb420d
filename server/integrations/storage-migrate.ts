import { createHash } from 'node:crypto';
import { appendFile, readFile, rm } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { Storage } from '../core/ports.js';

/** One object of a migration: copied now and verified, verified by an earlier run, or gone from the source meanwhile. */
export interface MigrationStep {
  key: string;
  outcome: 'copied' | 'verified before' | 'gone';
  bytes: number;
}

export interface MigrationResult {
  objects: number;
  copied: number;
  bytes: number;
}

async function sha256Of(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

async function journalled(journal: string): Promise<Set<string>> {
  try {
    return new Set((await readFile(journal, 'utf8')).split('\n').filter(Boolean));
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return new Set();
    throw err;
  }
}

/**
 * Copies every object of `from` to `to`, each checked: read back from `to`, it must hash as the
 * bytes read from `from` did, or the migration stops with an error. Each verified key is appended
 * to `journal`, so a run killed halfway resumes where it was (a key copied but not yet journalled
 * is copied again: a put replaces whole). The journal is removed once every object is verified;
 * nothing else is switched: the caller says what to change.
 */
export async function migrateObjects(from: Storage, to: Storage, journal: string, onStep: (step: MigrationStep, done: number, total: number) => void): Promise<MigrationResult> {
  const verified = await journalled(journal);
  const keys: string[] = [];
  for await (const { key } of from.list()) keys.push(key);
  keys.sort();
  const result: MigrationResult = { objects: keys.length, copied: 0, bytes: 0 };
  for (const [i, key] of keys.entries()) {
    if (verified.has(key)) {
      onStep({ key, outcome: 'verified before', bytes: 0 }, i + 1, keys.length);
      continue;
    }
    const source = await from.open(key);
    if (!source) {
      onStep({ key, outcome: 'gone', bytes: 0 }, i + 1, keys.length);
      continue;
    }
    const written = await to.put(key, source.stream, source.size);
    const copy = await to.open(key);
    const readBack = copy ? await sha256Of(copy.stream) : null;
    if (readBack !== written.sha256) throw new Error(`${key}: the copy reads back ${readBack ? 'with another checksum' : 'as missing'}; nothing is switched`);
    await appendFile(journal, `${key}\n`);
    result.copied++;
    result.bytes += written.size;
    onStep({ key, outcome: 'copied', bytes: written.size }, i + 1, keys.length);
  }
  await rm(journal, { force: true });
  return result;
}
