import { TenantModel } from '../../core/model.js';

export class BlockedSource extends TenantModel {
  static override tableName = 'blockedSources';

  declare id: string;
  declare brandId: string;
  declare type: 'email' | 'domain';
  declare value: string;
  declare reason: string | null;
  declare createdBy: string | null;
  declare createdAt: Date;
}
