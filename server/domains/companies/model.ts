import { TenantModel } from '../../core/model.js';

export class Company extends TenantModel {
  static override tableName = 'companies';
  static override jsonAttributes = ['metadata'];

  declare id: string;
  declare brandId: string;
  declare name: string;
  declare nameKey: string;
  declare domain: string | null;
  declare metadata: Record<string, unknown>;
  declare createdAt: Date;
  declare updatedAt: Date;
  /** Selected by list and get queries. */
  declare customerCount?: number | string;
}
