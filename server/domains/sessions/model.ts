import objection from 'objection';
import type { TenantCtx } from '../../core/context.js';

/**
 * Sign-in records belong to a member, so to the account and not to a mode (like members). Both are
 * found by the hash of their token alone when presented; anything else goes through ofAccount.
 */

/** A single-use sign-in token for one member, asked for from one dashboard origin. */
export class MagicLink extends objection.Model {
  static override tableName = 'magicLinks';

  declare id: string;
  declare accountId: string;
  declare memberId: string;
  declare tokenHash: string;
  declare origin: string;
  declare createdAt: Date;
  declare expiresAt: Date;
  declare usedAt: Date | null;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('magicLinks.accountId', ctx.accountId);
  }
}

/** A member's dashboard session: a bearer token with a sliding expiry under a fixed cap. */
export class Session extends objection.Model {
  static override tableName = 'sessions';

  declare id: string;
  declare accountId: string;
  declare memberId: string;
  declare tokenHash: string;
  declare ip: string | null;
  declare userAgent: string | null;
  declare createdAt: Date;
  declare lastUsedAt: Date;
  declare expiresAt: Date;
  declare maxExpiresAt: Date;
  declare revokedAt: Date | null;
  /** Opened by single sign-on. */
  declare sso: boolean;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('sessions.accountId', ctx.accountId);
  }
}
