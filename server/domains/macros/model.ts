import { TenantModel } from '../../core/model.js';
import type { Visibility } from '../../core/saved-items.js';
import type { MacroAction, MacroComment } from './schemas.js';

/** A macro (see the macros and views migration). */
export class Macro extends TenantModel {
  static override tableName = 'macros';
  static override jsonAttributes = ['actions', 'comment'];

  declare id: string;
  declare brandId: string;
  declare name: string;
  declare visibility: Visibility;
  declare ownerId: string | null;
  declare actions: MacroAction[];
  declare comment: Required<MacroComment> | null;
  declare createdBy: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
