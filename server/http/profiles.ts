import type { FastifyInstance, FastifyRequest } from 'fastify';
import multipart from '@fastify/multipart';
import type { Readable } from 'node:stream';
import { HttpError } from '../core/errors.js';
import { confirmAvatar, getProfile, removeAvatar, requestAvatarUpload, updateProfile, uploadAvatar } from '../flows/profile.js';
import {
  AvatarGrantOut,
  AvatarParams,
  AvatarReceiptOut,
  AvatarUploadBody,
  ConfirmAvatarBody,
  MultipartFile,
  ProfileOut,
  UpdateProfileBody,
  type AvatarUploadInput,
  type UpdateProfileInput,
} from '../domains/profiles/schemas.js';
import * as profiles from '../domains/profiles/service.js';

export interface ProfileRouteOptions {
  deps: profiles.AvatarDeps;
}

const io = (deps: profiles.AvatarDeps, req: FastifyRequest) => profiles.forRequest(deps, req.protocol, req.host);

/** The signed-in member's own profile and avatar (GET, PATCH /v1/auth/profile; the avatar routes under it). */
export async function profileRoutes(app: FastifyInstance, { deps }: ProfileRouteOptions): Promise<void> {
  const tags = ['Profile'];
  const read = { auth: 'session', permission: 'profile:read' } as const;
  const write = { auth: 'session', permission: 'profile:write' } as const;
  // Multipart only in this scope; the parser stops reading a file at the limit and marks it truncated (413).
  await app.register(multipart, { limits: { fileSize: profiles.AVATAR_MAX_BYTES, files: 1, fields: 20, parts: 21 } });

  app.get('/v1/auth/profile', { config: read, schema: { tags, summary: "The signed-in member's profile", response: { 200: ProfileOut } } }, async (req) =>
    getProfile(req.ctx, io(deps, req)),
  );

  app.patch<{ Body: UpdateProfileInput }>(
    '/v1/auth/profile',
    { config: write, schema: { tags, summary: 'Change any of the profile fields; returns the whole profile', body: UpdateProfileBody, response: { 200: ProfileOut } } },
    async (req) => updateProfile(req.ctx, io(deps, req), req.body),
  );

  app.post(
    '/v1/auth/profile/avatar/upload',
    {
      config: write,
      schema: {
        tags,
        summary: 'Upload an avatar in one multipart/form-data request (field `file`): JPEG, PNG, GIF or WebP by its content, at most 5 MiB; returns the profile',
        consumes: ['multipart/form-data'],
        body: MultipartFile,
        response: { 200: ProfileOut },
      },
    },
    async (req) => {
      if (!req.isMultipart()) throw new HttpError(415, 'unsupported_media_type', 'Send the image as multipart/form-data, in a field named "file"');
      const part = await req.file();
      if (part?.fieldname !== 'file') {
        part?.file.resume(); // read and dropped, so the request ends
        throw new HttpError(400, 'file_missing', 'The multipart body has no file in a field named "file"');
      }
      return uploadAvatar(req.ctx, io(deps, req), { stream: part.file, truncated: () => part.file.truncated });
    },
  );

  app.post<{ Body: AvatarUploadInput }>(
    '/v1/auth/profile/avatar',
    {
      config: write,
      schema: {
        tags,
        summary: 'Step 1 of 3: an upload URL for an avatar (PUT its raw bytes there without Authorization, then confirm)',
        body: AvatarUploadBody,
        response: { 200: AvatarGrantOut },
      },
    },
    async (req) => requestAvatarUpload(req.ctx, io(deps, req), req.body),
  );

  app.post<{ Body: { storageKey?: string } }>(
    '/v1/auth/profile/avatar/confirm',
    {
      config: write,
      schema: {
        tags,
        summary: 'Step 3 of 3: the uploaded file becomes the avatar once its content shows an image; returns the profile',
        body: ConfirmAvatarBody,
        response: { 200: ProfileOut },
      },
    },
    async (req) => confirmAvatar(req.ctx, io(deps, req), req.body?.storageKey),
  );

  app.delete(
    '/v1/auth/profile/avatar',
    { config: write, schema: { tags, summary: 'Remove the avatar (back to none); returns the profile', response: { 200: ProfileOut } } },
    async (req) => removeAvatar(req.ctx, io(deps, req)),
  );
}

/**
 * Avatar files at their public URL, outside any credential: the avatar id in the path is the
 * capability. GET serves a member's current avatar; PUT takes the bytes of an upload that waits.
 * This scope takes any request body as a raw stream (the JSON parser is replaced here only).
 */
export async function avatarFileRoutes(app: FastifyInstance, { deps }: ProfileRouteOptions): Promise<void> {
  const tags = ['Profile'];
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
  // An empty Content-Type header means "none" here (Fastify would refuse it before the handler).
  app.addHook('onRequest', async (req) => {
    if (req.headers['content-type'] === '') delete req.headers['content-type'];
  });

  app.get<{ Params: { accountId: string; avatarId: string } }>(
    '/v1/avatars/:accountId/:avatarId',
    {
      config: { auth: 'none', permission: 'files:download' },
      schema: { tags, summary: "A member's avatar image (public: its URL is unguessable)", params: AvatarParams },
    },
    async (req, reply) => {
      const file = await profiles.open(req.baseCtx, deps.storage, req.params.accountId, req.params.avatarId);
      return reply
        .header('Content-Type', file.contentType)
        .header('Content-Length', file.size)
        .header('X-Content-Type-Options', 'nosniff')
        .header('Content-Security-Policy', "default-src 'none'; sandbox")
        .header('Cross-Origin-Resource-Policy', 'cross-origin')
        .header('Cache-Control', 'public, max-age=86400')
        .send(file.stream);
    },
  );

  app.put<{ Params: { accountId: string; avatarId: string } }>(
    '/v1/avatars/:accountId/:avatarId',
    {
      config: { auth: 'none', permission: 'files:upload' },
      schema: {
        tags,
        summary: "Step 2 of 3: PUT an avatar's raw bytes (exactly the declared size) to its uploadUrl; no Authorization: the URL is the grant",
        params: AvatarParams,
        response: { 200: AvatarReceiptOut },
      },
    },
    async (req) => {
      const length = req.headers['content-length'];
      const contentLength = typeof length === 'string' && /^\d+$/.test(length) ? Number(length) : null;
      return profiles.receiveUpload(req.baseCtx, deps, req.params.accountId, req.params.avatarId, req.body as Readable | undefined, contentLength);
    },
  );
}
