import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { attachmentDeps } from '../../server/domains/attachments/service.js';
import * as members from '../../server/domains/members/service.js';
import { assertErrorShape, client, makeTicket, servicesOf, testApp, type Reply } from '../helpers/app.js';
import { addressOf, deliverMail, mailsTo, sessionToken, teamOfThree } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';
import { stagingDirOf } from '../helpers/s3.js';

// GET, PATCH /v1/auth/profile; POST /v1/auth/profile/avatar/upload (multipart); POST
// /v1/auth/profile/avatar, PUT /v1/avatars/{accountId}/{avatarId}, POST /v1/auth/profile/avatar/confirm
// (upload URL); DELETE /v1/auth/profile/avatar; GET /v1/avatars/{accountId}/{avatarId}; and the
// mail that notifyEmail governs (mentions, watchers).

const MAX = 5 * 1024 * 1024;
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-profile-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const { app, db, config } = await testApp(t, { TICKETD_DATA_DIR: dataDir, TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });
const services = servicesOf(db);

const team = () => teamOfThree(app, services);
const address = addressOf;

const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const WEBP = Buffer.from('UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==', 'base64');
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]), Buffer.from('JFIF\0'), Buffer.alloc(20)]);

function multipart(filename: string, type: string, bytes: Buffer, field = 'file'): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----ticketd${Math.random().toString(16).slice(2)}`;
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`),
    bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

type Call = ReturnType<typeof client>;
const uploadAvatar = (as: Call, filename: string, type: string, bytes: Buffer, field?: string) => {
  const form = multipart(filename, type, bytes, field);
  return as('POST', '/v1/auth/profile/avatar/upload', form.payload, form.headers);
};

/** A raw request without credentials: status, headers and the bytes. */
async function raw(method: 'GET' | 'PUT', url: string, payload?: Buffer | string, headers: Record<string, string> = {}) {
  const res = await app.inject({ method, url: url.startsWith('http') ? new URL(url).pathname : url, headers, ...(payload === undefined ? {} : { payload }) });
  let body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try {
    body = JSON.parse(res.body);
  } catch {
    body = undefined;
  }
  return { status: res.statusCode, headers: res.headers, bytes: res.rawPayload, body };
}

/** Whether the storage (a disk or a bucket: the S3 mode) holds the file of this id. */
const isStored = (id: string) => servicesOf(db).storage.exists(id);
const avatarIdOf = (url: string) => new URL(url).pathname.split('/').pop()!;
const AVATAR_URL = /^http:\/\/localhost\/v1\/avatars\/acct_[0-9a-z]+\/av_[0-9A-Za-z]{43}$/;
const entries = (memberId: string) => db('auditLog').where({ entityType: 'profile', entityId: memberId }).orderBy('id');

t.test('a profile starts from the defaults: the member’s name, no avatar, every notification on', async (t) => {
  const a = await team();
  const DEFAULTS = { avatarUrl: null, notifyEmail: true, notifyToast: true, notifyDesktop: true };
  t.same((await a.asMember('GET', '/v1/auth/profile')).body, { displayName: 'Mo Member', ...DEFAULTS });
  t.same((await a.asOwner('GET', '/v1/auth/profile')).body, { displayName: 'Test Owner', ...DEFAULTS });
  const nameless = await members.add(tenantCtx(systemCtx(services), a.owner.accountId, true), { email: address('nameless'), role: 'member' });
  const asNameless = client(app, await sessionToken(app, services, a.owner.accountId, nameless.email));
  t.same((await asNameless('GET', '/v1/auth/profile')).body, { displayName: null, ...DEFAULTS }, 'no name: displayName null');
});

