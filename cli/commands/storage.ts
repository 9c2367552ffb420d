import path from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../../server/core/config.js';
import { S3Storage } from '../../server/integrations/s3-storage.js';
import { storageFromConfig } from '../../server/integrations/storage-from-config.js';
import { migrateObjects } from '../../server/integrations/storage-migrate.js';
import { emit, progressBar, UsageError } from '../io.js';
import type { GlobalOptions } from '../globals.js';

const KINDS = ['local', 's3'] as const;
type Kind = (typeof KINDS)[number];

export function registerStorage(program: Command, globals: () => GlobalOptions): void {
  const cmd = program.command('storage').description('where attachments, avatars and kept raw mail live (storage.kind: local disk or an S3 bucket)');

  cmd
    .command('migrate')
    .description(
      'copy every file from the other storage to this one (--to s3: from <dataDir>/attachments to the configured bucket; --to local: back), each read back and its checksum compared; resumes after a kill; switches nothing: set storage.kind afterwards',
    )
    .requiredOption('--to <kind>', `where the files go: ${KINDS.join(' or ')}`)
    .option('--json', 'one JSON line per file ({ key, outcome, bytes, done, total }), then the summary')
    .addHelpText(
      'after',
      `
Needs storage.bucket (and its other storage.* settings) in either direction. Run it with ticketd
stopped, or again right before switching: a second run copies only what the first did not verify.
When every file is verified it says what to set; until then the running configuration is untouched.
See docs/operations.md, Object storage.`,
    )
    .action(async (opts: { to: string; json?: boolean }) => {
      if (!KINDS.includes(opts.to as Kind)) throw new UsageError(`--to must be ${KINDS.join(' or ')}`);
      const to = opts.to as Kind;
      const config = loadConfig({ configFile: globals().config });
      if (!config.storage.bucket) throw new UsageError('storage.bucket (TICKETD_S3_BUCKET) names the bucket to migrate with');
      const local = storageFromConfig({ ...config, storage: { ...config.storage, kind: 'local' } });
      const bucket = storageFromConfig({ ...config, storage: { ...config.storage, kind: 's3' } }) as S3Storage;
      const [from, into] = to === 's3' ? [local, bucket] : [bucket, local];
      const bar = opts.json ? null : progressBar('files');
      try {
        const result = await migrateObjects(from, into, path.join(config.dataDir, `storage-migrate-to-${to}.journal`), (step, done, total) => {
          if (opts.json) emit(true, { ...step, done, total }, () => []);
          else bar!.update(done, total);
        });
        bar?.stop();
        const switched = config.storage.kind === to;
        emit(Boolean(opts.json), { ...result, to, switchTo: switched ? null : to }, () => [
          `${result.objects} files in ${to === 's3' ? `the bucket ${config.storage.bucket}` : 'local storage'}, each verified (${result.copied} copied now, ${result.bytes} bytes).`,
          switched ? `storage.kind is ${to} already.` : `Now set storage.kind to ${to} (TICKETD_STORAGE_KIND=${to}) and restart ticketd.`,
        ]);
      } finally {
        bar?.stop();
        await bucket.destroy();
      }
    });
}
