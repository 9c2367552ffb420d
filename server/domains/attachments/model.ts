import type { ScanStatus } from '../../core/scanning.js';
import { TenantModel } from '../../core/model.js';

export const ATTACHMENT_STATUSES = ['PENDING', 'UPLOADED', 'FAILED'] as const;
export type AttachmentStatus = (typeof ATTACHMENT_STATUSES)[number];

export class Attachment extends TenantModel {
  static override tableName = 'attachments';
  static override jsonAttributes = ['metadata'];

  declare id: string;
  declare brandId: string;
  declare ticketId: string | null;
  declare commentId: string | null;
  declare filename: string;
  declare contentType: string;
  /** bigint: the driver returns it as a string. */
  declare size: string | number;
  declare status: AttachmentStatus;
  declare sha256: string | null;
  declare scanStatus: ScanStatus;
  declare uploadedBy: string | null;
  /** The contact whose portal token declared it: a pending upload is that customer's alone. */
  declare portalCustomerId: string | null;
  declare metadata: Record<string, unknown>;
  declare createdAt: Date;
  declare updatedAt: Date;
}
