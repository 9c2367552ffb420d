import { TenantModel } from '../../core/model.js';

export class Ticket extends TenantModel {
  static override tableName = 'tickets';
  static override jsonAttributes = ['links', 'customFields', 'metadata', 'sourceData'];

  declare id: string;
  declare brandId: string;
  declare ticketNumber: number;
  declare title: string;
  declare body: string | null;
  declare status: string;
  declare priority: string | null;
  declare assigneeId: string | null;
  declare createdBy: string | null;
  declare customerId: string | null;
  declare categoryId: string | null;
  declare links: { url: string; title?: string | null; type?: string | null }[];
  declare customFields: unknown;
  declare metadata: Record<string, unknown>;
  declare source: string;
  declare sourceId: string | null;
  declare sourceData: Record<string, unknown> | null;
  declare isSpam: boolean;
  declare mergedIntoId: string | null;
  declare closeReason: string | null;
  declare dueAt: Date | null;
  declare dueAtManual: boolean;
  declare slaPausedAt: Date | null;
  declare slaPausedSeconds: number;
  declare overdueAt: Date | null;
  declare commentCount: number;
  declare attachmentCount: number;
  declare createdAt: Date;
  declare updatedAt: Date;
  declare deletedAt: Date | null;
  declare legalHold: boolean;
}
