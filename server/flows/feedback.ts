import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { requireBrand } from '../core/brand.js';
import { publicBaseUrl, type Config } from '../core/config.js';
import { conflict, gone, HttpError, notFound } from '../core/errors.js';
import { normalizeOrigin } from '../core/origins.js';
import * as audit from '../core/audit.js';
import * as events from '../core/outbox/events.js';
import * as outbox from '../core/outbox/service.js';
import * as feedback from '../domains/feedback/service.js';
import type { TicketFeedback } from '../domains/feedback/model.js';
import type { FeedbackPageView, PortalFeedbackView, RateInput, RatedView } from '../domains/feedback/schemas.js';
import * as messages from '../domains/mail/messages.js';
import * as mail from '../domains/mail/service.js';
import { mailingBrand } from './brand-domains.js';

/**
 * Satisfaction ratings (CSAT): the rating mail sent after the brand's delay, the public rating page's
 * two calls, and ratings from the portal. A resolution is rated once, by whichever way comes
 * first; every rating is audited as the customer's and announced as `ticket.rated`.
 */

const RATING_MAIL_EVENT = 'mail.csat';
/** Rating requests mailed per dispatcher tick (the rest wait for the next one). */
const SEND_BATCH = 100;

/** The page a rating mail links to: the configured one, else the dashboard's rating page, else ticketd's own. */
export function ratingPageUrl(config: Config, token: string): string {
  const dashboard = config.dashboardOrigins.map(normalizeOrigin).find((o): o is string => o !== null);
  const template = config.ratingPageUrl ?? `${dashboard ?? publicBaseUrl(config)}/rate/{token}`;
  return template.replace('{token}', encodeURIComponent(token));
}

/**
 * The dispatcher's job: mails the rating requests that are due, in one transaction. A request whose
 * ticket is no longer resolved (reopened, deleted, spam), whose customer has no address, or whose
 * brand stopped asking for ratings is cancelled instead. The mail carries the token until it is sent.
 */
export async function sendDueRequests(base: BaseCtx, now: Date): Promise<{ sent: number; cancelled: number }> {
  return withTx(base, async (tx) => {
    let sent = 0;
    let cancelled = 0;
    for (const due of await feedback.claimDue(tx, now, SEND_BATCH)) {
      const ctx = tenantCtx(tx, due.accountId, due.livemode);
      const brand = await requireBrand(ctx, due.brandId);
      if (!due.stillResolved || !due.contactEmail || !brand.csatEnabled) {
        await feedback.cancel(ctx, due.id);
        cancelled++;
        continue;
      }
      const { token, tokenHash } = feedback.newToken();
      await feedback.markSent(ctx, due.id, tokenHash, now);
      const ticket = mail.ticketInfo({ id: due.ticketId, ticketNumber: due.ticketNumber, title: due.ticketTitle, source: due.ticketSource, sourceData: due.ticketSourceData });
      const message = messages.ratingRequest({
        settings: mail.settingsOf(tx.services),
        key: await mail.replyTokenKey(tx),
        brand: await mailingBrand(ctx, brand),
        ticket,
        thread: { inboundMessageIds: await mail.inboundMessageIds(ctx, brand.id, ticket.id) },
        feedbackId: due.id,
        customer: { name: due.contactName, address: due.contactEmail },
        ratingUrl: ratingPageUrl(tx.services.config, token),
        subjectTemplate: brand.csatEmailSubject,
        bodyTemplate: brand.csatEmailBody,
      });
      await outbox.enqueue(ctx, { kind: 'mail', brandId: brand.id, event: RATING_MAIL_EVENT, payload: { message } });
      sent++;
    }
    return { sent, cancelled };
  });
}

const ALREADY_RATED = 'Feedback already submitted: each resolution is rated once';
const EXPIRED = 'This rating link has expired';

/** Why a request can no longer be rated, if it cannot: rated (409) or expired or superseded (410). */
function closedReason(row: TicketFeedback, now: Date): HttpError | null {
  if (row.status === 'rated') return conflict(ALREADY_RATED, 'feedback_already_submitted');
  if (row.status === 'cancelled' || (row.expiresAt && new Date(row.expiresAt) <= now)) return gone(EXPIRED, 'feedback_expired');
  return null;
}

