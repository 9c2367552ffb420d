import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ArchiveWriter, checksumProblems, extractArchive, FORMAT, FORMAT_VERSION, readArchive, type Manifest } from '../../server/integrations/backup-archive.js';

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
  const contents = await readArchive(file);
  t.same(checksumProblems(contents), [], 'every member matches the manifest');
  t.match(contents.manifest, { format: 'ticketd-backup', version: 1, kind: 'external', withFiles: true });
  t.same(Object.keys(contents.manifest!.members).sort(), ['attachments/ab/att_1ab', 'attachments/top.txt', 'database.dump'], 'files only, the upload being received left out');

  const out = path.join(root, 'out');
  mkdirSync(out);
  await extractArchive(file, out);
  t.ok(readFileSync(path.join(out, 'attachments', 'ab', 'att_1ab')).equals(readFileSync(path.join(tree, 'ab', 'att_1ab'))), 'a file of several chunks, byte for byte');
  t.equal(readFileSync(path.join(out, 'attachments', 'top.txt'), 'utf8'), 'top');
  t.ok(existsSync(path.join(out, 'attachments', 'empty')), 'an empty directory');
  t.throws(() => readFileSync(path.join(out, 'attachments', 'ab', '.staging', 'partial')), 'what was left out is not there');
  t.throws(() => readFileSync(path.join(out, 'manifest.json')), 'nor the manifest');
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
