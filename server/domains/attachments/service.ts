import formatContentDisposition from 'content-disposition';
import path from 'node:path';
import { Readable } from 'node:stream';
import objection from 'objection';
import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { requestBaseUrl, type Config } from '../../core/config.js';
import type { Db } from '../../core/db.js';
import { badRequest, conflict, forbidden, HttpError, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { BOUND_TENANT, boundToTenant, scopeOf, tenantIs, tenantScope } from '../../core/model.js';
import { deleteQueuingFiles, queueFileDeletions } from '../../core/file-deletions.js';
import { cachedServerSecret } from '../../core/secrets.js';
import { part, type Services } from '../../core/services.js';
import type { StagedObject, Storage } from '../../core/ports.js';
import { ByteLimitExceeded, stageDeclared } from '../../integrations/storage.js';
import { storageFromConfig } from '../../integrations/storage-from-config.js';
import * as audit from '../../core/audit.js';
import { scanFile, scanUpload, type ScanStatus } from '../../core/scanning.js';
import * as events from '../../core/outbox/events.js';
import { requireBrand } from '../../core/brand.js';
import { signGrant, verifyGrant, type GrantPurpose } from './grants.js';
import { Attachment } from './model.js';
import type { AttachmentView, AttachmentWithUrlView, CreateAttachmentInput, UploadedView, UploadGrantView, UploadReceiptView, UrlsView } from './schemas.js';

/**
 * Attachments: records here, bytes in storage under the attachment id.
 *
 * Two ways in. Three steps (SDK, portal): POST …/attachments declares filename, type and size and
 * gets a signed upload URL; the client PUTs the bytes there (no credential: the URL is the grant);
 * POST …/confirm marks it UPLOADED. Or one multipart request (dashboard), UPLOADED at once.
 * Pending attachments (no ticket yet) are linked by ticket create (`attachmentIds`).
 *
 * tickets.attachment_count counts a ticket's UPLOADED attachments; every change to it happens in
 * the transaction that changes the attachment. Bytes are written to staging first and moved under
 * their key inside the transaction that records them, holding the row lock, so the stored file and
 * the row's sha256 agree once committed and a half-written upload is never served. With scanning on,
 * staged bytes go through the virus scanner (core/scanning.ts) before that transaction, and the
 * row records its scanStatus; an infected file is refused and never kept. Deleted rows queue their
 * file for removal in the deleting statement (core/file-deletions.ts); the DELETE removes it at once, the dispatcher
 * removes anything left.
 */

const PENDING_LINK_HOURS = 24;
const PURGE_BATCH = 500;

/** What the attachment services need beyond the database: set up once per process. */
export interface AttachmentDeps {
  storage: Storage;
  maxBytes: number;
  uploadTtlSeconds: number;
  downloadTtlSeconds: number;
  publicUrl: string | null;
  /** The URL signing key (server_secrets), read once. */
  signingKey: () => Promise<Buffer>;
  /** Milliseconds; tests may move it. */
  now: () => number;
  /** When this process last swept staging (see purgeAbandoned). */
  staging: { lastSweep: number };
}

/** Deps plus the absolute base URL the current request's links are built on. */
export interface AttachmentIo extends AttachmentDeps {
  baseUrl: string;
}

/** `now`: the services' clock (attachmentDepsOf), or a test's. */
export function attachmentDeps(config: Config, db: Db, now: () => number, storage: Storage = storageFromConfig(config)): AttachmentDeps {
  return {
    storage,
    maxBytes: config.attachmentMaxBytes,
    uploadTtlSeconds: config.attachmentUploadUrlTtlSeconds,
    downloadTtlSeconds: config.attachmentDownloadUrlTtlSeconds,
    publicUrl: config.publicUrl,
    signingKey: cachedServerSecret(db, 'attachment_url_signing_key'),
    now,
    staging: { lastSweep: -Infinity },
  };
}

/** The process's attachment deps, made once with its services (storage and config from them). */
const depsPart = part('attachments.deps', (services) => attachmentDeps(services.config, services.db, services.now, services.storage));
export function attachmentDepsOf(services: Services): AttachmentDeps {
  return services.get(depsPart);
}

/** Links are absolute: on the configured public URL, else on the protocol and host the request came in on. */
export function forRequest(deps: AttachmentDeps, protocol: string, host: string): AttachmentIo {
  return { ...deps, baseUrl: requestBaseUrl(deps.publicUrl, protocol, host) };
}

function toView(row: Attachment): AttachmentView {
  return {
    id: row.id,
    object: 'attachment',
    brandId: row.brandId,
    ticketId: row.ticketId,
    commentId: row.commentId,
    filename: row.filename,
    contentType: row.contentType,
    size: Number(row.size),
    status: row.status,
    sha256: row.sha256,
    scanStatus: row.scanStatus,
    uploadedBy: row.uploadedBy,
    metadata: row.metadata ?? {},
    createdAt: new Date(row.createdAt).toISOString(),
    updatedAt: new Date(row.updatedAt).toISOString(),
  };
}

const tooLarge = (maxBytes: number) =>
  new HttpError(413, 'attachment_too_large', `Attachments may be at most ${maxBytes} bytes`, [{ field: 'size', message: `must be at most ${maxBytes}` }]);

/** The brand's live ticket, else 404. Raw SQL: the attachment domain keeps tickets.attachment_count. */
async function requireTicket(ctx: TenantCtx, brandId: string, ticketId: string): Promise<void> {
  const found = (await ctx.db.raw(`select 1 from tickets where ? and brand_id = ? and id = ? and deleted_at is null`, [tenantScope(ctx, 'tickets'), brandId, ticketId])) as {
    rows: unknown[];
  };
  if (!found.rows.length) throw notFound('Ticket');
}

/**
 * The comment an attachment names: a live comment of the attachment's own ticket (same account,
 * mode and brand), else 400 invalid_comment, as for any other id in a body. A pending attachment
 * has no ticket yet, so it names no comment.
 */
async function requireCommentOnTicket(ctx: TenantCtx, brandId: string, ticketId: string | null, commentId: string): Promise<void> {
  const found = ticketId
    ? ((await ctx.db.raw(`select 1 from comments where ? and brand_id = ? and ticket_id = ? and id = ? and deleted_at is null`, [
        tenantScope(ctx, 'comments'),
        brandId,
        ticketId,
        commentId,
      ])) as { rows: unknown[] })
    : { rows: [] };
  if (!found.rows.length) {
    const reason = ticketId ? 'is not a live comment of this ticket' : 'cannot be given before the attachment is on a ticket';
    throw badRequest(`commentId ${commentId} ${reason}`, [{ field: 'commentId', message: reason }], 'invalid_comment');
  }
}

async function bumpCount(ctx: TenantCtx, brandId: string, ticketId: string, by: number): Promise<void> {
  await ctx.db.raw(`update tickets set attachment_count = attachment_count + ? where ? and brand_id = ? and id = ?`, [by, tenantScope(ctx, 'tickets'), brandId, ticketId]);
}

/** Sets attachment_count of these tickets to their number of UPLOADED attachments. */
export async function recount(ctx: TenantCtx, brandId: string, ticketIds: string[]): Promise<void> {
  await ctx.db.raw(
    `update tickets set attachment_count = (
      select count(*) from attachments a where ${tenantIs('a', BOUND_TENANT)} and a.brand_id = tickets.brand_id and a.ticket_id = tickets.id and a.status = 'UPLOADED')
    where :scope and tickets.brand_id = :brandId and tickets.id = any(:ticketIds)`,
    { account: ctx.accountId, livemode: ctx.livemode, scope: tenantScope(ctx, 'tickets'), brandId, ticketIds },
  );
}

/** Attachments of a ticket that is not deleted, or pending ones: what may be read and served. */
const onLiveTicket = (ctx: TenantCtx) =>
  boundToTenant(
    ctx,
    `(attachments.ticket_id is null or exists (select 1 from tickets t where ${tenantIs('t', BOUND_TENANT)}
  and t.brand_id = attachments.brand_id and t.id = attachments.ticket_id and t.deleted_at is null))`,
  );

function ofBrand(ctx: TenantCtx, brandId: string) {
  return Attachment.scoped(ctx).where('attachments.brandId', brandId);
}

async function grantUrl(io: AttachmentIo, row: Attachment, purpose: GrantPurpose): Promise<{ url: string; expiresIn: number; expiresAt: string }> {
  const expiresIn = purpose === 'upload' ? io.uploadTtlSeconds : io.downloadTtlSeconds;
  const expiresAt = Math.floor(io.now() / 1000) + expiresIn;
  const token = signGrant(await io.signingKey(), { attachmentId: row.id, accountId: row.accountId, livemode: row.livemode, purpose, expiresAt });
  return { url: `${io.baseUrl}/v1/${purpose === 'upload' ? 'uploads' : 'files'}/${token}`, expiresIn, expiresAt: new Date(expiresAt * 1000).toISOString() };
}

// ---------------------------------------------------------------------------------------------
// Three steps: declare, PUT the bytes, confirm.

/**
 * Step 1: the record (PENDING) and a signed upload URL. ticketId null: a pending attachment.
 * portalCustomerId: the customer declaring it through the portal, whose pending upload it is.
 */
export async function createUpload(
  ctx: TenantCtx,
  io: AttachmentIo,
  brandId: string,
  ticketId: string | null,
  input: CreateAttachmentInput,
  portalCustomerId: string | null = null,
): Promise<UploadGrantView> {
  const filename = input.filename.trim();
  if (input.size > io.maxBytes) throw tooLarge(io.maxBytes);
  const brand = await requireBrand(ctx, brandId);
  if (ticketId) await requireTicket(ctx, brand.id, ticketId);
  if (input.commentId) await requireCommentOnTicket(ctx, brand.id, ticketId, input.commentId);
  const row = (await Attachment.query(ctx.db)
    .insert({
      id: newId(ID_PREFIX.attachment),
      ...scopeOf(ctx),
      brandId: brand.id,
      ticketId,
      commentId: input.commentId ?? null,
      filename,
      contentType: input.contentType.trim(),
      size: input.size,
      status: 'PENDING',
      uploadedBy: input.uploadedBy ?? null,
      portalCustomerId,
      metadata: input.metadata ?? {},
    })
    .returning('*')) as unknown as Attachment;
  const grant = await grantUrl(io, row, 'upload');
  return { id: row.id, attachmentId: row.id, filename: row.filename, attachment: toView(row), uploadUrl: grant.url, expiresIn: grant.expiresIn, expiresAt: grant.expiresAt };
}

async function tenantOfGrant(base: BaseCtx, deps: AttachmentDeps, token: string, purpose: GrantPurpose): Promise<{ ctx: TenantCtx; attachmentId: string }> {
  const check = verifyGrant(await deps.signingKey(), token, purpose, Math.floor(deps.now() / 1000));
  if (!check.ok) {
    if (check.reason === 'expired') throw forbidden(`This ${purpose} URL has expired; ask for a new one`, 'url_expired');
    if (check.reason === 'wrong_purpose') throw forbidden(`This URL is not valid for ${purpose === 'upload' ? 'uploading' : 'downloading'}`, 'invalid_signature');
    throw forbidden('This URL is not valid: its signature does not match', 'invalid_signature');
  }
  return { ctx: tenantCtx(base, check.grant.accountId, check.grant.livemode), attachmentId: check.grant.attachmentId };
}

/**
 * Step 2: PUT /v1/uploads/<token>. Streams the body to staging (never more than the declared
 * size), then, holding the row lock, moves it under the attachment id and records its sha256.
 * The attachment stays PENDING until confirmed; a repeat PUT before that replaces the bytes.
 */
export async function receiveUpload(base: BaseCtx, deps: AttachmentDeps, token: string, body: Readable | undefined, contentLength: number | null): Promise<UploadReceiptView> {
  const { ctx, attachmentId } = await tenantOfGrant(base, deps, token, 'upload');
  const row = await Attachment.scoped(ctx).findById(attachmentId);
  if (!row) throw notFound('Attachment');
  if (row.status !== 'PENDING') throw conflict('This attachment was already uploaded and confirmed', 'already_uploaded');
  const declared = Number(row.size);
  if (contentLength !== null && contentLength > deps.maxBytes) throw tooLarge(deps.maxBytes);
  const staged = await stageDeclared(deps.storage, body, declared, contentLength);
  try {
    // Before the transaction: the scan is network I/O. An infected file is not kept, and the attachment stays PENDING.
    const scanStatus = await scanUpload(ctx.services, () => staged.read(), { attachmentId });
    await withTx(ctx, async (tx) => {
      const locked = await Attachment.scoped(tx).findById(attachmentId).forUpdate();
      if (!locked) throw notFound('Attachment');
      if (locked.status !== 'PENDING') throw conflict('This attachment was already uploaded and confirmed', 'already_uploaded');
      await Attachment.scoped(tx)
        .findById(attachmentId)
        .patch({ sha256: staged.sha256, scanStatus, updatedAt: objection.raw('now()') as unknown as Date });
      await staged.commit(attachmentId);
    });
  } finally {
    await staged.discard();
  }
  return { id: attachmentId, size: staged.size, sha256: staged.sha256, status: 'PENDING' };
}

/**
 * Step 3: PENDING → UPLOADED once the bytes are stored; counts it on its ticket and records
 * attachment.created. Already UPLOADED: returned as is. ticketId null (the pending route): any
 * attachment of the brand by id, or (portalCustomerId) that customer's pending uploads only.
 */
export async function confirm(
  ctx: TenantCtx,
  io: AttachmentIo,
  brandId: string,
  ticketId: string | null,
  attachmentId: string,
  portalCustomerId: string | null = null,
): Promise<AttachmentView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    if (ticketId) await requireTicket(tx, brand.id, ticketId);
    const q = ofBrand(tx, brand.id).findById(attachmentId).forUpdate();
    if (ticketId) q.where('attachments.ticketId', ticketId);
    else if (portalCustomerId) q.whereNull('attachments.ticketId').where('attachments.portalCustomerId', portalCustomerId);
    const row = await q;
    if (!row) throw notFound('Attachment');
    if (row.status === 'UPLOADED') return toView(row);
    if (row.status !== 'PENDING' || !row.sha256 || !(await io.storage.exists(row.id))) {
      throw badRequest('The file has not been uploaded yet: PUT its bytes to the uploadUrl first, then confirm', [], 'upload_incomplete');
    }
    const [updated] = (await ofBrand(tx, brand.id)
      .where('attachments.id', row.id)
      .patch({ status: 'UPLOADED', updatedAt: objection.raw('now()') as unknown as Date })
      .returning('*')) as unknown as Attachment[];
    await recordCreated(tx, updated!);
    return toView(updated!);
  });
}

