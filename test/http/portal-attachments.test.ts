import t from 'tap';
import { assertErrorShape, client, makeBrand, makeTicket, mustCreate, signup, testApp } from '../helpers/app.js';
import { MULTIPART } from '../helpers/world.js';

// POST /v1/portal/tickets/attachments/pending and …/pending/{id}/confirm (before the ticket
// exists), POST/GET /v1/portal/tickets/{ticketId}/attachments, POST …/{attachmentId}/confirm and
// GET …/{attachmentId}: a customer's uploads, in the three steps the dashboard's support page takes.

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_ATTACHMENT_MAX_BYTES: '1000' });
const owner = await signup(app);
const brand = await makeBrand(owner.live, 'Acme');
const base = `/v1/brands/${brand.id}`;

async function customer(email: string) {
  const minted = await mustCreate(owner.live, `${base}/portal/token`, { email });
  return { id: minted.customerId as string, call: client(app, minted.token as string) };
}
const ada = await customer('ada@example.com');
const bob = await customer('bob@example.com');

/** Step 2 as a browser does it: PUT the bytes to the signed URL, no Authorization. */
async function put(uploadUrl: string, bytes: string, type = 'text/plain') {
  const res = await app.inject({ method: 'PUT', url: new URL(uploadUrl).pathname, headers: { 'content-type': type }, payload: bytes });
  return res.statusCode;
}

const file = (name = 'notes.txt', size = 5, contentType = 'text/plain') => ({ filename: name, contentType, size });

t.test('before the ticket exists: declare, PUT, confirm, then open the ticket with it', async (t) => {
  const grant = await ada.call('POST', '/v1/portal/tickets/attachments/pending', file());
  t.equal(grant.status, 201);
  t.match(grant.body, {
    attachment: { id: /^att_/, filename: 'notes.txt', contentType: 'text/plain', size: 5, status: 'PENDING', ticketId: null },
    uploadUrl: /\/v1\/uploads\//,
    expiresAt: /Z$/,
  });
  const id = grant.body.attachment.id as string;
  assertErrorShape(t, await ada.call('POST', `/v1/portal/tickets/attachments/pending/${id}/confirm`), 400, 'upload_incomplete');
  t.equal(await put(grant.body.uploadUrl, 'hello'), 200);
  assertErrorShape(t, await bob.call('POST', `/v1/portal/tickets/attachments/pending/${id}/confirm`), 404, 'not_found');
  t.comment("Bob cannot confirm Ada's upload");
  const confirmed = await ada.call('POST', `/v1/portal/tickets/attachments/pending/${id}/confirm`);
  t.equal(confirmed.status, 200);
  t.match(confirmed.body, { id, status: 'UPLOADED' });

  const stolen = await bob.call('POST', '/v1/portal/tickets', { title: 'With a stolen file', attachmentIds: [id] });
  assertErrorShape(t, stolen, 400, 'invalid_attachments');
  t.equal(Number((await db('tickets').where({ brandId: brand.id }).count({ n: '*' }))[0]!.n), 0, "Bob's ticket was not created");

  const created = await ada.call('POST', '/v1/portal/tickets', { title: 'Logs attached', attachmentIds: [id] }, { 'x-idempotency-key': 'with-file' });
  t.equal(created.status, 201);
  t.equal(created.body.attachmentCount, 1, 'the file is on the new ticket');
  const listed = await ada.call('GET', `/v1/portal/tickets/${created.body.id}/attachments`);
  t.same(
    listed.body.map((a: { id: string; status: string }) => [a.id, a.status]),
    [[id, 'UPLOADED']],
  );
  const again = await ada.call('POST', '/v1/portal/tickets', { title: 'Logs attached', attachmentIds: [id] }, { 'x-idempotency-key': 'with-file' });
  t.equal(again.status, 200, 'a replay with the now linked file answers the first ticket');
  t.equal(again.body.id, created.body.id);
  assertErrorShape(t, await ada.call('POST', '/v1/portal/tickets', { title: 'Twice', attachmentIds: [id] }), 400, 'invalid_attachments');
  t.comment('a file goes on one ticket only');
});

