import Fastify, { type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import cors from '@fastify/cors';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { Config } from './core/config.js';
import type { Db } from './core/db.js';
import { authKindsOf, installAuth, requireAuthDeclaration, SESSION_COOKIE, type AuthDeclaration } from './core/auth.js';
import { isDashboardOrigin } from './core/origins.js';
import { CONDITIONAL_CACHE_CONTROL, installConditionalReads } from './core/conditional-reads.js';
import { installCompression } from './core/compression.js';
import { installReadYourWrites } from './core/read-replica.js';
import { clientErrorHandler, frameworkErrors, installErrorHandling, installJsonParser, installRouteCatalog, installValidators, LazySchemas, requestIdFor } from './core/http.js';
import { ErrorResponse } from './core/schemas.js';
import { version } from './core/version.js';
import type { Services } from './core/services.js';
import { createServices } from './compose.js';
import { installRequestMetrics } from './core/metrics.js';
import { authenticate as authenticateApiKey, startKeyCache } from './domains/api-keys/service.js';
import { accountRoutes } from './http/accounts.js';
import { apiKeyRoutes } from './http/api-keys.js';
import { attachmentFileRoutes, attachmentRoutes, withoutGrantTokens } from './http/attachments.js';
import { attachmentDepsOf, type AttachmentDeps } from './domains/attachments/service.js';
import { rawMailRoutes } from './http/raw-mails.js';
import { recurringTicketRoutes } from './http/recurring-tickets.js';
import { ruleRoutes } from './http/rules.js';
import { macroRoutes } from './http/macros.js';
import { viewRoutes } from './http/views.js';
import { commerceOrderRoutes } from './http/commerce-orders.js';
import { commerceStoreRoutes } from './http/commerce-stores.js';
import { commerceNotificationRoutes } from './http/commerce-notifications.js';
import { auditRoutes } from './http/audit.js';
import { blockedSourceRoutes } from './http/blocked-sources.js';
import { brandDomainRoutes } from './http/brand-domains.js';
import { emailConnectionRoutes } from './http/email-connections.js';
import { brandRoutes } from './http/brands.js';
import { categoryRoutes } from './http/categories.js';
import { commentRoutes } from './http/comments.js';
import { companyRoutes } from './http/companies.js';
import { contactRoutes, customerRoutes } from './http/contacts.js';
import { accountContactPrivacyRoutes, contactPrivacyRoutes } from './http/contact-privacy.js';
import { fieldRoutes, ticketSchemaRoutes } from './http/fields.js';
import { healthRoutes } from './http/health.js';
import { inboundMailRoutes } from './http/inbound-mail.js';
import { memberRoutes } from './http/members.js';
import { teamRoutes } from './http/team.js';
import { metricsRoutes } from './http/metrics.js';
import { organizationRoutes } from './http/organizations.js';
import { portalRoutes, portalTokenRoutes } from './http/portal.js';
import { authenticate as authenticatePortalToken, isPortalOrigin } from './domains/portal/service.js';
import { avatarFileRoutes, profileRoutes } from './http/profiles.js';
import { mentionRoutes } from './http/mentions.js';
import { featureRequestRoutes } from './http/feature-requests.js';
import { billingRoutes } from './http/billing.js';
import { signupCheckoutRoutes } from './http/checkout.js';
import { identityRoutes } from './http/identity.js';
import { feedbackRoutes } from './http/feedback.js';
import { formRoutes } from './http/forms.js';
import { formSubmitRoutes } from './http/forms-public.js';
import { sessionRoutes } from './http/sessions.js';
import { ssoRoutes } from './http/sso.js';
import { statusRoutes } from './http/statuses.js';
import { tagRoutes } from './http/tags.js';
import { ticketRoutes } from './http/tickets.js';
import { ticketActionRoutes } from './http/ticket-actions.js';
import { dashboardRoutes } from './http/dashboard.js';
import { watcherRoutes } from './http/watchers.js';
import { webhookRoutes } from './http/webhooks.js';
import { authenticateSession, startSessionCache } from './flows/sign-in.js';
import { learnTheDatabase } from './core/citus.js';

export interface AppDeps {
  config: Config;
  db: Db;
  /** The process's services (main.ts shares them with the dispatcher); default: built here for this app, and closed with it. */
  services?: Services;
  /** The clock of the services built here when none are given (tests pass theirs); default Date.now. */
  clock?: () => number;
  isShuttingDown?: () => boolean;
  /** Attachment storage and URL signing; default: the services' (local disk under dataDir). */
  attachments?: AttachmentDeps;
}

/** Domains whose routes live under a brand: /v1/brands/:brandId/… and /v1/workspaces/:brandId/…. */
const BRAND_SCOPED_ROUTES: FastifyPluginAsync[] = [
  statusRoutes,
  ticketSchemaRoutes,
  fieldRoutes,
  categoryRoutes,
  tagRoutes,
  contactRoutes, // /contacts and /customers: one implementation at both paths
  customerRoutes,
  companyRoutes,
  blockedSourceRoutes,
  formRoutes,
  brandDomainRoutes,
  recurringTicketRoutes,
  ruleRoutes, // /triggers… and /automations…
  macroRoutes,
  viewRoutes,
  commerceStoreRoutes, // /ecommerce/stores…
  commerceOrderRoutes, // /ecommerce/orders… and /ecommerce/products
  commentRoutes, // /tickets/:ticketId/comments… and the short /comments/:commentId
  ticketRoutes,
  ticketActionRoutes,
  watcherRoutes,
  auditRoutes, // /logs and /tickets/:ticketId/logs
];

const CLIENT_ERRORS = ['400', '401', '403', '404', '409', '413', '429'] as const;

/** Builds the whole HTTP API without listening: tests inject into it, main.ts listens. */
export async function buildApp({ config, db, services: given, clock, isShuttingDown = () => false, attachments: givenAttachments }: AppDeps): Promise<FastifyInstance> {
  const services = given ?? createServices({ config, db, clock });
  const attachments = givenAttachments ?? attachmentDepsOf(services);
  const lazySchemas = new LazySchemas();
  const app = Fastify({
    schemaController: { compilersFactory: { buildSerializer: lazySchemas.serializerFactory() } },
    // Logs go to stderr: stdout carries what commands print (e.g. `ticketd start --json`).
    logger:
      config.logLevel === 'silent'
        ? false
        : {
            level: config.logLevel,
            stream: process.stderr,
            redact: ['req.headers.authorization', 'req.headers.cookie'],
            // Fastify's request serializer, minus the tokens of signed attachment URLs.
            serializers: { req: (req) => ({ method: req.method, url: withoutGrantTokens(req.url), host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort }) },
          },
    genReqId: requestIdFor,
    requestIdHeader: false,
    bodyLimit: config.bodyLimitBytes,
    trustProxy: config.trustProxy,
    forceCloseConnections: 'idle',
    // A client that stalls while sending gets 408 and loses its connection; the server checks
    // unfinished requests every second (Node's default is every 30 s).
    requestTimeout: config.requestTimeoutMs,
    http: { headersTimeout: Math.min(config.headersTimeoutMs, config.requestTimeoutMs), connectionsCheckingInterval: 1_000 },
    frameworkErrors,
    clientErrorHandler,
    // Signed attachment URLs carry a token of ~130 characters in one path segment.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 512 },
  });

  installRouteCatalog(app);
  // Asked before the first request; with the database away then, the first request that needs it asks.
  app.addHook('onReady', () => learnTheDatabase({ services }).catch(() => undefined));
  installValidators(app, lazySchemas);
  installJsonParser(app);
  installErrorHandling(app);
  if (config.metricsEnabled) installRequestMetrics(app, services);
  app.addSchema(ErrorResponse);

  const corsOptions = {
    origin: config.corsOrigins.includes('*') ? '*' : [...config.corsOrigins],
    methods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'X-Idempotency-Key', 'X-Request-Id', 'If-None-Match'],
    exposedHeaders: ['X-Request-Id', 'ETag', 'Content-Disposition', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After'],
    maxAge: 600,
    // An OPTIONS without Origin is no browser's preflight: answered like one, not with a bare-text 400 outside the error shape.
    strictPreflight: false,
  };
  // Dashboard origins are echoed back with credentials allowed, so a browser may send the session cookie.
  const dashboardCors = { ...corsOptions, origin: true, credentials: true };
  const publicFormCors = { ...corsOptions, origin: '*', methods: ['POST'] };
  // The portal answers only origins some brand lists in portalOrigins (a preflight names no brand);
  // each request is then held to its own brand's (core/auth.ts). Bearer tokens: no credentials mode.
  const portalCors = { ...corsOptions, origin: (origin: string | undefined) => isPortalOrigin(services, origin) };
  await app.register(cors, {
    delegator: (req, done) => {
      // A public web form is posted to from the pages that embed it, whatever corsOrigins says (its own allowedOrigins decide).
      if (req.url?.startsWith('/v1/forms/')) return done(null, publicFormCors);
      if (req.url?.startsWith('/v1/portal/')) return done(null, portalCors);
      done(null, isDashboardOrigin(services, req.headers.origin) ? dashboardCors : corsOptions);
    },
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'ticketd API',
        version,
        description:
          'Self-hosted, multi-tenant ticketing API. Authenticate with `Authorization: Bearer sk_live_…` (or `sk_test_…` for the separate test mode), or, as a team member signed in by magic link, with the session token (`Authorization: Bearer ts_…` or the session cookie). Customers call /v1/portal/… with a portal token (`Authorization: Bearer pt_…`) and nothing else.',
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: sk_live_… or sk_test_…' },
          session: { type: 'http', scheme: 'bearer', description: 'A session token of a signed-in member (ts_…), from POST /v1/auth/verify' },
          sessionCookie: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE, description: 'The session cookie set by POST /v1/auth/verify?setCookies=true' },
          portalToken: { type: 'http', scheme: 'bearer', description: "A customer's portal token (pt_…), from POST /v1/brands/{brandId}/portal/token or /v1/portal/verify" },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transform: ({ schema, url, route }) => {
      const kinds = authKindsOf((route.config as { auth?: AuthDeclaration } | undefined)?.auth);
      const responses: Record<string, unknown> = { ...(schema?.response as object) };
      for (const status of CLIENT_ERRORS) responses[status] ??= { $ref: 'Error#', description: 'Error' };
      responses['500'] ??= { $ref: 'Error#', description: 'Error' };
      if ((route.config as { conditional?: true } | undefined)?.conditional) {
        responses['304'] = {
          description: `Not Modified: If-None-Match named this caller's current ETag (a 200 carries a weak ETag and Cache-Control: ${CONDITIONAL_CACHE_CONTROL}); no body`,
        };
      }
      const security: Record<string, string[]>[] = [
        ...(kinds.includes('api-key') ? [{ apiKey: [] }] : []),
        ...(kinds.includes('session') ? [{ session: [] }, { sessionCookie: [] }] : []),
        ...(kinds.includes('portal') ? [{ portalToken: [] }] : []),
      ];
      return { schema: { ...schema, response: responses, ...(security.length ? { security } : {}) }, url };
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  // API keys are served from memory, invalidated through LISTEN/NOTIFY (see api-keys/service.ts).
  startKeyCache(services);
  startSessionCache(services);
  if (!given) app.addHook('onClose', async () => services.close());

  // Every API route lives in this scope: each must declare its auth kind and permission.
  await app.register(async (api) => {
    api.addHook('onRoute', requireAuthDeclaration);
    installAuth(api, services, { apiKey: authenticateApiKey, session: authenticateSession, portal: authenticatePortalToken });
    installReadYourWrites(api, services);
    installConditionalReads(api);
    await installCompression(api); // after the conditional reads: their tag is of the body as built

    api.get('/v1/openapi.json', { config: { auth: 'none', permission: 'docs:read' }, schema: { hide: true } }, async () => app.swagger());
    await api.register(healthRoutes, { prefix: '/v1', db, version, isShuttingDown });
    await api.register(accountRoutes, { config });
    await api.register(memberRoutes);
    await api.register(teamRoutes);
    await api.register(apiKeyRoutes);
    await api.register(sessionRoutes);
    await api.register(organizationRoutes, { storage: attachments.storage });
    await api.register(ssoRoutes);
    await api.register(mentionRoutes);
    await api.register(featureRequestRoutes);
    const avatars = { deps: { storage: attachments.storage, publicUrl: attachments.publicUrl, uploadTtlSeconds: attachments.uploadTtlSeconds, now: attachments.now } };
    await api.register(profileRoutes, avatars);
    await api.register(avatarFileRoutes, avatars);
    // Every brand route exists under /v1/brands and /v1/workspaces; sub-resources under /:brandId.
    for (const prefix of ['/v1/brands', '/v1/workspaces']) {
      await api.register(brandRoutes, { prefix });
      for (const routes of BRAND_SCOPED_ROUTES) await api.register(routes, { prefix: `${prefix}/:brandId` });
      await api.register(attachmentRoutes, { prefix: `${prefix}/:brandId`, deps: attachments });
      await api.register(rawMailRoutes, { prefix: `${prefix}/:brandId`, storage: attachments.storage });
      await api.register(webhookRoutes, { prefix: `${prefix}/:brandId`, policy: { allowPrivate: config.webhookAllowPrivate } });
      await api.register(emailConnectionRoutes, { prefix: `${prefix}/:brandId`, policy: { allowPrivate: config.webhookAllowPrivate }, sync: { inbound: { attachments } } });
      await api.register(portalTokenRoutes, { prefix: `${prefix}/:brandId` });
      await api.register(contactPrivacyRoutes, { prefix: `${prefix}/:brandId`, deps: attachments });
    }
    await api.register(accountContactPrivacyRoutes, { prefix: '/v1', deps: attachments });
    await api.register(portalRoutes, { deps: attachments });
    await api.register(dashboardRoutes);
    await api.register(attachmentFileRoutes, { deps: attachments });
    await api.register(inboundMailRoutes, { config, deps: { attachments } });
    await api.register(commerceNotificationRoutes);
    await api.register(formSubmitRoutes, { deps: { attachments } });
    await api.register(feedbackRoutes);
    await api.register(billingRoutes, { config });
    await api.register(signupCheckoutRoutes, { config });
    await api.register(identityRoutes, { config });
    await api.register(metricsRoutes, { config, services });
  });

  return app;
}