async function recordCreated(tx: TenantCtx, row: Attachment): Promise<void> {
  if (row.ticketId) await bumpCount(tx, row.brandId, row.ticketId, 1);
  await audit.record(tx, {
    brandId: row.brandId,
    ticketId: row.ticketId,
    entityType: 'attachment',
    entityId: row.id,
    event: 'attachment.created',
    metadata: { filename: row.filename, contentType: row.contentType, size: Number(row.size), pending: row.ticketId === null },
  });
  await events.attachmentsChanged(tx, 'attachment.created', [row]);
}

// ---------------------------------------------------------------------------------------------
// One step: multipart.

export interface IncomingFile {
  stream: Readable;
  filename: string;
  contentType: string;
  /** True when the parser cut the file at the byte limit. */
  truncated: () => boolean;
}

const CONTENT_TYPE = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+$/;

/** A client's file name as shown: no directories, no control characters, at most 255 characters. */
function cleanFilename(raw: string): string {
  const name = path.win32
    .basename(raw)
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .trim()
    .slice(0, 255);
  return name || 'file';
}

/** Multipart upload: UPLOADED at once, on a ticket (ticketId) or pending (null). */
export async function uploadFile(ctx: TenantCtx, io: AttachmentIo, brandId: string, ticketId: string | null, file: IncomingFile): Promise<UploadedView> {
  // Fail fast, before reading the body: the checks are repeated in the transaction below.
  const brand = await requireBrand(ctx, brandId);
  if (ticketId) await requireTicket(ctx, brand.id, ticketId);
  let staged: StagedObject;
  try {
    staged = await io.storage.stage(file.stream, io.maxBytes);
  } catch (err) {
    if (err instanceof ByteLimitExceeded) throw tooLarge(io.maxBytes);
    throw err;
  }
  try {
    if (file.truncated()) throw tooLarge(io.maxBytes);
    const scanStatus = await scanUpload(ctx.services, () => staged.read(), { brandId: brand.id, ticketId });
    const id = newId(ID_PREFIX.attachment);
    const row = await withTx(ctx, async (tx) => {
      await requireBrand(tx, brand.id);
      if (ticketId) await requireTicket(tx, brand.id, ticketId);
      const type = file.contentType.split(';')[0]!.trim().toLowerCase();
      const inserted = (await Attachment.query(tx.db)
        .insert({
          id,
          ...scopeOf(tx),
          brandId: brand.id,
          ticketId,
          filename: cleanFilename(file.filename),
          contentType: CONTENT_TYPE.test(type) ? type : 'application/octet-stream',
          size: staged.size,
          status: 'UPLOADED',
          sha256: staged.sha256,
          scanStatus,
          metadata: {},
        })
        .returning('*')) as unknown as Attachment;
      await recordCreated(tx, inserted);
      await staged.commit(inserted.id);
      return inserted;
    }).catch(async (err: unknown) => {
      // The file was moved under the id before a commit that failed: no row will ever queue it for removal.
      await io.storage.delete(id).catch(() => undefined);
      throw err;
    });
    const grant = await grantUrl(io, row, 'download');
    return { attachment: toView(row), downloadUrl: grant.url, expiresAt: grant.expiresAt };
  } finally {
    await staged.discard();
  }
}

