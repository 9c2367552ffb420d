import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import multipart from '@fastify/multipart';
import type { Readable } from 'node:stream';
import { Type } from 'typebox';
import { HttpError } from '../core/errors.js';
import { BrandParams } from '../core/schemas.js';
import {
  AttachmentOut,
  AttachmentWithUrlOut,
  CreateAttachmentBody,
  GrantParams,
  MultipartBody,
  PendingAttachmentParams,
  TicketAttachmentParams,
  TicketAttachmentsParams,
  UploadedOut,
  UploadGrantOut,
  UploadReceiptOut,
  UrlsBody,
  UrlsOut,
  type CreateAttachmentInput,
} from '../domains/attachments/schemas.js';
import * as attachments from '../domains/attachments/service.js';

export interface AttachmentRouteOptions {
  deps: attachments.AttachmentDeps;
}

type TicketRoute<B = undefined> = { Params: { brandId: string; ticketId: string }; Body: B };
type OneRoute = { Params: { brandId: string; ticketId: string; attachmentId: string } };
type PendingRoute = { Params: { brandId: string; attachmentId: string } };

const io = (deps: attachments.AttachmentDeps, req: FastifyRequest) => attachments.forRequest(deps, req.protocol, req.host);

/** The first file part of a multipart request (the clients send one, in the field `file`). */
async function incomingFile(req: FastifyRequest): Promise<attachments.IncomingFile> {
  if (!req.isMultipart()) throw new HttpError(415, 'unsupported_media_type', 'Send the file as multipart/form-data, in a field named "file"');
  const part = await req.file();
  if (!part) throw new HttpError(400, 'file_missing', 'The multipart body has no file: send it in a field named "file"');
  return { stream: part.file, filename: part.filename, contentType: part.mimetype, truncated: () => part.file.truncated };
}

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function attachmentRoutes(app: FastifyInstance, { deps }: AttachmentRouteOptions): Promise<void> {
  const tags = ['Attachments'];
  const read = { auth: ['api-key', 'session'], permission: 'attachments:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'attachments:write' } as const;
  // Multipart only in this scope; the file is streamed to storage, never buffered. busboy stops
  // reading a file at the limit and marks it truncated: the service answers 413.
  await app.register(multipart, { limits: { fileSize: deps.maxBytes, files: 1, fields: 20, parts: 21 } });

  app.post<TicketRoute<CreateAttachmentInput>>(
    '/tickets/:ticketId/attachments',
    {
      config: write,
      schema: {
        tags,
        summary: 'Step 1 of 3: declare a file; returns a signed uploadUrl to PUT its raw bytes to (no Authorization), then confirm. A size over the limit is 413.',
        params: TicketAttachmentsParams,
        body: CreateAttachmentBody,
        response: { 201: UploadGrantOut },
      },
    },
    async (req, reply) => reply.status(201).send(await attachments.createUpload(req.ctx, io(deps, req), req.params.brandId, req.params.ticketId, req.body)),
  );

  app.post<TicketRoute>(
    '/tickets/:ticketId/attachments/upload',
    {
      config: write,
      schema: {
        tags,
        summary: 'Upload a file in one multipart/form-data request (field `file`); returns { attachment, downloadUrl } (UPLOADED)',
        consumes: ['multipart/form-data'],
        params: TicketAttachmentsParams,
        body: MultipartBody,
        response: { 201: UploadedOut },
      },
    },
    async (req, reply) => {
      const file = await incomingFile(req);
      return reply.status(201).send(await attachments.uploadFile(req.ctx, io(deps, req), req.params.brandId, req.params.ticketId, file));
    },
  );

  app.post<OneRoute>(
    '/tickets/:ticketId/attachments/:attachmentId/confirm',
    {
      config: write,
      schema: {
        tags,
        summary: 'Step 3 of 3: mark the uploaded file UPLOADED (400 upload_incomplete before its bytes arrived; again: harmless)',
        params: TicketAttachmentParams,
        response: { 200: AttachmentOut },
      },
    },
    async (req) => attachments.confirm(req.ctx, io(deps, req), req.params.brandId, req.params.ticketId, req.params.attachmentId),
  );

  app.get<TicketRoute>(
    '/tickets/:ticketId/attachments',
    {
      config: read,
      schema: { tags, summary: "A ticket's attachments, oldest first (bare array)", params: TicketAttachmentsParams, response: { 200: Type.Array(AttachmentOut) } },
    },
    async (req) => attachments.list(req.ctx, req.params.brandId, req.params.ticketId),
  );

  app.get<OneRoute>(
    '/tickets/:ticketId/attachments/:attachmentId',
    {
      config: read,
      schema: {
        tags,
        summary: 'An attachment with a fresh signed downloadUrl and expiresAt (also as { attachment, downloadUrl })',
        params: TicketAttachmentParams,
        response: { 200: AttachmentWithUrlOut },
      },
    },
    async (req) => attachments.get(req.ctx, io(deps, req), req.params.brandId, req.params.ticketId, req.params.attachmentId),
  );

  app.delete<OneRoute>(
    '/tickets/:ticketId/attachments/:attachmentId',
    {
      config: write,
      schema: { tags, summary: 'Delete an attachment and its file; returns the attachment', params: TicketAttachmentParams, response: { 200: AttachmentOut } },
    },
    async (req) => attachments.remove(req.ctx, deps, req.params.brandId, req.params.ticketId, req.params.attachmentId),
  );

  app.post<{ Params: { brandId: string }; Body: CreateAttachmentInput }>(
    '/attachments/pending',
    {
      config: write,
      schema: {
        tags,
        summary: 'Step 1 of 3 for a file uploaded before its ticket exists; pass its id in attachmentIds when creating the ticket (unlinked ones are removed after 24 h)',
        params: BrandParams,
        body: CreateAttachmentBody,
        response: { 201: UploadGrantOut },
      },
    },
    async (req, reply) => reply.status(201).send(await attachments.createUpload(req.ctx, io(deps, req), req.params.brandId, null, req.body)),
  );

  app.post<{ Params: { brandId: string } }>(
    '/attachments/pending/upload',
    {
      config: write,
      schema: {
        tags,
        summary: 'Upload a file before its ticket exists, in one multipart/form-data request (field `file`); returns the attachment itself (UPLOADED)',
        consumes: ['multipart/form-data'],
        params: BrandParams,
        body: MultipartBody,
        response: { 201: AttachmentOut },
      },
    },
    async (req, reply) => {
      const file = await incomingFile(req);
      return reply.status(201).send((await attachments.uploadFile(req.ctx, io(deps, req), req.params.brandId, null, file)).attachment);
    },
  );

  app.post<PendingRoute>(
    '/attachments/pending/:attachmentId/confirm',
    {
      config: write,
      schema: { tags, summary: 'Step 3 of 3 for a pending attachment: mark it UPLOADED', params: PendingAttachmentParams, response: { 200: AttachmentOut } },
    },
    async (req) => attachments.confirm(req.ctx, io(deps, req), req.params.brandId, null, req.params.attachmentId),
  );

  app.post<{ Params: { brandId: string }; Body: { ids: string[] } }>(
    '/attachments/urls',
    {
      config: read,
      schema: {
        tags,
        summary: 'Fresh signed download URLs: { [id]: { url, filename, contentType, expiresAt } | null } (at most 100 ids)',
        params: BrandParams,
        body: UrlsBody,
        response: { 200: UrlsOut },
      },
    },
    async (req) => attachments.urls(req.ctx, io(deps, req), req.params.brandId, req.body.ids),
  );
}

/** For logs: a signed URL is a credential while it lives, so its token is left out. */
export function withoutGrantTokens(url: string): string {
  return url.replace(/^(\/v1\/(?:uploads|files)\/)[^/?#]+/, '$1<token>');
}

function sendDownload(reply: FastifyReply, file: attachments.Download | { redirect: string }) {
  // The bucket serves it, with the same Content-Type and Content-Disposition, signed for minutes.
  if ('redirect' in file) return reply.header('Cache-Control', 'no-store').redirect(file.redirect, 302);
  return reply
    .header('Content-Type', file.contentType)
    .header('Content-Length', file.size)
    .header('Content-Disposition', attachments.contentDisposition(file.filename))
    .header('X-Content-Type-Options', 'nosniff')
    .header('Content-Security-Policy', "default-src 'none'; sandbox")
    .header('Cache-Control', 'private, max-age=300')
    .send(file.stream);
}

/**
 * The signed URLs, outside any brand: the token in the path is the credential. Mounted at the root.
 * This scope takes any request body as a raw stream (the JSON parser is replaced here only), so a
 * file is stored as sent, whatever its Content-Type.
 */
export async function attachmentFileRoutes(app: FastifyInstance, { deps }: AttachmentRouteOptions): Promise<void> {
  const tags = ['Attachments'];
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
  // An empty Content-Type header means "none" here (Fastify would refuse it before the handler).
  app.addHook('onRequest', async (req) => {
    if (req.headers['content-type'] === '') delete req.headers['content-type'];
  });

  app.put<{ Params: { token: string } }>(
    '/v1/uploads/:token',
    {
      config: { auth: 'none', permission: 'files:upload' },
      schema: {
        tags,
        summary: 'Step 2 of 3: PUT the raw bytes (any Content-Type, exactly the declared size) to the uploadUrl; no Authorization: the signed URL is the grant',
        params: GrantParams,
        response: { 200: UploadReceiptOut },
      },
    },
    async (req) => {
      const length = req.headers['content-length'];
      const contentLength = typeof length === 'string' && /^\d+$/.test(length) ? Number(length) : null;
      return attachments.receiveUpload(req.baseCtx, deps, req.params.token, req.body as Readable | undefined, contentLength);
    },
  );

  app.get<{ Params: { token: string } }>(
    '/v1/files/:token',
    {
      config: { auth: 'none', permission: 'files:download' },
      schema: {
        tags,
        summary: 'Download an attachment by its signed downloadUrl (always as a download: Content-Disposition attachment, nosniff)',
        description:
          "With storage.presignedDownloads on an S3 install: 302 to the bucket's presigned URL (5 minutes), which serves the bytes with the same Content-Type and Content-Disposition.",
        params: GrantParams,
      },
    },
    async (req, reply) => sendDownload(reply, await attachments.openDownload(req.baseCtx, deps, req.params.token)),
  );
}
