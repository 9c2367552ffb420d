import { withTx, type BaseCtx, type TenantCtx } from '../../core/context.js';
import { notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { SESSION_TOKEN_PREFIX } from '../../core/auth.js';
import { hashSecret, randomBase62, TOKEN_RANDOM_LENGTH } from '../../core/secrets.js';
import { part, type Services } from '../../core/services.js';
import * as audit from '../../core/audit.js';
import { credentialsChanged } from '../../core/credential-cache.js';
import { MagicLink, Session } from './model.js';

/**
 * Magic links and sessions. Tokens are 256 random bits behind a prefix (`ml_` sign-in links, `ts_`
 * sessions); only their SHA-256 is stored, so a copy of the database signs nobody in. Every time
 * is taken from services.now(), so tests move through expiry with an injected clock.
 */

export const MAGIC_LINK_TTL_MS = 15 * 60_000;
const MAGIC_LINK_FORMAT = new RegExp(`^ml_[0-9A-Za-z]{${TOKEN_RANDOM_LENGTH}}$`);
const SESSION_FORMAT = new RegExp(`^${SESSION_TOKEN_PREFIX}[0-9A-Za-z]{${TOKEN_RANDOM_LENGTH}}$`);
/** The sliding expiry is written at most once a minute per session: reads stay reads. */
const TOUCH_RESOLUTION_MS = 60_000;

export interface IssuedLink {
  id: string;
  token: string;
  expiresAt: Date;
}

/**
 * A sign-in token for a member, valid once within 15 minutes; returned here only. The member's
 * used and expired links go at the same time, so their rows never pile up.
 */
export async function issueMagicLink(ctx: TenantCtx, memberId: string, origin: string): Promise<IssuedLink> {
  const now = new Date(ctx.services.now());
  await MagicLink.ofAccount(ctx)
    .where('magicLinks.memberId', memberId)
    .where((q) => q.whereNotNull('usedAt').orWhere('expiresAt', '<=', now))
    .delete();
  const token = `ml_${randomBase62()}`;
  const expiresAt = new Date(now.getTime() + MAGIC_LINK_TTL_MS);
  const id = newId(ID_PREFIX.magicLink);
  await MagicLink.query(ctx.db).insert({ id, accountId: ctx.accountId, memberId, tokenHash: hashSecret(token), origin, expiresAt });
  return { id, token, expiresAt };
}

/**
 * The token of an invitation: a sign-in link of the pending member, valid once until the invitation
 * expires. Every other link of the member goes, used or not: only the newest invitation works.
 */
export async function issueInviteLink(ctx: TenantCtx, memberId: string, origin: string, expiresAt: Date): Promise<IssuedLink> {
  await MagicLink.ofAccount(ctx).where('magicLinks.memberId', memberId).delete();
  const token = `ml_${randomBase62()}`;
  const id = newId(ID_PREFIX.magicLink);
  await MagicLink.query(ctx.db).insert({ id, accountId: ctx.accountId, memberId, tokenHash: hashSecret(token), origin, expiresAt });
  return { id, token, expiresAt };
}

/**
 * Spends a sign-in token: the first caller before its expiry gets its member, everyone after gets
 * null (one compare-and-set statement, so two concurrent uses cannot both succeed). Unknown, used,
 * expired and malformed tokens all read the same.
 */
export async function consumeMagicLink(ctx: BaseCtx, token: string): Promise<{ accountId: string; memberId: string; origin: string } | null> {
  if (!MAGIC_LINK_FORMAT.test(token)) return null;
  const now = new Date(ctx.services.now());
  const [spent] = (await MagicLink.query(ctx.db)
    .where({ tokenHash: hashSecret(token) })
    .whereNull('usedAt')
    .where('expiresAt', '>', now)
    .patch({ usedAt: now })
    .returning(['accountId', 'memberId', 'origin'])) as unknown as Pick<MagicLink, 'accountId' | 'memberId' | 'origin'>[];
  return spent ? { accountId: spent.accountId, memberId: spent.memberId, origin: spent.origin } : null;
}

export interface SessionRecord {
  id: string;
  accountId: string;
  memberId: string;
  createdAt: Date;
  lastUsedAt: Date;
  /** The sliding expiry: pushed forward by use, never past maxExpiresAt. */
  expiresAt: Date;
  maxExpiresAt: Date;
  /** Opened by single sign-on: the address is proven to this organization only. */
  sso: boolean;
}

function recordOf(row: Session): SessionRecord {
  return {
    id: row.id,
    accountId: row.accountId,
    memberId: row.memberId,
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
    expiresAt: row.expiresAt,
    maxExpiresAt: row.maxExpiresAt,
    sso: row.sso,
  };
}

function lifetimes(services: Services): { idleMs: number; maxMs: number } {
  const maxMs = services.config.sessionMaxTtlSeconds * 1000;
  return { idleMs: Math.min(services.config.sessionIdleTtlSeconds * 1000, maxMs), maxMs };
}

/**
 * Opens a session for a member (ctx: their account, in a transaction, acting as them); the token is
 * returned here only. The member's ended sessions go at the same time. `sso`: opened by single
 * sign-on (recorded on the session and in its audit entry).
 */
export async function open(
  ctx: TenantCtx,
  memberId: string,
  client: { ip: string | null; userAgent: string | null },
  options: { sso?: boolean } = {},
): Promise<SessionRecord & { token: string }> {
  const now = new Date(ctx.services.now());
  const { idleMs, maxMs } = lifetimes(ctx.services);
  const gone = (await Session.ofAccount(ctx)
    .where('sessions.memberId', memberId)
    .where((q) => q.whereNotNull('revokedAt').orWhere('expiresAt', '<=', now))
    .delete()
    .returning('sessions.id')) as unknown as { id: string }[];
  await credentialsChanged(
    ctx,
    'sessions',
    gone.map((s) => s.id),
  );
  const token = `${SESSION_TOKEN_PREFIX}${randomBase62()}`;
  const row = await Session.query(ctx.db)
    .insert({
      id: newId(ID_PREFIX.session),
      accountId: ctx.accountId,
      memberId,
      tokenHash: hashSecret(token),
      ip: client.ip,
      userAgent: client.userAgent?.slice(0, 500) ?? null,
      lastUsedAt: now,
      expiresAt: new Date(now.getTime() + idleMs),
      maxExpiresAt: new Date(now.getTime() + maxMs),
      sso: options.sso ?? false,
    })
    .returning('*');
  await audit.record(ctx, { brandId: null, entityType: 'session', entityId: row.id, event: 'session.created', metadata: { memberId, ...(options.sso ? { via: 'sso' } : {}) } });
  return { ...recordOf(row), token };
}

export function isSessionToken(token: string): boolean {
  return SESSION_FORMAT.test(token);
}

/** The session whose token has this hash, if it is not revoked nor past its expiry or cap: one indexed read. */
export async function findLive(services: Services, tokenHash: string): Promise<SessionRecord | null> {
  const row = await Session.query(services.db).where({ tokenHash }).whereNull('revokedAt').first();
  const record = row ? recordOf(row) : null;
  return record && isLive(record, services.now()) ? record : null;
}

function isLive(session: SessionRecord, now: number): boolean {
  return session.expiresAt.getTime() > now && session.maxExpiresAt.getTime() > now;
}

/**
 * The latest write of each session's sliding expiry in this process, by session id, with the time
 * it was made: the requests a dashboard sends at once share it (instead of each waiting for the
 * last one's commit on the session's row), and so do those that read the session before it was
 * written but reach here after, within the minute it stands for.
 */
const touchesPart = part('session-touches', () => new Map<string, { at: number; touch: Promise<SessionRecord | null> }>());

/**
 * A use of a live session: its sliding expiry moves forward, written at most once a minute, so
 * reads stay reads. Null when it has ended by the clock, or was revoked meanwhile (the write finds
 * nothing, so a logout racing this request wins).
 */
export async function keepAlive(services: Services, session: SessionRecord): Promise<SessionRecord | null> {
  const now = services.now();
  if (!isLive(session, now)) return null;
  if (now - session.lastUsedAt.getTime() < TOUCH_RESOLUTION_MS) return session;
  const touches = services.get(touchesPart);
  const latest = touches.get(session.id);
  if (latest && now - latest.at < TOUCH_RESOLUTION_MS) return latest.touch;
  const expiresAt = new Date(Math.min(now + lifetimes(services).idleMs, session.maxExpiresAt.getTime()));
  const touch = Session.ofAccount({ db: services.db, accountId: session.accountId })
    .where('sessions.id', session.id)
    .whereNull('revokedAt')
    .patch({ lastUsedAt: new Date(now), expiresAt })
    .then((touched) => (touched ? { ...session, lastUsedAt: new Date(now), expiresAt } : null));
  touches.set(session.id, { at: now, touch });
  // Forgotten once it stands for nothing more (a later request reads the row it wrote).
  setTimeout(() => {
    if (touches.get(session.id)?.touch === touch) touches.delete(session.id);
  }, TOUCH_RESOLUTION_MS).unref();
  return touch;
}

/** Ends a session now (sign-out): its token gets 401 from the next request on. */
export async function revoke(ctx: TenantCtx, sessionId: string): Promise<void> {
  await withTx(ctx, async (tx) => {
    const revoked = await Session.ofAccount(tx)
      .where('sessions.id', sessionId)
      .whereNull('revokedAt')
      .patch({ revokedAt: new Date(tx.services.now()) });
    if (!revoked) return;
    await audit.record(tx, { brandId: null, entityType: 'session', entityId: sessionId, event: 'session.revoked' });
    await credentialsChanged(tx, 'sessions', [sessionId]);
  });
}

/** A session of the caller's account, by id. */
export async function get(ctx: TenantCtx, sessionId: string): Promise<SessionRecord> {
  const row = await Session.ofAccount(ctx).where('sessions.id', sessionId).first();
  if (!row) throw notFound('Session');
  return recordOf(row);
}

/** Ends every live session of a member now (their account deleted at the identity provider); returns how many. */
export async function revokeAllOf(ctx: TenantCtx, memberId: string): Promise<number> {
  const revoked = await Session.ofAccount(ctx)
    .where('sessions.memberId', memberId)
    .whereNull('revokedAt')
    .patch({ revokedAt: new Date(ctx.services.now()) });
  if (revoked) await credentialsChanged(ctx, 'sessions', [memberId]);
  return revoked;
}
