import { Readable } from 'node:stream';
import { type BaseCtx, type TenantCtx, withTx } from '../../core/context.js';
import { requestBaseUrl } from '../../core/config.js';
import { badRequest, conflict, forbidden, HttpError, notFound } from '../../core/errors.js';
import { deleteQueuingFiles } from '../../core/file-deletions.js';
import { accountScope } from '../../core/model.js';
import { randomBase62 } from '../../core/secrets.js';
import type { Storage } from '../../core/ports.js';
import { stageDeclared } from '../../integrations/storage.js';
import * as audit from '../../core/audit.js';
import { scanUpload } from '../../core/scanning.js';
import { AVATAR_TYPES, imageTypeOf, SIGNATURE_BYTES, type AvatarType } from './images.js';
import { Avatar, MemberProfile } from './model.js';
import type { AvatarGrantView, AvatarReceiptView, AvatarUploadInput, ProfileView, UpdateProfileInput } from './schemas.js';

/**
 * A member's dashboard profile (display name, avatar, notification preferences) and their avatar
 * files. A profile row is made on the first change; until then every default holds.
 *
 * Avatars are images checked by their content (images.ts): JPEG, PNG, GIF or WebP, at most 5 MiB.
 * Their bytes go to attachment storage under the avatar's id, `av_` and 256 random bits, which is
 * also what makes the public URL `/v1/avatars/<account>/<id>` unguessable (a browser loads it in
 * an <img> without credentials). Two ways in: one multipart request, or an upload URL to PUT the
 * bytes to and a confirm that checks them. Bytes are moved under their key inside the transaction
 * that records them, holding the row lock (as attachments do); a replaced or deleted avatar's row
 * goes in the change's transaction and queues its file, which the caller removes after the commit.
 */

export const AVATAR_MAX_BYTES = 5 * 1024 * 1024;
const AVATAR_ID = /^av_[0-9A-Za-z]{43}$/;

/** What avatar files need beyond the database: set up once per process (the attachments' storage). */
export interface AvatarDeps {
  storage: Storage;
  publicUrl: string | null;
  uploadTtlSeconds: number;
  /** Milliseconds; tests may move it. */
  now: () => number;
}

/** Deps plus the absolute base URL the current request's links are built on. */
export interface AvatarIo extends AvatarDeps {
  baseUrl: string;
}

export function forRequest(deps: AvatarDeps, protocol: string, host: string): AvatarIo {
  return { ...deps, baseUrl: requestBaseUrl(deps.publicUrl, protocol, host) };
}

/** Who a profile is: the member, and their name (the display name's default). */
export interface Me {
  memberId: string;
  name: string | null;
}

/** The result of a change: the profile, and the avatar files whose rows went (to remove after the commit). */
export interface Changed {
  profile: ProfileView;
  removedFiles: string[];
}

type Row = Pick<MemberProfile, 'displayName' | 'avatarId' | 'avatarUrl' | 'notifyEmail' | 'notifyToast' | 'notifyDesktop'>;
const DEFAULTS: Row = { displayName: null, avatarId: null, avatarUrl: null, notifyEmail: true, notifyToast: true, notifyDesktop: true };

export function avatarUrlOf(io: AvatarIo, accountId: string, avatarId: string): string {
  return `${io.baseUrl}/v1/avatars/${accountId}/${avatarId}`;
}

function toView(io: AvatarIo, accountId: string, me: Me, row: Row): ProfileView {
  return {
    displayName: row.displayName ?? me.name,
    avatarUrl: row.avatarId ? avatarUrlOf(io, accountId, row.avatarId) : row.avatarUrl,
    notifyEmail: row.notifyEmail,
    notifyToast: row.notifyToast,
    notifyDesktop: row.notifyDesktop,
  };
}

async function rowOf(ctx: TenantCtx, memberId: string, lock = false): Promise<Row> {
  const q = MemberProfile.ofAccount(ctx).where('memberProfiles.memberId', memberId).first();
  return (await (lock ? q.forUpdate() : q)) ?? DEFAULTS;
}

export async function get(ctx: TenantCtx, io: AvatarIo, me: Me): Promise<ProfileView> {
  return toView(io, ctx.accountId, me, await rowOf(ctx, me.memberId));
}

const FIELDS = ['displayName', 'avatarUrl', 'notifyEmail', 'notifyToast', 'notifyDesktop'] as const;

/**
 * Writes the profile (made on first use) and records what changed as one profile.updated entry,
 * in the caller's transaction. An uploaded avatar the change leaves unused is deleted; its file is
 * returned for removal after the commit.
 */
