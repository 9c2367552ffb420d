import { closeSync, createReadStream, existsSync, mkdirSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { version as ticketdVersion } from '../core/version.js';
import { ArchiveWriter, checksumProblems, extractArchive, FORMAT, FORMAT_VERSION, readArchive, type Manifest } from './backup-archive.js';
import { copyCluster, walSegments } from './base-backup.js';
import { adoptCluster, CLUSTER_DIR, CREDENTIALS_FILE, EmbeddedPostgres, embeddedClusterExists, type DatabaseHandle } from './embedded-postgres.js';
import { backupDatabase, inspectDatabase, restoreDatabase } from './pg-tools.js';
import type { Storage } from '../core/ports.js';

/**
 * `ticketd db backup|verify|restore`: one file holds the database and, on request, the files
 * ticketd keeps under its data directory. The embedded database is copied with PostgreSQL's
 * low-level base backup API (base-backup.ts), as a data directory that a restore starts on; an
 * external one with pg_dump, restored with pg_restore (pg-tools.ts).
 */

/** Where ticketd keeps files under its data directory: attachments and avatars (storage.ts), mail of the file transport (mail.ts). */
export const FILE_AREAS = ['attachments', 'mail'] as const;
/** The pg_dump of an external database, inside the archive. */
const DUMP = 'database.dump';
/** Object storage: the list of its objects, one JSON line `{ key, size }` each; their bytes, when copied, under OBJECTS_DIR. */
const OBJECT_LIST = 'objects.ndjson';
const OBJECTS_DIR = 'objects';

/**
 * The files of an install on object storage, for `--with-files`: listed, and with `copy` their
 * bytes read from the bucket into the archive too.
 */
export interface ObjectsToBackUp {
  storage: Storage;
  copy: boolean;
}

type Log = (line: string) => void;

/** Uploads still being received (storage.ts stages them here): no row names them yet. */
const unfinishedUpload = (relative: string) => path.basename(relative) === '.staging';

export interface BackupResult {
  file: string;
  bytes: number;
  kind: Manifest['kind'];
  method: 'pg_backup_start' | 'pg_dump';
  database: string;
  serverVersion: string;
  withFiles: boolean;
  /** Files copied from under the data directory. */
  files: number;
  /** Object storage: the objects listed, and whether their bytes were copied. */
  objects: { count: number; bytes: number; copied: boolean } | null;
  wal: { start: string; stop: string } | null;
}

/**
 * The database (and with `withFiles` the data directory's files, copied after it so that every
 * file a row names is there) to `file`, written beside it first and renamed when complete. On
 * object storage (`objects`), the attachments and avatars are the bucket's objects, not files
 * under the data directory: they are listed, and copied when asked.
 */
export async function writeBackup(
  handle: DatabaseHandle,
  options: { file: string; dataDir: string; withFiles: boolean; objects?: ObjectsToBackUp; log?: Log },
): Promise<BackupResult> {
  const target = path.resolve(options.file);
  const partial = `${target}.partial-${process.pid}`;
  const scratch = `${partial}.dump`;
  const facts = await inspectDatabase(handle.url);
  const archive = await ArchiveWriter.create(partial);
  try {
    let wal: Manifest['wal'];
    if (handle.embedded) {
      options.log?.(`copying the embedded PostgreSQL ${facts.serverVersion} cluster (pg_backup_start … pg_backup_stop)`);
      wal = await copyCluster(handle.url, path.join(options.dataDir, CLUSTER_DIR), archive, CLUSTER_DIR);
      await archive.file(CREDENTIALS_FILE, path.join(options.dataDir, CREDENTIALS_FILE));
    } else {
      options.log?.(`dumping database ${facts.database} with pg_dump`);
      await backupDatabase(handle, scratch);
      await archive.file(DUMP, scratch);
    }
    let files = 0;
    let objects: BackupResult['objects'] = null;
    if (options.withFiles) {
      const areas = options.objects ? FILE_AREAS.filter((a) => a !== 'attachments') : FILE_AREAS;
      options.log?.(`copying ${areas.join(' and ')} from ${options.dataDir}`);
      for (const area of areas) files += await archive.tree(path.join(options.dataDir, area), area, unfinishedUpload);
      if (options.objects) objects = await backUpObjects(archive, options.objects, options.log);
    }
    await archive.finish({
      format: FORMAT,
      version: FORMAT_VERSION,
      kind: handle.embedded ? 'embedded' : 'external',
      createdAt: new Date().toISOString(),
      ticketd: ticketdVersion,
      postgres: { version: facts.serverVersion, major: facts.serverMajor },
      database: facts.database,
      withFiles: options.withFiles,
      ...(objects ? { objects } : {}),
      ...(wal ? { wal } : {}),
    });
    renameSync(partial, target);
    return {
      file: target,
      bytes: statSync(target).size,
      kind: handle.embedded ? 'embedded' : 'external',
      method: handle.embedded ? 'pg_backup_start' : 'pg_dump',
      database: facts.database,
      serverVersion: facts.serverVersion,
      withFiles: options.withFiles,
      files,
      objects,
      wal: wal ? { start: wal.start, stop: wal.stop } : null,
    };
  } catch (err) {
    await archive.abort();
    throw err;
  } finally {
    rmSync(partial, { force: true });
    rmSync(scratch, { force: true });
  }
}

/**
 * The bucket's objects into the archive: their list, sorted by key, and with `copy` each object's
 * bytes. An object deleted between the list and its copy (the deletion queue runs meanwhile) is
 * left out of both, as a file deleted under the data directory meanwhile is.
 */
async function backUpObjects(archive: ArchiveWriter, objects: ObjectsToBackUp, log?: Log): Promise<NonNullable<BackupResult['objects']>> {
  const listed: { key: string; size: number }[] = [];
  for await (const object of objects.storage.list()) listed.push(object);
  listed.sort((a, b) => (a.key < b.key ? -1 : 1));
  const kept: typeof listed = [];
  if (objects.copy) {
    log?.(`copying ${listed.length} objects from the bucket`);
    archive.directory(OBJECTS_DIR, 0o700);
    for (const object of listed) {
      const opened = await objects.storage.open(object.key);
      if (!opened) continue;
      await archive.stream(`${OBJECTS_DIR}/${object.key}`, opened.stream, opened.size);
      kept.push({ key: object.key, size: opened.size });
    }
  } else {
    log?.(`listing the bucket's ${listed.length} objects (their bytes stay in the bucket: --copy-objects copies them)`);
    kept.push(...listed);
  }
  await archive.buffer(OBJECT_LIST, kept.map((o) => `${JSON.stringify(o)}\n`).join(''));
  return { count: kept.length, bytes: kept.reduce((sum, o) => sum + o.size, 0), copied: objects.copy };
}

/** What a file holds, by its first bytes: a ticketd archive (a tar, gzipped or not), or a bare pg_dump from an older ticketd. */
function formatOf(file: string): 'archive' | 'pg_dump' | null {
  const head = Buffer.alloc(512);
  const fd = openSync(file, 'r');
  const length = readSync(fd, head, 0, head.length, 0);
  closeSync(fd);
  if (head.subarray(0, 5).toString('latin1') === 'PGDMP') return 'pg_dump';
  if (head[0] === 0x1f && head[1] === 0x8b) return 'archive';
  return length === 512 && head.subarray(257, 262).toString('latin1') === 'ustar' ? 'archive' : null;
}

/** The object list of an archive's OBJECT_LIST member. */
const objectList = (text: string): { key: string; size: number }[] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { key: string; size: number });

