import { createHash } from 'node:crypto';
import { once } from 'node:events';
import type { Dirent, WriteStream } from 'node:fs';
import { open, readdir, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extract, Header, list, Pack, ReadEntry } from 'tar';

/**
 * ticketd's backup file: a gzipped tar (node-tar) whose last member, manifest.json, describes
 * the backup and holds the size and SHA-256 of every other member. The manifest comes last
 * because it can only be written once everything is in; a reader checks the members it has
 * already hashed against it.
 */

export const MANIFEST = 'manifest.json';
export const FORMAT = 'ticketd-backup';
export const FORMAT_VERSION = 1;

export interface Member {
  size: number;
  sha256: string;
}

export interface Manifest {
  format: typeof FORMAT;
  version: number;
  /** embedded: a copy of the embedded cluster; external: a pg_dump of the database. */
  kind: 'embedded' | 'external';
  createdAt: string;
  ticketd: string;
  postgres: { version: string; major: number };
  database: string;
  /** Whether the files under the data directory (attachments, avatars, mail) are in it. */
  withFiles: boolean;
  /**
   * Object storage only, with the files: its objects as they were listed (OBJECT_LIST, one JSON
   * line `{ key, size }` each), and whether their bytes are in the archive too (`objects/<key>`).
   */
  objects?: { count: number; bytes: number; copied: boolean };
  /** embedded only: the WAL the copy needs, first to last segment. */
  wal?: { start: string; stop: string; firstSegment: string; lastSegment: string; segmentBytes: number };
  members: Record<string, Member>;
}

const CHUNK = 1024 * 1024;

/** One member being written: its bytes are hashed on their way into the tar. */
interface OpenMember {
  write(chunk: Buffer): Promise<void>;
  end(): void;
}

export class ArchiveWriter {
  private readonly pack = new Pack({ gzip: true, portable: true });
  private readonly members: Record<string, Member> = {};
  private readonly written: Promise<void>;
  private failed: Error | null = null;

  private constructor(private readonly out: WriteStream) {
    this.written = pipeline(this.pack, out);
    this.written.catch((err: Error) => {
      this.failed = err;
    });
  }

  /** A new archive at `file` (which must not exist), readable by its owner only: it holds the whole database. */
  static async create(file: string): Promise<ArchiveWriter> {
    const handle = await open(file, 'wx', 0o600);
    return new ArchiveWriter(handle.createWriteStream());
  }

  private begin(name: string, mode: number, size: number, mtime: Date): OpenMember {
    if (this.failed) throw this.failed;
    const entry = new ReadEntry(new Header({ path: name, type: 'File', mode, size, mtime }));
    this.pack.add(entry);
    const hash = createHash('sha256');
    return {
      write: async (chunk) => {
        hash.update(chunk);
        // Back-pressure: wait while the tar (and the disk) catch up, unless writing failed.
        if (!entry.write(chunk)) await Promise.race([once(entry, 'drain'), this.written]);
        if (this.failed) throw this.failed;
      },
      end: () => {
        entry.end();
        this.members[name] = { size, sha256: hash.digest('hex') };
      },
    };
  }

  directory(name: string, mode: number): void {
    const entry = new ReadEntry(new Header({ path: `${name}/`, type: 'Directory', mode, size: 0, mtime: new Date() }));
    this.pack.add(entry);
    entry.end();
  }

  async buffer(name: string, data: Buffer | string, mode = 0o600): Promise<void> {
    const bytes = Buffer.from(data);
    const member = this.begin(name, mode, bytes.length, new Date());
    await member.write(bytes);
    member.end();
  }

