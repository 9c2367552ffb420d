import type { BaseCtx, TenantCtx } from '../../core/context.js';
import type { PortalIdentity } from '../../core/auth.js';
import { PORTAL_TOKEN_PREFIX } from '../../core/auth.js';
import { badRequest, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { sameAccount, sameTenant, scopeOf } from '../../core/model.js';
import { normalizeOrigin } from '../../core/origins.js';
import { hashSecret, randomBase62, TOKEN_RANDOM_LENGTH } from '../../core/secrets.js';
import { part, type Services } from '../../core/services.js';
import * as audit from '../../core/audit.js';
import { PortalLink, PortalToken } from './model.js';
import { DEFAULT_TOKEN_LIFETIME_SECONDS, MAX_TOKEN_LIFETIME_SECONDS, MIN_TOKEN_LIFETIME_SECONDS, type PortalTokenView } from './schemas.js';

/**
 * Portal tokens and portal sign-in links: a customer's narrow door. Tokens carry 256 random bits
 * behind a prefix (`pt_` tokens, `pl_` links) and only their SHA-256 is stored. Each remembers who
 * granted it (an API key, or a member's session) and works only while that grantor does: a revoked
 * key or a removed member takes its tokens along (docs/decisions/0054-…). A token goes with its
 * contact (and so with its brand and account): foreign key, cascade. Every time is services.now().
 */

const TOKEN_FORMAT = new RegExp(`^${PORTAL_TOKEN_PREFIX}[0-9A-Za-z]{${TOKEN_RANDOM_LENGTH}}$`);
const LINK_PREFIX = 'pl_';
const LINK_FORMAT = new RegExp(`^${LINK_PREFIX}[0-9A-Za-z]{${TOKEN_RANDOM_LENGTH}}$`);
export const LINK_TTL_MS = 15 * 60_000;

/** Who granted a token: the API key or the member whose session minted it. */
export interface Grantor {
  apiKeyId: string | null;
  memberId: string | null;
}

/** The grantor of what ctx mints: its session's member, else its API key. */
export function grantorOf(ctx: TenantCtx): Grantor {
  if (ctx.session) return { apiKeyId: null, memberId: ctx.session.memberId };
  return { apiKeyId: ctx.actor.type === 'api' ? ctx.actor.id : null, memberId: null };
}

const UNITS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86400 };

/** Seconds of `expiresIn` (`30m`, `24h`, `7d`, `90s` or seconds), within the bounds; absent: 24 hours. */
export function lifetimeOf(expiresIn: string | number | undefined, field = 'expiresIn'): number {
  if (expiresIn === undefined) return DEFAULT_TOKEN_LIFETIME_SECONDS;
  const match = typeof expiresIn === 'string' ? /^\s*(\d+)\s*([smhd])\s*$/.exec(expiresIn) : null;
  const seconds = typeof expiresIn === 'number' ? expiresIn : match ? Number(match[1]) * UNITS[match[2]!]! : NaN;
  if (!Number.isSafeInteger(seconds) || seconds < MIN_TOKEN_LIFETIME_SECONDS || seconds > MAX_TOKEN_LIFETIME_SECONDS) {
    const bounds = `between ${MIN_TOKEN_LIFETIME_SECONDS / 60}m and ${MAX_TOKEN_LIFETIME_SECONDS / 86400}d`;
    throw badRequest(`${field} must be a duration ${bounds} such as 30m, 24h or 7d`, [{ field, message: `must be ${bounds}` }], 'invalid_expires_in');
  }
  return seconds;
}

/** The customer a mint or link request names, in either spelling (`email`/`name` or `customerEmail`/`customerName`). */
export function customerOf(input: { email?: string; name?: string | null; customerEmail?: string; customerName?: string | null }): { email: string; name: string | null } {
  const email = (input.customerEmail ?? input.email)?.trim();
  if (!email) throw badRequest('Name the customer: email (or customerEmail) is required', [{ field: 'email', message: 'is required' }], 'email_required');
  if (input.email !== undefined && input.customerEmail !== undefined && input.email.trim().toLowerCase() !== input.customerEmail.trim().toLowerCase()) {
    throw badRequest('email and customerEmail name different customers: send one of them', [{ field: 'customerEmail', message: 'differs from email' }]);
  }
  const name = (input.customerName ?? input.name)?.trim() || null;
  return { email, name };
}

export interface MintedToken {
  id: string;
  token: string;
  expiresAt: Date;
  lifetimeSeconds: number;
}

/**
 * A portal token for a contact of the brand (ctx: in a transaction, in the brand's account and
 * mode); returned here only. The contact's ended tokens go at the same time, so rows never pile up.
 */