t.test('on an own ticket: declare, PUT, confirm, list, get with a signed download URL', async (t) => {
  const ticket = await makeTicket(owner.live, base, { title: 'Broken', customerEmail: 'ada@example.com' });
  const grant = await ada.call('POST', `/v1/portal/tickets/${ticket.id}/attachments`, file('screen.png', 4, 'image/png'));
  t.equal(grant.status, 201);
  const id = grant.body.attachment.id as string;
  t.equal(await put(grant.body.uploadUrl, 'PNG!', 'image/png'), 200);
  assertErrorShape(t, await bob.call('POST', `/v1/portal/tickets/${ticket.id}/attachments/${id}/confirm`), 404, 'not_found');
  const confirmed = await ada.call('POST', `/v1/portal/tickets/${ticket.id}/attachments/${id}/confirm`);
  t.equal(confirmed.status, 200);
  t.equal(confirmed.body.status, 'UPLOADED');
  t.equal((await owner.live('GET', `${base}/tickets/${ticket.id}`)).body.attachmentCount, 1, 'counted on the ticket');
  const audit = (await owner.live('GET', `${base}/logs?event=attachment.created&entityId=${id}`)).body.data;
  t.match(audit, [{ performerType: 'customer', performedBy: { id: ada.id } }]);

  const one = await ada.call('GET', `/v1/portal/tickets/${ticket.id}/attachments/${id}`);
  t.equal(one.status, 200);
  t.match(one.body, { attachment: { id, filename: 'screen.png' }, downloadUrl: /\/v1\/files\//, expiresAt: /Z$/ });
  const download = await app.inject({ method: 'GET', url: new URL(one.body.downloadUrl).pathname });
  t.equal(download.statusCode, 200);
  t.equal(download.body, 'PNG!', 'the signed URL serves the bytes');
  assertErrorShape(t, await bob.call('GET', `/v1/portal/tickets/${ticket.id}/attachments/${id}`), 404, 'not_found');
});

t.test("the team's files on internal notes stay hidden", async (t) => {
  const ticket = await makeTicket(owner.live, base, { title: 'With notes', customerEmail: 'ada@example.com' });
  const note = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'internal', metadata: { isInternal: true } });
  const reply = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/comments`, { body: 'public' });
  const onNote = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/attachments`, { ...file('secret.txt', 3), commentId: note.id });
  const onReply = await mustCreate(owner.live, `${base}/tickets/${ticket.id}/attachments`, { ...file('answer.txt', 3), commentId: reply.id });
  const loose = (await mustCreate(owner.live, `${base}/tickets/${ticket.id}/attachments/upload`, MULTIPART.body, MULTIPART.headers)).attachment;
  const listed = (await ada.call('GET', `/v1/portal/tickets/${ticket.id}/attachments`)).body.map((a: { id: string }) => a.id);
  t.same(listed, [onReply.id, loose.id], "the public reply's file and the ticket's own; not the internal note's");
  assertErrorShape(t, await ada.call('GET', `/v1/portal/tickets/${ticket.id}/attachments/${onNote.id}`), 404, 'not_found');
  t.equal((await ada.call('GET', `/v1/portal/tickets/${ticket.id}/attachments/${loose.id}`)).status, 200);
});

t.test('oversized and wrong-type uploads: a clear 4xx, and nothing is declared', async (t) => {
  const ticket = await makeTicket(owner.live, base, { title: 'Refusals', customerEmail: 'ada@example.com' });
  const count = async () => Number((await db('attachments').count({ n: '*' }))[0]!.n);
  const before = await count();
  for (const url of ['/v1/portal/tickets/attachments/pending', `/v1/portal/tickets/${ticket.id}/attachments`]) {
    assertErrorShape(t, await ada.call('POST', url, file('big.zip', 1001, 'application/zip')), 413, 'attachment_too_large');
    for (const type of ['text/html', 'image/svg+xml', 'application/javascript', 'application/x-msdownload']) {
      assertErrorShape(t, await ada.call('POST', url, file('page', 10, type)), 400, 'unsupported_content_type');
    }
    assertErrorShape(t, await ada.call('POST', url, file('x.txt', -1)), 400, 'validation_failed');
    assertErrorShape(t, await ada.call('POST', url, { ...file(), commentId: 'cmt_1' }), 400, 'validation_failed');
    const nul = await ada.call('POST', url, file('notes\u0000.txt', 3));
    t.equal(nul.status, 400, `a NUL in the filename: 400 ${nul.body.code}`);
  }
  t.equal(await count(), before, 'no attachment row was made');

  const grant = await ada.call('POST', `/v1/portal/tickets/${ticket.id}/attachments`, file('short.txt', 5));
  t.equal(await put(grant.body.uploadUrl, 'abc'), 400, 'fewer bytes than declared are refused');
  assertErrorShape(t, await ada.call('POST', `/v1/portal/tickets/${ticket.id}/attachments/${grant.body.attachment.id}/confirm`), 400, 'upload_incomplete');
  t.equal((await owner.live('GET', `${base}/tickets/${ticket.id}`)).body.attachmentCount, 0);
});
