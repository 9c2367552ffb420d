import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import t from 'tap';
import { S3Storage } from '../../server/integrations/s3-storage.js';
import { LocalDiskStorage, localStorageRoot } from '../../server/integrations/storage.js';
import { BIN, runCli, ticketdEnv } from '../helpers/cli.js';
import { startS3 } from '../helpers/s3.js';

// `ticketd storage migrate` of the real bin/ticketd: a local install's files to a bucket, killed
// halfway and run again to the end, every copy's checksum equal to its original; then back.
const bucket = await startS3();
t.teardown(() => bucket.stop());
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-migrate-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = { TICKETD_DATA_DIR: dataDir, ...bucket.env, TICKETD_STORAGE_KIND: 'local' };
const local = new LocalDiskStorage(localStorageRoot(dataDir));
const s3 = new S3Storage(bucket.settings, path.join(dataDir, 'probe-staging'));
t.teardown(() => s3.destroy());

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
async function digestOf(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

// 120 files, one of them past a multipart part.
const originals = new Map<string, string>();
for (let i = 0; i < 120; i++) {
  const bytes = randomBytes(i === 7 ? 9 * 1024 * 1024 : 2048 + i);
  const key = `att_${String(i).padStart(3, '0')}${randomBytes(6).toString('hex')}`;
  await local.put(key, Readable.from([bytes]), bytes.length);
  originals.set(key, sha256(bytes));
}

/** The migration, killed once it has reported `after` files; the lines it printed. */
function migrateKilledAfter(after: number): Promise<Record<string, unknown>[]> {
  const child = spawn(process.execPath, [BIN, 'storage', 'migrate', '--to', 's3', '--json'], { env: ticketdEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  let buffered = '';
  child.stdout.on('data', (d) => {
    buffered += d;
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    for (const line of parts) lines.push(JSON.parse(line) as Record<string, unknown>);
    if (lines.length >= after) child.kill('SIGKILL');
  });
  return new Promise((resolve) => child.on('close', () => resolve(lines)));
}

t.test('killed halfway, run again: every file in the bucket, each checksum equal', async (t) => {
  const first = await migrateKilledAfter(20);
  t.ok(first.length >= 20 && first.length < 120, `killed after ${first.length} files`);
  t.ok(existsSync(path.join(dataDir, 'storage-migrate-to-s3.journal')), 'its journal kept what it verified');

  const again = await runCli(['storage', 'migrate', '--to', 's3', '--json'], env);
  t.equal(again.code, 0, again.stderr);
  const lines = again.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const summary = lines.pop()!;
  t.match(summary, { objects: 120, to: 's3', switchTo: 's3' });
  const resumed = lines.filter((l) => l.outcome === 'verified before').length;
  t.ok(resumed >= 20, `${resumed} files verified by the first run were not copied again`);
  t.equal(summary.copied, 120 - resumed, 'the rest copied now');
  t.equal(lines.length, 120, 'a line per file');
  t.notOk(existsSync(path.join(dataDir, 'storage-migrate-to-s3.journal')), 'the journal is gone once every file is verified');

  for (const [key, digest] of originals) {
    const copy = await s3.open(key);
    t.equal(copy && (await digestOf(copy.stream)), digest, `${key} in the bucket`);
  }
});

t.test('and back to local disk, on another data directory', async (t) => {
  const back = mkdtempSync(path.join(os.tmpdir(), 'ticketd-migrate-back-'));
  t.teardown(() => rmSync(back, { recursive: true, force: true }));
  const res = await runCli(['storage', 'migrate', '--to', 'local'], { ...env, TICKETD_DATA_DIR: back, TICKETD_STORAGE_KIND: 's3' });
  t.equal(res.code, 0, res.stderr);
  t.match(
    res.stdout,
    /^120 files in local storage, each verified \(120 copied now, \d+ bytes\)\.\nNow set storage\.kind to local \(TICKETD_STORAGE_KIND=local\) and restart ticketd\.\n$/,
  );
  const restored = new LocalDiskStorage(localStorageRoot(back));
  for (const [key, digest] of originals) {
    const copy = await restored.open(key);
    t.equal(copy && (await digestOf(copy.stream)), digest, `${key} on disk`);
  }
});

t.test('without a bucket, or to a kind that is not one, it is a usage error', async (t) => {
  const noBucket = await runCli(['storage', 'migrate', '--to', 's3'], { TICKETD_DATA_DIR: dataDir });
  t.equal(noBucket.code, 2);
  t.match(noBucket.stderr, /storage\.bucket \(TICKETD_S3_BUCKET\)/);
  t.equal((await runCli(['storage', 'migrate', '--to', 'nfs'], env)).code, 2);
});
