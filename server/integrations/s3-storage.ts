import { createReadStream } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { StagedObject, Storage, StoredObject } from '../core/ports.js';
import { FileStaging, checkKey, putStaged, removeStaged } from './storage.js';

/** How an S3-compatible bucket is reached (the `storage` section of the configuration). */
export interface S3Settings {
  bucket: string;
  /** Prepended to every object's key, e.g. `ticketd/`. */
  prefix: string;
  /** Another service than AWS (MinIO, Ceph, R2, …); null: AWS's own for the region. */
  endpoint: string | null;
  region: string;
  /** `endpoint/bucket/key` rather than `bucket.endpoint/key`: most self-hosted services want it. */
  forcePathStyle: boolean;
  /** Null: the SDK's own chain (environment, shared files, instance role). */
  accessKeyId: string | null;
  secretAccessKey: string | null;
  /** Attachment downloads go to the bucket by presigned URL, not through ticketd. */
  presignedDownloads: boolean;
}

/** Parts of a multipart upload: 8 MiB each, two in flight, so an upload holds at most about 16 MiB. */
const PART_BYTES = 8 * 1024 * 1024;
const PARTS_IN_FLIGHT = 2;

const status = (err: unknown) => (err instanceof S3ServiceException ? err.$metadata.httpStatusCode : undefined);
const isMissing = (err: unknown) => status(err) === 404 || (err as { name?: string }).name === 'NoSuchKey' || (err as { name?: string }).name === 'NotFound';

/**
 * Files in an S3-compatible bucket. An upload is staged on local disk first (FileStaging under the
 * process's data directory: bounded memory, the size limit and the hash known before the bucket is
 * touched, nothing sent for an upload that fails), then sent under its key on commit: one PUT, or
 * a multipart upload past 8 MiB, which the SDK aborts when a part fails and whose abort is then
 * checked (ListParts must no longer find it). A reader never sees a half-written object: S3 shows
 * an object only once its PUT or its multipart upload completes.
 */
export class S3Storage implements Storage {
  readonly client: S3Client;
  private readonly staging: FileStaging;

  constructor(
    readonly settings: S3Settings,
    stagingDir: string,
    private readonly log: (message: string) => void = () => undefined,
  ) {
    this.client = new S3Client({
      region: settings.region,
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      forcePathStyle: settings.forcePathStyle,
      ...(settings.accessKeyId && settings.secretAccessKey ? { credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey } } : {}),
      // Checksums only where S3 requires them: many S3-compatible services refuse the SDK's default trailing checksums.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    this.staging = new FileStaging(stagingDir);
  }

  /** The object's name in the bucket. */
  objectKey(key: string): string {
    return `${this.settings.prefix}${checkKey(key)}`;
  }

  async stage(source: Readable, maxBytes: number): Promise<StagedObject> {
    const file = await this.staging.stage(source, maxBytes);
    return {
      size: file.size,
      sha256: file.sha256,
      commit: async (key: string) => {
        await this.send(key, file.path);
        await removeStaged(file.path);
      },
      discard: () => removeStaged(file.path),
    };
  }

  /** Sends a staged file under `key`; a failed multipart upload is aborted and the abort checked. */
  private async send(key: string, file: string): Promise<void> {
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.settings.bucket, Key: this.objectKey(key), Body: createReadStream(file) },
      partSize: PART_BYTES,
      queueSize: PARTS_IN_FLIGHT,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (err) {
      if (upload.uploadId) await this.checkAborted(key, upload.uploadId);
      throw err;
    }
  }

  /** After the SDK aborted a multipart upload: ListParts must answer NoSuchUpload, else its parts are still billed. */
  private async checkAborted(key: string, uploadId: string): Promise<void> {
    try {
      await this.client.send(new ListPartsCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key), UploadId: uploadId }));
    } catch (err) {
      if (status(err) === 404) return;
      this.log(
        `storage: could not check that the multipart upload ${uploadId} of ${key} was aborted (${(err as Error).name}); a lifecycle rule that aborts incomplete uploads removes it`,
      );
      return;
    }
    this.log(`storage: the multipart upload ${uploadId} of ${key} is still open after its abort; a lifecycle rule that aborts incomplete uploads removes it`);
  }

  async put(key: string, source: Readable, maxBytes: number): Promise<StoredObject> {
    checkKey(key);
    return putStaged(this, key, source, maxBytes);
  }

  async open(key: string): Promise<{ stream: Readable; size: number } | null> {
    try {
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key) }));
      return { stream: got.Body as Readable, size: Number(got.ContentLength) };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key) }));
  }

  async exists(key: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key) }));
      return true;
    } catch (err) {
      if (isMissing(err)) return false;
      throw err;
    }
  }

  /** Local staging only: the bucket holds no staged bytes (incomplete multipart uploads are the bucket's lifecycle rule's). */
  purgeStaging(before: Date): Promise<number> {
    return this.staging.purge(before);
  }

  /** With presignedDownloads: the bucket's own URL for the object, signed for `seconds`, with these response headers. */
  async directDownloadUrl(key: string, seconds: number, headers: { contentType: string; contentDisposition: string }): Promise<string | null> {
    if (!this.settings.presignedDownloads) return null;
    const command = new GetObjectCommand({
      Bucket: this.settings.bucket,
      Key: this.objectKey(key),
      ResponseContentType: headers.contentType,
      ResponseContentDisposition: headers.contentDisposition,
    });
    return getSignedUrl(this.client, command, { expiresIn: seconds });
  }

  async *keys(): AsyncIterable<string> {
    const { bucket, prefix } = this.settings;
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
      for (const object of page.Contents ?? []) {
        const key = object.Key!.slice(prefix.length);
        if (!key.includes('/')) yield key;
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /**
   * What `doctor` asks of the bucket: it takes, reads back and deletes a small object, and gives
   * the service's clock against this host's (its Date header, to the second): S3 refuses requests
   * signed 15 minutes off.
   */
  async probe(): Promise<{ skewMs: number; roundTripMs: number }> {
    const key = `ticketd-doctor-${randomBytes(8).toString('hex')}`;
    const put = new PutObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key), Body: 'ticketd doctor' });
    let date: string | undefined;
    put.middlewareStack.add(
      (next) => async (args) => {
        const out = await next(args);
        date = (out.response as { headers?: Record<string, string> }).headers?.date;
        return out;
      },
      { step: 'deserialize', name: 'readServiceDate' },
    );
    const sent = Date.now();
    await this.client.send(put);
    const received = Date.now();
    try {
      if (!(await this.exists(key))) throw new Error('an object just written cannot be found');
    } finally {
      await this.delete(key);
    }
    const serviceTime = date ? Date.parse(date) : NaN;
    return { skewMs: Number.isNaN(serviceTime) ? 0 : serviceTime - Math.round((sent + received) / 2), roundTripMs: received - sent };
  }

  destroy(): void {
    this.client.destroy();
  }
}

/** Where an S3 install stages uploads: on the process's own disk, beside nothing else. */
export const s3StagingDir = (dataDir: string) => path.join(dataDir, 'staging');
