import { TenantModel } from '../../core/model.js';
import type { MailKind, MailMessage } from '../../core/ports.js';
import type { MailAuthentication } from '../../integrations/mail-auth.js';

/** A built outbound message as queued (see the migration); its delivery is an outbox row of kind mail. */
export class QueuedMail extends TenantModel {
  static override tableName = 'mailMessages';
  static override jsonAttributes = ['message'];

  declare id: string;
  declare brandId: string;
  declare ticketId: string | null;
  declare kind: Exclude<MailKind, 'test'>;
  declare message: MailMessage;
  declare messageId: string;
  declare createdAt: Date;
}

export const INBOUND_ACTIONS = ['ticket_created', 'comment_created', 'spam', 'ignored', 'held'] as const;
export type InboundAction = (typeof INBOUND_ACTIONS)[number];

/** One inbound message accepted for a brand, by Message-ID (idempotency and threading). */
export class InboundEmail extends TenantModel {
  static override tableName = 'inboundEmails';
  static override jsonAttributes = ['authentication'];

  declare id: string;
  declare brandId: string;
  declare messageId: string;
  declare fromEmail: string;
  declare action: InboundAction;
  declare reason: string | null;
  declare ticketId: string | null;
  declare commentId: string | null;
  /** The SPF, DKIM, DMARC and ARC results when it arrived. */
  declare authentication: MailAuthentication | null;
  declare createdAt: Date;
}