t.test('PATCH takes any subset and answers the whole profile; each member has their own, and every change is audited', async (t) => {
  const a = await team();
  const changed = await a.asMember('PATCH', '/v1/auth/profile', { displayName: '  Mo  ', notifyEmail: false, notifyDesktop: false });
  t.equal(changed.status, 200);
  t.same(changed.body, { displayName: 'Mo', avatarUrl: null, notifyEmail: false, notifyToast: true, notifyDesktop: false });
  t.same((await a.asMember('GET', '/v1/auth/profile')).body, changed.body, 'kept');
  t.equal((await a.asOwner('GET', '/v1/auth/profile')).body.notifyEmail, true, "the owner's profile is the owner's own");
  const [entry] = await entries(a.member.id);
  t.match(entry, {
    event: 'profile.updated',
    brandId: null,
    performerType: 'user',
    performerId: a.member.id,
    changes: [
      { field: 'displayName', from: 'Mo Member', to: 'Mo' },
      { field: 'notifyEmail', from: true, to: false },
      { field: 'notifyDesktop', from: true, to: false },
    ],
  });

  t.same((await a.asMember('PATCH', '/v1/auth/profile', {})).body, changed.body, 'an empty patch changes nothing');
  t.same((await a.asMember('PATCH', '/v1/auth/profile', changed.body)).body, changed.body, 'the whole profile sent back changes nothing');
  t.equal((await entries(a.member.id)).length, 1, 'and is not audited');
  t.equal((await a.asMember('PATCH', '/v1/auth/profile', { displayName: null })).body.displayName, 'Mo Member', 'null: back to the member’s name');

  const linked = await a.asMember('PATCH', '/v1/auth/profile', { avatarUrl: 'https://images.example.com/mo.png' });
  t.equal(linked.body.avatarUrl, 'https://images.example.com/mo.png', 'an avatar elsewhere');
  t.equal((await a.asMember('PATCH', '/v1/auth/profile', { avatarUrl: null })).body.avatarUrl, null, 'and removed');
});

t.test('PATCH refuses what is not a profile, and changes nothing', async (t) => {
  const a = await team();
  for (const [body, field] of [
    [{ displayName: '' }, 'displayName'],
    [{ displayName: '   ' }, 'displayName'],
    [{ displayName: 'x'.repeat(101) }, 'displayName'],
    [{ avatarUrl: 'javascript:alert(1)' }, 'avatarUrl'],
    [{ avatarUrl: 'ftp://files.example.com/me.png' }, 'avatarUrl'],
    [{ avatarUrl: '/relative.png' }, 'avatarUrl'],
    [{ notifyEmail: 'yes' }, 'notifyEmail'],
    [{ email: 'someone-else@example.com' }, 'email'],
  ] as const) {
    const res = await a.asMember('PATCH', '/v1/auth/profile', body);
    assertErrorShape(t, res, 400, 'validation_failed');
    t.ok(JSON.stringify(res.body.errors).includes(field), `names ${field}`);
  }
  t.same((await a.asMember('GET', '/v1/auth/profile')).body.displayName, 'Mo Member');
  t.equal((await entries(a.member.id)).length, 0);
});

t.test('the multipart upload: an image by its content becomes the avatar, at a URL a browser loads without credentials', async (t) => {
  const a = await team();
  const res = await uploadAvatar(a.asMember, 'me.png', 'image/png', PNG);
  t.equal(res.status, 200);
  t.match(res.body, { displayName: 'Mo Member', notifyEmail: true });
  t.match(res.body.avatarUrl, AVATAR_URL);
  t.same((await a.asMember('GET', '/v1/auth/profile')).body, res.body);
  const sentBack = await a.asMember('PATCH', '/v1/auth/profile', { ...res.body, avatarUrl: res.body.avatarUrl.replace('http://localhost', 'https://help.example.com') });
  t.equal(sentBack.body.avatarUrl, res.body.avatarUrl, 'its own URL sent back, as built on another host, keeps the upload');
  const image = await raw('GET', res.body.avatarUrl);
  t.equal(image.status, 200);
  t.equal(image.headers['content-type'], 'image/png');
  t.equal(image.headers['x-content-type-options'], 'nosniff');
  t.ok(image.bytes.equals(PNG), 'the bytes as uploaded');
  t.match(await entries(a.member.id), [{ event: 'profile.updated', performerId: a.member.id, changes: [{ field: 'avatarUrl', from: null, to: res.body.avatarUrl }] }]);

  for (const [name, type, bytes, served] of [
    ['me.gif', 'image/gif', GIF, 'image/gif'],
    ['me.webp', 'image/webp', WEBP, 'image/webp'],
    ['me.jpg', 'image/jpeg', JPEG, 'image/jpeg'],
    ['disguised.jpg', 'image/jpeg', PNG, 'image/png'],
    ['no-type', 'application/octet-stream', GIF, 'image/gif'],
  ] as const) {
    const up = await uploadAvatar(a.asMember, name, type, bytes);
    t.equal(up.status, 200, `${name} sent as ${type}`);
    t.equal((await raw('GET', up.body.avatarUrl)).headers['content-type'], served, `${name} is served as what its content is: ${served}`);
  }
});

