import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { serverSecret } from '../../server/core/secrets.js';
import { signGrant } from '../../server/domains/attachments/grants.js';
import { withoutGrantTokens } from '../../server/http/attachments.js';
import { attachmentDeps } from '../../server/domains/attachments/service.js';
import { Dispatcher } from '../../server/worker/dispatcher.js';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, signup, type Signup, testApp, servicesOf } from '../helpers/app.js';
import { testNow } from '../helpers/clock.js';
import { stagingDirOf } from '../helpers/s3.js';

const MAX = 1024;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-attachments-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db, config } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_ATTACHMENT_MAX_BYTES: String(MAX),
  TICKETD_DATA_DIR: dataDir,
});
const anonymous = client(app);
const quietLog = { info() {}, error() {} };

type Call = Signup['live'];
const ATT_ID = /^att_[0-9a-z]{26}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
/** Whether the storage (a disk or a bucket: the S3 mode) holds the file of this id. */
const isStored = (id: string) => servicesOf(db).storage.exists(id);
const pathOf = (url: string) => new URL(url).pathname;

async function setup(prefix: '/v1/brands' | '/v1/workspaces' = '/v1/brands') {
  const owner = await signup(app);
  const brand = await makeBrand(owner.live);
  const base = `${prefix}/${prefix === '/v1/workspaces' ? `ws_${brand.id.slice(3)}` : brand.id}`;
  return { owner, brand, base };
}

/** A raw request through inject (no credential unless given): status, headers and the bytes. */
async function send(method: 'GET' | 'PUT' | 'POST', url: string, payload?: Buffer | string | Readable, headers: Record<string, string> = {}) {
  const res = await app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
  let body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try {
    body = JSON.parse(res.body);
  } catch {
    body = undefined;
  }
  return { status: res.statusCode, headers: res.headers, bytes: res.rawPayload, body };
}

const put = (uploadUrl: string, bytes: Buffer | string | Readable, headers: Record<string, string> = { 'content-type': 'application/octet-stream' }) =>
  send('PUT', pathOf(uploadUrl), bytes, headers);