async function write(tx: TenantCtx, io: AvatarIo, me: Me, patch: Partial<Row>, metadata?: Record<string, unknown>): Promise<Changed> {
  // The row exists and is locked before it is read: concurrent changes of one profile serialize.
  await tx.db('memberProfiles').insert({ accountId: tx.accountId, memberId: me.memberId }).onConflict(['accountId', 'memberId']).ignore();
  const before = await rowOf(tx, me.memberId, true);
  const after: Row = { ...before, ...patch };
  await MemberProfile.ofAccount(tx)
    .where('memberProfiles.memberId', me.memberId)
    .patch({ ...patch, updatedAt: new Date(tx.services.now()) });
  const removed = before.avatarId && before.avatarId !== after.avatarId ? [before.avatarId] : [];
  if (removed.length) await deleteQueuingFiles(tx, 'avatars', { sql: '? and f.id = any(?)', bindings: [accountScope(tx, 'f'), removed] });
  const [from, to] = [toView(io, tx.accountId, me, before), toView(io, tx.accountId, me, after)];
  const changes = audit.changesBetween(from, to, [...FIELDS]);
  if (changes.length) await audit.record(tx, { brandId: null, entityType: 'profile', entityId: me.memberId, event: 'profile.updated', changes, metadata });
  return { profile: to, removedFiles: removed };
}

/**
 * Whether a URL sent in a PATCH is the avatar the profile has: its own value, or the uploaded
 * avatar's URL as built on another host (behind another proxy), which must not replace the
 * upload with a link to itself.
 */
function isCurrentAvatar(io: AvatarIo, accountId: string, me: Me, row: Row, url: string | null): boolean {
  if (url === toView(io, accountId, me, row).avatarUrl) return true;
  return row.avatarId !== null && url !== null && url.endsWith(`/v1/avatars/${accountId}/${row.avatarId}`);
}

/**
 * PATCH: any subset of the fields. displayName null goes back to the member's name; avatarUrl null
 * removes the avatar, a URL elsewhere replaces an uploaded one, and the profile's own current
 * avatarUrl sent back as it is (a form saving every field) changes nothing.
 */
export async function update(ctx: TenantCtx, io: AvatarIo, me: Me, input: UpdateProfileInput): Promise<Changed> {
  return withTx(ctx, async (tx) => {
    const patch: Partial<Row> = {};
    if (input.displayName !== undefined) patch.displayName = input.displayName === null ? null : input.displayName.trim();
    for (const field of ['notifyEmail', 'notifyToast', 'notifyDesktop'] as const) if (input[field] !== undefined) patch[field] = input[field];
    if (input.avatarUrl !== undefined && !isCurrentAvatar(io, tx.accountId, me, await rowOf(tx, me.memberId), input.avatarUrl)) {
      Object.assign(patch, { avatarId: null, avatarUrl: input.avatarUrl });
    }
    return write(tx, io, me, patch);
  });
}

/** DELETE avatar: back to none (the default); no avatar already: nothing changes. */
export async function removeAvatar(ctx: TenantCtx, io: AvatarIo, me: Me): Promise<Changed> {
  return withTx(ctx, (tx) => write(tx, io, me, { avatarId: null, avatarUrl: null }));
}

const tooLarge = () =>
  new HttpError(413, 'avatar_too_large', `An avatar may be at most ${AVATAR_MAX_BYTES} bytes (5 MiB)`, [{ field: 'file', message: `must be at most ${AVATAR_MAX_BYTES} bytes` }]);

const notAnImage = (field: string) =>
  badRequest(
    `The file is not a JPEG, PNG, GIF or WebP image: an avatar is judged by its content, not by its name or the type it was sent as`,
    [{ field, message: 'is not a JPEG, PNG, GIF or WebP image' }],
    'invalid_image',
  );

const newAvatarId = () => `av_${randomBase62()}`;

/** The uploaded avatar becomes the member's, in the caller's transaction; the one it replaces goes. */
async function makeCurrent(tx: TenantCtx, io: AvatarIo, me: Me, avatar: { id: string; contentType: string; size: number }): Promise<Changed> {
  return write(tx, io, me, { avatarId: avatar.id, avatarUrl: null }, { avatarId: avatar.id, contentType: avatar.contentType, size: avatar.size });
}

/**
 * POST …/avatar/upload (multipart): the file, read whole (at most 5 MiB; the parser stops at the
 * limit and says so), must be an image by its content; it becomes the member's avatar at once.
 */
