import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { organization, organizationsOf } from '../../flows/sign-in.js';
import { OrganizationMembership, OrganizationOut } from './schemas.js';

/** The organizations of the signed-in person; one account is one organization. */
export async function organizationRoutes(app: FastifyInstance): Promise<void> {
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
}
