import { TenantModel } from '../model.js';
import type { OutboxStatus } from './statuses.js';

export const OUTBOX_KINDS = ['webhook', 'mail'] as const;
export type OutboxKind = (typeof OUTBOX_KINDS)[number];
export { OUTBOX_STATUSES, type OutboxStatus } from './statuses.js';

/** One message to deliver (see the outbox migration). */
export class OutboxMessage extends TenantModel {
  static override tableName = 'outbox';
  static override jsonAttributes = ['payload'];

  declare id: string;
  declare brandId: string | null;
  declare kind: OutboxKind;
  declare event: string;
  declare webhookId: string | null;
  declare payload: Record<string, unknown>;
  declare status: OutboxStatus;
  declare attempts: number;
  declare availableAt: Date;
  declare leaseOwner: string | null;
  declare leaseExpiresAt: Date | null;
  declare lastError: string | null;
  declare responseCode: number | null;
  declare responseBody: string | null;
  declare lastAttemptAt: Date | null;
  declare createdAt: Date;
  declare deliveredAt: Date | null;
}
