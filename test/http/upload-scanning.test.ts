import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildApp } from '../../server/app.js';
import { createServices } from '../../server/compose.js';
import { RETRY_AFTER_SECONDS } from '../../server/core/http.js';
import { freePort } from '../../server/integrations/embedded-postgres.js';
import { s3StagingDir } from '../../server/integrations/s3-storage.js';
import { localStorageRoot } from '../../server/integrations/storage.js';
import { assertErrorShape, client, makeTicket, mustCreate, ownerWithBrand, servicesOf, testApp, testConfig, type Reply } from '../helpers/app.js';
import { EICAR, EICAR_SIGNATURE, noClamd, startClamd } from '../helpers/clamd.js';
import { testNow } from '../helpers/clock.js';
import { imapConnection, imapServer } from '../helpers/imap.js';
import { SIGN_IN_TEST_ENV, teamOfThree } from '../helpers/sign-in.js';

/**
 * Uploads through a virus scanner (clamd): every way a file comes in (a multipart upload, the PUT
 * of a three-step upload, an avatar, an inbound message's attachments) is scanned before it is
 * kept. An infected file is refused with 422 attachment_infected naming the signature and nothing
 * of it is kept; a scanner that is down is a 503 with Retry-After, or, when the operator allows,
 * the file is kept as unscanned. The scanner-down half runs everywhere; the infected half needs a
 * real clamd (Debian's clamav-daemon) and is skipped, saying so, where it is not installed.
 */

const SECRET = 'inbound-secret-for-tests-0123456789';
const DOMAIN = 'inbound.test.example';
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-scanning-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = {
  ...SIGN_IN_TEST_ENV,
  TICKETD_DATA_DIR: dataDir,
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  // A mailbox on loopback (hoodiecrow-imap in this process).
  TICKETD_WEBHOOK_ALLOW_PRIVATE: 'true',
  TICKETD_MAILBOX_TIMEOUT_MS: '3000',
};
const nobody = String(await freePort());
// The file's own database, served first by an app whose clamd is not there (scanFailure: refuse, the default).
const down = await testApp(t, { ...env, TICKETD_CLAMD_HOST: '127.0.0.1', TICKETD_CLAMD_PORT: nobody });
const { db } = down;
const storage = servicesOf(db).storage;

/** Another app on the same database, configured otherwise (another API process would be). */
async function appWith(extra: Record<string, string>) {
  const config = testConfig({ DATABASE_URL: down.url, ...env, ...extra });
  const services = createServices({ config, db, clock: testNow });
  const app = await buildApp({ config, db, services });
  t.teardown(async () => {
    await app.close();
    await services.close();
  });
  return { app, services };
}

const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

function multipart(filename: string, type: string, bytes: Buffer): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----ticketd${Math.random().toString(16).slice(2)}`;
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`),
    bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

type App = Awaited<ReturnType<typeof appWith>>['app'];
type Call = ReturnType<typeof client>;

/** An account with a brand and a ticket, its owner's client on `app`. */
async function ticketOn(app: App) {
  const { owner, base } = await ownerWithBrand(app);
  const ticket = await makeTicket(owner.live, base);
  return { call: owner.live, base, ticket, url: `${base}/tickets/${ticket.id}/attachments` };
}

const uploadTo = (call: Call, url: string, filename: string, bytes: Buffer, type = 'text/plain') => {
  const form = multipart(filename, type, bytes);
  return call('POST', `${url}/upload`, form.payload, form.headers);
};

/** Step 1 and 2 of a three-step upload: the declared attachment, and the PUT of `bytes` to its URL. */
async function putUpload(app: App, call: Call, url: string, bytes: Buffer) {
  const grant = (await call('POST', url, { filename: 'notes.txt', contentType: 'text/plain', size: bytes.length })).body;
  const res = await client(app)('PUT', new URL(grant.uploadUrl).pathname, bytes, { 'content-type': 'application/octet-stream' });
  return { id: grant.attachmentId as string, res };
}

const rowsOf = (ticketId: string) => db('attachments').where({ ticketId }).orderBy('id');
/** Nothing left in staging: what was refused was thrown away. */
const staging = down.config.storage.kind === 's3' ? s3StagingDir(dataDir) : path.join(localStorageRoot(dataDir), '.staging');
const staged = () => (existsSync(staging) ? readdirSync(staging) : []);

