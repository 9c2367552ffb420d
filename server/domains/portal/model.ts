import { TenantModel } from '../../core/model.js';

/**
 * A customer's credentials, of one contact of one brand. Both are found by the hash of their token
 * alone when presented; anything else goes through scoped(ctx).
 */

/** A portal token (`pt_…`): a bearer token with a fixed expiry, revocable. */
export class PortalToken extends TenantModel {
  static override tableName = 'portalTokens';

  declare id: string;
  declare brandId: string;
  declare contactId: string;
  declare tokenHash: string;
  /** Who granted it: the API key, or the member whose session minted it (one of the two, or neither for a refresh of neither). */
  declare apiKeyId: string | null;
  declare memberId: string | null;
  /** What a refresh grants again. */
  declare lifetimeSeconds: number;
  declare createdAt: Date;
  declare expiresAt: Date;
  declare revokedAt: Date | null;
}

/** A single-use portal sign-in link (`pl_…`) mailed to a customer; spending it mints a portal token. */
export class PortalLink extends TenantModel {
  static override tableName = 'portalLinks';

  declare id: string;
  declare brandId: string;
  declare contactId: string;
  declare tokenHash: string;
  declare apiKeyId: string | null;
  declare memberId: string | null;
  declare portalUrl: string;
  /** The lifetime of the portal token the link mints. */
  declare lifetimeSeconds: number;
  declare createdAt: Date;
  declare expiresAt: Date;
  declare usedAt: Date | null;
}
