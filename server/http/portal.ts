import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { addressSubject, enforceRateLimit, rateLimiterOf, signInPolicies } from '../core/rate-limit.js';
import { onReplica } from '../core/read-replica.js';
import { BrandParams } from '../core/schemas.js';
import * as portal from '../flows/portal.js';
import { AttachmentOut, AttachmentWithUrlOut, UploadGrantOut } from '../domains/attachments/schemas.js';
import { PortalFeedbackOut, PortalFeedbackWrapper, RateBody, type RateInput } from '../domains/feedback/schemas.js';
import {
  LinkSent,
  MagicLinkBody,
  MintTokenBody,
  PortalAttachmentParams,
  PortalCommentBody,
  PortalCommentOut,
  PortalCreateTicketBody,
  PortalIdempotencyHeaders,
  PortalPendingParams,
  PortalTicketDetailOut,
  PortalTicketListQuery,
  PortalTicketOut,
  PortalTicketPage,
  PortalTicketParams,
  PortalTokenOut,
  PortalUploadBody,
  VerifyBody,
  type MagicLinkInput,
  type MintTokenInput,
  type PortalCreateTicketInput,
  type PortalTicketListInput,
  type PortalUploadInput,
} from '../domains/portal/schemas.js';

/**
 * The customer portal. Minting (and mailing sign-in links) is server side, under the brand, with an
 * API key or a session of a member of the brand; everything under /v1/portal takes a portal token
 * alone (verify, which turns a mailed link into one, takes nothing).
 */

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function portalTokenRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Portal'];
  const mint = { auth: ['api-key', 'session'], permission: 'portal_tokens:write' } as const;

  app.post<{ Params: { brandId: string }; Body: MintTokenInput }>(
    '/portal/token',
    {
      config: mint,
      schema: {
        tags,
        summary: 'Mint a portal token for a customer (found or created as a contact of the brand); hand `token` to their browser',
        params: BrandParams,
        body: MintTokenBody,
        response: { 201: PortalTokenOut },
      },
    },
    async (req, reply) => reply.status(201).send(await portal.mintToken(req.ctx, req.params.brandId, req.body)),
  );

  app.post<{ Params: { brandId: string }; Body: MagicLinkInput }>(
    '/portal/magic-link',
    {
      config: mint,
      schema: {
        tags,
        summary: "Mail a customer a single-use sign-in link (15 minutes) to portalUrl, which must lie within the brand's portalOrigins",
        params: BrandParams,
        body: MagicLinkBody,
        response: { 200: LinkSent },
      },
    },
    async (req) => portal.requestMagicLink(req.ctx, req.params.brandId, req.body),
  );
}

export interface PortalRouteOptions {
  deps: portal.AttachmentDeps;
}

type Idempotent = { 'x-idempotency-key'?: string };

/** Counts a verify against its client address's hourly budget: tokens are not guessed, but tries cost. */
async function verifyBudget(req: FastifyRequest, reply: FastifyReply) {
  const { services } = req.baseCtx;
  enforceRateLimit(reply, rateLimiterOf(services), signInPolicies(services.config, 'portal-verify').ip, addressSubject(req.ip));
}

