import objection from 'objection';
import type { MemberRole, TenantCtx } from '../../core/context.js';

/** Members belong to the account, not to a mode: the same people work in live and test mode. */
export class Member extends objection.Model {
  static override tableName = 'members';

  declare id: string;
  declare accountId: string;
  declare email: string;
  declare name: string | null;
  declare role: MemberRole;
  declare status: 'active' | 'pending';
  /** Brand assignments: the brands a member's session sees (owners and admins see all regardless). */
  declare allBrands: boolean;
  declare brandIds: string[];
  /** When the latest invitation was sent and when it stops working; null for members never invited. */
  declare invitedAt: Date | null;
  declare inviteExpiresAt: Date | null;
  /** The identity provider's user this member is (linked by its notifications), if any. */
  declare identityProvider: string | null;
  declare identityUserId: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('members.accountId', ctx.accountId);
  }
}
