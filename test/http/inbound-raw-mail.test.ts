import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { systemCtx } from '../../server/core/context.js';
import * as rawMails from '../../server/domains/raw-mails/service.js';
import { storageFromConfig } from '../../server/integrations/storage-from-config.js';
import { client, makeBrand, servicesOf, signup, testApp } from '../helpers/app.js';
import { postInbound } from '../helpers/inbound.js';
import { sessionToken } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

/** The raw bytes of inbound messages: kept with the ticket, read by its readers, purged after rawMailRetentionDays. */

const SECRET = 'inbound-secret-for-tests-0123456789';
const DOMAIN = 'inbound.test.example';
const DAY_MS = 86_400_000;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-rawmail-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db, config } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000',
  TICKETD_INBOUND_SECRET: SECRET,
  TICKETD_INBOUND_DOMAIN: DOMAIN,
  TICKETD_DATA_DIR: dataDir,
});
const storage = storageFromConfig(config);

const message = (brandId: string, id: string, extra = '') =>
  `From: Jane <jane@customer.example>\r\nTo: ${brandId}@${DOMAIN}\r\nSubject: Printer\r\nMessage-ID: <${id}@customer.example>\r\n${extra}X-Odd-Header: kept as sent\r\n\r\nHello \u00e9\r\n`;

const deliver = (raw: string) => postInbound(app, SECRET, raw);

/** A new account with a brand, and its owner signed in (usage is a session route). */
async function ownerWithBrand() {
  const email = `raw-${Math.random().toString(36).slice(2)}@example.com`;
  const owner = await signup(app, email);
  const brand = await makeBrand(owner.live);
  const session = client(app, await sessionToken(app, servicesOf(db), owner.accountId, email));
  return { owner, brand, base: `/v1/brands/${brand.id}`, session };
}

t.test("a ticket's messages are kept byte for byte: the one that opened it and each reply", async (t) => {
  const { owner, base, brand, session } = await ownerWithBrand();
  t.equal((await session('GET', '/v1/auth/usage')).body.storageBytes, 0);
  const first = message(brand.id, 'raw-1');
  const created = await deliver(first);
  const reply = await deliver(message(brand.id, 'raw-2', 'In-Reply-To: <raw-1@customer.example>\r\n'));
  t.equal(reply.action, 'comment_created');

  const list = (await owner.live('GET', `${base}/tickets/${created.ticketId}/raw-mails`)).body;
  t.match(list, [
    { ticketId: created.ticketId, commentId: null, messageId: '<raw-1@customer.example>', size: Buffer.byteLength(first, 'latin1') },
    { commentId: reply.commentId, messageId: '<raw-2@customer.example>' },
  ]);
  t.equal(new Date(list[0].expiresAt).getTime() - new Date(list[0].createdAt).getTime(), 30 * DAY_MS, 'kept 30 days by default');
  t.equal((await session('GET', '/v1/auth/usage')).body.storageBytes, list[0].size + list[1].size, "the raw mails count in the account's storage");

  const download = await app.inject({ method: 'GET', url: `${base}/tickets/${created.ticketId}/raw-mails/${list[0].id}`, headers: { authorization: `Bearer ${owner.liveKey}` } });
  t.equal(download.statusCode, 200);
  t.equal(download.headers['content-type'], 'message/rfc822');
  t.match(download.headers['content-disposition'], /^attachment/);
  t.same(download.rawPayload, Buffer.from(first, 'latin1'), 'exactly what arrived');

  const elsewhere = await ownerWithBrand();
  t.equal((await elsewhere.owner.live('GET', `${elsewhere.base}/tickets/${created.ticketId}/raw-mails`)).status, 404, "another account's ticket is not found");
  t.equal((await elsewhere.session('GET', '/v1/auth/usage')).body.storageBytes, 0, "another account's storage counts none of it");
  t.equal((await owner.live('GET', `${base}/tickets/${created.ticketId}/raw-mails/raw_0000000000000000000000000000`)).status, 404);
});

t.test('past rawMailRetentionDays the dispatcher deletes them, and their files', async (t) => {
  const { owner, base, brand } = await ownerWithBrand();
  const { ticketId } = await deliver(message(brand.id, 'raw-old'));
  const [kept] = (await owner.live('GET', `${base}/tickets/${ticketId}/raw-mails`)).body;
  t.ok(await storage.exists(kept.id), 'the bytes are in storage');
  const base0 = systemCtx(servicesOf(db), 'test');
  t.equal(await rawMails.purgeExpired(base0, 30, testNow() + 29 * DAY_MS), 0, 'not yet');
  t.ok((await rawMails.purgeExpired(base0, 30, testNow() + 31 * DAY_MS)) >= 1);
  t.same((await owner.live('GET', `${base}/tickets/${ticketId}/raw-mails`)).body, []);
  t.same(await db('attachmentFileDeletions').where({ attachmentId: kept.id }).select('attachmentId'), [{ attachmentId: kept.id }], 'its file is queued for removal');
});

t.test("a brand's deletion takes its raw mails and queues their files", async (t) => {
  const { owner, base, brand } = await ownerWithBrand();
  const { ticketId } = await deliver(message(brand.id, 'raw-brand-gone'));
  const [kept] = (await owner.live('GET', `${base}/tickets/${ticketId}/raw-mails`)).body;
  t.equal((await owner.live('DELETE', `${base}?confirm=true`)).status, 200);
  t.same(await db('rawMails').where({ id: kept.id }).select('id'), [], 'the row went with the brand');
  t.same(await db('attachmentFileDeletions').where({ attachmentId: kept.id }).select('attachmentId'), [{ attachmentId: kept.id }], 'its file is queued for removal');
});

t.test('rawMailRetentionDays 0: nothing is staged or kept', async (t) => {
  t.equal(await rawMails.stage(storage, 0, Buffer.from('From: a@b.example\r\n\r\nx')), null);
});
