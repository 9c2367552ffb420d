import { TenantModel } from '../../core/model.js';

export class TicketWatcher extends TenantModel {
  static override tableName = 'ticketWatchers';

  declare id: string;
  declare brandId: string;
  declare ticketId: string;
  declare memberId: string;
  declare memberEmail: string;
  declare memberName: string | null;
  declare addedBy: string | null;
  declare notifyOnComment: boolean;
  declare notifyOnStatusChange: boolean;
  declare createdAt: Date;
}
