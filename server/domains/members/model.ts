import objection from 'objection';
import type { TenantCtx } from '../../core/context.js';

/** Members belong to the account, not to a mode: the same people work in live and test mode. */
export class Member extends objection.Model {
  static override tableName = 'members';

  declare id: string;
  declare accountId: string;
  declare email: string;
  declare name: string | null;
  declare role: 'owner' | 'admin' | 'member';
  declare status: 'active' | 'pending';
  declare createdAt: Date;
  declare updatedAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('members.accountId', ctx.accountId);
  }
}
