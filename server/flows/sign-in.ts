import { tenantCtx, withTx, type Actor, type BaseCtx, type TenantCtx } from '../core/context.js';
import { badRequest, forbidden, notFound } from '../core/errors.js';
import type { SessionIdentity } from '../core/auth.js';
import type { Services } from '../core/services.js';
import { credentialCacheOf, startCredentialCache, type CacheEntry } from '../core/credential-cache.js';
import { hashSecret } from '../core/secrets.js';
import { normalizeEmail } from '../core/text.js';
import * as outbox from '../core/outbox/service.js';
import * as accounts from '../domains/accounts/service.js';
import { signInLink } from '../domains/mail/messages.js';
import { settingsOf } from '../domains/mail/service.js';
import * as members from '../domains/members/service.js';
import { acceptOnSignIn } from '../domains/members/team.js';
import type { Membership, SessionMember } from '../domains/members/service.js';
import type { OrganizationMembershipView, OrganizationView } from '../domains/organizations/schemas.js';
import type { SignedInView, SignupInput } from '../domains/sessions/schemas.js';
import type { CreatedAccountView } from '../domains/accounts/schemas.js';
import * as sessions from '../domains/sessions/service.js';
import * as sso from '../domains/sso/service.js';
import { createAccountWithOwner } from './accounts.js';

/**
 * Team members sign in by magic link: a single-use link mailed through the outbox to the address of
 * a member, pointing at the dashboard page it was asked from; the dashboard posts its token to
 * verify, which opens a session. A person is their email address: one member row per
 * organization, and one organization per account (docs/decisions/0041-…).
 */

const SIGN_IN_MAIL_EVENT = 'mail.sign_in';

function userActor(m: { memberId: string; name: string | null; email: string }): Actor {
  return { type: 'user', id: m.memberId, name: m.name ?? m.email };
}

/** The account of a membership, in live mode, acting as that member. */
function memberCtx(ctx: BaseCtx, m: Membership): TenantCtx {
  return { ...tenantCtx(ctx, m.accountId, true), actor: userActor(m) };
}

/** Whether anyone with this email is an active member of an organization. */
export async function emailExists(ctx: BaseCtx, email: string): Promise<boolean> {
  return (await members.activeMembershipsOf(ctx, email)).length > 0;
}

function callbackUrl(origin: string, token: string): string {
  return `${origin}/auth/callback?token=${encodeURIComponent(token)}`;
}

/** Issues a link for a member and queues its mail, in the caller's transaction. */
async function mailSignInLink(tx: TenantCtx, m: Membership, origin: string, firstSignIn: boolean): Promise<void> {
  const link = await sessions.issueMagicLink(tx, m.memberId, origin);
  const organizationName = (await accounts.namesOf(tx, [m.accountId])).get(m.accountId) ?? m.accountId;
  const message = signInLink(settingsOf(tx.services), {
    linkId: link.id,
    to: { name: m.name, address: m.email },
    url: callbackUrl(origin, link.token),
    organizationName,
    validMinutes: sessions.MAGIC_LINK_TTL_MS / 60_000,
    firstSignIn,
  });
  // The mail carries the token until it is sent: the link works once, for 15 minutes.
  await outbox.enqueue(tx, { kind: 'mail', brandId: null, event: SIGN_IN_MAIL_EVENT, payload: { message } });
}

/** Takes the sign-up lock of an address until the transaction ends: two sign-ups of one address take turns, the second then finds the first. */
export async function lockAddress(tx: BaseCtx, email: string): Promise<void> {
  await tx.db.raw(`SELECT pg_advisory_xact_lock(hashtext('ticketd:signup:' || ?))`, [normalizeEmail(email)]);
}

/**
 * A new organization in the caller's transaction (which holds the address's lock): the account,
 * its owner, and the owner's first sign-in link mailed, pointing at `origin`.
 */
export async function openOrganization(
  tx: BaseCtx,
  input: { email: string; name?: string; accountName?: string },
  origin: string,
): Promise<Pick<CreatedAccountView, 'account' | 'owner'> & { ctx: TenantCtx }> {
  const { account, owner } = await createAccountWithOwner(tx, input);
  const membership: Membership = { accountId: account.id, memberId: owner.id, email: owner.email, name: owner.name, role: 'owner' };
  const ctx = memberCtx(tx, membership);
  await mailSignInLink(ctx, membership, origin, true);
  return { account, owner, ctx };
}

/**
 * A new organization: the account, its owner, and a sign-in link mailed to the owner. An address
 * that is already a member somewhere signs in instead (400), so one person never owns two
 * organizations by accident.
 */