/** Objects the manifest says were listed (and copied) that the archive lacks. */
function objectProblems(manifest: Manifest, members: ReadonlySet<string>, list: Buffer | undefined): string[] {
  if (!manifest.objects) return [];
  if (!list) return [`${OBJECT_LIST} is missing`];
  const objects = objectList(list.toString('utf8'));
  const problems = objects.length === manifest.objects.count ? [] : [`${OBJECT_LIST} lists ${objects.length} objects, the manifest ${manifest.objects.count}`];
  if (manifest.objects.copied) problems.push(...objects.filter((o) => !members.has(`${OBJECTS_DIR}/${o.key}`)).map((o) => `${OBJECTS_DIR}/${o.key} is missing`));
  return problems;
}

/** Members a restore of this kind cannot do without, beyond the checksums. */
function structureProblems(manifest: Manifest, members: ReadonlySet<string>, pgVersion: string | undefined): string[] {
  if (manifest.kind === 'external') return members.has(DUMP) ? [] : [`${DUMP} is missing`];
  if (manifest.kind !== 'embedded') return [`unknown kind ${JSON.stringify(manifest.kind)}`];
  if (!manifest.wal) return ['the manifest names no WAL range'];
  const needed = [
    `${CLUSTER_DIR}/PG_VERSION`,
    `${CLUSTER_DIR}/global/pg_control`,
    `${CLUSTER_DIR}/backup_label`,
    CREDENTIALS_FILE,
    ...walSegments(manifest.wal.firstSegment, manifest.wal.lastSegment, manifest.wal.segmentBytes).map((s) => `${CLUSTER_DIR}/pg_wal/${s}`),
  ];
  const problems = needed.filter((name) => !members.has(name)).map((name) => `${name} is missing`);
  if (pgVersion !== undefined && pgVersion.trim() !== String(manifest.postgres.major)) {
    problems.push(`PG_VERSION says ${pgVersion.trim()}, the manifest PostgreSQL ${manifest.postgres.major}`);
  }
  return problems;
}