function multipart(filename: string, type: string, bytes: Buffer, field = 'file'): { payload: Buffer; contentType: string } {
  const boundary = `----ticketd${Math.random().toString(16).slice(2)}`;
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`),
    bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, contentType: `multipart/form-data; boundary=${boundary}` };
}

async function upload(key: string, url: string, filename: string, type: string, bytes: Buffer) {
  const form = multipart(filename, type, bytes);
  return send('POST', url, form.payload, { authorization: `Bearer ${key}`, 'content-type': form.contentType });
}

async function ticketCount(call: Call, base: string, ticketId: string): Promise<number> {
  return (await call('GET', `${base}/tickets/${ticketId}`)).body.attachmentCount;
}

async function auditEvents(entityId: string): Promise<{ event: string; ticketId: string | null }[]> {
  return db('audit_log').where({ entityType: 'attachment', entityId }).orderBy('id').select('event', 'ticketId');
}

for (const prefix of ['/v1/brands', '/v1/workspaces'] as const) {
  t.test(`${prefix}: three steps with real bytes: declare, PUT to the uploadUrl, confirm; then read, download and delete`, async (t) => {
    const { owner, base } = await setup(prefix);
    const ticket = await makeTicket(owner.live, base);
    const bytes = Buffer.from('%PDF-1.4 pretend this is a report\n');

    const created = await owner.live('POST', `${base}/tickets/${ticket.id}/attachments`, {
      filename: 'Q3 report.pdf',
      contentType: 'application/pdf',
      size: bytes.length,
      uploadedBy: 'agent-7',
      metadata: { source: 'sdk' },
    });
    t.equal(created.status, 201);
    const g = created.body;
    t.match(g.id, ATT_ID);
    t.equal(g.attachmentId, g.id, 'attachmentId (SDK) and id (dashboard) are the same');
    t.equal(g.filename, 'Q3 report.pdf');
    t.equal(g.expiresIn, 900, 'the upload grant lives 15 minutes by default');
    t.match(g.expiresAt, ISO);
    t.match(g.attachment, {
      id: g.id,
      ticketId: ticket.id,
      filename: 'Q3 report.pdf',
      contentType: 'application/pdf',
      size: bytes.length,
      status: 'PENDING',
      uploadedBy: 'agent-7',
      metadata: { source: 'sdk' },
      sha256: null,
    });
    t.match(g.uploadUrl, /^http:\/\/localhost\/v1\/uploads\/[A-Za-z0-9._-]+$/, 'absolute, on the request host');

    const early = await owner.live('POST', `${base}/tickets/${ticket.id}/attachments/${g.id}/confirm`);
    assertErrorShape(t, early, 400, 'upload_incomplete');

    const stored = await put(g.uploadUrl, bytes, { 'content-type': 'application/pdf' });
    t.equal(stored.status, 200, 'the PUT needs no Authorization');
    t.same(stored.body, { id: g.id, size: bytes.length, sha256: sha256(bytes), status: 'PENDING' });
    t.ok(await isStored(g.id), 'the file is stored, named by the attachment id');
    t.equal(await ticketCount(owner.live, base, ticket.id), 0, 'not counted before confirm');

    const confirmed = await owner.live('POST', `${base}/tickets/${ticket.id}/attachments/${g.id}/confirm`);
    t.equal(confirmed.status, 200);
    t.match(confirmed.body, { id: g.id, status: 'UPLOADED', sha256: sha256(bytes), size: bytes.length });
    const again = await owner.live('POST', `${base}/tickets/${ticket.id}/attachments/${g.id}/confirm`);
    t.equal(again.status, 200, 'confirming twice is harmless');
    t.equal(await ticketCount(owner.live, base, ticket.id), 1, 'counted once');
    t.same(
      (await auditEvents(g.id)).map((e) => [e.event, e.ticketId]),
      [['attachment.created', ticket.id]],
      'one created entry, on the ticket',
    );

    const late = await put(g.uploadUrl, bytes);
    assertErrorShape(t, late, 409, 'already_uploaded');

    const list = await owner.live('GET', `${base}/tickets/${ticket.id}/attachments`);
    t.equal(list.status, 200);
    t.ok(Array.isArray(list.body), 'a bare array');
    t.same(
      list.body.map((a: { id: string }) => a.id),
      [g.id],
    );

    const one = await owner.live('GET', `${base}/tickets/${ticket.id}/attachments/${g.id}`);
    t.equal(one.status, 200);
    t.match(one.body, { id: g.id, filename: 'Q3 report.pdf', status: 'UPLOADED', attachment: { id: g.id, status: 'UPLOADED' } });
    t.match(one.body.downloadUrl, /^http:\/\/localhost\/v1\/files\//);
    t.match(one.body.expiresAt, ISO);
    t.ok(Date.parse(one.body.expiresAt) - testNow() > 3500_000, 'the download URL lives an hour');

    const dl = await send('GET', pathOf(one.body.downloadUrl));
    t.equal(dl.status, 200, 'the download needs no Authorization');
    t.same(dl.bytes, bytes, 'the same bytes');
    t.equal(dl.headers['content-type'], 'application/pdf');
    t.equal(dl.headers['content-length'], String(bytes.length));
    t.equal(dl.headers['content-disposition'], 'attachment; filename="Q3 report.pdf"', 'an ASCII name needs no filename*');
    t.equal(dl.headers['x-content-type-options'], 'nosniff');

    const flagged = await owner.live('GET', `${base}/tickets?hasAttachments=true`);
    t.same(
      flagged.body.data.map((x: { id: string }) => x.id),
      [ticket.id],
      'hasAttachments=true finds it',
    );
    t.same((await owner.live('GET', `${base}/tickets?hasAttachments=false`)).body.data, [], 'hasAttachments=false does not');

    const deleted = await owner.live('DELETE', `${base}/tickets/${ticket.id}/attachments/${g.id}`);
    t.equal(deleted.status, 200);
    t.match(deleted.body, { id: g.id, filename: 'Q3 report.pdf' });
    t.notOk(await isStored(g.id), 'the file is gone');
    t.equal(await ticketCount(owner.live, base, ticket.id), 0, 'uncounted');
    assertNotFound(t, await owner.live('GET', `${base}/tickets/${ticket.id}/attachments/${g.id}`), 'deleted attachment');
    assertNotFound(t, await owner.live('DELETE', `${base}/tickets/${ticket.id}/attachments/${g.id}`), 'second delete');
    assertNotFound(t, await send('GET', pathOf(one.body.downloadUrl)), 'its download URL');
    t.same(
      (await auditEvents(g.id)).map((e) => [e.event, e.ticketId]),
      [
        ['attachment.created', ticket.id],
        ['attachment.deleted', ticket.id],
      ],
    );
  });
}

t.test('multipart upload on a ticket: { attachment, downloadUrl }, UPLOADED at once', async (t) => {
  const { owner, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);
  const res = await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'C:\\Users\\ann\\screen shot é.png', 'image/png', png);
  t.equal(res.status, 201);
  t.match(res.body.attachment, {
    ticketId: ticket.id,
    filename: 'screen shot é.png',
    contentType: 'image/png',
    size: png.length,
    status: 'UPLOADED',
    sha256: sha256(png),
    scanStatus: 'not_scanned',
  });
  t.match(res.body.attachment.id, ATT_ID);
  t.equal(await ticketCount(owner.live, base, ticket.id), 1);
  t.same(
    (await auditEvents(res.body.attachment.id)).map((e) => e.event),
    ['attachment.created'],
  );

  const dl = await send('GET', pathOf(res.body.downloadUrl));
  t.same(dl.bytes, png);
  t.equal(dl.headers['content-type'], 'image/png', 'a safe image type is served as recorded (the dashboard shows it in <img>)');
  t.equal(dl.headers['content-disposition'], `attachment; filename="screen shot _.png"; filename*=UTF-8''screen%20shot%20%C3%A9.png`);

  const html = await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'x.html', 'text/html', Buffer.from('<script>alert(1)</script>'));
  t.equal(html.body.attachment.contentType, 'text/html', 'the recorded type is kept');
  const served = await send('GET', pathOf(html.body.downloadUrl));
  t.equal(served.headers['content-type'], 'application/octet-stream', 'but HTML is never served as HTML');
  t.equal(served.headers['x-content-type-options'], 'nosniff');
  t.equal(await ticketCount(owner.live, base, ticket.id), 2);

  const notMultipart = await owner.live('POST', `${base}/tickets/${ticket.id}/attachments/upload`, { file: 'x' });
  assertErrorShape(t, notMultipart, 415, 'unsupported_media_type');
  const empty = multipart('x', 'text/plain', Buffer.alloc(0));
  const noFile = await send(
    'POST',
    `${base}/tickets/${ticket.id}/attachments/upload`,
    Buffer.from(empty.payload.toString().replace(/; filename="x"\r\nContent-Type: text\/plain/, '')),
    { authorization: `Bearer ${owner.liveKey}`, 'content-type': empty.contentType },
  );
  assertErrorShape(t, noFile, 400, 'file_missing');
  assertErrorShape(t, await owner.live('POST', `${base}/attachments/pending/upload`, { file: 'x' }), 415, 'unsupported_media_type');
  const noPendingFile = await send('POST', `${base}/attachments/pending/upload`, Buffer.from(empty.payload.toString().replace(/; filename="x"\r\nContent-Type: text\/plain/, '')), {
    authorization: `Bearer ${owner.liveKey}`,
    'content-type': empty.contentType,
  });
  assertErrorShape(t, noPendingFile, 400, 'file_missing');

  const before = (await db('attachments').where({ ticketId: ticket.id }).count({ n: '*' }).first()) as { n: string };
  const big = await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'big.bin', 'application/octet-stream', Buffer.alloc(MAX + 1, 7));
  assertErrorShape(t, big, 413, 'attachment_too_large');
  const after = (await db('attachments').where({ ticketId: ticket.id }).count({ n: '*' }).first()) as { n: string };
  t.equal(after.n, before.n, 'no record kept');
  t.same(readdirSync(stagingDirOf(config)), [], 'nothing left in staging');
  const exact = await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'max.bin', 'application/octet-stream', Buffer.alloc(MAX, 7));
  t.equal(exact.status, 201, 'exactly the limit is fine');

  const gone = await upload(owner.liveKey, `${base}/tickets/tkt_nope/attachments/upload`, 'a.txt', 'text/plain', Buffer.from('a'));
  assertNotFound(t, gone, 'unknown ticket');
});

t.test('pending attachments: uploaded before the ticket, linked by attachmentIds on create', async (t) => {
  const { owner, brand, base } = await setup();
  const flat = await upload(owner.liveKey, `${base}/attachments/pending/upload`, 'log.txt', 'text/plain', Buffer.from('line 1\n'));
  t.equal(flat.status, 201);
  t.match(flat.body, { id: ATT_ID, filename: 'log.txt', size: 7, status: 'UPLOADED', ticketId: null }, 'a flat Attachment');
  t.notOk('attachment' in flat.body, 'not wrapped');

  const g = (await owner.live('POST', `${base}/attachments/pending`, { filename: 'b.txt', contentType: 'text/plain', size: 3 })).body;
  t.match(g, { attachmentId: ATT_ID, attachment: { ticketId: null, status: 'PENDING' } });
  t.equal((await put(g.uploadUrl, 'abc')).status, 200);
  const pendingNotUploaded = (await owner.live('POST', `${base}/attachments/pending`, { filename: 'c.txt', contentType: 'text/plain', size: 3 })).body;
  assertErrorShape(t, await owner.live('POST', `${base}/attachments/pending/${pendingNotUploaded.id}/confirm`), 400, 'upload_incomplete');
  const confirmed = await owner.live('POST', `${base}/attachments/pending/${g.id}/confirm`);
  t.match(confirmed.body, { id: g.id, status: 'UPLOADED', ticketId: null });
  t.same(
    (await auditEvents(g.id)).map((e) => [e.event, e.ticketId]),
    [['attachment.created', null]],
    'created, on no ticket yet',
  );

  const next = (await owner.live('GET', `/v1/brands/${brand.id}`)).body.nextTicketNumber;
  const notUploaded = await owner.live('POST', `${base}/tickets`, { title: 'With files', attachmentIds: [flat.body.id, pendingNotUploaded.id] });
  assertErrorShape(t, notUploaded, 400, 'invalid_attachments');
  t.same(
    notUploaded.body.errors.map((e: { message: string }) => e.message.split(' ')[0]),
    [pendingNotUploaded.id],
    'names the bad id',
  );
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'x', attachmentIds: ['att_unknown'] }), 400, 'invalid_attachments');
  t.equal((await owner.live('GET', `/v1/brands/${brand.id}`)).body.nextTicketNumber, next, 'failed creates used no ticket number');
  t.equal((await db('attachments').where({ id: flat.body.id }).first()).ticketId, null, 'and linked nothing');

  const ticket = await makeTicket(owner.live, base, { title: 'With files', attachmentIds: [flat.body.id, g.id, g.id] });
  t.equal(ticket.attachmentCount, 2, 'counted in the create');
  const list = (await owner.live('GET', `${base}/tickets/${ticket.id}/attachments`)).body;
  t.same(
    list.map((a: { id: string; ticketId: string }) => [a.id, a.ticketId]),
    [
      [flat.body.id, ticket.id],
      [g.id, ticket.id],
    ],
  );
  const other = await makeTicket(owner.live, base, { title: 'Plain' });
  const filtered = (await owner.live('GET', `${base}/tickets?hasAttachments=true`)).body.data.map((x: { id: string }) => x.id);
  t.same(filtered, [ticket.id], 'hasAttachments filter');
  t.same(
    (await owner.live('GET', `${base}/tickets?hasAttachments=false`)).body.data.map((x: { id: string }) => x.id),
    [other.id],
  );

  const relink = await owner.live('POST', `${base}/tickets`, { title: 'Steal', attachmentIds: [g.id] });
  assertErrorShape(t, relink, 400, 'invalid_attachments');

  const elsewhere = await makeBrand(owner.live, 'Other brand');
  const foreign = await upload(owner.liveKey, `/v1/brands/${elsewhere.id}/attachments/pending/upload`, 'f.txt', 'text/plain', Buffer.from('f'));
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'x', attachmentIds: [foreign.body.id] }), 400, 'invalid_attachments');
  const testMode = await upload(owner.testKey, `/v1/brands/${(await makeBrand(owner.test)).id}/attachments/pending/upload`, 't.txt', 'text/plain', Buffer.from('t'));
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, { title: 'x', attachmentIds: [testMode.body.id] }), 400, 'invalid_attachments');
});

t.test("commentId: a live comment of the attachment's own ticket, else 400 invalid_comment and nothing stored", async (t) => {
  const { owner, brand, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const comment = (await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'Here is the file' })).body;
  const declare = (commentId: string | null, url = `${base}/tickets/${ticket.id}/attachments`) =>
    owner.live('POST', url, { filename: 'a.txt', contentType: 'text/plain', size: 3, commentId });

  const ok = await declare(comment.id);
  t.equal(ok.status, 201);
  t.equal(ok.body.attachment.commentId, comment.id, 'a comment of this ticket is stored');
  t.equal((await declare(null)).status, 201, 'no comment is fine');

  const stranger = await setup();
  const theirTicket = await makeTicket(stranger.owner.live, stranger.base);
  const theirs = (await stranger.owner.live('POST', `${stranger.base}/tickets/${theirTicket.id}/comments`, { body: 'Not yours' })).body;
  const testBase = `/v1/brands/${(await makeBrand(owner.test)).id}`;
  const testTicket = await makeTicket(owner.test, testBase);
  const testComment = (await owner.test('POST', `${testBase}/tickets/${testTicket.id}/comments`, { body: 'Test mode' })).body;
  const sibling = await makeTicket(owner.live, base, { title: 'Sibling' });
  const siblings = (await owner.live('POST', `${base}/tickets/${sibling.id}/comments`, { body: 'On the sibling' })).body;
  const elsewhere = await makeBrand(owner.live, 'Elsewhere');
  const elsewhereTicket = await makeTicket(owner.live, `/v1/brands/${elsewhere.id}`);
  const elsewhereComment = (await owner.live('POST', `/v1/brands/${elsewhere.id}/tickets/${elsewhereTicket.id}/comments`, { body: 'Other brand' })).body;
  const gone = (await owner.live('POST', `${base}/tickets/${ticket.id}/comments`, { body: 'Deleted' })).body;
  t.equal((await owner.live('DELETE', `${base}/comments/${gone.id}`)).status, 200);

  const before = (await owner.live('GET', `${base}/tickets/${ticket.id}/attachments`)).body.length;
  const refused: [string, string][] = [
    ["another account's comment", theirs.id],
    ["the other mode's comment", testComment.id],
    ['a random id', 'cmt_01jzzzzzzzzzzzzzzzzzzzzzzz'],
    ["another ticket's comment", siblings.id],
    ["another brand's comment", elsewhereComment.id],
    ['a deleted comment', gone.id],
  ];
  for (const [label, commentId] of refused) {
    const res = await declare(commentId);
    assertErrorShape(t, res, 400, 'invalid_comment');
    t.same(
      res.body.errors?.map((e: { field: string }) => e.field),
      ['commentId'],
      `${label}: names commentId`,
    );
  }
  t.equal((await owner.live('GET', `${base}/tickets/${ticket.id}/attachments`)).body.length, before, 'none of them was stored');
  t.equal(Number((await db('attachments').where({ commentId: theirs.id }).count({ n: '*' }))[0]!.n), 0, "no row points at another account's comment");

  const pending = await declare(comment.id, `/v1/brands/${brand.id}/attachments/pending`);
  assertErrorShape(t, pending, 400, 'invalid_comment');
  t.match(pending.body.message, /before the attachment is on a ticket/, 'a pending attachment names no comment');
});

t.test('POST /attachments/urls: fresh download URLs, null for what is not downloadable here', async (t) => {
  const { owner, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const a = (await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'a.png', 'image/png', Buffer.from('png!'))).body.attachment;
  const p = (await upload(owner.liveKey, `${base}/attachments/pending/upload`, 'p.txt', 'text/plain', Buffer.from('pending'))).body;
  const notUploaded = (await owner.live('POST', `${base}/tickets/${ticket.id}/attachments`, { filename: 'n.txt', contentType: 'text/plain', size: 1 })).body;
  const stranger = await setup();
  const theirs = (await upload(stranger.owner.liveKey, `${stranger.base}/attachments/pending/upload`, 's.txt', 'text/plain', Buffer.from('s'))).body;

  const res = await owner.live('POST', `${base}/attachments/urls`, { ids: [a.id, p.id, notUploaded.id, theirs.id, 'att_nope'] });
  t.equal(res.status, 200);
  t.same(Object.keys(res.body).sort(), [a.id, p.id, notUploaded.id, theirs.id, 'att_nope'].sort(), 'every id asked is a key');
  t.match(res.body[a.id], { filename: 'a.png', contentType: 'image/png', expiresAt: ISO, url: /^http:\/\/localhost\/v1\/files\// });
  t.match(res.body[p.id], { filename: 'p.txt' });
  t.equal(res.body[notUploaded.id], null, 'not uploaded');
  t.equal(res.body[theirs.id], null, "another account's");
  t.equal(res.body.att_nope, null, 'unknown');
  t.same((await send('GET', pathOf(res.body[a.id].url))).bytes, Buffer.from('png!'));

  t.same((await owner.live('POST', `${base}/attachments/urls`, { ids: [] })).body, {});
  const many = await owner.live('POST', `${base}/attachments/urls`, { ids: Array.from({ length: 101 }, (_, i) => `att_${i}`) });
  assertErrorShape(t, many, 400, 'validation_failed');

  await owner.live('DELETE', `${base}/tickets/${ticket.id}`);
  t.equal((await owner.live('POST', `${base}/attachments/urls`, { ids: [a.id] })).body[a.id], null, "a deleted ticket's attachments are not served");
  assertNotFound(t, await send('GET', pathOf(res.body[a.id].url)), 'even with a URL issued before');
});

t.test('signed URLs: expired, tampered, wrong purpose and garbage tokens are refused', async (t) => {
  const { owner, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const g = (await owner.live('POST', `${base}/tickets/${ticket.id}/attachments`, { filename: 'a.txt', contentType: 'text/plain', size: 2 })).body;
  const up = (await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'b.txt', 'text/plain', Buffer.from('bb'))).body;

  // The clock is injected: the same app logic an hour and a half later.
  const deps = attachmentDeps(config, db, testNow);
  const later = await buildApp({ clock: testNow, config, db, attachments: { ...deps, now: () => testNow() + 90 * 60_000 } });
  t.teardown(() => later.close());
  const expiredUpload = await later.inject({ method: 'PUT', url: pathOf(g.uploadUrl), payload: 'aa' });
  t.equal(expiredUpload.statusCode, 403);
  t.equal(expiredUpload.json().code, 'url_expired');
  t.match(expiredUpload.json().message, /expired/);
  const expiredDownload = await later.inject({ method: 'GET', url: pathOf(up.downloadUrl) });
  t.equal(expiredDownload.json().code, 'url_expired', 'the download URL lives an hour');

  // A grant signed with the real key, but already past its expiry.
  const key = await serverSecret(db, 'attachment_url_signing_key');
  const past = signGrant(key, { attachmentId: up.attachment.id, accountId: owner.accountId, livemode: true, purpose: 'download', expiresAt: Math.floor(testNow() / 1000) - 1 });
  assertErrorShape(t, await send('GET', `/v1/files/${past}`), 403, 'url_expired');
  const valid = signGrant(key, { attachmentId: up.attachment.id, accountId: owner.accountId, livemode: true, purpose: 'download', expiresAt: Math.floor(testNow() / 1000) + 60 });
  t.equal((await send('GET', `/v1/files/${valid}`)).status, 200, 'the same grant in date works');
  const wrongMode = signGrant(key, {
    attachmentId: up.attachment.id,
    accountId: owner.accountId,
    livemode: false,
    purpose: 'download',
    expiresAt: Math.floor(testNow() / 1000) + 60,
  });
  assertNotFound(t, await send('GET', `/v1/files/${wrongMode}`), 'a grant for the other mode');
  const stranger = await signup(app);
  const otherAccount = signGrant(key, {
    attachmentId: up.attachment.id,
    accountId: stranger.accountId,
    livemode: true,
    purpose: 'download',
    expiresAt: Math.floor(testNow() / 1000) + 60,
  });
  assertNotFound(t, await send('GET', `/v1/files/${otherAccount}`), 'a grant naming another account');
  for (const [label, grant] of [
    ['the other mode', { accountId: owner.accountId, livemode: false }],
    ['another account', { accountId: stranger.accountId, livemode: true }],
  ] as const) {
    const upload = signGrant(key, { attachmentId: g.id, ...grant, purpose: 'upload', expiresAt: Math.floor(testNow() / 1000) + 60 });
    assertNotFound(t, await send('PUT', `/v1/uploads/${upload}`, 'aa'), `an upload grant for ${label}`);
  }
  t.equal((await db('attachments').where({ id: g.id }).first()).sha256, null, 'no refused upload stored anything');

  const token = pathOf(up.downloadUrl).split('/').pop()!;
  const parts = token.split('.');
  const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
  const tamperedSig = [...parts.slice(0, 6), flip(parts[6]!)].join('.');
  assertErrorShape(t, await send('GET', `/v1/files/${tamperedSig}`), 403, 'invalid_signature');
  const longer = [...parts.slice(0, 5), String(Number(parts[5]) + 86400), parts[6]].join('.');
  assertErrorShape(t, await send('GET', `/v1/files/${longer}`), 403, 'invalid_signature');
  const otherFile = [parts[0], g.id, ...parts.slice(2)].join('.');
  assertErrorShape(t, await send('GET', `/v1/files/${otherFile}`), 403, 'invalid_signature');
  assertErrorShape(t, await send('GET', '/v1/files/not-a-token'), 403, 'invalid_signature');
  const forged = signGrant(Buffer.alloc(32, 1), {
    attachmentId: up.attachment.id,
    accountId: owner.accountId,
    livemode: true,
    purpose: 'download',
    expiresAt: Math.floor(testNow() / 1000) + 60,
  });
  assertErrorShape(t, await send('GET', `/v1/files/${forged}`), 403, 'invalid_signature');

  const uploadToken = pathOf(g.uploadUrl).split('/').pop()!;
  assertErrorShape(t, await send('GET', `/v1/files/${uploadToken}`), 403, 'invalid_signature');
  assertErrorShape(t, await send('PUT', `/v1/uploads/${token}`, 'aa'), 403, 'invalid_signature');
  t.equal((await db('attachments').where({ id: g.id }).first()).sha256, null, 'nothing was stored by the refused PUT');
  t.equal((await put(g.uploadUrl, 'aa')).status, 200, 'the real upload URL still works');
});

t.test('sizes: declared over the limit, sent over the limit, more or fewer bytes than declared', async (t) => {
  const { owner, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const path_ = `${base}/tickets/${ticket.id}/attachments`;
  const rowsBefore = ((await db('attachments').count({ n: '*' }).first()) as { n: string }).n;
  const tooBig = await owner.live('POST', path_, { filename: 'big.iso', contentType: 'application/octet-stream', size: MAX + 1 });
  assertErrorShape(t, tooBig, 413, 'attachment_too_large');
  t.equal(((await db('attachments').count({ n: '*' }).first()) as { n: string }).n, rowsBefore, 'nothing recorded');
  assertErrorShape(t, await owner.live('POST', path_, { filename: 'x', contentType: 'text/plain', size: -1 }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', path_, { filename: 'x', contentType: 'not a type', size: 1 }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', path_, { filename: 'a\nb', contentType: 'text/plain', size: 1 }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', path_, { filename: 'x', contentType: 'text/plain', size: 1, extra: 1 }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', path_, { contentType: 'text/plain', size: 1 }), 400, 'validation_failed');
  // The pending route takes the same body with the same rules.
  assertErrorShape(t, await owner.live('POST', `${base}/attachments/pending`, { filename: 'x', contentType: 'text/plain', size: -1 }), 400, 'validation_failed');
  assertErrorShape(t, await owner.live('POST', `${base}/attachments/pending`, { contentType: 'text/plain', size: 1 }), 400, 'validation_failed');
  assertErrorShape(
    t,
    await owner.live('POST', `${base}/attachments/pending`, { filename: 'big.iso', contentType: 'application/octet-stream', size: MAX + 1 }),
    413,
    'attachment_too_large',
  );

  const g = (await owner.live('POST', path_, { filename: 'ten.bin', contentType: 'application/octet-stream', size: 10 })).body;
  assertErrorShape(t, await put(g.uploadUrl, Buffer.alloc(MAX + 5, 1)), 413, 'attachment_too_large');
  assertErrorShape(t, await put(g.uploadUrl, Buffer.alloc(9, 1)), 400, 'size_mismatch');
  assertErrorShape(t, await put(g.uploadUrl, Buffer.alloc(11, 1)), 400, 'size_mismatch');
  // No Content-Length (a chunked stream): counted while streaming, cut at the declared size.
  const chunked = (n: number) => Readable.from([Buffer.alloc(n, 2)]);
  assertErrorShape(t, await put(g.uploadUrl, chunked(MAX * 3), { 'transfer-encoding': 'chunked', 'content-type': 'application/octet-stream' }), 400, 'size_mismatch');
  assertErrorShape(t, await put(g.uploadUrl, chunked(4), { 'transfer-encoding': 'chunked', 'content-type': 'application/octet-stream' }), 400, 'size_mismatch');
  t.equal((await db('attachments').where({ id: g.id }).first()).sha256, null, 'nothing kept');
  t.notOk(await isStored(g.id), 'no file');
  t.same(readdirSync(stagingDirOf(config)), [], 'nothing left in staging');

  const ok = await put(g.uploadUrl, chunked(10), { 'transfer-encoding': 'chunked', 'content-type': 'application/json' });
  t.equal(ok.status, 200, 'the right size, chunked, with a JSON content type: stored as raw bytes');
  t.equal(ok.body.sha256, sha256(Buffer.alloc(10, 2)));
  const replaced = await put(g.uploadUrl, Buffer.alloc(10, 3), {});
  t.equal(replaced.status, 200, 'a repeat PUT before confirm replaces the bytes (and needs no Content-Type)');
  const confirmed = await owner.live('POST', `${path_}/${g.id}/confirm`);
  t.equal(confirmed.body.sha256, sha256(Buffer.alloc(10, 3)));
  t.same((await send('GET', pathOf((await owner.live('GET', `${path_}/${g.id}`)).body.downloadUrl))).bytes, Buffer.alloc(10, 3));

  const zero = (await owner.live('POST', path_, { filename: 'empty.txt', contentType: 'text/plain', size: 0 })).body;
  t.equal((await send('PUT', pathOf(zero.uploadUrl))).status, 200, 'an empty file is a file');
  t.equal((await owner.live('POST', `${path_}/${zero.id}/confirm`)).body.size, 0);
});

t.test('credentials: 401 without a key; another account, the other mode and another brand read as 404', async (t) => {
  const { owner, brand, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const att = (await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'a.txt', 'text/plain', Buffer.from('a'))).body.attachment;
  const pending = (await owner.live('POST', `${base}/attachments/pending`, { filename: 'p.txt', contentType: 'text/plain', size: 1 })).body;
  const one = `${base}/tickets/${ticket.id}/attachments/${att.id}`;
  const declare = { filename: 'x.txt', contentType: 'text/plain', size: 1 };

  const routes: [string, string, unknown?][] = [
    ['POST', `${base}/tickets/${ticket.id}/attachments`, declare],
    ['GET', `${base}/tickets/${ticket.id}/attachments`],
    ['GET', one],
    ['POST', `${one}/confirm`],
    ['DELETE', one],
    ['POST', `${base}/attachments/pending`, declare],
    ['POST', `${base}/attachments/pending/${pending.id}/confirm`],
    ['POST', `${base}/attachments/urls`, { ids: [att.id] }],
  ];
  const stranger = await signup(app);
  for (const [method, url, body] of routes) {
    assertErrorShape(t, await anonymous(method, url, body), 401, 'missing_credentials');
    assertNotFound(t, await stranger.live(method, url, body), `another account: ${method} ${url}`);
    assertNotFound(t, await owner.test(method, url, body), `test key on live data: ${method} ${url}`);
  }
  for (const [url, key] of [
    [`${base}/tickets/${ticket.id}/attachments/upload`, stranger.liveKey],
    [`${base}/attachments/pending/upload`, owner.testKey],
  ] as const) {
    assertErrorShape(
      t,
      await send('POST', url, multipart('a', 'text/plain', Buffer.from('a')).payload, { 'content-type': multipart('a', 'text/plain', Buffer.from('a')).contentType }),
      401,
      'missing_credentials',
    );
    assertNotFound(t, await upload(key, url, 'a.txt', 'text/plain', Buffer.from('a')), `multipart ${url}`);
  }

  // The right brand, but the ids of another brand's ticket and attachment.
  const otherBrand = await makeBrand(owner.live, 'Second');
  const otherBase = `/v1/brands/${otherBrand.id}`;
  assertNotFound(t, await owner.live('GET', `${otherBase}/tickets/${ticket.id}/attachments`), "another brand's ticket");
  const otherTicket = await makeTicket(owner.live, otherBase);
  assertNotFound(t, await owner.live('GET', `${otherBase}/tickets/${otherTicket.id}/attachments/${att.id}`), "another brand's attachment");
  assertNotFound(t, await owner.live('DELETE', `${otherBase}/tickets/${otherTicket.id}/attachments/${att.id}`), 'delete through another brand');
  assertNotFound(t, await owner.live('POST', `${otherBase}/attachments/pending/${pending.id}/confirm`), 'confirm through another brand');
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${otherTicket.id}/attachments/${att.id}`), 'an attachment of another ticket');

  // A key limited to another brand.
  const limited = await owner.live('POST', '/v1/accounts/me/api-keys', { name: 'Second only', brandIds: [otherBrand.id] });
  const scoped = client(app, limited.body.key);
  assertNotFound(t, await scoped('GET', `${base}/tickets/${ticket.id}/attachments`), "outside the key's brand scope");

  t.equal((await owner.live('GET', one)).status, 200, 'still there for its owner');
  t.ok(brand.id);
});