export async function signup(ctx: BaseCtx, input: SignupInput, origin: string): Promise<{ success: true; message: string; organizationId: string }> {
  return withTx(ctx, async (tx) => {
    await lockAddress(tx, input.email);
    if (await emailExists(tx, input.email)) throw emailTaken();
    const name = input.name ?? ([input.firstName, input.lastName].filter(Boolean).join(' ') || undefined);
    const { account, owner } = await openOrganization(tx, { email: input.email, name, accountName: input.organizationName }, origin);
    return { success: true as const, message: `Organization created; a sign-in link was sent to ${owner.email}`, organizationId: account.id };
  });
}

/** 400 email_exists: the address is a member already, and signs in instead. */
export function emailTaken() {
  return badRequest(
    'This email is already a member of an organization: sign in with POST /v1/auth/magic-link instead',
    [{ field: 'email', message: 'is already registered' }],
    'email_exists',
  );
}

/** The membership a sign-in is for: the named organization, else the one the person joined first. */
async function membershipFor(ctx: BaseCtx, email: string, organizationId?: string): Promise<Membership> {
  const all = await members.activeMembershipsOf(ctx, email);
  const found = organizationId ? all.find((m) => m.accountId === organizationId) : all[0];
  if (!found) {
    throw badRequest(
      `Member not found: ${organizationId ? 'that organization has' : 'no organization has'} an active member with this email; sign up, or ask an owner to invite you`,
      [{ field: 'email', message: 'is not a member' }],
      'member_not_found',
    );
  }
  return found;
}

/**
 * Mails a sign-in link to a member; 400 sso_required when that organization's members sign in with
 * single sign-on only (its other organizations are asked for by organizationId, docs/decisions/0081-…).
 */
export async function requestMagicLink(ctx: BaseCtx, email: string, origin: string, organizationId?: string): Promise<{ success: true; message: string }> {
  const membership = await membershipFor(ctx, email, organizationId);
  await sso.assertMagicLinksAllowed(memberCtx(ctx, membership));
  await withTx(memberCtx(ctx, membership), (tx) => mailSignInLink(tx, membership, origin, false));
  return { success: true, message: `A sign-in link was sent to ${membership.email}; it works once, within 15 minutes` };
}

/** For operators without mail: a sign-in link printed instead of mailed (`ticketd members login-link`). */
export async function loginLink(ctx: BaseCtx, email: string, origin: string, organizationId?: string) {
  const membership = await membershipFor(ctx, email, organizationId);
  const link = await sessions.issueMagicLink(memberCtx(ctx, membership), membership.memberId, origin);
  return {
    url: callbackUrl(origin, link.token),
    expiresAt: link.expiresAt.toISOString(),
    email: membership.email,
    memberId: membership.memberId,
    organizationId: membership.accountId,
  };
}

function splitName(name: string | null): { firstName: string | null; lastName: string | null } {
  const [first, ...rest] = (name ?? '').trim().split(/\s+/);
  return { firstName: first || null, lastName: rest.length ? rest.join(' ') : null };
}

async function signedInView(ctx: TenantCtx, member: SessionMember, session: sessions.SessionRecord): Promise<SignedInView> {
  const account = await accounts.get(ctx);
  const names = splitName(member.name);
  const expiresAt = session.expiresAt.toISOString();
  return {
    customerId: member.memberId,
    memberId: member.memberId,
    email: member.email,
    organizationId: account.id,
    orgRole: member.role,
    // The organization is the account: there is nothing to connect (docs/decisions/0041-…).
    connected: true,
    expiresAt,
    ...names,
    session: { id: session.id, object: 'session', createdAt: session.createdAt.toISOString(), expiresAt, maxExpiresAt: session.maxExpiresAt.toISOString() },
    account,
    organization: { id: account.id, name: account.name },
    member: { id: member.memberId, email: member.email, name: member.name, ...names, role: member.role },
  };
}

const INVALID_LINK = 'This sign-in link is not valid: it is unknown, already used or expired. Ask for a new one.';

