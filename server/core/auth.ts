import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { unauthorized, forbidden } from './errors.js';
import { hasRole, tenantCtx, type BaseCtx, type TenantCtx, type BrandScope, type MemberRole, type PortalCaller, type SessionCaller } from './context.js';
import { assertBrandVisible, startBrandCache } from './brand.js';
import { isInstanceAdmin } from './config.js';
import { isDashboardOrigin, normalizeOrigin } from './origins.js';
import type { Services } from './services.js';
import { addressSubject, enforceRateLimit, policiesFrom, rateLimiterOf, type Policy } from './rate-limit.js';

/** How a route is called: without credentials, with an API key, with a member's session, or with a customer's portal token. */
export type AuthKind = 'none' | 'api-key' | 'session' | 'portal';
/** What a route accepts: one kind, or several (`['api-key', 'session']`); `portal` stands alone. */
export type AuthDeclaration = AuthKind | readonly AuthKind[];

export interface PermissionRule {
  /** A credential limited to some brands may not use it (it could otherwise widen its own reach). */
  readonly accountWide: boolean;
  /** The least role a member's session needs; absent: any member. API keys are not bound by it. */
  readonly minRole?: MemberRole;
  /** Only a session of an instance administrator (config instanceAdmins, by the member's email), whatever the role. */
  readonly instanceAdmin?: boolean;
}

/**
 * What a route does. Every route names one; a credential limited to some brands may not use the
 * account-wide ones (it could otherwise widen its own reach), and a session needs the role named.
 */
export const PERMISSIONS = {
  'health:read': { accountWide: false },
  'docs:read': { accountWide: false },
  'accounts:create': { accountWide: false },
  'account:read': { accountWide: false, minRole: 'admin' },
  'members:read': { accountWide: false, minRole: 'admin' },
  'api_keys:read': { accountWide: false, minRole: 'admin' },
  'api_keys:write': { accountWide: true, minRole: 'admin' },
  'brands:read': { accountWide: false },
  'brands:create': { accountWide: true, minRole: 'admin' },
  'brands:write': { accountWide: false },
  'brands:delete': { accountWide: false, minRole: 'owner' },
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
  // A data subject's export and erasure (everything about a person; erasure cannot be undone):
  // owners and admins, of a brand's contact or, by email, across every brand of the account.
  'contacts:export': { accountWide: false, minRole: 'admin' },
  'contacts:erase': { accountWide: false, minRole: 'admin' },
  'contacts:export_all': { accountWide: true, minRole: 'admin' },
  'contacts:erase_all': { accountWide: true, minRole: 'admin' },
  'companies:read': { accountWide: false },
  'companies:write': { accountWide: false },
  'blocked_sources:read': { accountWide: false },
  'blocked_sources:write': { accountWide: false },
  'comments:read': { accountWide: false },
  'comments:write': { accountWide: false },
  'tickets:read': { accountWide: false },
  'tickets:write': { accountWide: false },
  // Every ticket of a brand in one download: a bulk extraction, so owners and admins (and API keys).
  'tickets:export': { accountWide: false, minRole: 'admin' },
  'watchers:read': { accountWide: false },
  'watchers:write': { accountWide: false },
  'attachments:read': { accountWide: false },
  'attachments:write': { accountWide: false },
  // A brand's mail domains and mailboxes, like its webhooks: whoever may manage the brand.
  'domains:read': { accountWide: false },
  'domains:write': { accountWide: false },
  'email_connections:read': { accountWide: false },
  'email_connections:write': { accountWide: false },
  'webhooks:read': { accountWide: false },
  'webhooks:write': { accountWide: false },
  'forms:read': { accountWide: false },
  'forms:write': { accountWide: false },
  // Recurring tickets open tickets on their own, on the plan's allowance, until stopped: owners and
  // admins set them up and change them; any member within their brands reads them and runs one now
  // (a ticket they could write themselves).
  'recurring:read': { accountWide: false },
  'recurring:write': { accountWide: false, minRole: 'admin' },
  'recurring:run': { accountWide: false },
  // Triggers and automations change tickets on their own, for everyone: owners and admins set them
  // up; any member within their brands reads them and dry-runs one on a ticket.
  'rules:read': { accountWide: false },
  'rules:write': { accountWide: false, minRole: 'admin' },
  // Macros and views are shared in a brand or personal to a member: any member reads and applies
  // them and manages their personal ones; the brand's ones take an admin, checked by the service
  // on the row's visibility (core/saved-items.ts). API keys manage the brand's ones only.
  'macros:read': { accountWide: false },
  'macros:write': { accountWide: false },
  'macros:apply': { accountWide: false },
  'views:read': { accountWide: false },
  'views:write': { accountWide: false },
  // A brand's connected stores hold a token that reads its customers' orders: owners and admins
  // connect, sync and remove them; any member within their brands reads the orders and links them
  // to tickets.
  'commerce:read': { accountWide: false },
  'commerce:write': { accountWide: false, minRole: 'admin' },
  'commerce:link': { accountWide: false },
  // A connected store's order notification: the store holding the secret ticketd registered with it.
  'commerce:notify': { accountWide: false },
  // A submission to a public web form: anyone holding its token.
  'forms:submit': { accountWide: false },
  'files:upload': { accountWide: false },
  'files:download': { accountWide: false },
  'inbound_email:write': { accountWide: false },
  'audit_logs:read': { accountWide: false },
  'metrics:read': { accountWide: false },
  'auth:sign_in': { accountWide: false },
  'session:read': { accountWide: false },
  'session:write': { accountWide: false },
  'organizations:read': { accountWide: false },
  'organization:write': { accountWide: true, minRole: 'owner' },
  'organization:connect': { accountWide: true, minRole: 'admin' },
  'account:delete': { accountWide: true, minRole: 'owner' },
  // The organization's single sign-on: its owner alone, since it decides who may sign in at all.
  'sso:read': { accountWide: true, minRole: 'owner' },
  'sso:write': { accountWide: true, minRole: 'owner' },
  'profile:read': { accountWide: false },
  'profile:write': { accountWide: false },
  'mentions:read': { accountWide: false },
  'mentions:write': { accountWide: false },
  'feature_requests:read': { accountWide: false },
  'feature_requests:write': { accountWide: false },
  'feature_requests:manage': { accountWide: false, minRole: 'admin' },
  // Team management (/v1/auth/members…): anyone on the team reads it, owners and admins change it.
  'team:read': { accountWide: false },
  'team:manage': { accountWide: true, minRole: 'admin' },
  'team:transfer': { accountWide: true, minRole: 'owner' },
  'invites:accept': { accountWide: false },
  // Customers: tokens are minted for them server side (an API key or a member of the brand); the
  // portal routes take the portal token alone.
  'portal_tokens:write': { accountWide: false },
  'portal:sign_in': { accountWide: false },
  'portal:read': { accountWide: false },
  'portal:write': { accountWide: false },
  // Satisfaction ratings by a mailed link: anyone holding its token.
  'feedback:read': { accountWide: false },
  'feedback:rate': { accountWide: false },
  // Billing: plans are public; any member reads the account's plan and usage, owners and admins change it.
  'plans:read': { accountWide: false },
  'billing:read': { accountWide: false },
  'billing:manage': { accountWide: true, minRole: 'admin' },
  // The checkout page: the browser holding its token.
  'billing:checkout': { accountWide: false },
  // An identity provider's notification: signed with its secret.
  'identity:notify': { accountWide: false },
  // A billing provider's notification: signed with its secret.
  'billing:notify': { accountWide: false },
  // Coupons are the installation's, not an organization's: for its instance administrators only.
  'coupons:read': { accountWide: false, instanceAdmin: true },
  'coupons:manage': { accountWide: false, instanceAdmin: true },
} as const satisfies Record<string, PermissionRule>;
export type Permission = keyof typeof PERMISSIONS;

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthDeclaration;
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

