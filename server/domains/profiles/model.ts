import objection from 'objection';
import type { TenantCtx } from '../../core/context.js';

/**
 * Profiles and avatars belong to a member, so to the account and not to a mode (like members);
 * they are reached through ofAccount.
 */

/** A member's dashboard profile; no row means every default. */
export class MemberProfile extends objection.Model {
  static override tableName = 'memberProfiles';
  static override get idColumn() {
    return ['accountId', 'memberId'];
  }

  declare accountId: string;
  declare memberId: string;
  /** null: the member's name. */
  declare displayName: string | null;
  /** An uploaded avatar (avatars.id), or null. */
  declare avatarId: string | null;
  /** An avatar elsewhere (http or https), or null. */
  declare avatarUrl: string | null;
  declare notifyEmail: boolean;
  declare notifyToast: boolean;
  declare notifyDesktop: boolean;
  declare createdAt: Date;
  declare updatedAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('memberProfiles.accountId', ctx.accountId);
  }
}

export type AvatarStatus = 'PENDING' | 'UPLOADED';

/** An avatar file: its bytes live in attachment storage under its id. */
export class Avatar extends objection.Model {
  static override tableName = 'avatars';
  static override get idColumn() {
    return ['accountId', 'id'];
  }

  declare accountId: string;
  declare id: string;
  declare memberId: string;
  declare status: AvatarStatus;
  declare contentType: string;
  /** bigint: the driver returns it as a string. */
  declare size: string | number;
  declare expiresAt: Date | null;
  declare createdAt: Date;
  declare updatedAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('avatars.accountId', ctx.accountId);
  }
}
