import { TenantModel } from '../../core/model.js';

export class Form extends TenantModel {
  static override tableName = 'forms';
  static override jsonAttributes = ['fieldMapping'];

  declare id: string;
  declare brandId: string;
  declare name: string;
  /** As issued, not hashed: it is published in the page that embeds the form (see the migration). */
  declare token: string;
  declare successUrl: string | null;
  declare errorUrl: string | null;
  declare thankYouMessage: string | null;
  declare fieldMapping: Record<string, string> | null;
  declare enabled: boolean;
  declare honeypotField: string | null;
  declare allowedOrigins: string[];
  declare submissionCount: number;
  declare lastSubmissionAt: Date | null;
  declare createdAt: Date;
  declare updatedAt: Date;
}
