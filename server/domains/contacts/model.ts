import { TenantModel } from '../../core/model.js';

export class Contact extends TenantModel {
  static override tableName = 'contacts';
  static override jsonAttributes = ['metadata'];

  declare id: string;
  declare brandId: string;
  declare email: string;
  declare name: string | null;
  declare nameKey: string;
  declare avatarUrl: string | null;
  declare companyId: string | null;
  declare notifyEmail: boolean;
  declare metadata: Record<string, unknown>;
  declare createdAt: Date;
  declare updatedAt: Date;
  /** Selected by reads: the linked company's name and whether the email is blocked. */
  declare companyName?: string | null;
  declare isBlocked?: boolean;
  declare ticketCount?: number;
}
