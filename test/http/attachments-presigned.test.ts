import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { makeBrand, makeTicket, signup, testApp } from '../helpers/app.js';
import { startS3 } from '../helpers/s3.js';

// GET /v1/files/<token> on an S3 install with storage.presignedDownloads: the bucket serves the
// bytes, by its own presigned URL, with the headers ticketd would send; ticketd only redirects.
const bucket = await startS3();
t.teardown(() => bucket.stop());
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-presigned-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app } = await testApp(t, { ...bucket.env, TICKETD_S3_PRESIGNED_DOWNLOADS: 'true', TICKETD_DATA_DIR: dataDir });

t.test('the download redirects to the bucket, which serves the bytes as a download', async (t) => {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `/v1/brands/${brand.id}`;
  const ticket = await makeTicket(owner.live, base);
  const bytes = Buffer.from('straight from the bucket\n');
  const grant = await owner.live('POST', `${base}/tickets/${ticket.id}/attachments`, { filename: 'Réponse.txt', contentType: 'text/plain', size: bytes.length });
  t.equal(grant.status, 201);
  const put = await app.inject({ method: 'PUT', url: new URL(grant.body.uploadUrl).pathname, headers: { 'content-type': 'text/plain' }, payload: bytes });
  t.equal(put.statusCode, 200);
  t.equal((await owner.live('POST', `${base}/tickets/${ticket.id}/attachments/${grant.body.id}/confirm`)).status, 200);
  const one = await owner.live('GET', `${base}/tickets/${ticket.id}/attachments/${grant.body.id}`);

  const first = await app.inject({ method: 'GET', url: new URL(one.body.downloadUrl).pathname });
  t.equal(first.statusCode, 302, 'ticketd redirects');
  t.equal(first.headers['cache-control'], 'no-store', 'the short-lived URL is not cached');
  const location = String(first.headers.location);
  t.ok(location.startsWith(`${bucket.settings.endpoint}/${bucket.settings.bucket}/files/${grant.body.id}?`), 'to the object in the bucket');
  t.match(location, /X-Amz-Expires=300/, 'signed for 5 minutes');

  const served = await fetch(location);
  t.equal(served.status, 200);
  t.same(Buffer.from(await served.arrayBuffer()), bytes, 'the same bytes');
  t.equal(served.headers.get('content-disposition'), `attachment; filename="R_ponse.txt"; filename*=UTF-8''R%C3%A9ponse.txt`, 'as a download, its name kept');
  t.match(served.headers.get('content-type'), /^text\/plain/);

  const forged = await app.inject({ method: 'GET', url: '/v1/files/not-a-token' });
  t.equal(forged.statusCode, 403, 'a token that is not one gets no redirect');
});
