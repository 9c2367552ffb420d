import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { unauthorized, forbidden } from './errors.js';
import { tenantCtx, type BaseCtx, type TenantCtx, type BrandScope } from './context.js';
import type { Services } from './services.js';
import { addressSubject, enforceRateLimit, policiesFrom, rateLimiterOf, type Policy } from './rate-limit.js';

/** How a route is called. Later kinds (session, portal) join this list. */
export type AuthKind = 'none' | 'api-key';

/**
 * What a route does. Every route names one; a credential limited to some brands may not use the
 * account-wide ones (it could otherwise widen its own reach).
 */
export const PERMISSIONS = {
  'health:read': { accountWide: false },
  'docs:read': { accountWide: false },
  'accounts:create': { accountWide: false },
  'account:read': { accountWide: false },
  'members:read': { accountWide: false },
  'api_keys:read': { accountWide: false },
  'api_keys:write': { accountWide: true },
  'brands:read': { accountWide: false },
  'brands:create': { accountWide: true },
  'brands:write': { accountWide: false },
  'categories:read': { accountWide: false },
  'categories:write': { accountWide: false },
  'tags:read': { accountWide: false },
  'tags:write': { accountWide: false },
  'statuses:read': { accountWide: false },
  'statuses:write': { accountWide: false },
  'fields:read': { accountWide: false },
  'fields:write': { accountWide: false },
  'schema:read': { accountWide: false },
  'schema:write': { accountWide: false },
  'contacts:read': { accountWide: false },
  'contacts:write': { accountWide: false },
  'companies:read': { accountWide: false },
  'companies:write': { accountWide: false },
  'blocked_sources:read': { accountWide: false },
  'blocked_sources:write': { accountWide: false },
  'comments:read': { accountWide: false },
  'comments:write': { accountWide: false },
  'tickets:read': { accountWide: false },
  'tickets:write': { accountWide: false },
  'watchers:read': { accountWide: false },
  'watchers:write': { accountWide: false },
  'attachments:read': { accountWide: false },
  'attachments:write': { accountWide: false },
  'webhooks:read': { accountWide: false },
  'webhooks:write': { accountWide: false },
  'files:upload': { accountWide: false },
  'files:download': { accountWide: false },
  'inbound_email:write': { accountWide: false },
  'audit_logs:read': { accountWide: false },
  'metrics:read': { accountWide: false },
} as const;
export type Permission = keyof typeof PERMISSIONS;

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthKind;
    permission?: Permission;
    /** Default: the budget of the caller's credential, or of its address without one. 'signup': its own hourly budget per address; false: none. */
    rateLimit?: 'signup' | false;
  }
  interface FastifyRequest {
    /** Connection and actor of an unauthenticated request. */
    baseCtx: BaseCtx;
    /** Tenant scope of an authenticated request; only set on routes that require auth. */
    ctx: TenantCtx;
  }
}

/** The identity a valid API key grants. */
export interface ApiKeyIdentity {
  keyId: string;
  name: string;
  accountId: string;
  livemode: boolean;
  brandScope: BrandScope;
}

export type ApiKeyAuthenticator = (services: Services, secret: string) => Promise<ApiKeyIdentity | null>;

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(req: FastifyRequest): string | null {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

/** Refuses to boot when a route does not declare how it is called and what it does. */
export function requireAuthDeclaration(route: RouteOptions): void {
  const config = route.config as { auth?: AuthKind; permission?: Permission } | undefined;
  if (!config?.auth || !config.permission || !(config.permission in PERMISSIONS)) {
    throw new Error(`Route ${String(route.method)} ${route.url} must declare config.auth and a known config.permission`);
  }
}

export function installAuth(app: FastifyInstance, services: Services, authenticateApiKey: ApiKeyAuthenticator): void {
  const { db } = services;
  const limiter = rateLimiterOf(services);
  const policies = policiesFrom(services.config);
  app.decorateRequest('baseCtx', null as unknown as BaseCtx);
  app.decorateRequest('ctx', null as unknown as TenantCtx);
  app.addHook('onRequest', async (req, reply) => {
    req.baseCtx = { services, db, actor: { type: 'api', id: null, name: null }, requestId: req.id, log: req.log };
    const { auth, permission, rateLimit } = req.routeOptions.config ?? {};
    const fromAddress = (policy: Policy) => {
      if (rateLimit !== false) enforceRateLimit(reply, limiter, policy, addressSubject(req.ip));
    };
    if (!auth || auth === 'none') return fromAddress(policies[rateLimit || 'ip']);

    // A request whose credentials fail spends its address's budget: guessing keys is slowed down.
    const secret = bearerToken(req);
    if (!secret) {
      fromAddress(policies.ip);
      throw unauthorized('Send an API key as "Authorization: Bearer sk_live_…" or "sk_test_…"', 'missing_credentials');
    }
    const identity = await authenticateApiKey(services, secret);
    if (!identity) {
      fromAddress(policies.ip);
      throw unauthorized('This API key is not valid: it is unknown, revoked or expired', 'invalid_api_key');
    }
    if (rateLimit !== false) enforceRateLimit(reply, limiter, policies.apiKey, `key:${identity.keyId}`);
    if (permission && PERMISSIONS[permission].accountWide && !identity.brandScope.allBrands) {
      throw forbidden('This API key is limited to some brands and cannot do account-wide changes', 'insufficient_scope');
    }
    const actor = { type: 'api' as const, id: identity.keyId, name: identity.name };
    req.log = req.log.child({ accountId: identity.accountId, livemode: identity.livemode, keyId: identity.keyId });
    req.ctx = tenantCtx({ services, db, actor, requestId: req.id, log: req.log }, identity.accountId, identity.livemode, identity.brandScope);
  });
}
