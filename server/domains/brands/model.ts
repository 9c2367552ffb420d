import { TenantModel } from '../../core/model.js';

/** What validating a custom-field value needs of one field definition. */
export interface FieldRule {
  key: string;
  type: string;
  options: string[] | null;
  required: boolean;
}

export class Brand extends TenantModel {
  static override tableName = 'brands';
  // jsonb columns; the text[] columns (portalOrigins) must not be JSON-encoded.
  static override jsonAttributes = ['settings', 'metadata', 'ticketSchema', 'slaByPriority', 'slaBusinessHours', 'fieldRules'];

  declare id: string;
  declare name: string;
  declare slug: string;
  declare ticketPrefix: string;
  declare nextTicketNumber: number;
  declare url: string | null;
  declare iconUrl: string | null;
  declare settings: Record<string, unknown>;
  declare metadata: Record<string, unknown>;
  declare ticketSchema: Record<string, unknown> | null;
  /** Kept by a trigger on field_definitions (migration 1700): per entity type, in display order. */
  declare fieldRules: Partial<Record<'ticket' | 'customer' | 'company', FieldRule[]>>;
  declare inboundEmailEnabled: boolean;
  declare autoresponseEnabled: boolean;
  declare autoresponseSubject: string | null;
  declare autoresponseBody: string | null;
  declare fromName: string | null;
  declare fromEmail: string | null;
  declare portalOrigins: string[];
  declare csatEnabled: boolean;
  declare csatType: string;
  declare csatDelayMinutes: number;
  declare csatEmailSubject: string | null;
  declare csatEmailBody: string | null;
  declare slaEnabled: boolean;
  declare slaDefaultHours: number | null;
  declare slaByPriority: Record<string, number> | null;
  declare slaNotifyOverdue: boolean;
  declare slaBusinessHoursOnly: boolean;
  declare slaBusinessHours: Record<string, unknown> | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
