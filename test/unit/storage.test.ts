import { createHash } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import t from 'tap';
import type { Storage } from '../../server/core/ports.js';
import { S3Storage } from '../../server/integrations/s3-storage.js';
import { LocalDiskStorage } from '../../server/integrations/storage.js';
import { startS3 } from '../helpers/s3.js';

/**
 * The storage contract, on both backends: local disk, and an S3-compatible bucket (s3rver on
 * loopback, started here). What a backend must do whatever holds the bytes: stage, commit, open,
 * delete, its limits and its failures, and the staging it leaves behind.
 */

const root = mkdtempSync(path.join(os.tmpdir(), 'ticketd-storage-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const bucket = await startS3();
t.teardown(() => bucket.stop());

interface Backend {
  name: string;
  storage: Storage;
  /** The directory uploads are staged in. */
  staging: string;
}
const s3 = new S3Storage(bucket.settings, path.join(root, 's3-staging'));
t.teardown(() => s3.destroy());
const backends: Backend[] = [
  { name: 'local disk', storage: new LocalDiskStorage(path.join(root, 'local')), staging: path.join(root, 'local', '.staging') },
  { name: 's3', storage: s3, staging: path.join(root, 's3-staging') },
];

const text = async (stream: Readable) => {
  let s = '';
  for await (const c of stream) s += c;
  return s;
};
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const staged = (b: Backend) => {
  try {
    return readdirSync(b.staging);
  } catch {
    return [];
  }
};

for (const b of backends) {
  const { storage } = b;
  t.test(`${b.name}: put, exists, open, delete`, async (t) => {
    const stored = await storage.put('att_01abc', Readable.from([Buffer.from('hello '), Buffer.from('world')]), 100);
    t.same(stored, { size: 11, sha256: sha256('hello world') });
    t.ok(await storage.exists('att_01abc'));
    const opened = await storage.open('att_01abc');
    t.equal(opened!.size, 11);
    t.equal(await text(opened!.stream), 'hello world');
    const listed: { key: string; size: number }[] = [];
    for await (const object of storage.list()) listed.push(object);
    t.same(
      listed.filter((o) => o.key === 'att_01abc'),
      [{ key: 'att_01abc', size: 11 }],
      'listed with its size',
    );
    await storage.delete('att_01abc');
    t.notOk(await storage.exists('att_01abc'));
    t.equal(await storage.open('att_01abc'), null);
    await storage.delete('att_01abc'); // a second delete is harmless
    t.same(staged(b), [], 'staging is empty');
  });

  t.test(`${b.name}: over the byte limit: rejected, nothing kept, the source left readable`, async (t) => {
    const source = new PassThrough();
    const staging = storage.stage(source, 5);
    source.write(Buffer.from('abc'));
    source.write(Buffer.from('defg'));
    await t.rejects(staging, { name: 'ByteLimitExceeded', limit: 5 });
    t.notOk(source.destroyed, 'an HTTP request body would still be readable, so the 413 reaches the client');
    source.end();
    t.same(staged(b), [], 'the partial file is gone');
    await t.rejects(storage.put('att_limit', Readable.from([Buffer.alloc(6)]), 5), { name: 'ByteLimitExceeded' });
    t.notOk(await storage.exists('att_limit'));
  });

  t.test(`${b.name}: a source that fails midway keeps nothing`, async (t) => {
    const source = new PassThrough();
    const staging = storage.stage(source, 100);
    source.write('partial');
    source.destroy(new Error('client went away'));
    await t.rejects(staging, /client went away/);
    t.same(staged(b), []);
  });

  t.test(`${b.name}: staged bytes are invisible until committed; discard throws them away`, async (t) => {
    const draft = await storage.stage(Readable.from([Buffer.from('draft')]), 100);
    t.notOk(await storage.exists('att_draft'));
    await draft.commit('att_draft');
    t.ok(await storage.exists('att_draft'));
    t.equal(await text((await storage.open('att_draft'))!.stream), 'draft');
    await draft.discard(); // after commit: nothing to do
    const dropped = await storage.stage(Readable.from([Buffer.from('x')]), 100);
    await dropped.discard();
    t.same(staged(b), []);
  });

  t.test(`${b.name}: a large object (past one multipart part) reads back whole`, async (t) => {
    const big = Buffer.alloc(20 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i);
    const chunks = Array.from({ length: 20 }, (_, i) => big.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024));
    t.same(await storage.put('att_big', Readable.from(chunks), big.length), { size: big.length, sha256: sha256(big) });
    const opened = await storage.open('att_big');
    t.equal(opened!.size, big.length);
    const hash = createHash('sha256');
    for await (const c of opened!.stream) hash.update(c as Buffer);
    t.equal(hash.digest('hex'), sha256(big), 'the same bytes');
    await storage.delete('att_big');
  });

  t.test(`${b.name}: keys are ids, never paths`, async (t) => {
    await t.rejects(storage.put('../escape', Readable.from([]), 1), /invalid storage key/);
    await t.rejects(storage.exists('a/b'), /invalid storage key/);
  });

  t.test(`${b.name}: purgeStaging removes only old leftovers`, async (t) => {
    await storage.put('att_warm', Readable.from([Buffer.from('w')]), 10); // the staging directory exists
    writeFileSync(path.join(b.staging, 'old'), 'x');
    writeFileSync(path.join(b.staging, 'new'), 'y');
    const dayAgo = new Date(Date.now() - 25 * 3600_000);
    utimesSync(path.join(b.staging, 'old'), dayAgo, dayAgo);
    t.equal(await storage.purgeStaging(new Date(Date.now() - 24 * 3600_000)), 1);
    t.same(staged(b), ['new']);
    rmSync(path.join(b.staging, 'new'));
  });
}

t.test('local disk: stored under its key, spread by its last two characters', async (t) => {
  const local = backends[0]!;
  await local.storage.put('att_01xyz', Readable.from([Buffer.from('here')]), 10);
  t.equal(readFileSync(path.join(root, 'local', 'yz', 'att_01xyz'), 'utf8'), 'here');
});

t.test('s3: objects under the prefix; two stores on different disks share one bucket', async (t) => {
  const other = new S3Storage(bucket.settings, path.join(root, 'other-staging'));
  t.teardown(() => other.destroy());
  await s3.put('att_shared', Readable.from([Buffer.from('from one')]), 100);
  t.equal(await text((await other.open('att_shared'))!.stream), 'from one', 'written by one, read by the other');
  const { S3Client, ListObjectsV2Command } = await import('@aws-sdk/client-s3');
  const { endpoint, region, accessKeyId, secretAccessKey } = bucket.settings;
  const lister = new S3Client({ endpoint: endpoint!, region, forcePathStyle: true, credentials: { accessKeyId: accessKeyId!, secretAccessKey: secretAccessKey! } });
  t.teardown(() => lister.destroy());
  const named = await lister.send(new ListObjectsV2Command({ Bucket: bucket.settings.bucket, Prefix: 'files/att_shared' }));
  t.same(
    named.Contents?.map((c) => c.Key),
    ['files/att_shared'],
    'named with the prefix',
  );
  await other.delete('att_shared');
  t.notOk(await s3.exists('att_shared'), 'deleted by the other');
});

t.test('s3: a commit the bucket refuses keeps nothing, staged or stored', async (t) => {
  const missing = new S3Storage({ ...bucket.settings, bucket: 'no-such-bucket' }, path.join(root, 'refused-staging'));
  t.teardown(() => missing.destroy());
  await t.rejects(missing.put('att_refused', Readable.from([Buffer.from('bytes')]), 100), { name: 'NoSuchBucket' });
  t.same(readdirSync(path.join(root, 'refused-staging')), [], 'the staged file is gone');
  t.notOk(await s3.exists('att_refused'));
});

/**
 * A bucket service that takes multipart uploads and refuses their second part, written from S3's
 * API reference (CreateMultipartUpload, UploadPart, AbortMultipartUpload, ListParts): s3rver has
 * neither abort nor ListParts. `honoursAbort: false` answers the abort but keeps the upload open,
 * as a service that lost the request would.
 */
async function refusingSecondPart(honoursAbort: boolean) {
  const open = new Set<string>();
  const calls: string[] = [];
  const xml = (body: string) => `<?xml version="1.0" encoding="UTF-8"?>\n${body}`;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const url = new URL(req.url!, 'http://bucket');
      const uploadId = url.searchParams.get('uploadId');
      const error = (status: number, code: string) =>
        res.writeHead(status, { 'content-type': 'application/xml' }).end(xml(`<Error><Code>${code}</Code><Message>${code}</Message></Error>`));
      if (req.method === 'POST' && url.searchParams.has('uploads')) {
        const id = `upload-${open.size + calls.length}`;
        open.add(id);
        calls.push('create');
        return res
          .writeHead(200, { 'content-type': 'application/xml' })
          .end(xml(`<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`));
      }
      if (req.method === 'PUT' && uploadId) {
        calls.push(`part ${url.searchParams.get('partNumber')}`);
        return url.searchParams.get('partNumber') === '1' ? res.writeHead(200, { etag: '"part-1"' }).end() : error(403, 'AccessDenied');
      }
      if (req.method === 'DELETE' && uploadId) {
        calls.push('abort');
        if (honoursAbort) open.delete(uploadId);
        return res.writeHead(204).end();
      }
      if (req.method === 'GET' && uploadId) {
        calls.push('list parts');
        if (!open.has(uploadId)) return error(404, 'NoSuchUpload');
        return res
          .writeHead(200, { 'content-type': 'application/xml' })
          .end(
            xml(
              `<ListPartsResult><Bucket>b</Bucket><Key>k</Key><UploadId>${uploadId}</UploadId><Part><PartNumber>1</PartNumber><ETag>"part-1"</ETag><Size>1</Size></Part></ListPartsResult>`,
            ),
          );
      }
      calls.push(`${req.method} ${url.pathname}`);
      return error(501, 'NotImplemented');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    calls,
    open,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

for (const honoursAbort of [true, false]) {
  t.test(`s3: a multipart upload whose part is refused is aborted, and the abort checked (${honoursAbort ? 'gone' : 'still open: logged'})`, async (t) => {
    const service = await refusingSecondPart(honoursAbort);
    t.teardown(service.close);
    const logged: string[] = [];
    const staging = path.join(root, `multipart-${honoursAbort}`);
    const storage = new S3Storage({ ...bucket.settings, endpoint: service.endpoint }, staging, (line) => logged.push(line));
    t.teardown(() => storage.destroy());
    await t.rejects(storage.put('att_multipart', Readable.from([Buffer.alloc(17 * 1024 * 1024, 1)]), 32 * 1024 * 1024), { name: 'AccessDenied' });
    t.same(
      service.calls.filter((c) => c === 'create' || c === 'abort' || c === 'list parts'),
      ['create', 'abort', 'list parts'],
      'created, aborted, then checked',
    );
    t.equal(service.open.size, honoursAbort ? 0 : 1);
    t.same(logged.filter((l) => l.includes('still open after its abort')).length, honoursAbort ? 0 : 1, honoursAbort ? 'nothing to report' : 'the open upload is logged');
    t.same(readdirSync(staging), [], 'nothing staged is left');
  });
}