// ---------------------------------------------------------------------------------------------
// Inbound mail: files that arrive inside a message.

export interface FileContent {
  filename: string;
  contentType: string;
  content: Buffer;
}

/** A file through the virus scanner, not infected. */
export interface ScannedFile extends FileContent {
  scanStatus: ScanStatus;
}

/** A file the virus scanner found infected: kept out, named where it would have been. */
export interface InfectedFile {
  filename: string;
  size: number;
  signature: string;
}

/** A file of an inbound message whose bytes are already in staging. */
export interface StagedFile {
  filename: string;
  contentType: string;
  scanStatus: ScanStatus;
  staged: StagedObject;
}

/**
 * Files that arrived with a message or a form through the virus scanner, before any transaction
 * (the scan is network I/O): the clean (or unscanned) ones, and the infected ones. The scanner
 * down under scanFailure refuse: 503 scanner_unavailable.
 */
export async function scanFiles(services: Services, files: readonly FileContent[]): Promise<{ kept: ScannedFile[]; infected: InfectedFile[] }> {
  const kept: ScannedFile[] = [];
  const infected: InfectedFile[] = [];
  for (const file of files) {
    const outcome = await scanFile(services, () => Readable.from([file.content]), { filename: file.filename });
    if ('infected' in outcome) infected.push({ filename: file.filename, size: file.content.length, signature: outcome.infected });
    else kept.push({ ...file, scanStatus: outcome.status });
  }
  return { kept, infected };
}

