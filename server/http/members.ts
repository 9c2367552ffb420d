import type { FastifyInstance } from 'fastify';
import { MemberList } from '../domains/members/schemas.js';
import * as members from '../domains/members/service.js';

export async function memberRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/v1/accounts/me/members',
    {
      config: { auth: ['api-key', 'session'], permission: 'members:read' },
      schema: { tags: ['Accounts'], summary: 'List members (their ids are valid assignees)', response: { 200: MemberList } },
    },
    async (req) => {
      const data = await members.list(req.ctx);
      return { data, pagination: { cursor: null, nextCursor: null, hasMore: false } };
    },
  );
}
