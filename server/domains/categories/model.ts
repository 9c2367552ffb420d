import { TenantModel } from '../../core/model.js';

export class Category extends TenantModel {
  static override tableName = 'categories';

  declare id: string;
  declare brandId: string;
  declare name: string;
  declare color: string;
  declare description: string | null;
  declare sortOrder: number;
  declare createdAt: Date;
  declare updatedAt: Date;
}
