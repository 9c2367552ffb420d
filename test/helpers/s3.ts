import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import t from 'tap';
import type { Config } from '../../server/core/config.js';
import { s3StagingDir } from '../../server/integrations/s3-storage.js';
import { localStorageRoot } from '../../server/integrations/storage.js';
import type { S3Settings } from '../../server/integrations/s3-storage.js';

/** The credentials s3rver accepts (it checks every request's signature with them). */
const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface TestBucket {
  settings: S3Settings;
  /** The same bucket as ticketd's environment variables, for a spawned process. */
  env: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * An S3-compatible server on loopback (s3rver, on a directory of its own) with one bucket, for
 * the storage contract, the S3 mode of the file-bearing HTTP tests and the CLI's processes.
 */
export async function startS3(bucket = 'ticketd-test'): Promise<TestBucket> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'ticketd-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const settings: S3Settings = { bucket, prefix: 'files/', endpoint, region: 'us-east-1', forcePathStyle: true, ...CREDENTIALS, presignedDownloads: false };
  return {
    settings,
    env: {
      TICKETD_STORAGE_KIND: 's3',
      TICKETD_S3_BUCKET: bucket,
      TICKETD_S3_PREFIX: settings.prefix,
      TICKETD_S3_ENDPOINT: endpoint,
      TICKETD_S3_REGION: settings.region,
      TICKETD_S3_FORCE_PATH_STYLE: 'true',
      TICKETD_S3_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
      TICKETD_S3_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    },
    async stop() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * The S3 mode of a file-bearing test file: every config testConfig makes from here on keeps its
 * files in a bucket of an s3rver started now (stopped when the file ends). Called by the `-s3`
 * twin of the file before it imports the file itself.
 */
export async function inS3Mode(): Promise<void> {
  const bucket = await startS3();
  process.env.TICKETD_TEST_STORAGE_ENV = JSON.stringify(bucket.env);
  t.teardown(() => bucket.stop());
}

/** Where a config's uploads are staged, whichever storage it names. */
export const stagingDirOf = (config: Pick<Config, 'dataDir' | 'storage'>) =>
  config.storage.kind === 's3' ? s3StagingDir(config.dataDir) : path.join(localStorageRoot(config.dataDir), '.staging');
