import { createHash, randomBytes } from 'node:crypto';
import { badRequest } from '../core/errors.js';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { StagedObject, Storage, StoredObject } from '../core/ports.js';

/** The source sent more than the byte limit allowed; nothing was kept. */
export class ByteLimitExceeded extends Error {
  constructor(readonly limit: number) {
    super(`more than ${limit} bytes`);
    this.name = 'ByteLimitExceeded';
  }
}

const KEY = /^[A-Za-z0-9_-]{1,128}$/;

export function checkKey(key: string): string {
  if (typeof key !== 'string' || !KEY.test(key)) throw new Error(`invalid storage key ${JSON.stringify(key)}`);
  return key;
}

const isMissing = (err: unknown) => (err as { code?: string }).code === 'ENOENT';

/** Bytes of an upload in a staging file, measured: the file is the caller's to move or remove. */
export interface StagedFile {
  path: string;
  size: number;
  sha256: string;
}

/**
 * A staging directory on local disk: uploads are streamed into files here, hashed and held to a
 * byte limit as they arrive, before a backend puts them under their key.
 */
export class FileStaging {
  /** Directories made (or found) already: a file costs no mkdir of its own (inbound mail stages one a message). */
  private readonly made = new Set<string>();

  constructor(readonly dir: string) {}

  async madeDir(dir: string): Promise<void> {
    if (this.made.has(dir)) return;
    await mkdir(dir, { recursive: true });
    this.made.add(dir);
  }

  /** After a directory went away under us: made again for the next file. */
  forget(dir: string): void {
    this.made.delete(dir);
  }

  /** Streams `source` into a new staging file; more than `maxBytes` rejects with ByteLimitExceeded and keeps nothing. */
  async stage(source: Readable, maxBytes: number): Promise<StagedFile> {
    // Listen before the first await: a source failing meanwhile must not be an unhandled 'error'.
    let early: Error | null = null;
    const remember = (err: Error) => {
      early = err;
    };
    // Left on: with the directory known, the wait below is a microtask, and a source destroyed
    // just before would emit its 'error' after this function has given up on it.
    source.once('error', remember);
    await this.madeDir(this.dir);
    if (early) throw early;
    // The source failed before anyone listened (a malformed or cut multipart body): its own error says why.
    if (source.destroyed && !source.readableEnded) throw source.errored ?? badRequest('The upload ended before all of its bytes arrived', undefined, 'incomplete_upload');
    const temp = path.join(this.dir, `${Date.now()}-${randomBytes(8).toString('hex')}`);
    const hash = createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length;
        if (size > maxBytes) return done(new ByteLimitExceeded(maxBytes));
        hash.update(chunk);
        done(null, chunk);
      },
    });
    const file = createWriteStream(temp, { flags: 'wx' });
    try {
      const written = pipeline(meter, file);
      // Plain pipe, not pipeline: past the limit the source is only unpiped, never destroyed, so an
      // HTTP request body stays readable and the client still gets the 413 (not a reset socket).
      source.once('error', (err) => meter.destroy(err));
      source.once('close', () => {
        if (!source.readableEnded) meter.destroy(new Error('the source closed before its end'));
      });
      source.pipe(meter);
      await written;
    } catch (err) {
      // A source failing at once fails the pipeline while the file is still being opened: once it
      // is closed, nothing can make it again.
      if (!file.closed) await new Promise<void>((closed) => file.once('close', () => closed()));
      await unlink(temp).catch(() => undefined);
      if (isMissing(err)) this.forget(this.dir);
      throw err;
    }
    return { path: temp, size, sha256: hash.digest('hex') };
  }

  /** Removes staged files older than `before` that a crashed process left behind; returns how many. */
  async purge(before: Date): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if (isMissing(err)) return 0;
      throw err;
    }
    let removed = 0;
    for (const name of names) {
      const file = path.join(this.dir, name);
      const info = await stat(file).catch(() => null);
      if (info && info.mtime < before) {
        await unlink(file).catch(() => undefined);
        removed++;
      }
    }
    return removed;
  }
}

/** Removes a staged file; harmless when it is gone already. */
export async function removeStaged(file: string): Promise<void> {
  await unlink(file).catch((err) => {
    if (!isMissing(err)) throw err;
  });
}

/** stage + commit, for a backend's put: the object is under `key` when this resolves, or nothing is kept. */
export async function putStaged(storage: Storage, key: string, source: Readable, maxBytes: number): Promise<StoredObject> {
  const staged = await storage.stage(source, maxBytes);
  try {
    await staged.commit(key);
  } catch (err) {
    await staged.discard();
    throw err;
  }
  return { size: staged.size, sha256: staged.sha256 };
}