/**
 * Inbound mail, first step: writes (and hashes) the files' bytes to staging before the ticket or
 * comment is written, so no lock that write takes (a new ticket's takes the brand row's) is held
 * while files are written. Throw them away with discardStaged; a file over the limit is a 413
 * (the caller skips those).
 */
export async function stageFiles(deps: AttachmentDeps, files: readonly ScannedFile[]): Promise<StagedFile[]> {
  const staged: StagedFile[] = [];
  try {
    for (const file of files) {
      if (file.content.length > deps.maxBytes) throw tooLarge(deps.maxBytes);
      staged.push({
        filename: file.filename,
        contentType: file.contentType,
        scanStatus: file.scanStatus,
        staged: await deps.storage.stage(Readable.from([file.content]), deps.maxBytes),
      });
    }
  } catch (err) {
    await discardStaged(staged);
    throw err;
  }
  return staged;
}

/** Staged bytes no attachment took; harmless for those committed under an id. */
export async function discardStaged(files: readonly StagedFile[]): Promise<void> {
  for (const file of files) await file.staged.discard();
}

/**
 * Second step: a staged file as an UPLOADED attachment of a ticket (and of one of its comments),
 * inside the caller's transaction (the ticket or comment and its files commit together). The
 * bytes move under the id last; if the transaction then fails, the caller removes them with
 * discardFiles.
 */