function inboundMessage(brandId: string, files: { name: string; bytes: Buffer }[]): string {
  const boundary = 'b-' + Math.random().toString(16).slice(2);
  return [
    'From: Jane Customer <jane@customer.example>',
    `To: ${brandId}@${DOMAIN}`,
    'Subject: Files for you',
    `Message-ID: <scan-${Math.random().toString(16).slice(2)}@customer.example>`,
    'MIME-Version: 1.0',
    `Content-Type: multipart/mixed; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Two files attached.',
    ...files.flatMap((f) => [
      `--${boundary}`,
      `Content-Type: application/octet-stream; name="${f.name}"`,
      `Content-Disposition: attachment; filename="${f.name}"`,
      'Content-Transfer-Encoding: base64',
      '',
      f.bytes.toString('base64'),
    ]),
    `--${boundary}--`,
    '',
  ].join('\r\n');
}

async function deliver(app: App, raw: string) {
  const res = await app.inject({ method: 'POST', url: '/v1/inbound/email', payload: raw, headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'message/rfc822' } });
  return { status: res.statusCode, body: JSON.parse(res.body), headers: res.headers };
}

function assertUnavailable(t: Test, res: Reply) {
  assertErrorShape(t, res, 503, 'scanner_unavailable');
  t.equal(res.headers['retry-after'], String(RETRY_AFTER_SECONDS), 'Retry-After');
}

t.test('scanner down, scanFailure refuse: every way in answers 503 with Retry-After, and nothing is kept', async (t) => {
  const { app } = down;
  const { call, url, ticket, base } = await ticketOn(app);
  assertUnavailable(t, await uploadTo(call, url, 'a.txt', Buffer.from('hello')));
  t.same(await rowsOf(ticket.id), [], 'no attachment row');

  const { id, res } = await putUpload(app, call, url, Buffer.from('hello'));
  assertUnavailable(t, res);
  t.match(await db('attachments').where({ id }).first(), { status: 'PENDING', sha256: null, scanStatus: 'not_scanned' }, 'the declared attachment waits for its bytes');
  t.notOk(await storage.exists(id), 'no file under its id');
  assertErrorShape(t, await call('POST', `${url}/${id}/confirm`), 400, 'upload_incomplete');

  const team = await teamOfThree(app, servicesOf(db));
  const avatar = multipart('me.png', 'image/png', PNG);
  assertUnavailable(t, await team.asMember('POST', '/v1/auth/profile/avatar/upload', avatar.payload, avatar.headers));
  t.equal((await team.asMember('GET', '/v1/auth/profile')).body.avatarUrl, null, 'no avatar');

  const brandId = base.split('/').pop()!;
  const before = await db('tickets').where({ brandId }).count<{ count: string }[]>({ count: '*' });
  assertUnavailable(t, await deliver(app, inboundMessage(brandId, [{ name: 'a.txt', bytes: Buffer.from('hello') }])));
  t.same(await db('tickets').where({ brandId }).count<{ count: string }[]>({ count: '*' }), before, 'the message is not taken in: its sender retries it');
  t.same(staged(), [], 'staging is empty');
});

t.test('scanner down, scanFailure allow: the file is kept, marked unscanned', async (t) => {
  const { app } = await appWith({ TICKETD_CLAMD_HOST: '127.0.0.1', TICKETD_CLAMD_PORT: nobody, TICKETD_SCAN_FAILURE: 'allow' });
  const { call, url, ticket } = await ticketOn(app);
  const res = await uploadTo(call, url, 'a.txt', Buffer.from('hello'));
  t.equal(res.status, 201);
  t.equal(res.body.attachment.scanStatus, 'unscanned');
  const { id, res: put } = await putUpload(app, call, url, Buffer.from('hello'));
  t.equal(put.status, 200);
  t.match((await call('POST', `${url}/${id}/confirm`)).body, { status: 'UPLOADED', scanStatus: 'unscanned' });
  t.same(
    (await call('GET', url)).body.map((a: { scanStatus: string }) => a.scanStatus),
    ['unscanned', 'unscanned'],
  );
  t.equal((await rowsOf(ticket.id)).length, 2);
});

t.test('a mailbox while the scanner is down: under refuse the message waits unread, then goes in unscanned where files may pass', async (t) => {
  const { owner, base } = await ownerWithBrand(down.app);
  const raw = inboundMessage('desk', [{ name: 'order.txt', bytes: Buffer.from('order 1234') }]).replace(`To: desk@${DOMAIN}`, 'To: desk@acme.example');
  const { port, inbox } = await imapServer(t, [raw]);
  const connection = await mustCreate(owner.live, `${base}/email-connections`, imapConnection(port));
  const url = `${base}/email-connections/${connection.id}`;
  const refused = await owner.live('POST', `${url}/sync`);
  t.same(refused.body, { ticketsCreated: 0 });
  t.same(
    inbox().map((m) => m.flags.includes('\\Seen')),
    [false],
    'left unread',
  );
  t.match((await owner.live('GET', url)).body, { status: 'ERROR', errorMessage: /virus scanner/ }, 'the connection says why, and is retried');

  const { app: allowing } = await appWith({ TICKETD_CLAMD_HOST: '127.0.0.1', TICKETD_CLAMD_PORT: nobody, TICKETD_SCAN_FAILURE: 'allow' });
  const taken = await client(allowing, owner.liveKey)('POST', `${url}/sync`);
  t.same(taken.body, { ticketsCreated: 1 });
  const [ticket] = (await owner.live('GET', `${base}/tickets`)).body.data;
  t.match((await owner.live('GET', `${base}/tickets/${ticket.id}/attachments`)).body, [{ filename: 'order.txt', scanStatus: 'unscanned' }]);
});

t.test('with a real clamd', { skip: noClamd() }, async (t) => {
  const clamd = await startClamd(t);
  const { app, services } = await appWith({ TICKETD_CLAMD_SOCKET: clamd.socket });
  const infectedFile = Buffer.from(`Dear support,\n${EICAR}\n`);

  t.test('a multipart upload: clean is kept as clean; EICAR is a 422 naming the signature, and nothing of it is kept', async (t) => {
    const { call, url, ticket, base } = await ticketOn(app);
    const clean = await uploadTo(call, url, 'letter.txt', Buffer.from('Dear support,\n'));
    t.equal(clean.status, 201);
    t.equal(clean.body.attachment.scanStatus, 'clean');
    t.ok(await services.storage.exists(clean.body.attachment.id));

    const res = await uploadTo(call, url, 'letter.txt', infectedFile);
    assertErrorShape(t, res, 422, 'attachment_infected');
    t.equal(res.body.signature, EICAR_SIGNATURE);
    t.match(res.body.message, EICAR_SIGNATURE);
    t.same(
      (await rowsOf(ticket.id)).map((r) => r.id),
      [clean.body.attachment.id],
      'no row for it',
    );
    t.equal((await call('GET', `${base}/tickets/${ticket.id}`)).body.attachmentCount, 1);
    t.same(staged(), [], 'nothing left in staging');
  });

  t.test('a three-step upload: the PUT of EICAR is refused; the attachment stays PENDING without bytes', async (t) => {
    const { call, url } = await ticketOn(app);
    const { id, res } = await putUpload(app, call, url, infectedFile);
    assertErrorShape(t, res, 422, 'attachment_infected');
    t.equal(res.body.signature, EICAR_SIGNATURE);
    t.match(await db('attachments').where({ id }).first(), { status: 'PENDING', sha256: null });
    t.notOk(await services.storage.exists(id), 'no file under its id');
    assertErrorShape(t, await call('POST', `${url}/${id}/confirm`), 400, 'upload_incomplete');

    const again = await putUpload(app, call, url, Buffer.from('clean this time'));
    t.equal(again.res.status, 200);
    t.match((await call('POST', `${url}/${again.id}/confirm`)).body, { status: 'UPLOADED', scanStatus: 'clean' });
  });

  t.test('an avatar with EICAR in it is refused, whichever way it comes', async (t) => {
    const team = await teamOfThree(app, services);
    const image = Buffer.concat([PNG, Buffer.from(EICAR)]);
    const form = multipart('me.png', 'image/png', image);
    const res = await team.asMember('POST', '/v1/auth/profile/avatar/upload', form.payload, form.headers);
    assertErrorShape(t, res, 422, 'attachment_infected');
    t.equal(res.body.signature, EICAR_SIGNATURE);
    t.equal((await team.asMember('GET', '/v1/auth/profile')).body.avatarUrl, null, 'no avatar');

    const grant = (await team.asMember('POST', '/v1/auth/profile/avatar', { filename: 'me.png', contentType: 'image/png', size: image.length })).body;
    const put = await client(app)('PUT', new URL(grant.uploadUrl).pathname, image, { 'content-type': 'image/png' });
    assertErrorShape(t, put, 422, 'attachment_infected');
    t.notOk(await services.storage.exists(grant.storageKey), 'its bytes are not kept');

    const clean = multipart('me.png', 'image/png', PNG);
    t.equal((await team.asMember('POST', '/v1/auth/profile/avatar/upload', clean.payload, clean.headers)).status, 200, 'a clean avatar passes');
  });

  t.test('inbound mail: the infected attachment is kept out of the ticket, and an internal note says so', async (t) => {
    const { owner, brand, base } = await ownerWithBrand(app);
    const res = await deliver(
      app,
      inboundMessage(brand.id, [
        { name: 'order.txt', bytes: Buffer.from('order 1234') },
        { name: 'invoice.com', bytes: Buffer.from(EICAR) },
      ]),
    );
    t.equal(res.status, 200);
    t.equal(res.body.action, 'ticket_created');
    const ticketId = res.body.ticketId;
    const files = (await owner.live('GET', `${base}/tickets/${ticketId}/attachments`)).body;
    t.same(
      files.map((f: { filename: string; scanStatus: string }) => [f.filename, f.scanStatus]),
      [['order.txt', 'clean']],
      'only the clean file',
    );
    const ticket = (await owner.live('GET', `${base}/tickets/${ticketId}`)).body;
    t.equal(ticket.attachmentCount, 1);
    t.same(ticket.metadata.email.infectedAttachments, [{ filename: 'invoice.com', size: EICAR.length, signature: EICAR_SIGNATURE }]);
    const notes = await db('comments').where({ ticketId, isInternal: true });
    t.equal(notes.length, 1, 'one internal note');
    t.match(notes[0].body, /invoice\.com .*Eicar-Test-Signature/);
    t.equal(notes[0].authorType, 'SYSTEM');

    // A reply with only an infected file: the comment is there, its file is not, and the note says so.
    const reply = inboundMessage(brand.id, [{ name: 'again.com', bytes: Buffer.from(EICAR) }]).replace(
      'Subject: Files for you',
      `Subject: Re: Files for you\r\nIn-Reply-To: ${ticket.sourceId}`,
    );
    const replied = await deliver(app, reply);
    t.match(replied.body, { action: 'comment_created', ticketId });
    t.equal((await owner.live('GET', `${base}/tickets/${ticketId}`)).body.attachmentCount, 1);
    t.equal((await db('comments').where({ ticketId, isInternal: true })).length, 2);
  });

  t.test('a web form with EICAR among its files is refused whole: no ticket', async (t) => {
    const { owner, brand, base } = await ownerWithBrand(app);
    const form = (await owner.live('POST', `${base}/forms`, { name: 'Contact us' })).body;
    const boundary = 'scan-form-boundary';
    const fields = { email: 'casey@example.com', subject: 'My order', message: 'Receipt attached.' };
    const body = [
      ...Object.entries(fields).map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`),
      `--${boundary}\r\nContent-Disposition: form-data; name="attachments"; filename="receipt.com"\r\nContent-Type: application/octet-stream\r\n\r\n${EICAR}\r\n`,
      `--${boundary}--\r\n`,
    ].join('');
    const res = await client(app)('POST', `/v1/forms/${form.token}`, body, { 'content-type': `multipart/form-data; boundary=${boundary}`, accept: 'application/json' });
    assertErrorShape(t, res, 422, 'attachment_infected');
    t.equal(res.body.signature, EICAR_SIGNATURE);
    t.same(await db('tickets').where({ brandId: brand.id }), [], 'no ticket');
  });

  t.test('clamd stalled past timeoutMs counts as down: 503 under refuse', async (t) => {
    const { app: hasty } = await appWith({ TICKETD_CLAMD_HOST: clamd.host, TICKETD_CLAMD_PORT: String(clamd.port), TICKETD_CLAMD_TIMEOUT_MS: '300' });
    const { call, url, ticket } = await ticketOn(hasty);
    clamd.pause();
    try {
      assertUnavailable(t, await uploadTo(call, url, 'a.txt', Buffer.from('hello')));
    } finally {
      clamd.resume();
    }
    t.same(await rowsOf(ticket.id), []);
    t.equal((await uploadTo(call, url, 'a.txt', Buffer.from('hello'))).body.attachment.scanStatus, 'clean', 'answering again');
  });
});
