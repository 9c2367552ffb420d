import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TenantCtx } from '../core/context.js';
import {
  ContactExportOut,
  ContactExportQuery,
  ContactParams,
  EraseByEmailBody,
  EraseContactBody,
  ErasureOut,
  ErasuresOut,
  type ContactExportInput,
  type EraseByEmailInput,
} from '../domains/contacts/schemas.js';
import * as attachments from '../domains/attachments/service.js';
import { eraseByEmail, eraseContact } from '../flows/contact-erasure.js';
import { contactTarget, emailTargets, exportDocument, type ExportTarget } from '../flows/contact-export.js';

/**
 * A data subject's requests (decision 0120): export everything held about a person, and erase it.
 * For a contact of a brand (mounted under /v1/brands/:brandId and /v1/workspaces/:brandId) and,
 * for owners and admins, for an email across every brand of the account (under /v1).
 */
export interface ContactPrivacyRouteOptions {
  deps: attachments.AttachmentDeps;
}

const tags = ['Contacts'];
type ContactRoute<B = undefined> = { Params: { brandId: string; contactId: string }; Body: B };

/** Streams the document: the targets were found (or refused) before the first byte. */
function sendExport(req: FastifyRequest, reply: FastifyReply, deps: attachments.AttachmentDeps, ctx: TenantCtx, targets: ExportTarget[]) {
  const io = attachments.forRequest(deps, req.protocol, req.host);
  return reply
    .header('Content-Type', 'application/json; charset=utf-8')
    .header('Content-Disposition', 'attachment; filename="contact-export.json"')
    .header('Cache-Control', 'private, no-store')
    .send(Readable.from(exportDocument(ctx, io, targets)));
}

export async function contactPrivacyRoutes(app: FastifyInstance, { deps }: ContactPrivacyRouteOptions): Promise<void> {
  app.get<ContactRoute>(
    '/contacts/:contactId/export',
    {
      // No HEAD: it would read everything to send nothing.
      exposeHeadRoute: false,
      config: { auth: ['api-key', 'session'], permission: 'contacts:export' },
      schema: { tags, summary: 'Everything held about a contact, as one JSON document (streamed)', params: ContactParams, response: { 200: ContactExportOut } },
    },
    async (req, reply) => sendExport(req, reply, deps, req.ctx, await contactTarget(req.ctx, req.params.brandId, req.params.contactId)),
  );

  app.post<ContactRoute<{ confirm: true }>>(
    '/contacts/:contactId/erase',
    {
      config: { auth: ['api-key', 'session'], permission: 'contacts:erase' },
      schema: {
        tags,
        summary: 'Erase a contact: its name and email become a tombstone, its messages are redacted, its files deleted; its tickets stay. Idempotent',
        params: ContactParams,
        body: EraseContactBody,
        response: { 200: ErasureOut },
      },
    },
    async (req) => eraseContact(req.ctx, req.params.brandId, req.params.contactId),
  );
}

/** The account-wide routes, by email: every brand of the account. Mounted under /v1. */
export async function accountContactPrivacyRoutes(app: FastifyInstance, { deps }: ContactPrivacyRouteOptions): Promise<void> {
  app.get<{ Querystring: ContactExportInput }>(
    '/contacts/export',
    {
      exposeHeadRoute: false,
      config: { auth: ['api-key', 'session'], permission: 'contacts:export_all' },
      schema: {
        tags,
        summary: 'Everything held about an email in every brand of the account, as one JSON document (streamed)',
        querystring: ContactExportQuery,
        response: { 200: ContactExportOut },
      },
    },
    async (req, reply) => sendExport(req, reply, deps, req.ctx, await emailTargets(req.ctx, req.query.email)),
  );

  app.post<{ Body: EraseByEmailInput }>(
    '/contacts/erase',
    {
      config: { auth: ['api-key', 'session'], permission: 'contacts:erase_all' },
      schema: {
        tags,
        summary: 'Erase the contacts of an email in every brand of the account, in one transaction. Idempotent',
        body: EraseByEmailBody,
        response: { 200: ErasuresOut },
      },
    },
    async (req) => eraseByEmail(req.ctx, req.body.email),
  );
}