/** Mounted at the root: /v1/portal/…. */
export async function portalRoutes(app: FastifyInstance, { deps }: PortalRouteOptions): Promise<void> {
  const tags = ['Portal'];
  const read = { auth: 'portal', permission: 'portal:read' } as const;
  const write = { auth: 'portal', permission: 'portal:write' } as const;
  const io = (req: FastifyRequest) => portal.requestIo(deps, req.protocol, req.host);

  app.post<{ Body: { token: string } }>(
    '/v1/portal/verify',
    {
      config: { auth: 'none', permission: 'portal:sign_in' },
      schema: { tags, summary: 'Spend a mailed portal sign-in link (`pl_…`) for a portal token', body: VerifyBody, response: { 200: PortalTokenOut } },
      preHandler: verifyBudget,
    },
    async (req) => portal.verifyLink(req.baseCtx, req.body.token, req.headers.origin),
  );

  app.post(
    '/v1/portal/refresh',
    {
      config: write,
      schema: { tags, summary: 'A new portal token for the same customer and lifetime, while this one is still valid', response: { 200: PortalTokenOut } },
    },
    async (req) => portal.refreshToken(req.ctx),
  );

  app.get<{ Querystring: PortalTicketListInput }>(
    '/v1/portal/tickets',
    {
      config: read,
      schema: {
        tags,
        summary: "The customer's own tickets (in `data` and `tickets`), newest first; cursor pages",
        querystring: PortalTicketListQuery,
        response: { 200: PortalTicketPage },
      },
    },
    async (req) => onReplica(req.ctx, (ctx) => portal.listTickets(ctx, req.query)),
  );

  app.post<{ Body: PortalCreateTicketInput; Headers: Idempotent }>(
    '/v1/portal/tickets',
    {
      config: write,
      schema: {
        tags,
        summary: 'Open a ticket as the customer (source web; 201); with X-Idempotency-Key, a repeat returns the first ticket (200)',
        headers: PortalIdempotencyHeaders,
        body: PortalCreateTicketBody,
        response: { 201: PortalTicketOut, 200: PortalTicketOut },
      },
    },
    async (req, reply) => {
      const { created, ticket } = await portal.createOwnTicket(req.ctx, req.body, req.headers['x-idempotency-key']);
      return reply.status(created ? 201 : 200).send(ticket);
    },
  );

  app.post<{ Body: PortalUploadInput }>(
    '/v1/portal/tickets/attachments/pending',
    {
      config: write,
      schema: {
        tags,
        summary: 'Declare an upload before the ticket exists: PUT the bytes to uploadUrl, confirm, then pass its id in attachmentIds',
        body: PortalUploadBody,
        response: { 201: UploadGrantOut },
      },
    },
    async (req, reply) => reply.status(201).send(await portal.createPendingUpload(req.ctx, io(req), req.body)),
  );

  app.post<{ Params: { attachmentId: string } }>(
    '/v1/portal/tickets/attachments/pending/:attachmentId/confirm',
    {
      config: write,
      schema: { tags, summary: 'Confirm a pending upload once its bytes are PUT (UPLOADED)', params: PortalPendingParams, response: { 200: AttachmentOut } },
    },
    async (req) => portal.confirmPendingUpload(req.ctx, io(req), req.params.attachmentId),
  );

  app.get<{ Params: { ticketId: string } }>(
    '/v1/portal/tickets/:ticketId',
    {
      config: read,
      schema: { tags, summary: "One of the customer's tickets with its public comments, oldest first", params: PortalTicketParams, response: { 200: PortalTicketDetailOut } },
    },
    async (req) => portal.getTicket(req.ctx, req.params.ticketId),
  );

  app.post<{ Params: { ticketId: string }; Body: { body: string }; Headers: Idempotent }>(
    '/v1/portal/tickets/:ticketId/comments',
    {
      config: write,
      schema: {
        tags,
        summary: "Reply on one of the customer's tickets (201; reopens a pending, resolved or closed ticket); X-Idempotency-Key as on create",
        params: PortalTicketParams,
        headers: PortalIdempotencyHeaders,
        body: PortalCommentBody,
        response: { 201: PortalCommentOut, 200: PortalCommentOut },
      },
    },
    async (req, reply) => {
      const { created, comment } = await portal.addComment(req.ctx, req.params.ticketId, req.body.body, req.headers['x-idempotency-key']);
      return reply.status(created ? 201 : 200).send(comment);
    },
  );

  app.get<{ Params: { ticketId: string } }>(
    '/v1/portal/tickets/:ticketId/feedback',
    {
      config: read,
      schema: {
        tags,
        summary: "The satisfaction rating request of one of the customer's tickets (its latest resolution's): open, rated or expired; null when none was asked for",
        params: PortalTicketParams,
        response: { 200: PortalFeedbackWrapper },
      },
    },
    async (req) => portal.getFeedback(req.ctx, req.params.ticketId),
  );

  app.post<{ Params: { ticketId: string }; Body: RateInput }>(
    '/v1/portal/tickets/:ticketId/feedback',
    {
      config: write,
      schema: {
        tags,
        summary: "Rate the latest resolution of one of the customer's tickets, once (as by the mailed link): 404 when no rating was asked for, 409 when rated, 410 when expired",
        params: PortalTicketParams,
        body: RateBody,
        response: { 200: PortalFeedbackOut, 410: { $ref: 'Error#', description: 'The rating request expired' } },
      },
    },
    async (req) => portal.rateTicket(req.ctx, req.params.ticketId, req.body),
  );

  app.post<{ Params: { ticketId: string }; Body: PortalUploadInput }>(
    '/v1/portal/tickets/:ticketId/attachments',
    {
      config: write,
      schema: {
        tags,
        summary: "Declare an upload to one of the customer's tickets: PUT the bytes to uploadUrl (no Authorization), then confirm",
        params: PortalTicketParams,
        body: PortalUploadBody,
        response: { 201: UploadGrantOut },
      },
    },
    async (req, reply) => reply.status(201).send(await portal.createTicketUpload(req.ctx, io(req), req.params.ticketId, req.body)),
  );

  app.post<{ Params: { ticketId: string; attachmentId: string } }>(
    '/v1/portal/tickets/:ticketId/attachments/:attachmentId/confirm',
    {
      config: write,
      schema: { tags, summary: 'Confirm an upload once its bytes are PUT (UPLOADED)', params: PortalAttachmentParams, response: { 200: AttachmentOut } },
    },
    async (req) => portal.confirmTicketUpload(req.ctx, io(req), req.params.ticketId, req.params.attachmentId),
  );

  app.get<{ Params: { ticketId: string } }>(
    '/v1/portal/tickets/:ticketId/attachments',
    {
      config: read,
      schema: { tags, summary: "A ticket's attachments the customer may see, oldest first (bare array)", params: PortalTicketParams, response: { 200: Type.Array(AttachmentOut) } },
    },
    async (req) => portal.listAttachments(req.ctx, req.params.ticketId),
  );

  app.get<{ Params: { ticketId: string; attachmentId: string } }>(
    '/v1/portal/tickets/:ticketId/attachments/:attachmentId',
    {
      config: read,
      schema: {
        tags,
        summary: 'An attachment with a fresh signed downloadUrl (also as { attachment, downloadUrl })',
        params: PortalAttachmentParams,
        response: { 200: AttachmentWithUrlOut },
      },
    },
    async (req) => portal.getAttachment(req.ctx, io(req), req.params.ticketId, req.params.attachmentId),
  );
}
