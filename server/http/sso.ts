import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { requestBaseUrl } from '../core/config.js';
import { badRequest } from '../core/errors.js';
import { isDashboardOrigin, normalizeOrigin } from '../core/origins.js';
import { addressSubject, enforceRateLimits, rateLimiterOf, signInPolicies, type Policy, type Subject } from '../core/rate-limit.js';
import { Success } from '../core/schemas.js';
import { hashSecret } from '../core/secrets.js';
import { normalizeEmail } from '../core/text.js';
import { SsoCallbackQuery, SsoConfigBody, SsoConfigOut, SsoStartBody, SsoStartOut, type SsoConfigInput, type SsoStartInput } from '../domains/sso/schemas.js';
import * as sso from '../domains/sso/service.js';
import { finishSignIn, startSignIn } from '../flows/sso.js';

/**
 * Single sign-on with the organization's OpenID provider: its configuration (the owner's), the
 * start a dashboard posts to, and the callback the provider sends the browser back to.
 */

/** The URL the provider sends the browser back to: on publicUrl, else the host the request came to. */
const redirectUriOf = (req: FastifyRequest) => `${requestBaseUrl(req.baseCtx.services.config.publicUrl, req.protocol, req.host)}${sso.CALLBACK_PATH}`;

type StartRequest = FastifyRequest<{ Body: SsoStartInput; Headers: { origin?: string } }>;

/** The dashboard origin to come back to (the body's, else the Origin header): one of the configured ones, else 400. */
function dashboardOrigin(req: StartRequest): string {
  const given = req.body.origin ?? req.headers.origin;
  const origin = given ? normalizeOrigin(given) : null;
  if (!origin || !isDashboardOrigin(req.baseCtx.services, origin)) {
    throw badRequest(
      `Origin ${given ?? '(none)'} is not a dashboard origin of this server: single sign-on only comes back to the configured dashboard origins (dashboardOrigins)`,
      [{ field: 'origin', message: 'is not an allowed dashboard origin' }],
      'origin_not_allowed',
    );
  }
  return origin;
}

/** Like the magic link's budgets: per client address, and per email address when one is given. A refused origin is answered before counting. */
async function rateLimited(req: StartRequest, reply: FastifyReply): Promise<void> {
  dashboardOrigin(req);
  const { services } = req.baseCtx;
  const policies = signInPolicies(services.config, 'sso-start');
  const budgets: [Policy, Subject][] = [[policies.ip, addressSubject(req.ip)]];
  if (req.body.email) budgets.push([policies.email, `email:${hashSecret(normalizeEmail(req.body.email))}`]);
  enforceRateLimits(reply, rateLimiterOf(services), budgets);
}

/** The provider's answer as text parameters (a repeated one: its first value). */
function providerAnswer(query: Record<string, unknown>): Record<string, string> {
  const answer: Record<string, string> = {};
  for (const [name, value] of Object.entries(query)) {
    const text = Array.isArray(value) ? value[0] : value;
    if (typeof text === 'string') answer[name] = text;
  }
  return answer;
}

export async function ssoRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Single sign-on'];
  const read = { auth: 'session', permission: 'sso:read' } as const;
  const write = { auth: 'session', permission: 'sso:write' } as const;
  const signIn = { auth: 'none', permission: 'auth:sign_in' } as const;

  app.get(
    '/v1/auth/organization/sso',
    {
      config: read,
      schema: { tags, summary: "The organization's single sign-on (owners only; the client secret is never returned); 404 sso_not_configured", response: { 200: SsoConfigOut } },
    },
    async (req) => sso.get(req.ctx, redirectUriOf(req)),
  );

  app.put<{ Body: SsoConfigInput }>(
    '/v1/auth/organization/sso',
    {
      config: write,
      schema: {
        tags,
        summary:
          "Set the organization's single sign-on (owners only): its OpenID provider, checked by discovery (400 sso_issuer_unreachable or sso_issuer_invalid), the client, the allowed email domains, the new members' role, and whether magic links still work",
        body: SsoConfigBody,
        response: { 200: SsoConfigOut },
      },
    },
    async (req) => sso.configure(req.ctx, req.body, redirectUriOf(req)),
  );

  app.delete(
    '/v1/auth/organization/sso',
    {
      config: write,
      schema: { tags, summary: 'Remove single sign-on (owners only): magic links work again; sign-ins under way end', response: { 200: Success } },
    },
    async (req) => sso.remove(req.ctx),
  );

  app.post<{ Body: SsoStartInput; Headers: { origin?: string } }>(
    '/v1/auth/sso/start',
    {
      config: signIn,
      schema: {
        tags,
        summary:
          "Start single sign-on for an email address (its domain finds the organization) or an organizationId: the provider's authorization URL (PKCE, state, nonce) to send the browser to; it comes back to <origin>/auth/callback within 10 minutes",
        body: SsoStartBody,
        response: { 200: SsoStartOut },
      },
      preHandler: rateLimited,
    },
    async (req) => startSignIn(req.baseCtx, req.body, dashboardOrigin(req), redirectUriOf(req)),
  );

  app.get<{ Querystring: Record<string, unknown> }>(
    sso.CALLBACK_PATH,
    {
      config: signIn,
      schema: {
        tags,
        summary:
          'Where the provider sends the browser back: a 302 to <origin>/auth/callback?sessionToken=… once the code is exchanged and the ID token checks out, or ?error=<code>; 400 sso_state_invalid for a state that names no sign-in',
        querystring: SsoCallbackQuery,
        response: { 302: Type.Null({ description: 'To the dashboard: ?sessionToken=ts_… or ?error=<code>' }) },
      },
    },
    async (req, reply) => {
      const location = await finishSignIn(req.baseCtx, providerAnswer(req.query), { ip: req.ip, userAgent: req.headers['user-agent'] ?? null });
      return reply.redirect(location, 302);
    },
  );
}