/** The identity a valid session grants: a member of one account, in live mode. */
export interface SessionIdentity extends SessionCaller {
  accountId: string;
  /** How audit entries name the member. */
  name: string;
  /** The member's email: who is an instance administrator is configured by email. */
  email: string;
  brandScope: BrandScope;
}

export type SessionAuthenticator = (services: Services, token: string) => Promise<SessionIdentity | null>;

/** The identity a valid portal token grants: one contact of one brand, in its account and mode. */
export interface PortalIdentity extends PortalCaller {
  accountId: string;
  livemode: boolean;
  /** The brand's portalOrigins: the only browser origins the token may be used from. */
  portalOrigins: readonly string[];
}

export type PortalAuthenticator = (services: Services, token: string) => Promise<PortalIdentity | null>;

export interface Authenticators {
  apiKey: ApiKeyAuthenticator;
  session: SessionAuthenticator;
  portal: PortalAuthenticator;
}

/** The cookie a browser may hold its session in (set by POST /v1/auth/verify?setCookies=true). */
export const SESSION_COOKIE = 'ticketd_session';
/** Session tokens start so (API keys with sk_live_ or sk_test_). */
export const SESSION_TOKEN_PREFIX = 'ts_';
/** Portal tokens start so: they are refused on every route but the portal's, and only they are taken there. */
export const PORTAL_TOKEN_PREFIX = 'pt_';

