import { TenantModel } from '../../core/model.js';

/** An inbound message's bytes as they arrived (see the migration); the bytes in storage under the id. */
export class RawMail extends TenantModel {
  static override tableName = 'rawMails';

  declare id: string;
  declare brandId: string;
  declare ticketId: string;
  declare commentId: string | null;
  declare inboundEmailId: string;
  declare messageId: string;
  /** bigint: the driver returns it as a string. */
  declare size: string | number;
  declare sha256: string;
  declare createdAt: Date;
}
