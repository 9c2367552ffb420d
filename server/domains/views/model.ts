import { TenantModel } from '../../core/model.js';
import type { Visibility } from '../../core/saved-items.js';
import type { StoredSort, ViewFilters } from './schemas.js';

/** A view (see the macros and views migration). */
export class View extends TenantModel {
  static override tableName = 'views';
  static override jsonAttributes = ['filters', 'sort'];

  declare id: string;
  declare brandId: string;
  declare name: string;
  declare visibility: Visibility;
  declare ownerId: string | null;
  declare filters: ViewFilters;
  declare sort: StoredSort;
  declare createdBy: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
