import { constants, existsSync } from 'node:fs';
import { access, statfs } from 'node:fs/promises';
import path from 'node:path';
import type { Db } from './db.js';

/** Measurements `ticketd doctor` judges; each throws when it cannot measure. */

export interface DatabaseClock {
  serverVersion: string;
  /** PostgreSQL's clock minus this host's, in ms (positive: the database is ahead). */
  skewMs: number;
  /** The round trip the reading took: the skew is known to within half of it. */
  roundTripMs: number;
}

export async function databaseClock(db: Db, now: () => number = Date.now): Promise<DatabaseClock> {
  const sent = now();
  const result = (await db.raw(`select current_setting('server_version') as version, extract(epoch from clock_timestamp()) * 1000 as at`)) as {
    rows: { version: string; at: string }[];
  };
  const received = now();
  const row = result.rows[0]!;
  return { serverVersion: row.version, skewMs: Math.round(Number(row.at) - (sent + received) / 2), roundTripMs: received - sent };
}

export interface DiskSpace {
  /** The directory measured: the data directory, or its nearest existing parent before the first start. */
  path: string;
  freeBytes: number;
  totalBytes: number;
  writable: boolean;
}

export async function diskSpace(dir: string): Promise<DiskSpace> {
  let existing = path.resolve(dir);
  while (!existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  const fs = await statfs(existing);
  const writable = await access(existing, constants.W_OK).then(
    () => true,
    () => false,
  );
  return { path: existing, freeBytes: fs.bavail * fs.bsize, totalBytes: fs.blocks * fs.bsize, writable };
}
