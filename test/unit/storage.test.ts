import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import t from 'tap';
import { LocalDiskStorage } from '../../server/integrations/storage.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'ticketd-storage-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const storage = new LocalDiskStorage(root);
const staging = path.join(root, '.staging');
const text = async (stream: Readable) => {
  let s = '';
  for await (const c of stream) s += c;
  return s;
};

t.test('put, exists, open, delete', async (t) => {
  const stored = await storage.put('att_01abc', Readable.from([Buffer.from('hello '), Buffer.from('world')]), 100);
  t.same(stored, { size: 11, sha256: createHash('sha256').update('hello world').digest('hex') });
  t.equal(readFileSync(path.join(root, 'bc', 'att_01abc'), 'utf8'), 'hello world', 'stored under its key, spread by the last two characters');
  t.ok(await storage.exists('att_01abc'));
  const opened = await storage.open('att_01abc');
  t.equal(opened!.size, 11);
  t.equal(await text(opened!.stream), 'hello world');
  await storage.delete('att_01abc');
  t.notOk(await storage.exists('att_01abc'));
  t.equal(await storage.open('att_01abc'), null);
  await storage.delete('att_01abc'); // a second delete is harmless
  t.same(readdirSync(staging), [], 'staging is empty');
});

t.test('over the byte limit: rejected, nothing kept, the source left readable', async (t) => {
  const source = new PassThrough();
  const staged = storage.stage(source, 5);
  source.write(Buffer.from('abc'));
  source.write(Buffer.from('defg'));
  await t.rejects(staged, { name: 'ByteLimitExceeded', limit: 5 });
  t.notOk(source.destroyed, 'an HTTP request body would still be readable, so the 413 reaches the client');
  source.end();
  t.same(readdirSync(staging), [], 'the partial file is gone');
  await t.rejects(storage.put('att_limit', Readable.from([Buffer.alloc(6)]), 5), { name: 'ByteLimitExceeded' });
  t.notOk(await storage.exists('att_limit'));
});

t.test('a source that fails midway keeps nothing', async (t) => {
  const source = new PassThrough();
  const staged = storage.stage(source, 100);
  source.write('partial');
  source.destroy(new Error('client went away'));
  await t.rejects(staged, /client went away/);
  t.same(readdirSync(staging), []);
});

t.test('staged bytes are invisible until committed; discard throws them away', async (t) => {
  const staged = await storage.stage(Readable.from([Buffer.from('draft')]), 100);
  t.notOk(await storage.exists('att_draft'));
  await staged.commit('att_draft');
  t.ok(await storage.exists('att_draft'));
  await staged.discard(); // after commit: nothing to do
  const dropped = await storage.stage(Readable.from([Buffer.from('x')]), 100);
  await dropped.discard();
  t.same(readdirSync(staging), []);
});

t.test('keys are ids, never paths', async (t) => {
  await t.rejects(storage.put('../escape', Readable.from([]), 1), /invalid storage key/);
  await t.rejects(storage.exists('a/b'), /invalid storage key/);
});

t.test('purgeStaging removes only old leftovers', async (t) => {
  writeFileSync(path.join(staging, 'old'), 'x');
  writeFileSync(path.join(staging, 'new'), 'y');
  const dayAgo = new Date(Date.now() - 25 * 3600_000);
  utimesSync(path.join(staging, 'old'), dayAgo, dayAgo);
  t.equal(await storage.purgeStaging(new Date(Date.now() - 24 * 3600_000)), 1);
  t.same(readdirSync(staging), ['new']);
});