/**
 * Files on local disk under `root`: `<root>/<last two characters of the key>/<key>` (ids end in
 * random characters, so files spread over up to 1024 directories), staging in `<root>/.staging`
 * on the same file system so the final rename is atomic.
 */
export class LocalDiskStorage implements Storage {
  private readonly staging: FileStaging;

  constructor(readonly root: string) {
    this.staging = new FileStaging(path.join(root, '.staging'));
  }

  private pathOf(key: string): string {
    checkKey(key);
    return path.join(this.root, key.slice(-2), key);
  }

  async stage(source: Readable, maxBytes: number): Promise<StagedObject> {
    const file = await this.staging.stage(source, maxBytes);
    const pathOf = (key: string) => this.pathOf(key);
    const staging = this.staging;
    return {
      size: file.size,
      sha256: file.sha256,
      async commit(key: string) {
        const target = pathOf(key);
        await staging.madeDir(path.dirname(target));
        await rename(file.path, target).catch(async (err: unknown) => {
          // Its directory went away since it was made: made again, once.
          if (!isMissing(err)) throw err;
          staging.forget(path.dirname(target));
          await staging.madeDir(path.dirname(target));
          await rename(file.path, target);
        });
      },
      discard: () => removeStaged(file.path),
      read: () => createReadStream(file.path),
    };
  }

  async put(key: string, source: Readable, maxBytes: number): Promise<StoredObject> {
    checkKey(key);
    return putStaged(this, key, source, maxBytes);
  }

  async open(key: string): Promise<{ stream: Readable; size: number } | null> {
    const file = this.pathOf(key);
    try {
      const { size } = await stat(file);
      // The descriptor is opened now: a delete after this point does not cut the download short.
      const stream = createReadStream(file);
      await new Promise<void>((resolve, reject) => stream.once('open', () => resolve()).once('error', reject));
      return { stream, size };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await unlink(this.pathOf(key)).catch((err) => {
      if (!isMissing(err)) throw err;
    });
  }

  async exists(key: string): Promise<boolean> {
    try {
      return (await stat(this.pathOf(key))).isFile();
    } catch (err) {
      if (isMissing(err)) return false;
      throw err;
    }
  }

  purgeStaging(before: Date): Promise<number> {
    return this.staging.purge(before);
  }

  /** Files on disk are served by ticketd. */
  directDownloadUrl(): Promise<string | null> {
    return Promise.resolve(null);
  }

  async *list(): AsyncIterable<{ key: string; size: number }> {
    let spreads: string[];
    try {
      spreads = await readdir(this.root);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    for (const spread of spreads) {
      if (spread.length !== 2) continue; // .staging, and nothing else of ours
      for (const key of await readdir(path.join(this.root, spread))) {
        if (!KEY.test(key)) continue;
        const size = await stat(path.join(this.root, spread, key)).then(
          (s) => s.size,
          (err: unknown) => (isMissing(err) ? null : Promise.reject(err)),
        );
        if (size !== null) yield { key, size }; // null: deleted since the directory was read
      }
    }
  }
}

/** Where a local install keeps its files: `<dataDir>/attachments`. */
export const localStorageRoot = (dataDir: string) => path.join(dataDir, 'attachments');

const sizeMismatch = (declared: number, detail: string) =>
  badRequest(
    `The upload must be exactly the declared size (${declared} bytes); ${detail}. Nothing was kept.`,
    [{ field: 'body', message: `must be ${declared} bytes` }],
    'size_mismatch',
  );

/**
 * Stages an upload that must be exactly the size declared when its URL was granted: a wrong
 * Content-Length, more bytes or fewer are a 400 `size_mismatch` and nothing is kept.
 */
export async function stageDeclared(storage: Storage, body: Readable | undefined, declared: number, contentLength: number | null): Promise<StagedObject> {
  if (contentLength !== null && contentLength !== declared) throw sizeMismatch(declared, `Content-Length is ${contentLength}`);
  let staged: StagedObject;
  try {
    staged = await storage.stage(body ?? Readable.from([]), declared);
  } catch (err) {
    if (err instanceof ByteLimitExceeded) throw sizeMismatch(declared, 'more bytes were sent');
    throw err;
  }
  if (staged.size !== declared) {
    await staged.discard();
    throw sizeMismatch(declared, `${staged.size} bytes were sent`);
  }
  return staged;
}
