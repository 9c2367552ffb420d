import { sessionMemberId, tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { badRequest, forbidden, notFound } from '../core/errors.js';
import * as audit from '../core/audit.js';
import * as accounts from '../domains/accounts/service.js';
import * as apiKeys from '../domains/api-keys/service.js';
import * as members from '../domains/members/service.js';
import type { SwitchOrganizationResultView, UpdateOrganizationResultView } from '../domains/organizations/schemas.js';
import * as sessions from '../domains/sessions/service.js';
import * as sso from '../domains/sso/service.js';

/**
 * What a signed-in member does to their organization as a whole (one account is one organization,
 * docs/decisions/0041-…): rename it, move their session to another organization of theirs, and
 * connect it to the account of an API key.
 */

/** PATCH /v1/auth/organization (owners): the organization's, that is the account's, name. */
export async function renameOrganization(ctx: TenantCtx, name: string): Promise<UpdateOrganizationResultView> {
  return withTx(ctx, async (tx) => {
    const { from, to } = await accounts.rename(tx, name.trim());
    if (from !== to)
      await audit.record(tx, { brandId: null, entityType: 'organization', entityId: tx.accountId, event: 'organization.updated', changes: [{ field: 'name', from, to }] });
    return { success: true, name: to };
  });
}

export interface SwitchedSession extends SwitchOrganizationResultView {
  sessionToken: string;
  maxExpiresAt: Date;
}

/**
 * POST /v1/auth/switch-organization: a new session for the same person (the same email address) as
 * their member in the organization named, which must be one where they are an active member; an
 * organization that does not exist reads the same (403), so the answer tells nothing of others.
 * The current session goes on (other tabs may use it); the new one is audited in its organization.
 * Single sign-on bounds it (docs/decisions/0081-…): a session it opened proves the address to its
 * own organization only, and an organization that requires it is entered through it alone.
 */
export async function switchOrganization(ctx: TenantCtx, organizationId: string, client: { ip: string | null; userAgent: string | null }): Promise<SwitchedSession> {
  if (ctx.session?.sso && organizationId !== ctx.accountId) {
    throw forbidden('This session was opened by single sign-on and works in its own organization only: sign in to the other organization on its own', 'sso_session_bound');
  }
  const me = await members.sessionMember(ctx, sessionMemberId(ctx));
  if (!me) throw notFound('Member');
  // A new tenant: nothing of the caller's (its session, brands, account) carries over but who asks.
  const base: BaseCtx = { services: ctx.services, db: ctx.db, actor: ctx.actor, requestId: ctx.requestId, log: ctx.log };
  return withTx(base, async (tx) => {
    const target = (await members.activeMembershipsOf(tx, me.email)).find((m) => m.accountId === organizationId);
    if (!target) {
      throw forbidden('You are not an active member of that organization: see GET /v1/auth/organizations for yours', 'not_a_member');
    }
    const there = { ...tenantCtx(tx, target.accountId, true), actor: { type: 'user' as const, id: target.memberId, name: target.name ?? target.email } };
    if (target.accountId !== ctx.accountId) await sso.assertMagicLinksAllowed(there, 403);
    const session = await sessions.open(there, target.memberId, client, { sso: ctx.session?.sso });
    return { sessionToken: session.token, organizationId: target.accountId, orgRole: target.role, expiresAt: session.expiresAt.toISOString(), maxExpiresAt: session.maxExpiresAt };
  });
}

/**
 * POST /v1/auth/connect: the hosted product links an organization to the API account a key belongs
 * to. Here the organization is that account already, so a key of this account (live or test, any
 * brand scope, not revoked or expired) is all it takes, and what is recorded is the audit entry;
 * `connected` is true before and after. Any other key, another account's included, is the same 400.
 */
export async function connect(ctx: TenantCtx, apiKey: string): Promise<{ success: true }> {
  const key = await apiKeys.authenticate(ctx.services, apiKey.trim());
  if (!key || key.accountId !== ctx.accountId) {
    throw badRequest(
      'This API key cannot connect this organization: it is unknown, revoked or expired, or it belongs to another account',
      [{ field: 'apiKey', message: 'is not a valid key of this organization' }],
      'invalid_api_key',
    );
  }
  await withTx(ctx, (tx) =>
    audit.record(tx, {
      brandId: null,
      entityType: 'organization',
      entityId: tx.accountId,
      event: 'organization.connected',
      metadata: { apiKeyId: key.keyId, apiKeyName: key.name, livemode: key.livemode },
    }),
  );
  return { success: true };
}
