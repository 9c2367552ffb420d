import { TenantModel } from '../../core/model.js';

export class ApiKey extends TenantModel {
  static override tableName = 'api_keys';

  declare id: string;
  declare name: string;
  declare secretHash: string;
  declare keyPreview: string;
  declare allBrands: boolean;
  declare brandIds: string[];
  declare lastUsedAt: Date | null;
  declare expiresAt: Date | null;
  declare revokedAt: Date | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
