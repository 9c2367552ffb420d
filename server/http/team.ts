import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sessionMemberId } from '../core/context.js';
import { badRequest, notFound } from '../core/errors.js';
import { isDashboardOrigin, normalizeOrigin } from '../core/origins.js';
import { inviteMember, resendInvite } from '../flows/invitations.js';
import { sessionMember } from '../domains/members/service.js';
import * as team from '../domains/members/team.js';
import {
  AcceptInviteBody,
  BrandAssignmentsBody,
  BrandAssignmentsOut,
  Done,
  InviteAccepted,
  InviteBody,
  InviteSent,
  MemberParams,
  TeamList,
  TeamListQuery,
  TransferOwnershipBody,
  UpdateMemberBody,
  type BrandAssignmentsInput,
  type InviteInput,
} from '../domains/members/team-schemas.js';

/**
 * Team management for signed-in members: the team and its invitations, roles, removal, ownership,
 * brand assignments, and accepting an invitation. Anyone on the team reads it; owners and admins
 * change it; only the owner hands ownership on.
 */

type Params = { memberId: string };

/**
 * Where an invitation's link points: the dashboard page the inviter works on (its Origin), when that
 * is a dashboard origin; else the first configured dashboard origin. Never anywhere else, so no
 * caller can have ticketd mail a link to a page of theirs (docs/decisions/0047-…).
 */
function invitationOrigin(req: FastifyRequest): string {
  const { services } = req.ctx;
  const asked = typeof req.headers.origin === 'string' ? normalizeOrigin(req.headers.origin) : null;
  if (asked && isDashboardOrigin(services, asked)) return asked;
  const configured = services.config.dashboardOrigins.map(normalizeOrigin).find((o): o is string => o !== null);
  if (configured) return configured;
  throw badRequest(
    'There is no dashboard origin for the invitation link: send the request from a dashboard page (its Origin header), or configure dashboardOrigins',
    [{ field: 'origin', message: 'is not an allowed dashboard origin' }],
    'origin_not_allowed',
  );
}

export async function teamRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Team'];
  const read = { auth: 'session', permission: 'team:read' } as const;
  const manage = { auth: 'session', permission: 'team:manage' } as const;

  app.get<{ Querystring: { brandId?: string } }>(
    '/v1/auth/members',
    {
      config: read,
      schema: {
        tags,
        summary: 'The team: active members and pending invitations; with brandId, those who can work in that brand',
        querystring: TeamListQuery,
        response: { 200: TeamList },
      },
    },
    async (req) => team.listTeam(req.ctx, req.query.brandId),
  );

  app.post<{ Body: InviteInput }>(
    '/v1/auth/members/invite',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Invite an address (owners and admins): a pending member and a mailed link that signs them in and accepts (7 days); an address already invited is invited again',
        body: InviteBody,
        response: { 200: InviteSent },
      },
    },
    async (req) => inviteMember(req.ctx, req.body, () => invitationOrigin(req)),
  );

  app.post<{ Params: Params }>(
    '/v1/auth/members/:memberId/resend-invite',
    {
      config: manage,
      schema: { tags, summary: 'Send a pending invitation again with a fresh link and expiry; earlier links stop working', params: MemberParams, response: { 200: Done } },
    },
    async (req) => resendInvite(req.ctx, req.params.memberId, () => invitationOrigin(req)),
  );

  app.patch<{ Params: Params; Body: { role: 'owner' | 'admin' | 'member' } }>(
    '/v1/auth/members/:memberId',
    {
      config: manage,
      schema: {
        tags,
        summary: "Change a member's role (owners and admins; only the owner makes an owner, by transfer)",
        params: MemberParams,
        body: UpdateMemberBody,
        response: { 200: Done },
      },
    },
    async (req) => {
      const outcome = await team.setRole(req.ctx, req.params.memberId, req.body.role);
      const message = {
        unchanged: `The role is already ${req.body.role}`,
        changed: `The role is now ${req.body.role}`,
        transferred: 'Ownership was transferred; you are an admin now',
      }[outcome];
      return { success: true as const, message };
    },
  );

  app.delete<{ Params: Params }>(
    '/v1/auth/members/:memberId',
    {
      config: manage,
      schema: { tags, summary: 'Remove a member (their sessions end at once) or withdraw an invitation; never the owner', params: MemberParams, response: { 200: Done } },
    },
    async (req) => {
      const removed = await team.remove(req.ctx, req.params.memberId);
      return { success: true as const, message: removed.status === 'pending' ? `The invitation to ${removed.email} was withdrawn` : `${removed.email} was removed` };
    },
  );

  app.post<{ Body: { newOwnerId: string } }>(
    '/v1/auth/transfer-ownership',
    {
      config: { auth: 'session', permission: 'team:transfer' },
      schema: { tags, summary: 'Make an active member the owner (the owner only); the owner becomes an admin', body: TransferOwnershipBody, response: { 200: Done } },
    },
    async (req) => {
      const outcome = await team.transferOwnership(req.ctx, req.body.newOwnerId);
      return { success: true as const, message: outcome === 'unchanged' ? 'You are the owner already' : 'Ownership was transferred; you are an admin now' };
    },
  );

  app.get<{ Params: Params }>(
    '/v1/auth/members/:memberId/brands',
    {
      config: read,
      schema: { tags, summary: "A member's brand assignments and the brands that can be assigned", params: MemberParams, response: { 200: BrandAssignmentsOut } },
    },
    async (req) => team.brandAssignments(req.ctx, req.params.memberId),
  );

  app.put<{ Params: Params; Body: BrandAssignmentsInput }>(
    '/v1/auth/members/:memberId/brands',
    {
      config: manage,
      schema: {
        tags,
        summary: "Replace a member's brand assignments (owners and admins); their sessions see the change on their next request",
        params: MemberParams,
        body: BrandAssignmentsBody,
        response: { 200: BrandAssignmentsOut },
      },
    },
    async (req) => team.setBrandAssignments(req.ctx, req.params.memberId, req.body),
  );

  app.post<{ Body: { inviteId: string } }>(
    '/v1/auth/accept-invite',
    {
      config: { auth: 'session', permission: 'invites:accept' },
      schema: {
        tags,
        summary: "Accept an invitation addressed to the session's email address (from any of the person's organizations); again: the same answer",
        body: AcceptInviteBody,
        response: { 200: InviteAccepted },
      },
    },
    async (req) => {
      const me = await sessionMember(req.ctx, sessionMemberId(req.ctx));
      if (!me) throw notFound('Member');
      // A session opened by single sign-on proves the address to its own organization only.
      const joined = await team.acceptInvite(req.ctx, me.email, req.body.inviteId, req.ctx.session?.sso ? req.ctx.accountId : undefined);
      return { success: true as const, organizationId: joined.accountId, memberId: joined.memberId };
    },
  );
}
