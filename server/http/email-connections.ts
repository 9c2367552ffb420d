import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import {
  AuthorizeBody,
  ConnectionParams,
  CreateConnectionBody,
  EmailConnectionOut,
  RetryResultOut,
  SyncQuery,
  SyncResultOut,
  UpdateConnectionBody,
  type CreateConnectionInput,
  type SyncQueryInput,
  type UpdateConnectionInput,
} from '../domains/email-connections/schemas.js';
import * as emailConnections from '../domains/email-connections/service.js';
import * as mailboxSync from '../flows/mailbox-sync.js';

type InBrand<B = undefined, Q = unknown> = { Params: { brandId: string }; Body: B; Querystring: Q };
type InConnection<B = undefined, Q = unknown> = { Params: { brandId: string; connectionId: string }; Body: B; Querystring: Q };

/**
 * A brand's mailboxes taken in over IMAP. Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId.
 * The sync routes talk to the mail server while the request waits (bounded by mailboxTimeoutMs),
 * never inside a transaction.
 */
export async function emailConnectionRoutes(app: FastifyInstance, options: { policy: emailConnections.ConnectionPolicy; sync: mailboxSync.MailboxSyncDeps }): Promise<void> {
  const tags = ['Email connections'];
  const read = { auth: ['api-key', 'session'], permission: 'email_connections:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'email_connections:write' } as const;

  app.get<InBrand>(
    '/email-connections',
    {
      config: { ...read, conditional: true },
      schema: {
        tags,
        summary: "List the brand's mailboxes, the primary first (a bare array; [] without any)",
        params: BrandParams,
        response: { 200: Type.Array(EmailConnectionOut) },
      },
    },
    async (req) => emailConnections.list(req.ctx, req.params.brandId),
  );

  app.post<InBrand<CreateConnectionInput>>(
    '/email-connections',
    {
      config: write,
      schema: {
        tags,
        summary:
          'Connect a mailbox: IMAP with a password, or GMAIL/OUTLOOK with a refresh token (XOAUTH2); the secret is stored sealed and never shown; the first is primary. 409 email_connection_exists',
        params: BrandParams,
        body: CreateConnectionBody,
        response: { 201: EmailConnectionOut },
      },
    },
    async (req, reply) => reply.status(201).send(await emailConnections.create(req.ctx, options.policy, req.params.brandId, req.body)),
  );

  // Static paths before /:connectionId.
  app.post<InBrand<unknown>>(
    '/email-connections/authorize',
    {
      config: write,
      schema: {
        tags,
        summary: "Google's OAuth consent: 400 oauth_unavailable (connect over IMAP with an app password, or as GMAIL/OUTLOOK with a refresh token)",
        params: BrandParams,
        body: Type.Optional(AuthorizeBody),
      },
    },
    async () => emailConnections.oauthUnavailable(),
  );

  app.post<InBrand<undefined, SyncQueryInput>>(
    '/email-connections/sync',
    {
      config: write,
      schema: {
        tags,
        summary: "Take in the brand's ACTIVE and ERROR mailboxes now (full=true: from their first message; nothing is taken twice)",
        params: BrandParams,
        querystring: SyncQuery,
        response: { 200: SyncResultOut },
      },
    },
    async (req) => mailboxSync.syncBrand(req.ctx, options.sync, req.params.brandId, req.query.full ?? false),
  );

  app.get<InConnection>(
    '/email-connections/:connectionId',
    { config: read, schema: { tags, summary: 'Get a mailbox connection', params: ConnectionParams, response: { 200: EmailConnectionOut } } },
    async (req) => emailConnections.get(req.ctx, req.params.brandId, req.params.connectionId),
  );

  app.patch<InConnection<UpdateConnectionInput>>(
    '/email-connections/:connectionId',
    {
      config: write,
      schema: {
        tags,
        summary: 'Rename a mailbox connection, or give it a new password or refresh token (then it is ACTIVE again)',
        params: ConnectionParams,
        body: UpdateConnectionBody,
        response: { 200: EmailConnectionOut },
      },
    },
    async (req) => emailConnections.update(req.ctx, req.params.brandId, req.params.connectionId, req.body),
  );

  app.post<InConnection>(
    '/email-connections/:connectionId/primary',
    {
      config: write,
      schema: { tags, summary: 'Make it the primary connection (the former one is primary no more)', params: ConnectionParams, response: { 200: EmailConnectionOut } },
    },
    async (req) => emailConnections.makePrimary(req.ctx, req.params.brandId, req.params.connectionId),
  );

  app.post<InConnection<undefined, SyncQueryInput>>(
    '/email-connections/:connectionId/sync',
    {
      config: write,
      schema: {
        tags,
        summary:
          'Take in one mailbox now (full=true: from its first message). A failure is recorded on the connection (status, errorMessage). 409 email_connection_disconnected: retry it',
        params: ConnectionParams,
        querystring: SyncQuery,
        response: { 200: SyncResultOut },
      },
    },
    async (req) => mailboxSync.syncOne(req.ctx, options.sync, req.params.brandId, req.params.connectionId, req.query.full ?? false),
  );

  app.post<InConnection>(
    '/email-connections/:connectionId/retry',
    {
      config: write,
      schema: {
        tags,
        summary: 'Try a mailbox again now, whatever its status (DISCONNECTED and ERROR included): { success, ticketsCreated, error? }',
        params: ConnectionParams,
        response: { 200: RetryResultOut },
      },
    },
    async (req) => mailboxSync.retry(req.ctx, options.sync, req.params.brandId, req.params.connectionId),
  );

  app.post<InConnection>(
    '/email-connections/:connectionId/reconnect',
    { config: write, schema: { tags, summary: 'OAuth re-consent: 400 oauth_unavailable (give the connection a new password or refresh token instead)', params: ConnectionParams } },
    async (req) => {
      await emailConnections.get(req.ctx, req.params.brandId, req.params.connectionId);
      return emailConnections.oauthUnavailable();
    },
  );

  app.delete<InConnection>(
    '/email-connections/:connectionId',
    {
      config: write,
      schema: {
        tags,
        summary: 'Disconnect a mailbox (nothing in it is touched); returns it. The next one becomes primary',
        params: ConnectionParams,
        response: { 200: EmailConnectionOut },
      },
    },
    async (req) => emailConnections.remove(req.ctx, req.params.brandId, req.params.connectionId),
  );
}
