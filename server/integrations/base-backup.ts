import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import type { ArchiveWriter } from './backup-archive.js';

/**
 * An online, consistent copy of a running cluster with PostgreSQL's low-level base backup API,
 * for the embedded distribution, which ships no pg_dump or pg_basebackup. On one session:
 *
 * 1. a temporary physical replication slot, reserving WAL at once: no checkpoint removes or
 *    recycles a segment from before the backup's start until the session ends;
 * 2. pg_backup_start, with an immediate checkpoint;
 * 3. the data directory, file by file, minus what the documentation says to leave out;
 * 4. pg_backup_stop (which switches to a new WAL segment, so the last one needed is complete),
 *    not waiting for an archive: there is none;
 * 5. the WAL segments from the start segment to the stop segment, still held by the slot, and
 *    backup_label (and tablespace_map) as pg_backup_stop returned them.
 *
 * Started on the copy, PostgreSQL finds backup_label and replays that WAL up to the stop point:
 * every transaction committed before pg_backup_stop returned is in it.
 */

/** Directories whose contents PostgreSQL makes anew at start-up (the directories themselves are kept). */
const EMPTIED: ReadonlySet<string> = new Set(['pg_wal', 'pg_replslot', 'pg_dynshmem', 'pg_notify', 'pg_serial', 'pg_snapshots', 'pg_stat_tmp', 'pg_subtrans']);
/** Top-level files never copied: the running server's own, and ticketd's log of the embedded server. */
const SKIPPED: ReadonlySet<string> = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map', 'backup_manifest', 'server.log']);
const PG_CONTROL = path.join('global', 'pg_control');

export interface ClusterCopy {
  start: string;
  stop: string;
  firstSegment: string;
  lastSegment: string;
  segmentBytes: number;
}

/** What the copy of the data directory leaves out; pg_control is added last, on its own. */
function leftOut(relative: string, isDirectory: boolean): boolean {
  const [top, ...below] = relative.split(path.sep);
  const name = path.basename(relative);
  // pg_wal keeps its subdirectories (archive_status, summaries), empty.
  if (below.length > 0 && EMPTIED.has(top!)) return !(top === 'pg_wal' && isDirectory);
  return (below.length === 0 && SKIPPED.has(name)) || name === 'pg_internal.init' || name.startsWith('pgsql_tmp') || relative === PG_CONTROL;
}

/**
 * pg_control, read until two reads agree: the server rewrites it in place, and a read that
 * overlaps a write may return a torn copy that the restored server would refuse.
 */
async function stableRead(file: string): Promise<Buffer> {
  let last = await readFile(file);
  for (let i = 0; i < 20; i++) {
    const next = await readFile(file);
    if (next.equals(last)) return next;
    last = next;
  }
  throw new Error(`${file} kept changing while it was read`);
}

const segmentNumber = (name: string, segmentBytes: number) => parseInt(name.slice(8, 16), 16) * (0x100000000 / segmentBytes) + parseInt(name.slice(16, 24), 16);

/** The names of the WAL segments from `first` to `last`, on first's timeline. */
export function walSegments(first: string, last: string, segmentBytes: number): string[] {
  const perLog = 0x100000000 / segmentBytes;
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(8, '0');
  const names: string[] = [];
  for (let n = segmentNumber(first, segmentBytes); n <= segmentNumber(last, segmentBytes); n++) {
    names.push(`${first.slice(0, 8)}${hex(Math.floor(n / perLog))}${hex(n % perLog)}`);
  }
  return names;
}

/** Copies the running cluster at `url` (a superuser's), whose data directory is `clusterDir`, into the archive under `prefix`. */
export async function copyCluster(url: string, clusterDir: string, archive: ArchiveWriter, prefix: string): Promise<ClusterCopy> {
  const client = new pg.Client({ connectionString: url, application_name: 'ticketd-backup' });
  await client.connect();
  try {
    const { rows } = await client.query(`select current_setting('data_directory') as data_directory, pg_size_bytes(current_setting('wal_segment_size')) as segment_bytes`);
    const facts = rows[0] as { data_directory: string; segment_bytes: string };
    if (realpathSync(facts.data_directory) !== realpathSync(clusterDir)) throw new Error(`the server runs ${facts.data_directory}, not ${clusterDir}`);
    if ((await readdir(path.join(clusterDir, 'pg_tblspc'))).length > 0) throw new Error('the cluster has tablespaces: a backup copies the data directory only');

    // Ended with the session (also when this fails half-way), and with it the hold on the WAL.
    await client.query('select pg_create_physical_replication_slot($1, true, true)', [`ticketd_backup_${process.pid}_${randomBytes(4).toString('hex')}`]);
    const started = await client.query(`select lsn, pg_walfile_name(lsn) as segment from pg_backup_start('ticketd backup', true) as lsn`);
    const { lsn: start, segment: firstSegment } = started.rows[0] as { lsn: string; segment: string };
    await archive.tree(clusterDir, prefix, leftOut);
    await archive.buffer(path.posix.join(prefix, PG_CONTROL), await stableRead(path.join(clusterDir, PG_CONTROL)));
    const stopped = await client.query(`select lsn, pg_walfile_name(lsn) as segment, labelfile, spcmapfile from pg_backup_stop(false)`);
    const { lsn: stop, segment: lastSegment, labelfile, spcmapfile } = stopped.rows[0] as { lsn: string; segment: string; labelfile: string; spcmapfile: string };

    const segmentBytes = Number(facts.segment_bytes);
    const wal = path.join(clusterDir, 'pg_wal');
    for (const segment of walSegments(firstSegment, lastSegment, segmentBytes)) {
      if (!(await archive.file(path.posix.join(prefix, 'pg_wal', segment), path.join(wal, segment)))) {
        throw new Error(`WAL segment ${segment}, needed from ${start} to ${stop}, is gone from ${wal}`);
      }
    }
    // Timeline histories, for a cluster that was itself recovered onto a new timeline.
    for (const history of (await readdir(wal)).filter((f) => f.endsWith('.history'))) await archive.file(path.posix.join(prefix, 'pg_wal', history), path.join(wal, history));
    await archive.buffer(path.posix.join(prefix, 'backup_label'), labelfile);
    if (spcmapfile) await archive.buffer(path.posix.join(prefix, 'tablespace_map'), spcmapfile);
    return { start, stop, firstSegment, lastSegment, segmentBytes };
  } finally {
    await client.end();
  }
}