  /**
   * The file at `absolute` as it is while it is read: its size when opened. A file that shrinks
   * meanwhile is padded with zeros (PostgreSQL's own base backups do the same: replaying the WAL
   * cuts it again) and bytes added after the open are left out. False when the file is gone.
   */
  async file(name: string, absolute: string): Promise<boolean> {
    let handle: FileHandle;
    try {
      handle = await open(absolute, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    try {
      const info = await handle.stat();
      const member = this.begin(name, info.mode & 0o7777, info.size, info.mtime);
      for (let left = info.size; left > 0; ) {
        const want = Math.min(left, CHUNK);
        const { bytesRead, buffer } = await handle.read(Buffer.alloc(want), 0, want, null);
        const chunk = bytesRead > 0 ? buffer.subarray(0, bytesRead) : buffer;
        await member.write(chunk);
        left -= chunk.length;
      }
      member.end();
      return true;
    } finally {
      await handle.close();
    }
  }

  /** `size` bytes read from `source` (an object of a bucket, say); fewer or more is an error, as the tar header holds the size. */
  async stream(name: string, source: Readable, size: number, mode = 0o600): Promise<void> {
    const member = this.begin(name, mode, size, new Date());
    let left = size;
    for await (const chunk of source as AsyncIterable<Buffer>) {
      if (chunk.length > left) throw new Error(`${name}: more than the ${size} bytes announced`);
      await member.write(chunk);
      left -= chunk.length;
    }
    if (left > 0) throw new Error(`${name}: ${left} of its ${size} bytes never came`);
    member.end();
  }

  /**
   * The tree under `dir` as `prefix/…`, directories first, in name order; what `leaveOut` names
   * (by its path relative to `dir`) is not copied, a directory left out with all it holds. A file
   * or directory that goes meanwhile is skipped. Returns how many files were copied.
   */
  async tree(dir: string, prefix: string, leaveOut: (relative: string, isDirectory: boolean) => boolean = () => false, relative = ''): Promise<number> {
    const here = path.join(dir, relative);
    let entries: Dirent[];
    try {
      entries = await readdir(here, { withFileTypes: true });
      this.directory(path.posix.join(prefix, relative), (await stat(here)).mode & 0o7777);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    let files = 0;
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const name = path.join(relative, entry.name);
      if (leaveOut(name, entry.isDirectory())) continue;
      if (entry.isDirectory()) files += await this.tree(dir, prefix, leaveOut, name);
      else if (entry.isFile()) files += (await this.file(path.posix.join(prefix, name), path.join(dir, name))) ? 1 : 0;
      else throw new Error(`${path.join(dir, name)} is neither a file nor a directory (a symbolic link?): backups copy files and directories only`);
    }
    return files;
  }

  /** Writes the manifest as the last member and waits until the file is complete. */
  async finish(manifest: Omit<Manifest, 'members'>): Promise<Manifest> {
    const complete: Manifest = { ...manifest, members: { ...this.members } };
    await this.buffer(MANIFEST, `${JSON.stringify(complete, null, 1)}\n`);
    this.pack.end();
    await this.written;
    return complete;
  }

  /** Gives up half-way: the file is closed, incomplete, for the caller to remove. */
  async abort(): Promise<void> {
    this.out.destroy();
    await this.written.catch(() => undefined);
  }
}

export interface ArchiveContents {
  manifest: Manifest | null;
  /** What was read: every member but the manifest, with what its bytes measure. */
  members: Map<string, Member>;
  /** Small members kept whole, by name (those `keep` asked for). */
  kept: Map<string, Buffer>;
}

/** Reads the whole archive, hashing every member; throws when it is no tar (or a damaged one). */
export async function readArchive(file: string, keep: readonly string[] = []): Promise<ArchiveContents> {
  const members = new Map<string, Member>();
  const kept = new Map<string, Buffer>();
  let manifest: Buffer | null = null;
  await list({
    file,
    strict: true,
    onReadEntry: (entry) => {
      if (entry.type !== 'File') return;
      const name = entry.path;
      const hash = createHash('sha256');
      const chunks: Buffer[] = [];
      const whole = name === MANIFEST || keep.includes(name);
      let size = 0;
      entry.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        size += chunk.length;
        if (whole) chunks.push(chunk);
      });
      entry.on('end', () => {
        if (name === MANIFEST) manifest = Buffer.concat(chunks);
        else members.set(name, { size, sha256: hash.digest('hex') });
        if (whole) kept.set(name, Buffer.concat(chunks));
      });
    },
  });
  return { manifest: manifest ? parseManifest(manifest) : null, members, kept };
}

function parseManifest(bytes: Buffer): Manifest | null {
  try {
    const value = JSON.parse(bytes.toString('utf8')) as Manifest;
    return value && typeof value === 'object' && value.members && typeof value.members === 'object' ? value : null;
  } catch {
    return null;
  }
}

/** What is wrong with the archive's members, measured against its manifest. */
export function checksumProblems(contents: ArchiveContents): string[] {
  const { manifest, members } = contents;
  if (!manifest) return [`no readable ${MANIFEST}: not a ticketd backup, or one cut short`];
  const problems: string[] = [];
  if (manifest.format !== FORMAT || manifest.version !== FORMAT_VERSION) {
    problems.push(`${MANIFEST} names format ${manifest.format} version ${manifest.version}; this ticketd reads ${FORMAT} version ${FORMAT_VERSION}`);
  }
  for (const [name, want] of Object.entries(manifest.members)) {
    const got = members.get(name);
    if (!got) problems.push(`${name} is missing`);
    else if (got.size !== want.size || got.sha256 !== want.sha256) problems.push(`${name} does not match its checksum`);
  }
  for (const name of members.keys()) if (!(name in manifest.members)) problems.push(`${name} is not in ${MANIFEST}`);
  return problems;
}

/** Unpacks the archive (all but the manifest, or what `only` accepts) under `dir`. */
export async function extractArchive(file: string, dir: string, only: (name: string) => boolean = () => true): Promise<void> {
  await extract({ file, cwd: dir, strict: true, preserveOwner: false, filter: (name) => name !== MANIFEST && only(name) });
}