t.test('a file that lies about its type, or is too large, is refused and the avatar stays', async (t) => {
  const a = await team();
  const first = (await uploadAvatar(a.asMember, 'me.png', 'image/png', PNG)).body.avatarUrl;
  const auditedBefore = (await entries(a.member.id)).length;
  const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>');
  for (const [name, type, bytes] of [
    ['me.png', 'image/png', Buffer.from('just some text, named and typed as a PNG')],
    ['me.svg', 'image/svg+xml', svg],
    ['me.gif', 'image/gif', Buffer.from('<html><script>alert(1)</script></html>')],
    ['empty.png', 'image/png', Buffer.alloc(0)],
    ['short.png', 'image/png', PNG.subarray(0, 4)],
  ] as const) {
    const res = await uploadAvatar(a.asMember, name, type, bytes);
    assertErrorShape(t, res, 400, 'invalid_image');
    t.match(res.body.message, /JPEG, PNG, GIF or WebP/);
  }
  const big = await uploadAvatar(a.asMember, 'big.png', 'image/png', Buffer.concat([PNG, Buffer.alloc(MAX + 1 - PNG.length)]));
  assertErrorShape(t, big, 413, 'avatar_too_large');
  t.equal((await a.asMember('GET', '/v1/auth/profile')).body.avatarUrl, first, 'the avatar is the one before');
  t.equal((await entries(a.member.id)).length, auditedBefore, 'nothing audited');
  t.same(readdirSync(stagingDirOf(config)), [], 'nothing left in staging');

  const exact = await uploadAvatar(a.asMember, 'max.png', 'image/png', Buffer.concat([PNG, Buffer.alloc(MAX - PNG.length)]));
  t.equal(exact.status, 200, 'exactly 5 MiB is taken');

  assertErrorShape(t, await a.asMember('POST', '/v1/auth/profile/avatar/upload', { file: 'x' }), 415, 'unsupported_media_type');
  assertErrorShape(t, await uploadAvatar(a.asMember, 'me.png', 'image/png', PNG, 'upload'), 400, 'file_missing');
});