export async function mint(ctx: TenantCtx, brandId: string, contactId: string, lifetimeSeconds: number, grantor: Grantor): Promise<MintedToken> {
  const now = new Date(ctx.services.now());
  await PortalToken.scoped(ctx)
    .where({ 'portalTokens.brandId': brandId, 'portalTokens.contactId': contactId })
    .where((q) => q.whereNotNull('revokedAt').orWhere('expiresAt', '<=', now))
    .delete();
  const token = `${PORTAL_TOKEN_PREFIX}${randomBase62()}`;
  const id = newId(ID_PREFIX.portalToken);
  const expiresAt = new Date(now.getTime() + lifetimeSeconds * 1000);
  await PortalToken.query(ctx.db).insert({ id, ...scopeOf(ctx), brandId, contactId, tokenHash: hashSecret(token), ...grantor, lifetimeSeconds, createdAt: now, expiresAt });
  await audit.record(ctx, {
    brandId,
    entityType: 'portal_token',
    entityId: id,
    event: 'portal_token.created',
    metadata: { contactId, expiresAt: expiresAt.toISOString(), ...(ctx.portal ? { refreshedFrom: ctx.portal.tokenId } : {}) },
  });
  return { id, token, expiresAt, lifetimeSeconds };
}

export function tokenView(brandId: string, minted: MintedToken, customer: { id: string; email: string; name: string | null }, now: number): PortalTokenView {
  return {
    object: 'portal_token',
    token: minted.token,
    accessToken: minted.token,
    expiresAt: minted.expiresAt.toISOString(),
    expiresIn: Math.max(0, Math.round((minted.expiresAt.getTime() - now) / 1000)),
    brandId,
    customerId: customer.id,
    email: customer.email,
    name: customer.name,
  };
}

/** The caller's own token row (a portal route's ctx): what a refresh grants again. */
export async function current(ctx: TenantCtx): Promise<{ lifetimeSeconds: number; grantor: Grantor }> {
  const row = await PortalToken.scoped(ctx)
    .findById(ctx.portal?.tokenId ?? '')
    .whereNull('revokedAt');
  if (!row) throw notFound('Portal token');
  return { lifetimeSeconds: row.lifetimeSeconds, grantor: { apiKeyId: row.apiKeyId, memberId: row.memberId } };
}

/** The grantor of the row `alias` still works: its API key is neither revoked nor past a rotation's grace, its member is active. */
function grantorAlive(alias: 't' | 'l'): string {
  return `(${alias}.api_key_id is null or exists (select 1 from api_keys k where ${sameAccount('k', alias)} and k.id = ${alias}.api_key_id
      and k.revoked_at is null and (k.expires_at is null or k.expires_at > ?)))
    and (${alias}.member_id is null or exists (select 1 from members m where ${sameAccount('m', alias)} and m.id = ${alias}.member_id and m.status = 'active'))`;
}

interface IdentityRow {
  id: string;
  account_id: string;
  livemode: boolean;
  brand_id: string;
  contact_id: string;
  expires_at: Date;
  email: string;
  name: string | null;
  portal_origins: string[];
}

/**
 * The authenticator of portal tokens (core/auth.ts): the live token, its contact and its brand's
 * portal origins, in one indexed read. Not cached: revoking (the contact, the brand, the grantor)
 * takes effect on the very next request, in every process.
 */
export async function authenticate(services: Services, token: string): Promise<PortalIdentity | null> {
  if (!TOKEN_FORMAT.test(token)) return null;
  const now = new Date(services.now());
  const { rows } = (await services.db.raw(
    `select t.id, t.account_id, t.livemode, t.brand_id, t.contact_id, t.expires_at, c.email, c.name, b.portal_origins
      from portal_tokens t
      join contacts c on ${sameTenant('c', 't')} and c.brand_id = t.brand_id and c.id = t.contact_id
      join brands b on ${sameTenant('b', 't')} and b.id = t.brand_id
      where t.token_hash = ? and t.revoked_at is null and t.expires_at > ? and ${grantorAlive('t')}`,
    [hashSecret(token), now, now],
  )) as { rows: IdentityRow[] };
  const row = rows[0];
  if (!row) return null;
  return {
    tokenId: row.id,
    accountId: row.account_id,
    livemode: row.livemode,
    brandId: row.brand_id,
    contactId: row.contact_id,
    email: row.email,
    name: row.name,
    expiresAt: new Date(row.expires_at),
    portalOrigins: row.portal_origins,
  };
}

// ---------------------------------------------------------------------------------------------
// Sign-in links.