/** The Set-Cookie value that holds a session token in the browser (an empty value and 0 clear it). */
export function sessionCookie(req: FastifyRequest, value: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${req.protocol === 'https' ? '; Secure' : ''}`;
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(req: FastifyRequest): string | null {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

function cookieValue(req: FastifyRequest, name: string): string | null {
  for (const pair of (req.headers.cookie ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim() || null;
  }
  return null;
}

export function authKindsOf(declaration: AuthDeclaration | undefined): readonly AuthKind[] {
  if (!declaration) return [];
  return typeof declaration === 'string' ? [declaration] : declaration;
}

/** Refuses to boot when a route does not declare how it is called and what it does. */
export function requireAuthDeclaration(route: RouteOptions): void {
  const config = route.config as { auth?: AuthDeclaration; permission?: Permission } | undefined;
  const kinds = authKindsOf(config?.auth);
  const alone = (kind: AuthKind) => kinds.includes(kind) && kinds.length > 1;
  if (!kinds.length || alone('none') || alone('portal') || !config?.permission || !(config.permission in PERMISSIONS)) {
    throw new Error(`Route ${String(route.method)} ${route.url} must declare config.auth and a known config.permission`);
  }
}

/** Whether a browser's `origin` is one of a brand's portal origins. */
export function portalOriginAllowed(portalOrigins: readonly string[], origin: string): boolean {
  const normal = normalizeOrigin(origin);
  return normal !== null && portalOrigins.some((o) => normalizeOrigin(o) === normal);
}

const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

function missingCredentials(kinds: readonly AuthKind[]) {
  if (kinds.includes('portal'))
    return unauthorized('Send a portal token as "Authorization: Bearer pt_…" (minted server side with POST /v1/brands/{brandId}/portal/token)', 'missing_credentials');
  if (!kinds.includes('session')) return unauthorized('Send an API key as "Authorization: Bearer sk_live_…" or "sk_test_…"', 'missing_credentials');
  const session = `a session token as "Authorization: Bearer …" or the ${SESSION_COOKIE} cookie (sign in with POST /v1/auth/magic-link)`;
  return unauthorized(`Send ${kinds.includes('api-key') ? `an API key or ${session}` : session}`, 'missing_credentials');
}

export function installAuth(app: FastifyInstance, services: Services, authenticators: Authenticators): void {
  const { db } = services;
  const limiter = rateLimiterOf(services);
  const policies = policiesFrom(services.config);
  app.decorateRequest('baseCtx', null as unknown as BaseCtx);
  app.decorateRequest('ctx', null as unknown as TenantCtx);
  app.addHook('onRequest', async (req, reply) => {
    req.baseCtx = { services, db, actor: { type: 'api', id: null, name: null }, requestId: req.id, log: req.log };
    const { auth, permission, rateLimit } = req.routeOptions.config ?? {};
    const kinds = authKindsOf(auth);
    const fromAddress = (policy: Policy) => {
      if (rateLimit !== false) enforceRateLimit(reply, limiter, policy, addressSubject(req.ip));
    };
    if (!kinds.length || kinds.includes('none')) return fromAddress(policies[rateLimit || 'ip']);
    const rule: PermissionRule | undefined = permission ? PERMISSIONS[permission] : undefined;

    const bearer = bearerToken(req);
    const cookie = bearer ? null : kinds.includes('session') ? cookieValue(req, SESSION_COOKIE) : null;
    // A request whose credentials fail spends its address's budget: guessing keys is slowed down.
    if (!bearer && !cookie) {
      fromAddress(policies.ip);
      throw missingCredentials(kinds);
    }
    // A portal token opens the portal routes and nothing else; nothing else opens them.
    if (kinds.includes('portal')) {
      if (!bearer?.startsWith(PORTAL_TOKEN_PREFIX)) {
        throw unauthorized('This route is for customers: send a portal token ("Authorization: Bearer pt_…"), not an API key or a session', 'portal_token_required');
      }
      const identity = await authenticators.portal(services, bearer);
      if (!identity) {
        fromAddress(policies.ip);
        throw unauthorized('This portal token is not valid: it is unknown, expired or revoked; ask the application for a new one', 'invalid_portal_token');
      }
      if (rateLimit !== false) enforceRateLimit(reply, limiter, policies.portal, `customer:${identity.contactId}`);
      const origin = req.headers.origin;
      if (origin !== undefined && !portalOriginAllowed(identity.portalOrigins, origin)) {
        throw forbidden(`This portal token works from the brand's portal origins only (portalOrigins); ${origin} is not one`, 'origin_not_allowed');
      }
      const { accountId, livemode, tokenId, brandId, contactId, email, name, expiresAt } = identity;
      const actor = { type: 'customer' as const, id: contactId, name: name ?? email };
      req.log = req.log.child({ accountId, livemode, brandId, contactId, portalTokenId: tokenId });
      // The brand scope is the token's brand: whatever else the customer names reads as 404.
      req.ctx = {
        ...tenantCtx({ services, db, actor, requestId: req.id, log: req.log }, accountId, livemode, { allBrands: false, brandIds: [brandId] }),
        portal: { tokenId, brandId, contactId, email, name, expiresAt },
      };
      return;
    }
    if (bearer?.startsWith(PORTAL_TOKEN_PREFIX)) {
      throw unauthorized("A portal token only works on the customer portal's routes (/v1/portal/…); use an API key or a session here", 'portal_token_not_allowed');
    }
    if (bearer?.startsWith('sk_') && !kinds.includes('api-key')) {
      throw unauthorized('This route is for team members signed in to the dashboard: send a session token, not an API key', 'session_required');
    }
    // Session tokens say what they are (ts_); where API keys are taken too, any other bearer is read as an API key.
    const token = cookie ?? (kinds.includes('session') && (!kinds.includes('api-key') || bearer!.startsWith(SESSION_TOKEN_PREFIX)) ? bearer : null);
    if (!token) {
      const identity = await authenticators.apiKey(services, bearer!);
      if (!identity) {
        fromAddress(policies.ip);
        throw unauthorized('This API key is not valid: it is unknown, revoked or expired', 'invalid_api_key');
      }
      if (rateLimit !== false) enforceRateLimit(reply, limiter, policies.apiKey, `key:${identity.keyId}`);
      if (rule?.accountWide && !identity.brandScope.allBrands) {
        throw forbidden('This API key is limited to some brands and cannot do account-wide changes', 'insufficient_scope');
      }
      const actor = { type: 'api' as const, id: identity.keyId, name: identity.name };
      req.log = req.log.child({ accountId: identity.accountId, livemode: identity.livemode, keyId: identity.keyId });
      req.ctx = tenantCtx({ services, db, actor, requestId: req.id, log: req.log }, identity.accountId, identity.livemode, identity.brandScope);
      return;
    }

    // A cookie rides along on any request the browser makes: a change must come from a dashboard page.
    const origin = req.headers.origin;
    if (cookie && !SAFE_METHODS.has(req.method) && origin !== undefined && !isDashboardOrigin(services, origin)) {
      throw forbidden(`Requests with the session cookie that change something must come from a dashboard origin; ${origin} is not one`, 'origin_not_allowed');
    }
    const identity = await authenticators.session(services, token);
    if (!identity) {
      fromAddress(policies.ip);
      throw unauthorized('This session is not valid: it is unknown, expired, revoked or signed out; sign in again', 'invalid_session');
    }
    if (rateLimit !== false) enforceRateLimit(reply, limiter, policies.session, `session:${identity.sessionId}`);
    const { sessionId, memberId, role, expiresAt, sso } = identity;
    const actor = { type: 'user' as const, id: memberId, name: identity.name };
    req.log = req.log.child({ accountId: identity.accountId, livemode: true, memberId, sessionId });
    req.ctx = {
      ...tenantCtx({ services, db, actor, requestId: req.id, log: req.log }, identity.accountId, true, identity.brandScope),
      session: { sessionId, memberId, role, expiresAt, sso },
    };
    if (rule?.minRole && !hasRole(role, rule.minRole)) {
      // On a brand's route, a brand the member may not see reads as 404 first, as on every other brand route.
      const brandId = brandInPath(req);
      if (brandId !== null) await assertBrandVisible(req.ctx, brandId);
      throw forbidden(`This takes the ${rule.minRole} role${rule.minRole === 'owner' ? '' : ' or above'}; your role is ${role}`, 'insufficient_role');
    }
    if (rule?.accountWide && !identity.brandScope.allBrands) {
      throw forbidden('You are assigned to some brands only and cannot do account-wide changes', 'insufficient_scope');
    }
    if (rule?.instanceAdmin && !isInstanceAdmin(services.config, identity.email)) {
      throw forbidden("This is for the installation's administrators (instanceAdmins in the configuration); your email is not one of them", 'instance_admin_required');
    }
  });
  // Right after: on every route under a brand, a brand the caller may not see is 404 before the
  // body is parsed or validated, so what a request holds never tells it apart from a visible one.
  startBrandCache(services);
  app.addHook('onRequest', async (req) => {
    const brandId = brandInPath(req);
    if (brandId !== null && req.ctx) await assertBrandVisible(req.ctx, brandId);
  });
}

/** The brand a route names in its path (`/v1/brands/:brandId/…`, `/v1/workspaces/:brandId/…`), if any. */
function brandInPath(req: FastifyRequest): string | null {
  const brandId = (req.params as { brandId?: unknown } | undefined)?.brandId;
  return typeof brandId === 'string' ? brandId : null;
}