export async function addStagedFile(
  tx: TenantCtx,
  brandId: string,
  ticketId: string,
  commentId: string | null,
  file: StagedFile,
  uploadedBy: string | null,
): Promise<AttachmentView> {
  if (!tx.db.isTransaction) throw new Error('addStagedFile must run inside the transaction of the ticket or comment it belongs to');
  const brand = await requireBrand(tx, brandId);
  const type = file.contentType.split(';')[0]!.trim().toLowerCase();
  const row = (await Attachment.query(tx.db)
    .insert({
      id: newId(ID_PREFIX.attachment),
      ...scopeOf(tx),
      brandId: brand.id,
      ticketId,
      commentId,
      filename: cleanFilename(file.filename),
      contentType: CONTENT_TYPE.test(type) ? type : 'application/octet-stream',
      size: file.staged.size,
      status: 'UPLOADED',
      sha256: file.staged.sha256,
      scanStatus: file.scanStatus,
      uploadedBy,
      metadata: {},
    })
    .returning('*')) as unknown as Attachment;
  await recordCreated(tx, row);
  await file.staged.commit(row.id);
  return toView(row);
}

/** Removes the stored bytes of attachments whose transaction did not commit. */
export async function discardFiles(deps: AttachmentDeps, attachmentIds: readonly string[]): Promise<void> {
  for (const id of attachmentIds) await deps.storage.delete(id).catch(() => undefined);
}

// ---------------------------------------------------------------------------------------------
// Reads, delete, URLs.

/** Attachments a customer may see: not on an internal note. */
const notOnInternalNote = (ctx: TenantCtx) =>
  boundToTenant(
    ctx,
    `not exists (select 1 from comments c where ${tenantIs('c', BOUND_TENANT)}
  and c.brand_id = attachments.brand_id and c.id = attachments.comment_id and c.is_internal)`,
  );

/** Who reads: the team (everything), or a customer in the portal (nothing on an internal note). */
export type Audience = 'team' | 'customer';

/** A ticket's attachments, oldest first (PENDING ones included: their upload may be under way). */
export async function list(ctx: TenantCtx, brandId: string, ticketId: string, audience: Audience = 'team'): Promise<AttachmentView[]> {
  const brand = await requireBrand(ctx, brandId);
  await requireTicket(ctx, brand.id, ticketId);
  const q = ofBrand(ctx, brand.id).where('attachments.ticketId', ticketId).orderBy('attachments.id');
  if (audience === 'customer') q.where(notOnInternalNote(ctx));
  return (await q).map(toView);
}