t.test('a replaced or removed avatar is gone: its URL, its file', async (t) => {
  const a = await team();
  const first = (await uploadAvatar(a.asMember, 'one.png', 'image/png', PNG)).body.avatarUrl;
  t.ok(await isStored(avatarIdOf(first)), 'stored');
  const second = (await uploadAvatar(a.asMember, 'two.gif', 'image/gif', GIF)).body.avatarUrl;
  t.not(second, first, 'a new URL for new content');
  t.equal((await raw('GET', first)).status, 404, 'the replaced URL no longer answers');
  t.notOk(await isStored(avatarIdOf(first)), 'its file was removed after the commit');
  t.equal((await raw('GET', second)).status, 200);

  const external = await a.asMember('PATCH', '/v1/auth/profile', { avatarUrl: 'https://images.example.com/mo.png' });
  t.equal(external.body.avatarUrl, 'https://images.example.com/mo.png', 'a URL elsewhere replaces the upload');
  t.notOk(await isStored(avatarIdOf(second)), 'whose file goes');

  const third = (await uploadAvatar(a.asMember, 'three.png', 'image/png', PNG)).body.avatarUrl;
  const removed = await a.asMember('DELETE', '/v1/auth/profile/avatar');
  t.equal(removed.status, 200);
  t.same(removed.body, { displayName: 'Mo Member', avatarUrl: null, notifyEmail: true, notifyToast: true, notifyDesktop: true }, 'back to the default');
  t.equal((await raw('GET', third)).status, 404);
  t.notOk(await isStored(avatarIdOf(third)));
  t.same((await a.asMember('DELETE', '/v1/auth/profile/avatar')).body.avatarUrl, null, 'again: harmless');
  t.equal(
    await db('attachmentFileDeletions')
      .where({ accountId: a.owner.accountId })
      .count({ n: '*' })
      .first()
      .then((r) => Number((r as { n: string }).n)),
    0,
    'nothing left queued',
  );
});

t.test('avatar URLs: only a current avatar answers, and only at its own account', async (t) => {
  const a = await team();
  const b = await team();
  const url = (await uploadAvatar(a.asMember, 'me.png', 'image/png', PNG)).body.avatarUrl as string;
  const id = avatarIdOf(url);
  t.equal((await raw('GET', `/v1/avatars/${b.owner.accountId}/${id}`)).status, 404, 'another account in the path');
  t.equal((await raw('GET', `/v1/avatars/${a.owner.accountId}/${id.slice(0, -1)}${id.endsWith('a') ? 'b' : 'a'}`)).status, 404, 'another id');
  t.equal((await raw('GET', `/v1/avatars/${a.owner.accountId}/att_x`)).status, 404, 'not an avatar id');
  const grant = (await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'next.png', contentType: 'image/png', size: PNG.length })).body;
  t.equal((await raw('PUT', grant.uploadUrl, PNG, { 'content-type': 'image/png' })).status, 200);
  t.equal((await raw('GET', grant.uploadUrl)).status, 404, 'an upload not yet confirmed is not served');
});

t.test('the upload URL flow: ask, PUT the bytes, confirm', async (t) => {
  const a = await team();
  const asked = await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'me.png', contentType: 'image/png', size: PNG.length });
  t.equal(asked.status, 200);
  t.match(asked.body, { uploadUrl: AVATAR_URL, storageKey: /^av_/, expiresAt: /^\d{4}-/, expiresIn: config.attachmentUploadUrlTtlSeconds, method: 'PUT' });
  t.equal(avatarIdOf(asked.body.uploadUrl), asked.body.storageKey);

  assertErrorShape(t, await a.asMember('POST', '/v1/auth/profile/avatar/confirm'), 400, 'upload_incomplete');
  assertErrorShape(t, await raw('PUT', asked.body.uploadUrl, PNG.subarray(1), { 'content-type': 'image/png' }), 400, 'size_mismatch');
  const put = await raw('PUT', asked.body.uploadUrl, PNG, { 'content-type': 'image/png' });
  t.equal(put.status, 200, 'the URL is the grant: no credential');
  t.same(put.body, { storageKey: asked.body.storageKey, size: PNG.length, status: 'PENDING' });

  const confirmed = await a.asMember('POST', '/v1/auth/profile/avatar/confirm');
  t.equal(confirmed.status, 200, 'confirm takes no body');
  t.same(confirmed.body, { displayName: 'Mo Member', avatarUrl: asked.body.uploadUrl, notifyEmail: true, notifyToast: true, notifyDesktop: true });
  const image = await raw('GET', confirmed.body.avatarUrl);
  t.ok(image.bytes.equals(PNG));
  t.equal(image.headers['content-type'], 'image/png');
  assertErrorShape(t, await raw('PUT', asked.body.uploadUrl, GIF.subarray(0, PNG.length), { 'content-type': 'image/gif' }), 409, 'already_uploaded');
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/profile/avatar/confirm', {}), 400, 'no_pending_upload');
  t.ok(
    (await entries(a.member.id)).some((e: { event: string }) => e.event === 'profile.avatar_upload_requested'),
    'asking for the URL is audited too',
  );

  // Asked for again: the newer request replaces the older, and confirm may name it.
  const older = (await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'a.gif', contentType: 'image/gif', size: GIF.length })).body;
  const newer = (await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'b.gif', contentType: 'image/gif', size: GIF.length })).body;
  t.equal((await raw('PUT', older.uploadUrl, GIF)).status, 404, 'the older upload URL is gone');
  t.equal((await raw('PUT', newer.uploadUrl, GIF)).status, 200);
  t.equal((await a.asOwner('POST', '/v1/auth/profile/avatar/confirm', { storageKey: newer.storageKey })).status, 404, "another member cannot confirm the member's upload");
  const named = await a.asMember('POST', '/v1/auth/profile/avatar/confirm', { storageKey: newer.storageKey });
  t.equal(named.body.avatarUrl, newer.uploadUrl);
  t.equal((await raw('GET', asked.body.uploadUrl)).status, 404, 'the avatar it replaced is gone');
});

