import { TenantModel } from '../../core/model.js';

export type SsoRole = 'admin' | 'member';

/** An organization's identity provider; one per account, in live mode (where sessions work). */
export class SsoConnection extends TenantModel {
  static override tableName = 'sso_connections';

  declare id: string;
  /** As the provider names itself in its discovery document (and in its ID tokens). */
  declare issuer: string;
  declare clientId: string;
  /** Sealed (core/sealed.ts). */
  declare clientSecret: string;
  /** Lower-case email domains the provider may vouch for. */
  declare allowedDomains: string[];
  declare defaultRole: SsoRole;
  declare allowMagicLinks: boolean;
  declare createdAt: Date;
  declare updatedAt: Date;
}

/** A sign-in under way: found at the callback by its state's hash, spent once. */
export class SsoAttempt extends TenantModel {
  static override tableName = 'sso_attempts';

  declare id: string;
  declare connectionId: string;
  declare stateHash: string;
  /** The state, nonce and PKCE verifier, sealed together (JSON). */
  declare secrets: string;
  /** The dashboard origin the person is sent back to. */
  declare origin: string;
  /** The callback URL given to the provider, which the code exchange must name again. */
  declare redirectUri: string;
  declare createdAt: Date;
  declare expiresAt: Date;
  declare usedAt: Date | null;
}
