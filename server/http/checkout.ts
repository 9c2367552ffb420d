import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requestBaseUrl, type Config } from '../core/config.js';
import { badRequest, forbidden } from '../core/errors.js';
import { isDashboardOrigin, normalizeOrigin } from '../core/origins.js';
import { sendPage } from '../core/page.js';
import { signupCheckoutPage } from '../domains/billing/page.js';
import { CheckoutParams, CreateCheckoutBody, CreateCheckoutOut, type CreateCheckoutInput } from '../domains/billing/schemas.js';
import { signupCheckout } from '../flows/billing-provider.js';
import { confirmLocal, localPage } from '../flows/signup-checkout.js';
import { rateLimited } from './sessions.js';

/**
 * A paid sign-up: POST /v1/auth/checkout (no credentials) starts a checkout at the configured
 * billing provider; with the local provider, ticketd's own page (/billing/signup/{token})
 * completes it. Anyone may call it: its origin is checked and it is rate-limited per client
 * address and per email address, like sign-up.
 */

/** A browser's Origin, when one is sent, must be a dashboard origin (the sign-in link will point at the dashboard too). */
async function dashboardOriginIfSent(req: FastifyRequest): Promise<void> {
  const sent = req.headers.origin;
  if (sent === undefined) return;
  const origin = normalizeOrigin(sent);
  if (!origin || !isDashboardOrigin(req.baseCtx.services, origin)) {
    throw badRequest(
      `Origin ${sent} is not a dashboard origin of this server: sign-up starts from the configured dashboard origins (dashboardOrigins)`,
      [{ field: 'origin', message: 'is not an allowed dashboard origin' }],
      'origin_not_allowed',
    );
  }
}

export async function signupCheckoutRoutes(app: FastifyInstance, { config }: { config: Config }): Promise<void> {
  const start = signupCheckout(config);

  app.post<{ Body: CreateCheckoutInput }>(
    '/v1/auth/checkout',
    {
      config: { auth: 'none', permission: 'auth:sign_in' },
      schema: {
        tags: ['Sign-in and sessions'],
        summary:
          "Sign up on a paid plan: a checkout to send the browser to ({ url }; stripe: Stripe's Checkout, local: ticketd's page), valid 24 hours. When it is paid, the organization is made with its owner and subscription, and the owner is mailed a sign-in link to successUrl's origin. 400 email_exists for an address with an account (sign in and upgrade), free_plan, unknown_plan, url_not_allowed; 403 signup_closed; 429 per address and per email",
        body: CreateCheckoutBody,
        response: { 200: CreateCheckoutOut },
      },
      // A refused origin costs nothing: it is answered before the budgets are counted.
      preHandler: [dashboardOriginIfSent, rateLimited('checkout')],
    },
    async (req) => {
      if (config.signup === 'closed') {
        throw forbidden('Sign-up is closed on this server; an administrator creates accounts with `ticketd accounts create`', 'signup_closed');
      }
      return start(req.baseCtx, req.body, requestBaseUrl(config.publicUrl, req.protocol, req.host));
    },
  );

  // The local provider's page: opened by the browser the checkout sent here (its token is the key).
  app.get<{ Params: { token: string } }>(
    '/billing/signup/:token',
    { config: { auth: 'none', permission: 'billing:checkout' }, schema: { hide: true, params: CheckoutParams } },
    async (req, reply) => {
      const page = await localPage(req.baseCtx, req.params.token);
      return sendPage(reply, signupCheckoutPage(page, `/billing/signup/${encodeURIComponent(req.params.token)}`), { formRedirectsAway: true });
    },
  );

  app.post<{ Params: { token: string } }>(
    '/billing/signup/:token',
    { config: { auth: 'none', permission: 'billing:checkout' }, schema: { hide: true, params: CheckoutParams } },
    async (req, reply) => reply.redirect(await confirmLocal(req.baseCtx, req.params.token), 303),
  );
}