async function requireOnTicket(ctx: TenantCtx, brandId: string, ticketId: string, attachmentId: string, lock = false, audience: Audience = 'team'): Promise<Attachment> {
  await requireTicket(ctx, brandId, ticketId);
  const q = ofBrand(ctx, brandId).where({ 'attachments.ticketId': ticketId, 'attachments.id': attachmentId }).first();
  if (audience === 'customer') q.where(notOnInternalNote(ctx));
  const row = await (lock ? q.forUpdate() : q);
  if (!row) throw notFound('Attachment');
  return row;
}

/** One attachment, with a fresh download URL once uploaded. */
export async function get(ctx: TenantCtx, io: AttachmentIo, brandId: string, ticketId: string, attachmentId: string, audience: Audience = 'team'): Promise<AttachmentWithUrlView> {
  const brand = await requireBrand(ctx, brandId);
  const row = await requireOnTicket(ctx, brand.id, ticketId, attachmentId, false, audience);
  const view = toView(row);
  const grant = row.status === 'UPLOADED' ? await grantUrl(io, row, 'download') : null;
  return { ...view, attachment: view, downloadUrl: grant?.url ?? null, expiresAt: grant?.expiresAt ?? null };
}

/**
 * Hard delete: the row goes (the audit log keeps attachment.deleted with its name and size) and
 * so does the file, right after the commit; the deletion queue covers a crash in between.
 */
export async function remove(ctx: TenantCtx, deps: AttachmentDeps, brandId: string, ticketId: string, attachmentId: string): Promise<AttachmentView> {
  const view = await withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await requireOnTicket(tx, brand.id, ticketId, attachmentId, true);
    await deleteQueuingFiles(tx, 'attachments', { sql: '? and f.brand_id = ? and f.id = ?', bindings: [tenantScope(tx, 'f'), brand.id, row.id] });
    if (row.status === 'UPLOADED') await bumpCount(tx, brand.id, ticketId, -1);
    await audit.record(tx, {
      brandId: brand.id,
      ticketId,
      entityType: 'attachment',
      entityId: row.id,
      event: 'attachment.deleted',
      metadata: { filename: row.filename, contentType: row.contentType, size: Number(row.size) },
    });
    await events.attachmentsChanged(tx, 'attachment.deleted', [row]);
    return toView(row);
  });
  await removeFiles(ctx, deps, [view.id]).catch(() => undefined); // the dispatcher retries
  return view;
}

/** Fresh download URLs: { [id]: { url, filename, contentType, expiresAt } | null } for every id asked. */
export async function urls(ctx: TenantCtx, io: AttachmentIo, brandId: string, ids: readonly string[]): Promise<UrlsView> {
  const brand = await requireBrand(ctx, brandId);
  const rows = ids.length
    ? await ofBrand(ctx, brand.id)
        .whereIn('attachments.id', [...new Set(ids)])
        .where('attachments.status', 'UPLOADED')
        .where(onLiveTicket(ctx))
    : [];
  const found = new Map<string, UrlsView[string]>();
  for (const row of rows) {
    const grant = await grantUrl(io, row, 'download');
    found.set(row.id, { url: grant.url, filename: row.filename, contentType: row.contentType, expiresAt: grant.expiresAt });
  }
  // fromEntries: own properties even for an id such as "__proto__".
  return Object.fromEntries(ids.map((id) => [id, found.get(id) ?? null]));
}

/** Types a browser may be told as is; anything else (HTML, SVG, scripts, …) is served as octet-stream. */
const SAFE_TYPES: ReadonlySet<string> = new Set([
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'image/avif',
  'image/bmp',
  'image/x-icon',
  'image/vnd.microsoft.icon',
  'image/heic',
  'image/tiff',
  'application/pdf',
  'text/plain',
  'text/csv',
  'application/json',
  'application/zip',
  'audio/mpeg',
  'audio/ogg',
  'audio/wav',
  'audio/webm',
  'audio/mp4',
  'video/mp4',
  'video/webm',
  'video/ogg',
  'video/quicktime',
]);

function servedContentType(recorded: string): string {
  const type = recorded.split(';')[0]!.trim().toLowerCase();
  if (!SAFE_TYPES.has(type)) return 'application/octet-stream';
  return type.startsWith('text/') ? `${type}; charset=utf-8` : type;
}

/** Always a download (RFC 6266): an ASCII name, and the exact UTF-8 one (filename*) when they differ. */
export function contentDisposition(filename: string): string {
  return formatContentDisposition(filename, { type: 'attachment', fallback: filename.replace(/[^\x20-\x7e]/g, '_') });
}

export interface Download {
  stream: Readable;
  size: number;
  filename: string;
  contentType: string;
}

/** How long a redirect to the storage's own URL lets the client fetch the bytes. */
const DIRECT_DOWNLOAD_SECONDS = 300;

