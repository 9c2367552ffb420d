import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { runCli, startServer } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { startS3 } from '../helpers/s3.js';

// Two `start --role api` processes of the real bin/ticketd, on one database and one S3 bucket but
// each with a data directory of its own (as on two hosts): a file uploaded through one downloads
// through the other, and neither keeps it on its disk.
const { url } = await freshDatabase(t);
const bucket = await startS3();
t.teardown(() => bucket.stop());
const dirs = [0, 1].map((i) => mkdtempSync(path.join(os.tmpdir(), `ticketd-s3-host${i}-`)));
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A `start --role api` on its own data directory, stopped when the file ends; its start-up summary. */
async function startHost(dataDir: string) {
  const server = startServer({ DATABASE_URL: url, TICKETD_DATA_DIR: dataDir, ...bucket.env }, ['--role', 'api']);
  t.teardown(async () => {
    server.child.kill('SIGKILL');
    await server.exited;
  });
  const summary = await server.ready;
  if (!summary) throw new Error(`ticketd did not start:\n${server.stderr()}`);
  return summary;
}
// One after the other: the first makes the account whose key both serve.
const first = await startHost(dirs[0]!);
const second = await startHost(dirs[1]!);

const key = first.bootstrap.apiKeys.live.key as string;
const base = `/v1/brands/${first.bootstrap.brand.id as string}`;
async function call(server: { url: string }, method: string, route: string, body?: unknown) {
  const res = await fetch(`${server.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

t.test('an attachment uploaded through one process downloads through the other', async (t) => {
  const bytes = Buffer.from('%PDF-1.4 shared across hosts\n');
  const ticket = await call(first, 'POST', `${base}/tickets`, { title: 'Two hosts', customerEmail: 'ann@example.com' });
  t.equal(ticket.status, 201);
  const grant = await call(first, 'POST', `${base}/tickets/${ticket.body.id}/attachments`, { filename: 'shared.pdf', contentType: 'application/pdf', size: bytes.length });
  t.equal(grant.status, 201);
  const put = await fetch(`${first.url}${new URL(grant.body.uploadUrl!).pathname}`, { method: 'PUT', headers: { 'content-type': 'application/pdf' }, body: bytes });
  t.equal(put.status, 200, 'uploaded through the first');
  t.equal((await call(first, 'POST', `${base}/tickets/${ticket.body.id}/attachments/${grant.body.id}/confirm`)).status, 200);

  const seen = await call(second, 'GET', `${base}/tickets/${ticket.body.id}/attachments/${grant.body.id}`);
  t.equal(seen.status, 200);
  const download = await fetch(`${second.url}${new URL(seen.body.downloadUrl!).pathname}`);
  t.equal(download.status, 200, 'downloaded through the second');
  t.same(Buffer.from(await download.arrayBuffer()), bytes, 'the same bytes');
  t.equal(download.headers.get('content-disposition'), 'attachment; filename="shared.pdf"');

  for (const dir of dirs) t.notOk(readdirSync(dir).includes('attachments'), `nothing under ${path.basename(dir)}/attachments: the bucket holds it`);
  t.same(readdirSync(path.join(dirs[0]!, 'staging')), [], 'and nothing left staged');
});

t.test('doctor checks the bucket: reachable, writable, its clock; a bucket that is not there fails', async (t) => {
  const doctor = (env: Record<string, string>) => runCli(['doctor', '--json'], { DATABASE_URL: url, TICKETD_DATA_DIR: dirs[0]!, ...bucket.env, ...env });
  const good = await doctor({});
  const storage = good.json().checks.find((c: { name: string }) => c.name === 'storage');
  t.equal(storage.status, 'ok', storage.message);
  t.match(storage.message, /^bucket ticketd-test \(files\/\) at http:\/\/127\.0\.0\.1:\d+: reachable and writable, its clock \d+ s (ahead of|behind) this host's$/);
  t.ok(Math.abs(storage.details.skewMs) < 5_000, 'the same machine: no skew to speak of');
  t.notMatch(good.stdout + good.stderr, bucket.env.TICKETD_S3_SECRET_ACCESS_KEY, 'the secret key is not shown');

  const missing = await doctor({ TICKETD_S3_BUCKET: 'no-such-bucket' });
  t.equal(missing.code, 1, 'a failed check exits 1');
  const refused = missing.json().checks.find((c: { name: string }) => c.name === 'storage');
  t.equal(refused.status, 'fail');
  t.match(refused.message, /no-such-bucket.*NoSuchBucket/);
});
