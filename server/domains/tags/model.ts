import { TenantModel } from '../../core/model.js';

export class Tag extends TenantModel {
  static override tableName = 'tags';

  declare id: string;
  declare brandId: string;
  declare name: string;
  declare color: string;
  declare createdAt: Date;
  declare updatedAt: Date;
}
