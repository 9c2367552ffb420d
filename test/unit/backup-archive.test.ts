import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { create } from 'tar';
import { ArchiveWriter, checksumProblems, extractArchive, FORMAT, FORMAT_VERSION, readArchive, type Manifest } from '../../server/integrations/backup-archive.js';
import { walSegments } from '../../server/integrations/base-backup.js';
import { verifyBackup } from '../../server/integrations/backups.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'ticketd-backup-archive-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

const described = (kind: Manifest['kind'], extra: Partial<Manifest> = {}): Omit<Manifest, 'members'> => ({
  format: FORMAT,
  version: FORMAT_VERSION,
  kind,
  createdAt: new Date().toISOString(),
  ticketd: '0.0.0',
  postgres: { version: '18.4', major: 18 },
  database: 'ticketd',
  withFiles: true,
  ...extra,
});

// A tree to copy: files at two levels, an upload still being received, and an empty directory.
const tree = path.join(root, 'tree');
mkdirSync(path.join(tree, 'ab', '.staging'), { recursive: true });
mkdirSync(path.join(tree, 'empty'));
writeFileSync(path.join(tree, 'top.txt'), 'top');
writeFileSync(path.join(tree, 'ab', 'att_1ab'), Buffer.alloc(3 * 1024 * 1024 + 5, 7));
writeFileSync(path.join(tree, 'ab', '.staging', 'partial'), 'half');

const copyTree = (a: ArchiveWriter) => a.tree(tree, 'attachments', (relative) => path.basename(relative) === '.staging');

async function archiveOf(name: string, kind: Manifest['kind'], extra: Partial<Manifest> = {}, fill: (a: ArchiveWriter) => Promise<unknown> = copyTree): Promise<string> {
  const file = path.join(root, name);
  const archive = await ArchiveWriter.create(file);
  await archive.buffer('database.dump', 'PGDMP and the rest');
  await fill(archive);
  await archive.finish(described(kind, extra));
  return file;
}

t.test('an archive round trip: every member checked against the manifest, unpacked as it was', async (t) => {
  const file = await archiveOf('good.tgz', 'external');
  t.equal(readFileSync(file).subarray(0, 2).toString('hex'), '1f8b', 'gzipped');
  const verified = await verifyBackup(file);
  t.match(verified, { ok: true, kind: 'external', withFiles: true, members: 3, problems: [] });
  t.same(Object.keys(verified.manifest!.members).sort(), ['attachments/ab/att_1ab', 'attachments/top.txt', 'database.dump'], 'files only, the upload being received left out');

  const out = path.join(root, 'out');
  mkdirSync(out);
  await extractArchive(file, out);
  t.ok(readFileSync(path.join(out, 'attachments', 'ab', 'att_1ab')).equals(readFileSync(path.join(tree, 'ab', 'att_1ab'))), 'a file of several chunks, byte for byte');
  t.equal(readFileSync(path.join(out, 'attachments', 'top.txt'), 'utf8'), 'top');
  t.ok(existsSync(path.join(out, 'attachments', 'empty')), 'an empty directory');
  t.throws(() => readFileSync(path.join(out, 'attachments', 'ab', '.staging', 'partial')), 'what was left out is not there');
  t.throws(() => readFileSync(path.join(out, 'manifest.json')), 'nor the manifest');
});

t.test('what verify finds wrong', async (t) => {
  const good = readFileSync(await archiveOf('base.tgz', 'external'));
  const variant = (name: string, bytes: Buffer) => {
    writeFileSync(path.join(root, name), bytes);
    return verifyBackup(path.join(root, name));
  };
  const flipped = Buffer.from(good);
  flipped[Math.floor(flipped.length / 2)]! ^= 0xff;
  t.match((await variant('flipped.tgz', flipped)).problems, [/damaged|checksum/], 'a changed byte');
  t.match((await variant('cut.tgz', good.subarray(0, good.length - 100))).problems, [/damaged/], 'a file cut short');
  t.match((await variant('junk', Buffer.from('hello'))).problems, [/not a ticketd backup/], 'something else');
  t.match((await variant('old.dump', Buffer.from('PGDMP\x01\x0e'))).problems, [/bare pg_dump archive/], 'a pg_dump file of an older ticketd');

  const plain = path.join(root, 'plain.tgz');
  await create({ gzip: true, file: plain, cwd: tree }, ['top.txt']);
  t.match((await verifyBackup(plain)).problems, [/no readable manifest.json/], 'a tar without a manifest');
});

