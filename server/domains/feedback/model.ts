import { TenantModel } from '../../core/model.js';

/**
 * A request for a satisfaction rating of one resolution of a ticket, made when the ticket
 * is resolved (core/ticket-writes.ts), and the rating once given.
 */
export class TicketFeedback extends TenantModel {
  static override tableName = 'ticketFeedback';

  declare id: string;
  declare brandId: string;
  declare ticketId: string;
  /** The ticket's customer when it was resolved: who is asked. */
  declare contactId: string;
  /** The ticket's assignee when it was resolved: who the rating is credited to. */
  declare resolverId: string | null;
  declare ratingType: RatingType;
  declare status: FeedbackStatus;
  /** When the rating mail goes out (the brand's delay after the resolution). */
  declare sendAt: Date;
  /** SHA-256 of the mailed link's token; set when the mail is sent. */
  declare tokenHash: string | null;
  declare sentAt: Date | null;
  /** When the mailed link stops working; null until it is sent. */
  declare expiresAt: Date | null;
  declare rating: number | null;
  declare comment: string | null;
  declare submittedAt: Date | null;
  declare createdAt: Date;
}

export const RATING_TYPES = ['thumbs', 'scale5', 'scale10'] as const;
export type RatingType = (typeof RATING_TYPES)[number];
export type FeedbackStatus = 'scheduled' | 'sent' | 'rated' | 'cancelled';