t.test('deleting a ticket hides its attachments; deleting the brand removes their files', async (t) => {
  const { owner, brand, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const att = (await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'a.txt', 'text/plain', Buffer.from('a'))).body;
  await owner.live('DELETE', `${base}/tickets/${ticket.id}`);
  assertNotFound(t, await owner.live('GET', `${base}/tickets/${ticket.id}/attachments`), 'list of a deleted ticket');
  assertNotFound(t, await send('GET', pathOf(att.downloadUrl)), 'download');
  t.ok(await isStored(att.attachment.id), 'the file stays while the (soft-deleted) ticket does');

  t.equal((await owner.live('DELETE', `/v1/brands/${brand.id}?confirm=true`)).status, 200);
  t.ok(await isStored(att.attachment.id), 'the cascade queued the file');
  const tick = await new Dispatcher(servicesOf(db), quietLog, attachmentDeps(config, db, testNow)).tick();
  t.ok(tick.removedFiles >= 1);
  t.notOk(await isStored(att.attachment.id), 'the dispatcher removed it');
  t.same(await db('attachment_file_deletions').where({ attachmentId: att.attachment.id }), [], 'and its queue entry');
});

t.test('the dispatcher removes pending attachments never linked (24 h) and uploads never completed (grant lifetime)', async (t) => {
  const { owner, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const stale = (await upload(owner.liveKey, `${base}/attachments/pending/upload`, 'stale.txt', 'text/plain', Buffer.from('s'))).body;
  const fresh = (await upload(owner.liveKey, `${base}/attachments/pending/upload`, 'fresh.txt', 'text/plain', Buffer.from('f'))).body;
  const unfinished = (await owner.live('POST', `${base}/tickets/${ticket.id}/attachments`, { filename: 'u.txt', contentType: 'text/plain', size: 1 })).body;
  await put(unfinished.uploadUrl, 'u');
  const inTime = (await owner.live('POST', `${base}/tickets/${ticket.id}/attachments`, { filename: 'i.txt', contentType: 'text/plain', size: 1 })).body;
  const linkedOld = (await upload(owner.liveKey, `${base}/tickets/${ticket.id}/attachments/upload`, 'kept.txt', 'text/plain', Buffer.from('k'))).body.attachment;
  await db('attachments')
    .whereIn('id', [stale.id, linkedOld.id])
    .update({ createdAt: db.raw("now() - interval '25 hours'") });
  await db('attachments')
    .where({ id: unfinished.id })
    .update({ createdAt: db.raw("now() - interval '16 minutes'") });
  await db('attachments')
    .where({ id: inTime.id })
    .update({ createdAt: db.raw("now() - interval '14 minutes'") });

  const dispatcher = new Dispatcher(servicesOf(db), quietLog, attachmentDeps(config, db, testNow));
  const first = await dispatcher.tick();
  t.ok(first.abandonedAttachments >= 2, `removed ${first.abandonedAttachments}`);
  const left = (await db('attachments').whereIn('id', [stale.id, fresh.id, unfinished.id, inTime.id, linkedOld.id]).pluck('id')).sort();
  t.same(left, [fresh.id, inTime.id, linkedOld.id].sort(), 'the stale pending one and the unfinished upload went; the rest stayed');
  t.notOk(await isStored(stale.id), 'with its file');
  t.notOk(await isStored(unfinished.id), "the unfinished upload's bytes too");
  t.ok(await isStored(fresh.id));
  t.equal(await ticketCount(owner.live, base, ticket.id), 1, 'the count is untouched');
  t.same(
    (await auditEvents(stale.id)).map((e) => e.event),
    ['attachment.created', 'attachment.deleted'],
    'an uploaded one leaves a deleted entry',
  );
  t.equal((await dispatcher.tick()).abandonedAttachments, 0, 'a second tick has nothing to do');
});

t.test('links are built on publicUrl when it is configured', async (t) => {
  const { owner, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const withPublic = await buildApp({
    clock: testNow,
    config: { ...config, publicUrl: 'https://help.example.com/tickets/' },
    db,
    attachments: { ...attachmentDeps(config, db, testNow), publicUrl: 'https://help.example.com/tickets/' },
  });
  t.teardown(() => withPublic.close());
  const res = await client(withPublic, owner.liveKey)('POST', `${base}/tickets/${ticket.id}/attachments`, { filename: 'a.txt', contentType: 'text/plain', size: 1 });
  t.match(res.body.uploadUrl, /^https:\/\/help\.example\.com\/tickets\/v1\/uploads\//);
  const proxied = await app.inject({
    method: 'POST',
    url: `${base}/tickets/${ticket.id}/attachments`,
    payload: { filename: 'a.txt', contentType: 'text/plain', size: 1 },
    headers: { authorization: `Bearer ${owner.liveKey}`, host: 'support.example.org:8443' },
  });
  t.match(proxied.json().uploadUrl, /^http:\/\/support\.example\.org:8443\/v1\/uploads\//, 'else the request host');
});

t.test('OpenAPI lists the attachment routes', async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body;
  for (const [route, method] of [
    ['/v1/brands/{brandId}/tickets/{ticketId}/attachments', 'post'],
    ['/v1/brands/{brandId}/tickets/{ticketId}/attachments', 'get'],
    ['/v1/brands/{brandId}/tickets/{ticketId}/attachments/upload', 'post'],
    ['/v1/brands/{brandId}/tickets/{ticketId}/attachments/{attachmentId}', 'get'],
    ['/v1/brands/{brandId}/tickets/{ticketId}/attachments/{attachmentId}', 'delete'],
    ['/v1/brands/{brandId}/tickets/{ticketId}/attachments/{attachmentId}/confirm', 'post'],
    ['/v1/workspaces/{brandId}/tickets/{ticketId}/attachments', 'post'],
    ['/v1/brands/{brandId}/attachments/pending', 'post'],
    ['/v1/brands/{brandId}/attachments/pending/upload', 'post'],
    ['/v1/brands/{brandId}/attachments/pending/{attachmentId}/confirm', 'post'],
    ['/v1/brands/{brandId}/attachments/urls', 'post'],
    ['/v1/uploads/{token}', 'put'],
    ['/v1/files/{token}', 'get'],
  ] as const) {
    t.ok(doc.paths[route]?.[method], `${method.toUpperCase()} ${route}`);
  }
  t.ok(doc.paths['/v1/brands/{brandId}/tickets/{ticketId}/attachments'].post.security, 'brand routes need a key');
  t.notOk(doc.paths['/v1/uploads/{token}'].put.security, 'the signed URL needs none');
});

t.test('over a real socket: fetch PUTs to the absolute uploadUrl; too many bytes get a clean 413, not a reset', async (t) => {
  const { owner, base } = await setup();
  const ticket = await makeTicket(owner.live, base);
  const server = await buildApp({ clock: testNow, config, db });
  t.teardown(async () => {
    // fetch may keep a connection the server counts as busy (an upload refused before its body was
    // read): closing only idle ones waited for the keep-alive timeout, 72 s, in about half the runs.
    const closed = server.close();
    server.server.closeAllConnections();
    await closed;
  });
  await server.listen({ host: '127.0.0.1', port: 0 });
  const origin = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
  const declare = async (size: number) =>
    (await (
      await fetch(`${origin}${base}/tickets/${ticket.id}/attachments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${owner.liveKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ filename: 'r.bin', contentType: 'application/octet-stream', size }),
      })
    ).json()) as { id: string; uploadUrl: string };

  const g = await declare(600);
  t.ok(g.uploadUrl.startsWith(`${origin}/v1/uploads/`), 'the URL names the host the client used');
  const ok = await fetch(g.uploadUrl, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: Buffer.alloc(600, 9) });
  t.equal(ok.status, 200);
  t.equal(((await ok.json()) as { sha256: string }).sha256, sha256(Buffer.alloc(600, 9)));

  const big = await declare(MAX);
  const tooBig = await fetch(big.uploadUrl, { method: 'PUT', body: Buffer.alloc(MAX * 64, 1) });
  t.equal(tooBig.status, 413, 'Content-Length over the limit: refused before reading');
  const streamed = await fetch(big.uploadUrl, { method: 'PUT', body: Readable.toWeb(Readable.from([Buffer.alloc(MAX * 64, 1)])) as ReadableStream, duplex: 'half' } as RequestInit);
  t.equal(streamed.status, 400, 'chunked and longer than declared: cut off and refused');
  t.equal(((await streamed.json()) as { code: string }).code, 'size_mismatch');
  const form = new FormData();
  form.append('file', new Blob([Buffer.alloc(MAX * 64, 1)], { type: 'application/octet-stream' }), 'huge.bin');
  const multi = await fetch(`${origin}${base}/tickets/${ticket.id}/attachments/upload`, { method: 'POST', headers: { authorization: `Bearer ${owner.liveKey}` }, body: form });
  t.equal(multi.status, 413, 'multipart over the limit');
  const small = new FormData();
  small.append('file', new Blob(['tiny'], { type: 'text/plain' }), 'tiny.txt');
  const fine = await fetch(`${origin}${base}/tickets/${ticket.id}/attachments/upload`, { method: 'POST', headers: { authorization: `Bearer ${owner.liveKey}` }, body: small });
  t.equal(fine.status, 201, 'the same connection pool still works');
  const dl = await fetch(((await fine.json()) as { downloadUrl: string }).downloadUrl);
  t.equal(await dl.text(), 'tiny');
});

t.test('browsers may PUT and GET the signed URLs cross-origin; logs never carry their tokens', async (t) => {
  const preflight = await app.inject({
    method: 'OPTIONS',
    url: '/v1/uploads/v1.x',
    headers: { origin: 'https://app.example.com', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'content-type' },
  });
  t.equal(preflight.statusCode, 204);
  t.match(preflight.headers['access-control-allow-methods'], /PUT/);
  t.match(preflight.headers['access-control-allow-headers'], /Content-Type/i);
  t.equal(withoutGrantTokens('/v1/uploads/v1.att_1.acct_1.l.u.123.sig?x=1'), '/v1/uploads/<token>?x=1');
  t.equal(withoutGrantTokens('/v1/files/v1.att_1.acct_1.l.d.123.sig'), '/v1/files/<token>');
  t.equal(withoutGrantTokens('/v1/brands/br_1/tickets'), '/v1/brands/br_1/tickets');
});