t.test('checksums: a member changed, missing or unlisted, or a format this ticketd does not read', async (t) => {
  const contents = await readArchive(await archiveOf('listed.tgz', 'external'));
  t.same(checksumProblems(contents), []);
  const members = new Map(contents.members);
  members.set('database.dump', { ...members.get('database.dump')!, sha256: '0'.repeat(64) });
  members.delete('attachments/top.txt');
  members.set('attachments/extra', { size: 1, sha256: '1'.repeat(64) });
  t.same(checksumProblems({ ...contents, members }), ['database.dump does not match its checksum', 'attachments/top.txt is missing', 'attachments/extra is not in manifest.json']);
  t.match(checksumProblems({ ...contents, manifest: { ...contents.manifest!, version: 2 } }), [/format ticketd-backup version 2; this ticketd reads ticketd-backup version 1/]);
});

t.test('an embedded backup must hold the cluster, its password and every WAL segment of its range', async (t) => {
  const wal = { start: '0/2000028', stop: '0/3000120', firstSegment: '000000010000000000000002', lastSegment: '000000010000000000000003', segmentBytes: 16 * 1024 * 1024 };
  const file = await archiveOf('embedded.tgz', 'embedded', { wal }, async (a) => {
    await a.buffer('postgres/PG_VERSION', '17\n');
    await a.buffer('postgres/pg_wal/000000010000000000000002', 'segment');
  });
  t.match((await verifyBackup(file)).problems, [
    'postgres/global/pg_control is missing',
    'postgres/backup_label is missing',
    'embedded-postgres.json is missing',
    'postgres/pg_wal/000000010000000000000003 is missing',
    'PG_VERSION says 17, the manifest PostgreSQL 18',
  ]);
});

t.test('WAL segment names run on across a log boundary', async (t) => {
  t.same(walSegments('0000000100000000000000FE', '000000010000000100000001', 16 * 1024 * 1024), [
    '0000000100000000000000FE',
    '0000000100000000000000FF',
    '000000010000000100000000',
    '000000010000000100000001',
  ]);
  t.same(walSegments('000000020000000A00000003', '000000020000000A00000003', 16 * 1024 * 1024), ['000000020000000A00000003']);
  t.same(
    walSegments('00000001000000000000003F', '000000010000000100000000', 64 * 1024 * 1024),
    ['00000001000000000000003F', '000000010000000100000000'],
    '64 MB segments: 64 to a log',
  );
});

// sysfs files claim 4096 bytes and hold fewer: to the reader, a file cut short after it was measured.
const shortFile = '/sys/kernel/mm/transparent_hugepage/enabled';
t.test('a file cut short while it is copied ends in zeros; one gone is skipped', { skip: existsSync(shortFile) ? false : `no ${shortFile} here` }, async (t) => {
  const target = path.join(root, 'short.tgz');
  const archive = await ArchiveWriter.create(target);
  t.ok(await archive.file('short', shortFile));
  t.notOk(await archive.file('absent', path.join(root, 'absent')), 'a file gone before it was opened');
  const manifest = await archive.finish(described('external'));
  t.equal(manifest.members.short!.size, 4096, 'the size it had when opened');
  const out = path.join(root, 'short');
  mkdirSync(out);
  await extractArchive(target, out);
  const bytes = readFileSync(path.join(out, 'short'));
  const held = readFileSync(shortFile);
  t.ok(bytes.subarray(0, held.length).equals(held) && bytes.subarray(held.length).every((b) => b === 0) && bytes.length === 4096, 'what was there, then zeros');
});