export async function upload(ctx: TenantCtx, io: AvatarIo, me: Me, file: { stream: Readable; truncated: () => boolean }): Promise<Changed> {
  const chunks: Buffer[] = [];
  for await (const chunk of file.stream) chunks.push(chunk as Buffer);
  if (file.truncated()) throw tooLarge();
  const bytes = Buffer.concat(chunks);
  const type = imageTypeOf(bytes.subarray(0, SIGNATURE_BYTES));
  if (!type) throw notAnImage('file');
  const staged = await io.storage.stage(Readable.from([bytes]), AVATAR_MAX_BYTES);
  const id = newAvatarId();
  try {
    // Before the transaction (network I/O): an infected file is refused and not kept.
    await scanUpload(ctx.services, () => staged.read(), { memberId: me.memberId });
    return await withTx(ctx, async (tx) => {
      await Avatar.query(tx.db).insert({ accountId: tx.accountId, id, memberId: me.memberId, status: 'UPLOADED', contentType: type, size: bytes.length, expiresAt: null });
      const changed = await makeCurrent(tx, io, me, { id, contentType: type, size: bytes.length });
      await staged.commit(id);
      return changed;
    });
  } catch (err) {
    // Moved under the id before a commit that failed: no row will ever queue it for removal.
    await io.storage.delete(id).catch(() => undefined);
    throw err;
  } finally {
    await staged.discard();
  }
}

/**
 * POST …/avatar: an upload URL for a file of this type and size (checked now; its bytes are checked
 * on confirm). A member has one upload waiting at most: an older one goes (its file after the commit).
 */
export async function requestUpload(ctx: TenantCtx, io: AvatarIo, me: Me, input: AvatarUploadInput): Promise<{ grant: AvatarGrantView; removedFiles: string[] }> {
  const declared = input.contentType.split(';')[0]!.trim().toLowerCase();
  if (!(AVATAR_TYPES as readonly string[]).includes(declared)) {
    throw badRequest(
      `An avatar is a JPEG, PNG, GIF or WebP image; ${input.contentType} is none of them`,
      [{ field: 'contentType', message: `must be one of ${AVATAR_TYPES.join(', ')}` }],
      'unsupported_image_type',
    );
  }
  if (input.size > AVATAR_MAX_BYTES) throw tooLarge();
  const expiresAt = new Date(io.now() + io.uploadTtlSeconds * 1000);
  const id = newAvatarId();
  const removedFiles = await withTx(ctx, async (tx) => {
    const older = await deleteQueuingFiles(tx, 'avatars', { sql: "? and f.member_id = ? and f.status = 'PENDING'", bindings: [accountScope(tx, 'f'), me.memberId] });
    await Avatar.query(tx.db).insert({ accountId: tx.accountId, id, memberId: me.memberId, status: 'PENDING', contentType: declared, size: input.size, expiresAt });
    await audit.record(tx, {
      brandId: null,
      entityType: 'profile',
      entityId: me.memberId,
      event: 'profile.avatar_upload_requested',
      metadata: { avatarId: id, contentType: declared, size: input.size },
    });
    return older.map((r) => r.id);
  });
  const grant = { uploadUrl: avatarUrlOf(io, ctx.accountId, id), storageKey: id, expiresAt: expiresAt.toISOString(), expiresIn: io.uploadTtlSeconds, method: 'PUT' as const };
  return { grant, removedFiles };
}

/** A PENDING avatar by its id (the capability of its upload URL), before its URL expires. */
async function pendingAvatar(ctx: Pick<TenantCtx, 'db' | 'accountId'>, deps: AvatarDeps, avatarId: string, lock = false): Promise<Avatar> {
  const q = Avatar.ofAccount(ctx).where('avatars.id', avatarId).first();
  const row = AVATAR_ID.test(avatarId) ? await (lock ? q.forUpdate() : q) : undefined;
  if (!row) throw notFound('Avatar upload');
  if (row.status !== 'PENDING') throw conflict('This avatar was already uploaded and confirmed', 'already_uploaded');
  if (!row.expiresAt || row.expiresAt.getTime() <= deps.now()) throw forbidden('This upload URL has expired; ask for a new one', 'url_expired');
  return row;
}

/**
 * PUT /v1/avatars/<account>/<id> while the upload waits: exactly the declared bytes (at most 5 MiB),
 * stored under the id. Again before confirm: the bytes are replaced.
 */