/** Spends a sign-in token and opens a session for its member; the session token is returned here only. */
export async function verify(ctx: BaseCtx, token: string, client: { ip: string | null; userAgent: string | null }): Promise<SignedInView & { sessionToken: string }> {
  return withTx(ctx, async (tx) => {
    const spent = await sessions.consumeMagicLink(tx, token);
    // An invitation's link: following it accepts the invitation (docs/decisions/0047-…).
    if (spent) await acceptOnSignIn(tenantCtx(tx, spent.accountId, true), spent.memberId);
    // A member removed (or suspended) since the link was sent is not signed in; the link is spent all the same.
    const member = spent && (await members.sessionMember({ db: tx.db, accountId: spent.accountId }, spent.memberId));
    if (!member) throw badRequest(INVALID_LINK, [{ field: 'token', message: 'is unknown, used or expired' }], 'invalid_token');
    const mtx = { ...tenantCtx(tx, member.accountId, true, member.brandScope), actor: userActor(member) };
    const session = await sessions.open(mtx, member.memberId, client);
    return { ...(await signedInView(mtx, member, session)), sessionToken: session.token };
  });
}

/**
 * Sessions are authenticated from memory like API keys (core/credential-cache.ts): the session and
 * its member are read once, then served for SESSION_CACHE_TTL_MS. Whatever ends or narrows a
 * session (sign-out, the member's removal, role or brand assignments) calls credentialsChanged
 * with the session's, the member's or the account's id in its transaction.
 */
export const SESSION_CACHE_TTL_MS = 30_000;

interface CachedSession extends CacheEntry {
  session: sessions.SessionRecord;
  member: SessionMember;
}

/** Starts the cache authenticateSession answers from (the API does); it closes with the services. */
export function startSessionCache(services: Services, ttlMs = SESSION_CACHE_TTL_MS): void {
  startCredentialCache<CachedSession>(services, 'sessions', ttlMs);
}

/** The authenticator of session tokens (core/auth.ts): the live session and its member. */
export async function authenticateSession(services: Services, token: string): Promise<SessionIdentity | null> {
  if (!sessions.isSessionToken(token)) return null;
  const hash = hashSecret(token);
  const cache = credentialCacheOf<CachedSession>(services, 'sessions');
  let entry = (await cache?.lookup(hash, services.now())) ?? null;
  if (!entry) {
    const readFrom = cache?.token() ?? 0;
    const session = await sessions.findLive(services, hash);
    // A member removed (or no longer active) has no session.
    const member = session && (await members.sessionMember({ db: services.db, accountId: session.accountId }, session.memberId));
    if (!session || !member) return null;
    entry = { tags: [session.id, member.memberId, session.accountId], cachedUntil: services.now() + (cache?.ttl ?? 0), session, member };
    cache?.set(hash, entry, readFrom);
  }
  const session = await sessions.keepAlive(services, entry.session);
  if (!session) {
    cache?.drop([entry.session.id]);
    return null;
  }
  entry.session = session;
  const { member } = entry;
  return {
    sessionId: session.id,
    accountId: session.accountId,
    memberId: member.memberId,
    name: member.name ?? member.email,
    email: member.email,
    role: member.role,
    brandScope: member.brandScope,
    expiresAt: session.expiresAt,
    sso: session.sso,
  };
}

function sessionOf(ctx: TenantCtx) {
  if (!ctx.session) throw forbidden('This takes a session of a signed-in member', 'session_required');
  return ctx.session;
}

/** GET /v1/auth/session: who is signed in, where, and until when. */
export async function sessionState(ctx: TenantCtx): Promise<SignedInView & { valid: true }> {
  const caller = sessionOf(ctx);
  const member = await members.sessionMember(ctx, caller.memberId);
  if (!member) throw notFound('Member');
  const session = await sessions.get(ctx, caller.sessionId);
  return { valid: true, ...(await signedInView(ctx, member, { ...session, expiresAt: caller.expiresAt })) };
}

/** Signs out: the session's token stops working at once. */
export async function logout(ctx: TenantCtx): Promise<void> {
  await sessions.revoke(ctx, sessionOf(ctx).sessionId);
}

/**
 * The organizations the signed-in person belongs to (their active memberships by email); a session
 * opened by single sign-on proves the address to its own organization only, so it sees that one.
 */
export async function organizationsOf(ctx: TenantCtx): Promise<OrganizationMembershipView[]> {
  const me = await members.sessionMember(ctx, sessionOf(ctx).memberId);
  if (!me) throw notFound('Member');
  const memberships = sessionOf(ctx).sso ? [me] : await members.activeMembershipsOf(ctx, me.email);
  const names = await accounts.namesOf(
    ctx,
    memberships.map((m) => m.accountId),
  );
  return memberships.filter((m) => names.has(m.accountId)).map((m) => ({ id: m.accountId, name: names.get(m.accountId)!, role: m.role }));
}

/** The organization of the session. */
export async function organization(ctx: TenantCtx): Promise<OrganizationView> {
  const account = await accounts.get(ctx);
  return { id: account.id, name: account.name };
}