t.test('the upload URL flow checks the content on confirm, the declared type and size up front, and the URL’s lifetime', async (t) => {
  const a = await team();
  const before = (await uploadAvatar(a.asMember, 'me.png', 'image/png', PNG)).body.avatarUrl;
  const text = Buffer.from('not an image at all, whatever was declared');
  const lie = (await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'me.png', contentType: 'image/png', size: text.length })).body;
  t.equal((await raw('PUT', lie.uploadUrl, text, { 'content-type': 'image/png' })).status, 200);
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/profile/avatar/confirm'), 400, 'invalid_image');
  t.equal((await a.asMember('GET', '/v1/auth/profile')).body.avatarUrl, before, 'the avatar stays');
  t.equal((await raw('GET', lie.uploadUrl)).status, 404, 'and the file is not served');

  for (const [contentType, code] of [
    ['image/svg+xml', 'unsupported_image_type'],
    ['text/html', 'unsupported_image_type'],
    ['application/octet-stream', 'unsupported_image_type'],
  ] as const) {
    assertErrorShape(t, await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'x', contentType, size: 10 }), 400, code);
  }
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'big.png', contentType: 'image/png', size: MAX + 1 }), 413, 'avatar_too_large');
  assertErrorShape(t, await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'x.png', contentType: 'image/png', size: 0 }), 400, 'validation_failed');
  t.equal((await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'x.png', contentType: 'IMAGE/PNG; charset=x', size: 10 })).status, 200, 'the type is read as a type');

  const grant = (await a.asMember('POST', '/v1/auth/profile/avatar', { filename: 'late.png', contentType: 'image/png', size: PNG.length })).body;
  const later = await buildApp({
    clock: testNow,
    config,
    db,
    services,
    attachments: { ...attachmentDeps(config, db, testNow), now: () => testNow() + (config.attachmentUploadUrlTtlSeconds + 60) * 1000 },
  });
  t.teardown(() => later.close());
  const expired = await later.inject({ method: 'PUT', url: new URL(grant.uploadUrl).pathname, payload: PNG, headers: { 'content-type': 'image/png' } });
  t.equal(expired.statusCode, 403);
  t.equal(JSON.parse(expired.body).code, 'url_expired');
});

t.test('profile routes take a session: not an API key, not nothing', async (t) => {
  const a = await team();
  for (const [method, url] of [
    ['GET', '/v1/auth/profile'],
    ['PATCH', '/v1/auth/profile'],
    ['DELETE', '/v1/auth/profile/avatar'],
    ['POST', '/v1/auth/profile/avatar/confirm'],
  ] as const) {
    assertErrorShape(t, await client(app, a.owner.liveKey)(method, url, method === 'PATCH' ? {} : undefined), 401, 'session_required');
    assertErrorShape(t, await client(app)(method, url, method === 'PATCH' ? {} : undefined), 401, 'missing_credentials');
  }
});

