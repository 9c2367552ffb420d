import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sessionCookie } from '../core/auth.js';
import { badRequest, forbidden } from '../core/errors.js';
import { isDashboardOrigin, normalizeOrigin } from '../core/origins.js';
import { addressSubject, enforceRateLimits, rateLimiterOf, signInPolicies } from '../core/rate-limit.js';
import { Success } from '../core/schemas.js';
import { hashSecret } from '../core/secrets.js';
import { normalizeEmail } from '../core/text.js';
import { emailExists, logout, requestMagicLink, sessionState, signup, verify } from '../flows/sign-in.js';
import {
  CheckEmailBody,
  CheckEmailResult,
  LinkSent,
  MagicLinkBody,
  OriginHeaders,
  SessionState,
  SignupBody,
  SignupResult,
  VerifyBody,
  VerifyQuery,
  VerifyResult,
  type CheckEmailInput,
  type MagicLinkInput,
  type SignupInput,
} from '../domains/sessions/schemas.js';

/**
 * Sign-in by magic link and the session it opens (POST check-email, signup, magic-link, verify;
 * GET session; POST logout). The first three may be called by anyone, so they are rate-limited per
 * client address and per email address.
 */

/** Counts the request against the route's budgets for the client address and the email address; over either: 429 with Retry-After. */
export function rateLimited(route: string) {
  return async (req: FastifyRequest<{ Body: { email: string } }>, reply: FastifyReply) => {
    const { services } = req.baseCtx;
    const policies = signInPolicies(services.config, route);
    enforceRateLimits(reply, rateLimiterOf(services), [
      [policies.ip, addressSubject(req.ip)],
      // The address is counted by its hash: the shared counters keep no one's email.
      [policies.email, `email:${hashSecret(normalizeEmail(req.body.email))}`],
    ]);
  };
}

/** The dashboard origin a link will point at: it must be one of the configured ones. */
function dashboardOrigin(req: FastifyRequest<{ Headers: { origin: string } }>): string {
  const origin = normalizeOrigin(req.headers.origin);
  if (!origin || !isDashboardOrigin(req.baseCtx.services, origin)) {
    throw badRequest(
      `Origin ${req.headers.origin} is not a dashboard origin of this server: sign-in links only point at the configured dashboard origins (dashboardOrigins)`,
      [{ field: 'origin', message: 'is not an allowed dashboard origin' }],
      'origin_not_allowed',
    );
  }
  return origin;
}

async function requireDashboardOrigin(req: FastifyRequest<{ Headers: { origin: string } }>): Promise<void> {
  dashboardOrigin(req);
}

export async function sessionRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Sign-in and sessions'];
  const signIn = { auth: 'none', permission: 'auth:sign_in' } as const;

  app.post<{ Body: CheckEmailInput }>(
    '/v1/auth/check-email',
    {
      config: signIn,
      schema: { tags, summary: 'Whether an email address belongs to a member of some organization', body: CheckEmailBody, response: { 200: CheckEmailResult } },
      preHandler: rateLimited('check-email'),
    },
    async (req) => ({ exists: await emailExists(req.baseCtx, req.body.email) }),
  );

  app.post<{ Body: SignupInput; Headers: { origin: string } }>(
    '/v1/auth/signup',
    {
      config: signIn,
      schema: {
        tags,
        summary: 'Create an organization with its owner, and mail the owner a sign-in link to <origin>/auth/callback',
        headers: OriginHeaders,
        body: SignupBody,
        response: { 200: SignupResult },
      },
      // A refused origin costs nothing (no mail): it is answered before the budgets are counted.
      preHandler: [requireDashboardOrigin, rateLimited('signup')],
    },
    async (req) => {
      const origin = dashboardOrigin(req);
      if (req.baseCtx.services.config.signup === 'closed') {
        throw forbidden('Sign-up is closed on this server; an administrator creates accounts with `ticketd accounts create`', 'signup_closed');
      }
      return signup(req.baseCtx, req.body, origin);
    },
  );

  app.post<{ Body: MagicLinkInput; Headers: { origin: string } }>(
    '/v1/auth/magic-link',
    {
      config: signIn,
      schema: {
        tags,
        summary: 'Mail a member a single-use sign-in link to <origin>/auth/callback (15 minutes)',
        headers: OriginHeaders,
        body: MagicLinkBody,
        response: { 200: LinkSent },
      },
      preHandler: [requireDashboardOrigin, rateLimited('magic-link')],
    },
    async (req) => requestMagicLink(req.baseCtx, req.body.email, dashboardOrigin(req), req.body.organizationId),
  );

  app.post<{ Body: { token: string }; Querystring: { setCookies?: boolean } }>(
    '/v1/auth/verify',
    {
      config: signIn,
      schema: {
        tags,
        summary: 'Spend a sign-in token and open a session: as a cookie (setCookies=true) or as a token in the body',
        querystring: VerifyQuery,
        body: VerifyBody,
        response: { 200: VerifyResult },
      },
    },
    async (req, reply) => {
      const { sessionToken, ...signedIn } = await verify(req.baseCtx, req.body.token, { ip: req.ip, userAgent: req.headers['user-agent'] ?? null });
      if (!req.query.setCookies) return { success: true as const, sessionToken, ...signedIn };
      const maxAge = Math.max(0, Math.floor((Date.parse(signedIn.session.maxExpiresAt) - req.baseCtx.services.now()) / 1000));
      reply.header('Set-Cookie', sessionCookie(req, sessionToken, maxAge));
      return { success: true as const, ...signedIn };
    },
  );

  app.get(
    '/v1/auth/session',
    {
      config: { auth: 'session', permission: 'session:read' },
      schema: { tags, summary: 'The signed-in member, their organization and account, and when the session ends', response: { 200: SessionState } },
    },
    async (req) => sessionState(req.ctx),
  );

  app.post(
    '/v1/auth/logout',
    {
      config: { auth: 'session', permission: 'session:write' },
      schema: { tags, summary: 'Sign out: the session token (and cookie) stop working at once', response: { 200: Success } },
    },
    async (req, reply) => {
      await logout(req.ctx);
      reply.header('Set-Cookie', sessionCookie(req, '', 0));
      return { success: true as const };
    },
  );
}
