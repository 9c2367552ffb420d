import { TenantModel } from '../../core/model.js';

export class Status extends TenantModel {
  static override tableName = 'statuses';

  declare id: string;
  declare brandId: string;
  declare key: string;
  declare name: string;
  declare color: string;
  declare description: string | null;
  declare isSystem: boolean;
  declare isActive: boolean;
  declare sortOrder: number;
  declare createdAt: Date;
  declare updatedAt: Date;
}