export interface VerifyResult {
  file: string;
  ok: boolean;
  /** Null when the file is no ticketd archive (or its manifest is unreadable). */
  kind: Manifest['kind'] | null;
  createdAt: string | null;
  serverVersion: string | null;
  withFiles: boolean;
  members: number;
  bytes: number;
  problems: string[];
}

/** Reads the whole archive: a manifest, every member matching its checksum, and what a restore needs there. */
export async function verifyBackup(file: string): Promise<VerifyResult & { manifest: Manifest | null }> {
  const source = path.resolve(file);
  if (!existsSync(source)) throw new Error(`${source} does not exist`);
  const result = (manifest: Manifest | null, members: number, problems: string[]) => ({
    file: source,
    ok: problems.length === 0,
    kind: manifest?.kind ?? null,
    createdAt: manifest?.createdAt ?? null,
    serverVersion: manifest?.postgres?.version ?? null,
    withFiles: manifest?.withFiles ?? false,
    members,
    bytes: statSync(source).size,
    problems,
    manifest,
  });
  const format = formatOf(source);
  if (format === 'pg_dump') return result(null, 0, ['a bare pg_dump archive (from an older ticketd): `db restore` still reads it, but it has no manifest to verify']);
  if (format === null) return result(null, 0, ['not a ticketd backup: neither a tar archive nor a pg_dump one']);
  const pgVersion = `${CLUSTER_DIR}/PG_VERSION`;
  let contents;
  try {
    contents = await readArchive(source, [pgVersion, OBJECT_LIST]);
  } catch (err) {
    return result(null, 0, [`the archive is damaged: ${(err as Error).message}`]);
  }
  const problems = checksumProblems(contents);
  if (contents.manifest && problems.length === 0) {
    const members = new Set(contents.members.keys());
    problems.push(...structureProblems(contents.manifest, members, contents.kept.get(pgVersion)?.toString('latin1')));
    problems.push(...objectProblems(contents.manifest, members, contents.kept.get(OBJECT_LIST)));
  }
  return result(contents.manifest, contents.members.size, problems);
}

/** A verified backup, ready to restore; a bare pg_dump file from an older ticketd counts as an external one without files. */
export interface Backup {
  file: string;
  kind: Manifest['kind'];
  manifest: Manifest | null;
}

export async function openBackup(file: string): Promise<Backup> {
  const verified = await verifyBackup(file);
  if (!verified.manifest && formatOf(verified.file) === 'pg_dump') return { file: verified.file, kind: 'external', manifest: null };
  if (!verified.ok || !verified.manifest) throw new Error(`${verified.file} is not a backup that can be restored: ${verified.problems.join('; ')}`);
  return { file: verified.file, kind: verified.manifest.kind, manifest: verified.manifest };
}

/** Whether dataDir holds an embedded database that a restore would replace; throws while it runs. */
export function embeddedTargetExists(dataDir: string): boolean {
  new EmbeddedPostgres({ dataDir }).assertStopped();
  return embeddedClusterExists(dataDir);
}

export interface RestoreResult {
  file: string;
  kind: Manifest['kind'];
  database: string;
  /** Whether what the target held was replaced. */
  replaced: boolean;
  /** Where what was replaced under the data directory went, if anything was. */
  movedAside: string | null;
  withFiles: boolean;
  /**
   * A backup of object storage: its objects put into the storage configured now (`restored`), or,
   * when only their list was kept, those of the list the storage does not hold (`missing`).
   */
  objects: { restored: number; missing: number } | null;
}

/** The areas under the data directory a backup holds: on object storage, the attachments are objects instead. */
const fileAreasOf = (manifest: Manifest) => (!manifest.withFiles ? [] : manifest.objects ? FILE_AREAS.filter((a) => a !== 'attachments') : [...FILE_AREAS]);

/**
 * An unpacked backup's objects, before anything else is replaced: copied ones are put into
 * `storage` (a put replaces whole, so a restore run again is harmless); of a list alone, those
 * `storage` lacks are counted.
 */
async function restoreObjects(staging: string, manifest: Manifest, storage: Storage | undefined, log?: Log): Promise<RestoreResult['objects']> {
  if (!manifest.withFiles || !manifest.objects) return null;
  if (!storage) throw new Error('this backup holds object storage: restoring it needs the storage to put its objects into');
  const objects = objectList(readFileSync(path.join(staging, OBJECT_LIST), 'utf8'));
  if (!manifest.objects.copied) {
    log?.(`checking that storage holds the ${objects.length} objects listed`);
    let missing = 0;
    for (const { key } of objects) if (!(await storage.exists(key))) missing++;
    return { restored: 0, missing };
  }
  log?.(`putting ${objects.length} objects into storage`);
  for (const { key, size } of objects) await storage.put(key, createReadStream(path.join(staging, OBJECTS_DIR, key)), size);
  return { restored: objects.length, missing: 0 };
}

