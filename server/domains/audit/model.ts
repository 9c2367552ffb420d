import { TenantModel } from '../../core/model.js';
import type { PerformerType } from '../../core/context.js';

export interface Change {
  field: string;
  from: unknown;
  to: unknown;
}

export class AuditEntry extends TenantModel {
  static override tableName = 'auditLog';
  static override jsonAttributes = ['changes', 'metadata'];

  declare id: string;
  declare brandId: string | null;
  declare ticketId: string | null;
  declare entityType: string;
  declare entityId: string;
  declare event: string;
  declare performerType: PerformerType;
  declare performerId: string | null;
  declare performerName: string | null;
  declare source: string;
  declare changes: Change[];
  declare metadata: Record<string, unknown>;
  declare requestId: string | null;
  declare createdAt: Date;
  /** Selected by reads: the display prefix of the API key that made the change. */
  declare apiKeyPrefix?: string | null;
}
