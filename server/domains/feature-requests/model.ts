import objection from 'objection';
import type { TenantCtx } from '../../core/context.js';

/** Feature requests belong to the account, not to a mode, like the members who make them. */
export class FeatureRequest extends objection.Model {
  static override tableName = 'featureRequests';
  static override jsonAttributes = ['images'];

  declare id: string;
  declare accountId: string;
  declare title: string;
  declare featureDetails: string;
  declare currentBehavior: string | null;
  declare whyItMatters: string | null;
  declare category: string | null;
  declare images: { url: string; name?: string | null }[];
  declare status: string;
  declare authorId: string;
  declare createdAt: Date;
  declare updatedAt: Date;

  static ofAccount(ctx: Pick<TenantCtx, 'db' | 'accountId'>) {
    return this.query(ctx.db).where('featureRequests.accountId', ctx.accountId);
  }
}