/** The link's URL: `portalUrl` with `token=…` added to its query. */
export function linkUrl(portalUrl: string, token: string): string {
  const url = new URL(portalUrl);
  url.searchParams.set('token', token);
  return url.toString();
}

/**
 * A portal sign-in token for a contact, valid once within 15 minutes; returned here only. The
 * contact's used and expired links go at the same time.
 */
export async function issueLink(ctx: TenantCtx, brandId: string, contactId: string, portalUrl: string, lifetimeSeconds: number, grantor: Grantor) {
  const now = new Date(ctx.services.now());
  await PortalLink.scoped(ctx)
    .where({ 'portalLinks.brandId': brandId, 'portalLinks.contactId': contactId })
    .where((q) => q.whereNotNull('usedAt').orWhere('expiresAt', '<=', now))
    .delete();
  const token = `${LINK_PREFIX}${randomBase62()}`;
  const id = newId(ID_PREFIX.portalLink);
  const expiresAt = new Date(now.getTime() + LINK_TTL_MS);
  await PortalLink.query(ctx.db).insert({
    id,
    ...scopeOf(ctx),
    brandId,
    contactId,
    tokenHash: hashSecret(token),
    ...grantor,
    portalUrl,
    lifetimeSeconds,
    createdAt: now,
    expiresAt,
  });
  return { id, token, expiresAt, url: linkUrl(portalUrl, token) };
}

export interface SpentLink extends Grantor {
  accountId: string;
  livemode: boolean;
  brandId: string;
  contactId: string;
  lifetimeSeconds: number;
  portalOrigins: string[];
}

/**
 * Spends a sign-in link: the first caller before its expiry gets it, everyone after gets null (one
 * compare-and-set statement). Unknown, used, expired, malformed links and links whose grantor is
 * gone all read the same. Run it in the transaction that mints the token, so a refusal after it
 * (a foreign origin) leaves the link unspent.
 */
export async function consumeLink(ctx: BaseCtx, token: string): Promise<SpentLink | null> {
  if (!LINK_FORMAT.test(token)) return null;
  const now = new Date(ctx.services.now());
  const { rows } = (await ctx.db.raw(
    `update portal_links l set used_at = ?
      from brands b
      where ${sameTenant('b', 'l')} and b.id = l.brand_id
        and l.token_hash = ? and l.used_at is null and l.expires_at > ? and ${grantorAlive('l')}
      returning l.account_id, l.livemode, l.brand_id, l.contact_id, l.api_key_id, l.member_id, l.lifetime_seconds, b.portal_origins`,
    [now, hashSecret(token), now, now],
  )) as {
    rows: {
      account_id: string;
      livemode: boolean;
      brand_id: string;
      contact_id: string;
      api_key_id: string | null;
      member_id: string | null;
      lifetime_seconds: number;
      portal_origins: string[];
    }[];
  };
  const r = rows[0];
  if (!r) return null;
  return {
    accountId: r.account_id,
    livemode: r.livemode,
    brandId: r.brand_id,
    contactId: r.contact_id,
    apiKeyId: r.api_key_id,
    memberId: r.member_id,
    lifetimeSeconds: r.lifetime_seconds,
    portalOrigins: r.portal_origins,
  };
}

// ---------------------------------------------------------------------------------------------
// CORS: which browser origins may call /v1/portal/… at all.

/** Answers about origins are kept this long: a preflight costs no query while they are. */
const ORIGIN_CACHE_MS = 30_000;
const ORIGIN_CACHE_MAX = 1000;
const originAnswers = part('portal.origins', () => new Map<string, { allowed: boolean; until: number }>());

/**
 * Whether some brand lists `origin` among its portalOrigins: the CORS preflight of a portal route
 * cannot know the brand (a browser sends no Authorization with it), so it is answered for the
 * portal origins of every brand; each request is then held to its own brand's (core/auth.ts).
 */
export async function isPortalOrigin(services: Services, origin: string | undefined): Promise<boolean> {
  const normal = origin ? normalizeOrigin(origin) : null;
  if (!normal) return false;
  const answers = services.get(originAnswers);
  const now = services.now();
  const known = answers.get(normal);
  if (known && known.until > now) return known.allowed;
  const { rows } = (await services.db.raw(`select exists (select 1 from brands b, unnest(b.portal_origins) o where lower(o) = ?) as allowed`, [normal])) as {
    rows: { allowed: boolean }[];
  };
  if (answers.size >= ORIGIN_CACHE_MAX) answers.clear();
  answers.set(normal, { allowed: rows[0]!.allowed, until: now + ORIGIN_CACHE_MS });
  return rows[0]!.allowed;
}