export async function receiveUpload(
  base: BaseCtx,
  deps: AvatarDeps,
  accountId: string,
  avatarId: string,
  body: Readable | undefined,
  contentLength: number | null,
): Promise<AvatarReceiptView> {
  // The account named in the URL: the avatar id is the capability, found within that account only.
  const ctx = { ...base, accountId };
  const row = await pendingAvatar(ctx, deps, avatarId);
  const declared = Number(row.size);
  if (contentLength !== null && contentLength > AVATAR_MAX_BYTES) throw tooLarge();
  const staged = await stageDeclared(deps.storage, body, declared, contentLength);
  try {
    await scanUpload(ctx.services, () => staged.read(), { avatarId });
    await withTx(ctx, async (tx) => {
      await pendingAvatar(tx, deps, avatarId, true);
      await Avatar.ofAccount(tx)
        .where('avatars.id', avatarId)
        .patch({ updatedAt: new Date(ctx.services.now()) });
      await staged.commit(avatarId);
    });
  } finally {
    await staged.discard();
  }
  return { storageKey: avatarId, size: declared, status: 'PENDING' };
}

/** The first bytes of a stored file, or null when there is none. */
async function headOf(storage: Storage, key: string): Promise<{ head: Buffer; size: number } | null> {
  const file = await storage.open(key);
  if (!file) return null;
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of file.stream) {
      chunks.push(chunk as Buffer);
      length += (chunk as Buffer).length;
      if (length >= SIGNATURE_BYTES) break;
    }
  } finally {
    file.stream.destroy();
  }
  return { head: Buffer.concat(chunks).subarray(0, SIGNATURE_BYTES), size: file.size };
}

/**
 * POST …/avatar/confirm: the waiting upload (the one named, else the newest) becomes the avatar once
 * its bytes are there and are an image by their content.
 */
export async function confirm(ctx: TenantCtx, io: AvatarIo, me: Me, storageKey?: string): Promise<Changed> {
  return withTx(ctx, async (tx) => {
    const q = Avatar.ofAccount(tx).where({ 'avatars.memberId': me.memberId, 'avatars.status': 'PENDING' }).orderBy('avatars.createdAt', 'desc').first().forUpdate();
    if (storageKey !== undefined) q.where('avatars.id', storageKey);
    const row = await q;
    if (!row && storageKey !== undefined) throw notFound('Avatar upload');
    if (!row) throw badRequest('No avatar upload is waiting: ask for one with POST /v1/auth/profile/avatar, PUT the file, then confirm', [], 'no_pending_upload');
    const stored = await headOf(io.storage, row.id);
    if (!stored) throw badRequest('The file has not been uploaded yet: PUT its bytes to the uploadUrl first, then confirm', [], 'upload_incomplete');
    const type: AvatarType | null = imageTypeOf(stored.head);
    if (!type) throw notAnImage('body');
    await Avatar.ofAccount(tx)
      .where('avatars.id', row.id)
      .patch({ status: 'UPLOADED', contentType: type, size: stored.size, expiresAt: null, updatedAt: new Date(ctx.services.now()) });
    return makeCurrent(tx, io, me, { id: row.id, contentType: type, size: stored.size });
  });
}

/** GET /v1/avatars/<account>/<id>: the bytes of an avatar that is a member's current one. */
export async function open(base: BaseCtx, storage: Storage, accountId: string, avatarId: string): Promise<{ stream: Readable; size: number; contentType: string }> {
  const ctx = { ...base, accountId };
  const row = AVATAR_ID.test(avatarId)
    ? await Avatar.ofAccount(ctx)
        .where({ 'avatars.id': avatarId, 'avatars.status': 'UPLOADED' })
        .whereExists(MemberProfile.ofAccount(ctx).whereColumn('memberProfiles.accountId', 'avatars.accountId').whereColumn('memberProfiles.avatarId', 'avatars.id'))
        .first()
    : undefined;
  const file = row ? await storage.open(row.id) : null;
  if (!row || !file) throw notFound('Avatar');
  return { stream: file.stream, size: file.size, contentType: row.contentType };
}

/** Of these members, those who turned mail notifications off (no profile: on). */
export async function mailOptedOut(ctx: TenantCtx, memberIds: readonly string[]): Promise<Set<string>> {
  if (!memberIds.length) return new Set();
  const rows = await MemberProfile.ofAccount(ctx)
    .whereIn('memberProfiles.memberId', [...new Set(memberIds)])
    .where('memberProfiles.notifyEmail', false)
    .select('memberId');
  return new Set(rows.map((r) => r.memberId));
}