/**
 * GET /v1/files/<token>: the bytes of an UPLOADED attachment whose ticket (if any) is not deleted,
 * or, when the storage serves them itself (a bucket's presigned downloads), where to get them.
 */
export async function openDownload(base: BaseCtx, deps: AttachmentDeps, token: string): Promise<Download | { redirect: string }> {
  const { ctx, attachmentId } = await tenantOfGrant(base, deps, token, 'download');
  const row = await Attachment.scoped(ctx).findById(attachmentId).where('attachments.status', 'UPLOADED').where(onLiveTicket(ctx));
  if (!row) throw notFound('Attachment');
  const contentType = servedContentType(row.contentType);
  const direct = await deps.storage.directDownloadUrl(row.id, DIRECT_DOWNLOAD_SECONDS, { contentType, contentDisposition: contentDisposition(row.filename) });
  if (direct) return { redirect: direct };
  const file = await deps.storage.open(row.id);
  if (!file) throw notFound('Attachment');
  return { stream: file.stream, size: file.size, filename: row.filename, contentType };
}

// ---------------------------------------------------------------------------------------------
// For ticket create and merge.

/**
 * Ticket create: links these pending attachments to the new ticket, in the create's transaction,
 * before the statement that inserts the ticket (the FK is checked at commit). Every id must be an
 * UPLOADED, not yet linked attachment of this brand, account and mode, else 400
 * invalid_attachments. Returns how many were linked: the new ticket's attachment_count. The
 * UPDATE locks the rows, so two creates cannot both link one attachment.
 */
export async function linkPending(tx: TenantCtx, brandId: string, ticketId: string, attachmentIds: readonly string[], portalCustomerId: string | null = null): Promise<number> {
  const wanted = [...new Set(attachmentIds)];
  if (!wanted.length) return 0;
  const brand = await requireBrand(tx, brandId);
  const q = ofBrand(tx, brand.id).whereIn('attachments.id', wanted).whereNull('attachments.ticketId').where('attachments.status', 'UPLOADED');
  // A customer's ticket takes that customer's own uploads only.
  if (portalCustomerId) q.where('attachments.portalCustomerId', portalCustomerId);
  const linked = (await q.patch({ ticketId, updatedAt: objection.raw('now()') as unknown as Date }).returning('id')) as unknown as { id: string }[];
  if (linked.length !== wanted.length) {
    const ok = new Set(linked.map((r) => r.id));
    const bad = wanted.filter((id) => !ok.has(id));
    const what = portalCustomerId ? 'your own uploaded pending attachments' : 'uploaded attachments of this brand that are not on a ticket yet';
    throw badRequest(
      `attachmentIds must name ${what}: ${bad.join(', ')}`,
      bad.map((id) => ({
        field: 'attachmentIds',
        message: `${id} is not ${portalCustomerId ? 'an uploaded pending attachment of yours' : 'an uploaded pending attachment of this brand'}`,
      })),
      'invalid_attachments',
    );
  }
  return linked.length;
}

/** Ticket merge: moves every attachment of fromTicketIds to toTicketId and recounts all of them. Returns how many moved. */
export async function moveToTicket(tx: TenantCtx, brandId: string, fromTicketIds: readonly string[], toTicketId: string): Promise<number> {
  const from = [...new Set(fromTicketIds)].filter((id) => id !== toTicketId);
  if (!from.length) return 0;
  const brand = await requireBrand(tx, brandId);
  return withTx(tx, async (t) => {
    const moved = await ofBrand(t, brand.id)
      .whereIn('attachments.ticketId', from)
      .patch({ ticketId: toTicketId, updatedAt: objection.raw('now()') as unknown as Date });
    await recount(t, brand.id, [...from, toTicketId]);
    return moved;
  });
}

// ---------------------------------------------------------------------------------------------
// Housekeeping (the dispatcher's tick; every account).

/** Removes the files of deleted attachment rows and their queue entries. */
async function removeFiles(base: BaseCtx, deps: Pick<AttachmentDeps, 'storage'>, ids: string[]): Promise<void> {
  for (const id of ids) await deps.storage.delete(id);
  if (ids.length) await base.db('attachment_file_deletions').whereIn('attachmentId', ids).delete();
}

/**
 * After a commit that deleted rows whose files are queued (attachments, avatars, a whole account):
 * removes those files now, the named ones or else the account's, at most `limit` of them; the
 * dispatcher's purge removes whatever is left. Returns how many went.
 */
export async function removeQueuedFiles(base: BaseCtx, storage: Storage, accountId: string, ids?: readonly string[], limit = PURGE_BATCH): Promise<number> {
  const q = base.db('attachment_file_deletions').where('accountId', accountId).orderBy('deletedAt').limit(limit).select('attachmentId');
  if (ids) q.whereIn('attachmentId', [...ids]);
  const queued = ((await q) as { attachmentId: string }[]).map((r) => r.attachmentId);
  await removeFiles(base, { storage }, queued);
  return queued.length;
}