/** GET /v1/feedback/{token}: what the rating page shows; 404 unknown, 409 rated, 410 expired. */
export async function ratingPage(base: BaseCtx, token: string): Promise<FeedbackPageView> {
  const found = await feedback.findByToken(base, token);
  if (!found) throw notFound('Feedback');
  const closed = closedReason(found, new Date(base.services.now()));
  if (closed) throw closed;
  return {
    id: found.id,
    object: 'feedback',
    ratingType: found.ratingType,
    expiresAt: found.expiresAt ? new Date(found.expiresAt).toISOString() : null,
    ticket: { title: found.ticketTitle, ticketNumber: found.ticketNumber, publicId: `${found.ticketPrefix}-${found.ticketNumber}` },
    brand: { name: found.brandName },
  };
}

/** Saves a rating of a request locked in this transaction (ctx: the customer's), with its audit entry and event. */
async function rate(tx: TenantCtx, row: TicketFeedback, input: RateInput): Promise<TicketFeedback> {
  const now = new Date(tx.services.now());
  const closed = closedReason(row, now);
  if (closed) throw closed;
  feedback.checkRating(row.ratingType, input.rating);
  const comment = input.comment?.trim() || null;
  const saved = await feedback.saveRating(tx, row.id, input.rating, comment, now);
  await audit.record(tx, {
    brandId: row.brandId,
    ticketId: row.ticketId,
    entityType: 'ticket',
    entityId: row.ticketId,
    event: 'ticket.rated',
    metadata: { feedbackId: row.id, rating: input.rating, ratingType: row.ratingType, resolverId: row.resolverId, hasComment: comment !== null },
  });
  await events.ticketRated(tx, row.brandId, { ...saved, rating: input.rating, submittedAt: now });
  return saved;
}

/** POST /v1/feedback/{token}: the customer's rating by the mailed link. */
export async function rateByLink(base: BaseCtx, token: string, input: RateInput): Promise<RatedView> {
  const found = await feedback.findByToken(base, token);
  if (!found) throw notFound('Feedback');
  const scoped = tenantCtx(base, found.accountId, found.livemode, { allBrands: false, brandIds: [found.brandId] });
  return withTx(scoped, async (tx) => {
    const locked = await feedback.lockFound(tx, found);
    if (!locked) throw notFound('Feedback');
    const asCustomer = { ...tx, actor: { type: 'customer' as const, id: locked.contactId, name: locked.contactName ?? locked.contactEmail, source: 'web' } };
    const saved = await rate(asCustomer, locked, input);
    return { success: true as const, message: 'Thank you for your feedback', id: saved.id };
  });
}

function portalView(row: TicketFeedback, now: Date): PortalFeedbackView {
  const reason = closedReason(row, now);
  return {
    id: row.id,
    object: 'feedback',
    ticketId: row.ticketId,
    ratingType: row.ratingType,
    status: row.status === 'rated' ? 'rated' : reason ? 'expired' : 'open',
    rating: row.rating,
    comment: row.comment,
    submittedAt: row.submittedAt ? new Date(row.submittedAt).toISOString() : null,
    expiresAt: row.expiresAt ? new Date(row.expiresAt).toISOString() : null,
    createdAt: new Date(row.createdAt).toISOString(),
  };
}

/** The rating request of a ticket the caller may see (ticket checked by the caller): its latest, or null. */
export async function latestOf(ctx: TenantCtx, brandId: string, ticketId: string): Promise<PortalFeedbackView | null> {
  const row = await feedback.latestForTicket(ctx, brandId, ticketId);
  return row ? portalView(row, new Date(ctx.services.now())) : null;
}

/**
 * A rating of the ticket's latest resolution (ctx: the customer's, the ticket checked by the
 * caller, inside its transaction); 404 when none was asked for.
 */
export async function rateLatest(tx: TenantCtx, brandId: string, ticketId: string, input: RateInput): Promise<PortalFeedbackView> {
  const row = await feedback.latestForTicket(tx, brandId, ticketId);
  if (!row) {
    throw new HttpError(
      404,
      'feedback_not_requested',
      'Feedback not found: this ticket has no rating request (one is made when the ticket is resolved and its brand asks for ratings)',
    );
  }
  return portalView(await rate(tx, row, input), new Date(tx.services.now()));
}
