import { createReadStream } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
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

/** The SDK, loaded on first use: a process on local disk never pays for it (about 150 ms at start-up). */
const loadSdk = async () => ({
  ...(await import('@aws-sdk/client-s3')),
  Upload: (await import('@aws-sdk/lib-storage')).Upload,
  getSignedUrl: (await import('@aws-sdk/s3-request-presigner')).getSignedUrl,
});
type Sdk = Awaited<ReturnType<typeof loadSdk>>;

const status = (err: unknown) => (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
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
  private readonly staging: FileStaging;
  private connected: Promise<{ sdk: Sdk; client: S3Client }> | null = null;

  constructor(
    readonly settings: S3Settings,
    stagingDir: string,
    private readonly log: (message: string) => void = () => undefined,
  ) {
    this.staging = new FileStaging(stagingDir);
  }

  /** The SDK and the client, made on first use. */
  private connect(): Promise<{ sdk: Sdk; client: S3Client }> {
    const { settings } = this;
    return (this.connected ??= loadSdk().then((sdk) => ({
      sdk,
      client: new sdk.S3Client({
        region: settings.region,
        ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
        forcePathStyle: settings.forcePathStyle,
        ...(settings.accessKeyId && settings.secretAccessKey ? { credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey } } : {}),
        // Checksums only where S3 requires them: many S3-compatible services refuse the SDK's default trailing checksums.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      }),
    })));
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
      read: () => createReadStream(file.path),
    };
  }

  /** Sends a staged file under `key`; a failed multipart upload is aborted and the abort checked. */
  private async send(key: string, file: string): Promise<void> {
    const { sdk, client } = await this.connect();
    const upload = new sdk.Upload({
      client,
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
    const { sdk, client } = await this.connect();
    try {
      await client.send(new sdk.ListPartsCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key), UploadId: uploadId }));
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
    const { sdk, client } = await this.connect();
    try {
      const got = await client.send(new sdk.GetObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key) }));
      return { stream: got.Body as Readable, size: Number(got.ContentLength) };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    const { sdk, client } = await this.connect();
    await client.send(new sdk.DeleteObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key) }));
  }

  async exists(key: string): Promise<boolean> {
    const { sdk, client } = await this.connect();
    try {
      await client.send(new sdk.HeadObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key) }));
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
    const { sdk, client } = await this.connect();
    const command = new sdk.GetObjectCommand({
      Bucket: this.settings.bucket,
      Key: this.objectKey(key),
      ResponseContentType: headers.contentType,
      ResponseContentDisposition: headers.contentDisposition,
    });
    return sdk.getSignedUrl(client, command, { expiresIn: seconds });
  }

  async *list(): AsyncIterable<{ key: string; size: number }> {
    const { bucket, prefix } = this.settings;
    const { sdk, client } = await this.connect();
    let token: string | undefined;
    do {
      const page = await client.send(new sdk.ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
      for (const object of page.Contents ?? []) {
        const key = object.Key!.slice(prefix.length);
        if (!key.includes('/')) yield { key, size: object.Size ?? 0 };
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
    const { sdk, client } = await this.connect();
    const put = new sdk.PutObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key), Body: 'ticketd doctor' });
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
    await client.send(put);
    const received = Date.now();
    try {
      if (!(await this.exists(key))) throw new Error('an object just written cannot be found');
    } finally {
      await this.delete(key);
    }
    const serviceTime = date ? Date.parse(date) : NaN;
    return { skewMs: Number.isNaN(serviceTime) ? 0 : serviceTime - Math.round((sent + received) / 2), roundTripMs: received - sent };
  }

  /** Closes the client's connections, if it was made. */
  async destroy(): Promise<void> {
    if (this.connected) (await this.connected).client.destroy();
  }
}

/** Where an S3 install stages uploads: on the process's own disk, beside nothing else. */
export const s3StagingDir = (dataDir: string) => path.join(dataDir, 'staging');