// ---------------------------------------------------------------------------------------------
// The mail notifyEmail governs.

/** The mail delivered so far to `email` (file transport). */
async function mailTo(email: string) {
  await deliverMail(services);
  return mailsTo(services, email);
}

t.test('a mentioned member gets one mail per comment, unless their profile turned mail off', async (t) => {
  const a = await team();
  const ticket = await makeTicket(a.owner.live, a.base, { title: 'Printer on fire' });
  const comment = (body: string, as: Call = a.asOwner): Promise<Reply> => as('POST', `${a.base}/tickets/${ticket.id}/comments`, { body });
  t.equal((await comment(`@[Mo Member](${a.member.id}) and again @[Mo](${a.member.id}), can you look?`)).status, 201);
  const mails = await mailTo(a.member.email);
  t.equal(mails.length, 1, 'one mail, though named twice');
  t.match(mails[0]!.subject, /Test Owner mentioned you: Printer on fire/);
  t.match(mails[0]!.text, /can you look\?/);
  t.equal((await mailTo(a.admin.email)).length, 0, 'nobody else is mailed');

  await a.asMember('PATCH', '/v1/auth/profile', { notifyEmail: false });
  t.equal((await comment(`@[Mo](${a.member.id}) ping`)).status, 201);
  t.equal((await mailTo(a.member.email)).length, 1, 'notifyEmail off: no new mail');
  t.equal((await a.asMember('GET', '/v1/auth/mentions/unread')).body.length, 2, 'the mention is still recorded');

  t.equal((await comment(`@[Ada](${a.admin.id}) and @[Mo](${a.member.id})`)).status, 201);
  t.equal((await mailTo(a.admin.email)).length, 1, 'others are mailed as their own profile says');
  t.equal((await comment(`@[Me](${a.owner.ownerId}) a note to self`)).status, 201);
  t.equal((await mailTo((await a.asOwner('GET', '/v1/auth/session')).body.email)).length, 0, 'no mail to oneself');
});

t.test('watchers are mailed as their profile says; a mentioned watcher gets one mail', async (t) => {
  const a = await team();
  const ticket = await makeTicket(a.owner.live, a.base, { title: 'Watched' });
  for (const m of [a.member, a.admin]) t.equal((await a.owner.live('POST', `${a.base}/tickets/${ticket.id}/watchers`, { memberId: m.id })).status, 201);
  const comment = (body: string) => a.owner.live('POST', `${a.base}/tickets/${ticket.id}/comments`, { body });

  await comment('First update');
  t.equal((await mailTo(a.member.email)).length, 1, 'notifyEmail on: the watcher is mailed');
  t.equal((await mailTo(a.admin.email)).length, 1);

  await a.asMember('PATCH', '/v1/auth/profile', { notifyEmail: false });
  await comment('Second update');
  t.equal((await mailTo(a.member.email)).length, 1, 'notifyEmail off: not mailed');
  t.equal((await mailTo(a.admin.email)).length, 2, 'the other watcher still is');

  await comment(`@[Ada](${a.admin.id}) third update`);
  const adminMails = await mailTo(a.admin.email);
  t.equal(adminMails.length, 3, 'mentioned and watching: one mail');
  t.match(adminMails[2]!.subject, /mentioned you/);
});

t.test('a brand id in a mention mail is only ever the comment’s: the mail goes to the member of this account', async (t) => {
  const a = await team();
  const b = await team();
  const ticket = await makeTicket(a.owner.live, a.base, { title: 'Cross' });
  t.equal((await a.owner.live('POST', `${a.base}/tickets/${ticket.id}/comments`, { body: `@[Stranger](${b.member.id}) hello` })).status, 201);
  t.equal((await mailTo(b.member.email)).length, 0, "another account's member is not mailed");
});
