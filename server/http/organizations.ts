import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { bearerToken, sessionCookie } from '../core/auth.js';
import { Success } from '../core/schemas.js';
import type { Storage } from '../core/ports.js';
import { deleteAccount } from '../flows/accounts.js';
import { connect, renameOrganization, switchOrganization } from '../flows/organization.js';
import { organization, organizationsOf } from '../flows/sign-in.js';
import {
  ConnectBody,
  DeleteAccountBody,
  DeleteAccountResult,
  OrganizationMembership,
  OrganizationOut,
  SwitchOrganizationBody,
  SwitchOrganizationResult,
  UpdateOrganizationBody,
  UpdateOrganizationResult,
} from '../domains/organizations/schemas.js';

export interface OrganizationRouteOptions {
  /** Attachment storage: deleting the account removes its files after the commit. */
  storage: Storage;
}

/** The organizations of the signed-in person; one account is one organization. */
export async function organizationRoutes(app: FastifyInstance, { storage }: OrganizationRouteOptions): Promise<void> {
  const tags = ['Organizations'];
  const config = { auth: 'session', permission: 'organizations:read' } as const;

  app.get(
    '/v1/auth/organizations',
    {
      config,
      schema: {
        tags,
        summary: 'The organizations the signed-in person is a member of, with their role in each (bare array)',
        response: { 200: Type.Array(OrganizationMembership) },
      },
    },
    async (req) => organizationsOf(req.ctx),
  );

  app.get(
    '/v1/auth/organization',
    {
      config,
      schema: { tags, summary: 'The organization of the session', response: { 200: OrganizationOut } },
    },
    async (req) => organization(req.ctx),
  );

  app.patch<{ Body: { name: string } }>(
    '/v1/auth/organization',
    {
      config: { auth: 'session', permission: 'organization:write' },
      schema: { tags, summary: 'Rename the organization (owners only); returns { success, name }', body: UpdateOrganizationBody, response: { 200: UpdateOrganizationResult } },
    },
    async (req) => renameOrganization(req.ctx, req.body.name),
  );

  app.post<{ Body: { organizationId: string } }>(
    '/v1/auth/switch-organization',
    {
      config: { auth: 'session', permission: 'session:write' },
      schema: {
        tags,
        summary: 'A new session for the signed-in person in another of their organizations (403 where they are no active member); the current one goes on',
        body: SwitchOrganizationBody,
        response: { 200: SwitchOrganizationResult },
      },
    },
    async (req, reply) => {
      const { sessionToken, maxExpiresAt, ...switched } = await switchOrganization(req.ctx, req.body.organizationId, {
        ip: req.ip,
        userAgent: req.headers['user-agent'] ?? null,
      });
      // A session that came as the cookie is replaced as the cookie, and its token stays out of the body.
      if (bearerToken(req)) return { sessionToken, ...switched };
      reply.header('Set-Cookie', sessionCookie(req, sessionToken, Math.max(0, Math.floor((maxExpiresAt.getTime() - req.ctx.services.now()) / 1000))));
      return switched;
    },
  );

  app.post<{ Body: { apiKey: string } }>(
    '/v1/auth/connect',
    {
      config: { auth: 'session', permission: 'organization:connect' },
      schema: {
        tags,
        summary: "Connect the organization to the account of an API key (owners and admins): a key of this organization's own account; `connected` is true",
        body: ConnectBody,
        response: { 200: Success },
      },
    },
    async (req) => connect(req.ctx, req.body.apiKey),
  );

  app.delete<{ Body: { confirmation?: string } }>(
    '/v1/auth/account',
    {
      config: { auth: 'session', permission: 'account:delete' },
      schema: {
        tags,
        summary: 'Delete the account (the organization) and everything in it, both modes, in one transaction (owners only; body { confirmation: "DELETE" })',
        body: DeleteAccountBody,
        response: { 200: DeleteAccountResult },
      },
    },
    async (req, reply) => {
      const result = await deleteAccount(req.ctx, req.body?.confirmation, storage);
      reply.header('Set-Cookie', sessionCookie(req, '', 0));
      return result;
    },
  );
}
