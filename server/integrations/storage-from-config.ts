import type { Config } from '../core/config.js';
import type { Storage } from '../core/ports.js';
import { S3Storage, s3StagingDir } from './s3-storage.js';
import { LocalDiskStorage, localStorageRoot } from './storage.js';

/** The storage a configuration describes: local disk under `<dataDir>/attachments`, or its S3 bucket. */
export function storageFromConfig(config: Pick<Config, 'dataDir' | 'storage'>, log: (line: string) => void = () => undefined): Storage {
  const s = config.storage;
  if (s.kind === 'local') return new LocalDiskStorage(localStorageRoot(config.dataDir));
  return new S3Storage(
    {
      bucket: s.bucket!,
      prefix: s.prefix,
      endpoint: s.endpoint,
      region: s.region,
      forcePathStyle: s.forcePathStyle,
      accessKeyId: s.accessKeyId,
      secretAccessKey: s.secretAccessKey,
      presignedDownloads: s.presignedDownloads,
    },
    s3StagingDir(config.dataDir),
    log,
  );
}
