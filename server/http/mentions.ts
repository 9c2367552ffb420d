import type { FastifyInstance } from 'fastify';
import { sessionMemberId } from '../core/context.js';
import { AckOut, MentionParams, MentionTicketParams, UnreadMentions } from '../domains/mentions/schemas.js';
import * as mentions from '../domains/mentions/service.js';

/** The signed-in member's mentions: the dashboard's notification bell. */
export async function mentionRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Mentions'];

  app.get(
    '/v1/auth/mentions/unread',
    {
      config: { auth: 'session', permission: 'mentions:read', conditional: true },
      schema: { tags, summary: "The caller's unacknowledged mentions in the brands they may see, newest first (bare array)", response: { 200: UnreadMentions } },
    },
    async (req) => mentions.unread(req.ctx, sessionMemberId(req.ctx)),
  );

  app.post<{ Params: { mentionId: string } }>(
    '/v1/auth/mentions/:mentionId/ack',
    {
      config: { auth: 'session', permission: 'mentions:write' },
      schema: { tags, summary: "Acknowledge one of the caller's mentions (again: a no-op); 404 when it is not theirs", params: MentionParams, response: { 200: AckOut } },
    },
    async (req) => ({ success: true as const, acknowledged: await mentions.acknowledge(req.ctx, sessionMemberId(req.ctx), req.params.mentionId) }),
  );

  app.post<{ Params: { ticketId: string } }>(
    '/v1/auth/mentions/ack-ticket/:ticketId',
    {
      config: { auth: 'session', permission: 'mentions:write' },
      schema: { tags, summary: 'Acknowledge every mention of the caller on a ticket they may see (404 otherwise)', params: MentionTicketParams, response: { 200: AckOut } },
    },
    async (req) => ({ success: true as const, acknowledged: await mentions.acknowledgeTicket(req.ctx, sessionMemberId(req.ctx), req.params.ticketId) }),
  );
}
