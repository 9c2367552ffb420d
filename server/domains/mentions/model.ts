import { TenantModel } from '../../core/model.js';

export class Mention extends TenantModel {
  static override tableName = 'mentions';

  declare id: string;
  declare brandId: string;
  declare ticketId: string;
  declare commentId: string;
  declare memberId: string;
  declare mentionedBy: string | null;
  declare createdAt: Date;
  declare acknowledgedAt: Date | null;
}
