import * as audit from '../core/audit.js';
import { systemActor, tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { badRequest, HttpError } from '../core/errors.js';
import { emailDomain, normalizeEmail } from '../core/text.js';
import * as billing from '../domains/billing/service.js';
import * as members from '../domains/members/service.js';
import { admitBySso } from '../domains/members/team.js';
import * as sessions from '../domains/sessions/service.js';
import type { SsoConnection } from '../domains/sso/model.js';
import type { SsoStartView } from '../domains/sso/schemas.js';
import * as sso from '../domains/sso/service.js';

/**
 * Single sign-on with an organization's OpenID provider (docs/decisions/0081-single-sign-on.md):
 * the start finds the organization and sends the browser to its provider; the callback spends the
 * attempt once, has the code exchanged and the ID token validated (domains/sso), admits the member
 * (just in time for a verified address in an allowed domain), opens a session as a magic link's
 * verify does and sends the browser back to its dashboard. Every refusal of a known attempt goes
 * back to that dashboard as `?error=<code>` and is audited in its organization.
 */

/** Who acts on sign-ins no member has made yet (refusals). */
const SSO_ACTOR = systemActor('single sign-on');

/** The organization a sign-in is for: the one named, else the one whose provider vouches for the address's domain. */
async function connectionFor(base: BaseCtx, email: string | undefined, organizationId: string | undefined): Promise<SsoConnection> {
  if (organizationId !== undefined) {
    const row = await sso.connectionForSignIn(base, organizationId);
    if (email && !row.allowedDomains.includes(emailDomain(email))) {
      throw badRequest(
        "This organization's single sign-on does not sign in addresses of that domain",
        [{ field: 'email', message: 'is outside the allowed domains' }],
        'sso_domain_not_allowed',
      );
    }
    return row;
  }
  const candidates = await sso.connectionsForDomain(base, emailDomain(email!));
  if (candidates.length === 1) return candidates[0]!;
  // Several organizations claim the domain: the one the person belongs to, if only one.
  const mine = new Set((await members.activeMembershipsOf(base, email!)).map((m) => m.accountId));
  const theirs = candidates.filter((c) => mine.has(c.accountId));
  if (theirs.length === 1) return theirs[0]!;
  throw badRequest(
    'Several organizations sign in addresses of this domain with single sign-on: name yours with organizationId',
    [{ field: 'organizationId', message: 'is required for this address' }],
    'sso_organization_required',
  );
}

/** POST /v1/auth/sso/start: the provider's authorization URL for the organization of `email` or `organizationId`. */
export async function startSignIn(base: BaseCtx, input: { email?: string; organizationId?: string }, origin: string, redirectUri: string): Promise<SsoStartView> {
  const email = input.email === undefined ? undefined : normalizeEmail(input.email);
  if (email === undefined && input.organizationId === undefined) {
    throw badRequest('Give the email address to sign in, or the organizationId', [{ field: 'email', message: 'or organizationId is required' }], 'validation_failed');
  }
  const row = await connectionFor(base, email, input.organizationId);
  const ctx = tenantCtx({ ...base, actor: SSO_ACTOR }, row.accountId, true);
  return sso.beginSignIn(ctx, row, origin, redirectUri, email);
}

const stateInvalid = (why: string) => badRequest(`This single sign-on is not valid: ${why}. Start again.`, [{ field: 'state', message: why }], 'sso_state_invalid');

/** `<origin>/auth/callback?<name>=<value>`: the dashboard's page that takes a session token or shows an error. */
function dashboardCallback(origin: string, name: 'sessionToken' | 'error', value: string): string {
  const url = new URL('/auth/callback', origin);
  url.searchParams.set(name, value);
  return url.href;
}

/** What the provider vouched for, checked against the organization's rules: a verified address in an allowed domain. */
function vouchedEmail(row: SsoConnection, claims: { email: string | null; emailVerified: boolean }): string {
  if (!claims.email || !claims.emailVerified) {
    throw badRequest('The identity provider did not vouch for an email address (email_verified is not true)', undefined, 'sso_email_unverified');
  }
  const email = normalizeEmail(claims.email);
  if (!row.allowedDomains.includes(emailDomain(email))) {
    throw badRequest(`${email} is outside the domains this organization signs in with single sign-on`, undefined, 'sso_domain_not_allowed');
  }
  return email;
}

/** The member admitted and their session, in one transaction; a member created now counts against the plan. */
async function openSession(ctx: TenantCtx, row: SsoConnection, email: string, name: string | null, client: { ip: string | null; userAgent: string | null }) {
  return withTx(ctx, async (tx) => {
    const admitted = await admitBySso(tx, email, name, row.defaultRole);
    if (admitted.created) await billing.assertWithinPlan(tx, 'members');
    const member = await members.sessionMember(tx, admitted.memberId);
    if (!member) throw badRequest('This member is not active', undefined, 'sso_member_inactive');
    const mtx = { ...tenantCtx(tx, tx.accountId, true, member.brandScope), actor: { type: 'user' as const, id: member.memberId, name: member.name ?? member.email } };
    return sessions.open(mtx, member.memberId, client, { sso: true });
  });
}

/**
 * GET /v1/auth/sso/callback: where the provider sends the browser back. Returns where to send it
 * next: its dashboard with a session token, or with `error=<code>`. A state that names no attempt
 * has no dashboard to go back to: 400 sso_state_invalid.
 */
export async function finishSignIn(base: BaseCtx, query: Readonly<Record<string, string>>, client: { ip: string | null; userAgent: string | null }): Promise<string> {
  const state = query.state;
  const found = state ? await sso.spendAttempt(base, state) : null;
  if (!state || !found) {
    base.log?.warn({ state: Boolean(state) }, 'single sign-on callback with an unknown state');
    throw stateInvalid('it names no sign-in under way');
  }
  const { attempt } = found;
  const ctx = tenantCtx({ ...base, actor: SSO_ACTOR }, attempt.accountId, attempt.livemode);
  const seen: { email?: string; subject?: string } = {};
  try {
    if (!found.spent) throw stateInvalid(attempt.usedAt ? 'it was used already' : 'it expired');
    if (query.error) {
      throw badRequest(
        `The identity provider refused the sign-in: ${query.error}${query.error_description ? ` (${query.error_description})` : ''}`,
        undefined,
        'sso_provider_error',
      );
    }
    const row = await sso.connectionOfAttempt(ctx, attempt);
    if (!row) throw stateInvalid('single sign-on was removed meanwhile');
    const claims = await sso.exchange(ctx, row, attempt, state, query);
    seen.subject = claims.subject;
    seen.email = claims.email ?? undefined;
    const email = vouchedEmail(row, claims);
    const session = await openSession(ctx, row, email, claims.name, client);
    return dashboardCallback(attempt.origin, 'sessionToken', session.token);
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    await withTx(ctx, (tx) =>
      audit.record(tx, {
        brandId: null,
        entityType: 'organization',
        entityId: tx.accountId,
        event: 'organization.sso_sign_in_refused',
        metadata: { reason: err.code, message: err.message, attemptId: attempt.id, ...seen },
      }),
    );
    return dashboardCallback(attempt.origin, 'error', err.code);
  }
}