/** Runs fn with an empty directory inside dataDir (so that moving what it holds into place is a rename), removed afterwards. */
async function withStaging<T>(dataDir: string, fn: (staging: string) => Promise<T>): Promise<T> {
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const staging = path.join(dataDir, `restore-${process.pid}.partial`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { mode: 0o755 }); // as root, the postgres user must reach the cluster inside
  try {
    return await fn(staging);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Moves `names` from staging into dataDir; what they replace goes to one `replaced-<time>` directory, returned (null when nothing was there). */
function moveIntoPlace(staging: string, dataDir: string, names: readonly string[]): string | null {
  const aside = path.join(dataDir, `replaced-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  let moved = false;
  for (const name of names) {
    if (!existsSync(path.join(dataDir, name))) continue;
    mkdirSync(aside, { recursive: true, mode: 0o700 });
    renameSync(path.join(dataDir, name), path.join(aside, name));
    moved = true;
  }
  for (const name of names) if (existsSync(path.join(staging, name))) renameSync(path.join(staging, name), path.join(dataDir, name));
  return moved ? aside : null;
}

/** The last lines PostgreSQL logged, for an error that would otherwise only say "could not start server". */
function logTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-5).join('\n');
  } catch {
    return '';
  }
}

/**
 * An embedded backup as the embedded database under dataDir. It is unpacked beside it and started
 * once there (PostgreSQL replays the WAL the copy holds, up to the end of the backup), so a copy
 * that does not recover replaces nothing; then, while no process runs the cluster, what it
 * replaces is moved aside. The caller has confirmed replacing an existing cluster.
 */
export async function restoreEmbedded(dataDir: string, backup: Backup, options: { storage?: Storage; log?: Log } = {}): Promise<RestoreResult> {
  const log = options.log;
  const manifest = backup.manifest!;
  return withStaging(dataDir, async (staging) => {
    log?.(`unpacking ${backup.file}`);
    await extractArchive(backup.file, staging);
    adoptCluster(path.join(staging, CLUSTER_DIR));
    log?.('starting PostgreSQL on the copy to replay its WAL');
    try {
      const trial = await new EmbeddedPostgres({ dataDir: staging }).acquire();
      await trial.release();
    } catch (err) {
      throw new Error(`the copy did not recover: ${(err as Error).message}\n${logTail(path.join(staging, CLUSTER_DIR, 'server.log'))}`);
    }
    const objects = await restoreObjects(staging, manifest, options.storage, log);
    const names = [CLUSTER_DIR, CREDENTIALS_FILE, ...fileAreasOf(manifest)];
    const movedAside = await new EmbeddedPostgres({ dataDir }).whileStopped(async () => moveIntoPlace(staging, dataDir, names));
    return { file: backup.file, kind: backup.kind, database: manifest.database, replaced: movedAside !== null, movedAside, withFiles: manifest.withFiles, objects };
  });
}

/**
 * An external backup (a pg_dump) into the database `handle` reaches, with pg_restore; then its
 * files, if it has them, into dataDir. `replace`: the caller has confirmed emptying a database
 * that is not empty.
 */
export async function restoreDump(
  handle: DatabaseHandle,
  backup: Backup,
  options: { dataDir: string; replace: boolean; storage?: Storage; log?: Log },
): Promise<RestoreResult & { relations: number }> {
  const finish = (restored: { database: string; replaced: boolean; relations: number }, movedAside: string | null, objects: RestoreResult['objects'] = null) => ({
    file: backup.file,
    kind: backup.kind,
    database: restored.database,
    replaced: restored.replaced,
    movedAside,
    withFiles: backup.manifest?.withFiles ?? false,
    objects,
    relations: restored.relations,
  });
  if (!backup.manifest) return finish(await restoreDatabase(handle, backup.file, options), null);
  const manifest = backup.manifest;
  return withStaging(options.dataDir, async (staging) => {
    options.log?.(`unpacking ${backup.file}`);
    await extractArchive(backup.file, staging);
    const objects = await restoreObjects(staging, manifest, options.storage, options.log);
    options.log?.(`restoring database ${manifest.database} with pg_restore`);
    const restored = await restoreDatabase(handle, path.join(staging, DUMP), options);
    return finish(restored, moveIntoPlace(staging, options.dataDir, fileAreasOf(manifest)), objects);
  });
}
