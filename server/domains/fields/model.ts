import { TenantModel } from '../../core/model.js';

export class FieldDefinition extends TenantModel {
  static override tableName = 'field_definitions';
  // jsonb; options is text[] and must not be JSON-encoded.
  static override jsonAttributes = ['defaultValue'];

  declare id: string;
  declare brandId: string;
  declare entityType: string;
  declare key: string;
  declare label: string;
  declare type: string;
  declare required: boolean;
  declare defaultValue: unknown;
  declare description: string | null;
  declare placeholder: string | null;
  declare options: string[] | null;
  declare visible: boolean;
  declare showOnCreate: boolean;
  declare showInTable: boolean;
  declare showInDetail: boolean;
  declare sortOrder: number;
  declare source: string | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
