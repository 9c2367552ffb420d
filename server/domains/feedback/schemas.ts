import { Type, type Static } from 'typebox';
import { Nullable, Timestamp } from '../../core/schemas.js';

export const MAX_FEEDBACK_COMMENT_LENGTH = 5_000;

const RatingTypeSchema = Type.Union([Type.Literal('thumbs'), Type.Literal('scale5'), Type.Literal('scale10')], {
  description: 'thumbs: 1 (good) or -1 (bad); scale5: 1 to 5; scale10: 1 to 10',
});

export const FeedbackTokenParams = Type.Object({
  token: Type.String({ minLength: 1, maxLength: 200, description: 'The token of a mailed rating link (`fb_…`)' }),
});

/** What the public rating page shows before the customer rates. */
export const FeedbackPageOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('feedback'),
  ratingType: RatingTypeSchema,
  expiresAt: Nullable(Timestamp),
  ticket: Type.Object({ title: Type.String(), ticketNumber: Type.Integer(), publicId: Type.String({ description: 'The ticket as the customer knows it: `<prefix>-<number>`' }) }),
  brand: Type.Object({ name: Type.String() }),
});
export type FeedbackPageView = Static<typeof FeedbackPageOut>;

export const RateBody = Type.Object(
  {
    rating: Type.Integer({ minimum: -1, maximum: 10, description: 'thumbs: 1 or -1; scale5: 1 to 5; scale10: 1 to 10 (as the request’s ratingType says)' }),
    comment: Type.Optional(Nullable(Type.String({ maxLength: MAX_FEEDBACK_COMMENT_LENGTH }))),
  },
  { additionalProperties: false },
);
export type RateInput = Static<typeof RateBody>;

export const RatedOut = Type.Object({
  success: Type.Literal(true),
  message: Type.String(),
  id: Type.String(),
});
export type RatedView = Static<typeof RatedOut>;

/** A ticket's rating request as the customer sees it in the portal. */
export const PortalFeedbackOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('feedback'),
  ticketId: Type.String(),
  ratingType: RatingTypeSchema,
  status: Type.Union([Type.Literal('open'), Type.Literal('rated'), Type.Literal('expired')], {
    description: 'open: it may be rated now; rated: it was (once per resolution); expired: its link ran out',
  }),
  rating: Nullable(Type.Integer()),
  comment: Nullable(Type.String()),
  submittedAt: Nullable(Timestamp),
  expiresAt: Nullable(Timestamp),
  createdAt: Timestamp,
});
export type PortalFeedbackView = Static<typeof PortalFeedbackOut>;

export const PortalFeedbackWrapper = Type.Object({ feedback: Nullable(PortalFeedbackOut) });