export interface PurgeResult {
  abandoned: number;
  files: number;
}

/** An attachment never linked within 24 h, or an upload never completed within its grant (two bindings). */
const ABANDONED = `((ticket_id is null and created_at < now() - make_interval(hours => ?))
  or (status = 'PENDING' and created_at < now() - make_interval(secs => ?)))`;

/** An attachment row as a delete returns it (snake_case): what its entry and event name. */
export interface RemovedRow {
  id: string;
  brand_id: string;
  ticket_id: string | null;
  comment_id: string | null;
  filename: string;
  content_type: string;
  size: string;
  created_at: Date;
}

/** Attachments ticketd removed of its own accord: each gets its attachment.deleted entry, with `reason`, and event. */
export async function recordRemoved(tx: TenantCtx, rows: readonly RemovedRow[], reason: string): Promise<void> {
  await audit.recordMany(
    tx,
    rows.map((row) => ({
      brandId: row.brand_id,
      ticketId: row.ticket_id,
      entityType: 'attachment',
      entityId: row.id,
      event: 'attachment.deleted',
      metadata: { filename: row.filename, contentType: row.content_type, size: Number(row.size), reason },
    })),
  );
  await events.attachmentsChanged(
    tx,
    'attachment.deleted',
    rows.map((row) => ({
      id: row.id,
      brandId: row.brand_id,
      ticketId: row.ticket_id,
      commentId: row.comment_id,
      filename: row.filename,
      contentType: row.content_type,
      size: row.size,
      createdAt: row.created_at,
    })),
  );
}

/**
 * Deletes pending attachments never linked within 24 h and uploads never completed within their
 * grant (PENDING older than the upload URL's lifetime), then removes the files of every deleted
 * attachment still queued. No locking read across accounts (refused on a cluster distributed by
 * account): the delete tests the condition again on each row, so one a request links meanwhile
 * (waited for) stays.
 */
export async function purgeAbandoned(base: BaseCtx, deps: AttachmentDeps): Promise<PurgeResult> {
  const abandoned = await withTx(base, async (tx) => {
    const deleted = {
      rows: await deleteQueuingFiles<{
        id: string;
        account_id: string;
        livemode: boolean;
        brand_id: string;
        ticket_id: string | null;
        comment_id: string | null;
        status: string;
        filename: string;
        content_type: string;
        size: string;
        created_at: Date;
      }>(
        tx,
        'attachments',
        {
          // No lock across accounts: the condition is tested again on each row deleted, so an upload linked meanwhile stays.
          sql: `(f.account_id, f.id) in (select account_id, id from attachments where ${ABANDONED} limit ?) and ${ABANDONED}`,
          bindings: [PENDING_LINK_HOURS, deps.uploadTtlSeconds, PURGE_BATCH, PENDING_LINK_HOURS, deps.uploadTtlSeconds],
        },
        'f.id, f.account_id, f.livemode, f.brand_id, f.ticket_id, f.comment_id, f.status, f.filename, f.content_type, f.size, f.created_at',
      ),
    }; // raw rows keep their snake_case names
    // Uploaded-but-never-linked attachments had an attachment.created entry: close it, one insert per tenant.
    const byTenant = new Map<string, typeof deleted.rows>();
    for (const row of deleted.rows.filter((r) => r.status === 'UPLOADED')) {
      const key = `${row.account_id}:${row.livemode}`;
      byTenant.set(key, [...(byTenant.get(key) ?? []), row]);
    }
    for (const rows of byTenant.values()) await recordRemoved(tenantCtx(tx, rows[0]!.account_id, rows[0]!.livemode), rows, 'never_linked');
    return deleted.rows.length;
  });
  const queued = ((await base.db('attachment_file_deletions').orderBy('deletedAt').limit(PURGE_BATCH).select('attachmentId')) as { attachmentId: string }[]).map(
    (r) => r.attachmentId,
  );
  await removeFiles(base, deps, queued);
  // Staging leftovers only come from crashes: a sweep an hour is plenty, not one per tick.
  if (deps.now() - deps.staging.lastSweep >= 3600_000) {
    deps.staging.lastSweep = deps.now();
    await deps.storage.purgeStaging(new Date(deps.now() - PENDING_LINK_HOURS * 3600_000));
  }
  return { abandoned, files: queued.length };
}

/** Before a brand is deleted (its attachments, pending ones too, go with it): their files, queued for removal after the commit. */
export async function forgetBrand(tx: TenantCtx, brandId: string): Promise<void> {
  await queueFileDeletions(tx, 'attachments', { sql: '? and f.brand_id = ?', bindings: [tenantScope(tx, 'f'), brandId] });
}
