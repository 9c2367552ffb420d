import { TenantModel } from '../../core/model.js';
import type { Action, Conditions, RuleKind } from './schemas.js';

export type { RuleKind };

/** A trigger or an automation (see the rules migration). */
export class Rule extends TenantModel {
  static override tableName = 'rules';
  static override jsonAttributes = ['conditions', 'actions'];

  declare id: string;
  declare brandId: string;
  declare kind: RuleKind;
  declare name: string;
  declare enabled: boolean;
  declare position: number;
  /** Triggers: the events they run on. */
  declare onEvents: string[];
  declare conditions: Conditions;
  declare actions: Action[];
  declare firedCount: number;
  declare lastFiredAt: Date | null;
  declare disabledReason: string | null;
  declare createdBy: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
