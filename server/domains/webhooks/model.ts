import { TenantModel } from '../../core/model.js';

export class Webhook extends TenantModel {
  static override tableName = 'webhooks';

  declare id: string;
  declare brandId: string;
  declare url: string;
  declare events: string[];
  /** As given or generated, not hashed: every delivery is signed with it (see the migration). */
  declare secret: string;
  declare previousSecret: string | null;
  declare previousSecretExpiresAt: Date | null;
  declare enabled: boolean;
  declare failureCount: number;
  declare lastTriggeredAt: Date | null;
  declare lastFailure: string | null;
  declare lastFailureAt: Date | null;
  declare disabledReason: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
