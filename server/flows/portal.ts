import { portalCaller, tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { portalOriginAllowed } from '../core/auth.js';
import { requireBrand, type Brand } from '../core/brand.js';
import { badRequest, forbidden, notFound } from '../core/errors.js';
import * as audit from '../core/audit.js';
import * as outbox from '../core/outbox/service.js';
import type { AttachmentDeps, AttachmentIo } from '../domains/attachments/service.js';
import * as attachments from '../domains/attachments/service.js';
import type { AttachmentView, AttachmentWithUrlView, UploadGrantView } from '../domains/attachments/schemas.js';
import type { PortalFeedbackView, RateInput } from '../domains/feedback/schemas.js';
import * as comments from '../domains/comments/service.js';
import type { CommentView } from '../domains/comments/schemas.js';
import * as contacts from '../domains/contacts/service.js';
import * as messages from '../domains/mail/messages.js';
import * as mail from '../domains/mail/service.js';
import * as portal from '../domains/portal/service.js';
import type {
  MagicLinkInput,
  MintTokenInput,
  PortalCommentView,
  PortalCreateTicketInput,
  PortalTicketDetailView,
  PortalTicketListInput,
  PortalTicketView,
  PortalTokenView,
  PortalUploadInput,
} from '../domains/portal/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import type { TicketView } from '../domains/tickets/schemas.js';
import type { Page } from '../core/pagination.js';
import { mailingBrand } from './brand-domains.js';
import { createComment } from './comment-create.js';
import * as csat from './feedback.js';
import { findOrCreateContact } from './customers.js';
import { createTicket } from './ticket-create.js';

/**
 * The customer portal: tokens minted server side for a contact of a brand, the mailed sign-in link,
 * and what a customer does with a token (their own tickets, public comments, uploads). Every
 * portal ctx is bound to one brand (its brand scope) and one contact; ownTicket is the one place
 * that decides which tickets are the caller's, and anything else reads as 404.
 */

const PORTAL_LINK_MAIL_EVENT = 'mail.portal_link';
/** A customer's reply sets these back to open (as a reply by mail does). */
const REOPENED_FROM = ['pending', 'resolved', 'closed'];

type Customer = { id: string; email: string; name: string | null };

/** The brand's contact with this email, found or created; and its name filled in when it has none. */
async function customerFor(
  tx: TenantCtx,
  brandId: string,
  input: { email?: string; name?: string | null; customerEmail?: string; customerName?: string | null },
): Promise<Customer> {
  const named = portal.customerOf(input);
  const { id } = await findOrCreateContact(tx, brandId, named.email, named.name);
  const contact = await contacts.get(tx, brandId, id);
  return { id: contact.id, email: contact.email, name: contact.name ?? named.name };
}

/** POST /v1/brands/:brandId/portal/token (an API key, or a session of a member of the brand). */
export async function mintToken(ctx: TenantCtx, brandId: string, input: MintTokenInput): Promise<PortalTokenView> {
  const lifetime = portal.lifetimeOf(input.expiresIn);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const customer = await customerFor(tx, brand.id, input);
    const minted = await portal.mint(tx, brand.id, customer.id, lifetime, portal.grantorOf(tx));
    return portal.tokenView(brand.id, minted, customer, tx.services.now());
  });
}

/** The portal page a link may open: http(s), within the brand's portalOrigins. */
function checkedPortalUrl(brand: Brand, portalUrl: string): string {
  let url: URL | null = null;
  try {
    url = new URL(portalUrl);
  } catch {
    url = null;
  }
  const ok = url && (url.protocol === 'https:' || url.protocol === 'http:') && !url.username && !url.password && portalOriginAllowed(brand.portalOrigins, url.origin);
  if (!url || !ok) {
    throw badRequest(
      `portalUrl must be a page of one of the brand's portal origins (portalOrigins: ${brand.portalOrigins.join(', ') || 'none set'}): links are never mailed to another site`,
      [{ field: 'portalUrl', message: "is not within the brand's portalOrigins" }],
      'portal_url_not_allowed',
    );
  }
  return url.toString();
}

/** POST /v1/brands/:brandId/portal/magic-link: mails the customer a single-use link to portalUrl, through the outbox. */
export async function requestMagicLink(ctx: TenantCtx, brandId: string, input: MagicLinkInput): Promise<{ success: true; message: string; expiresAt: string }> {
  const lifetime = portal.lifetimeOf(input.expiresIn);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const portalUrl = checkedPortalUrl(brand, input.portalUrl);
    const customer = await customerFor(tx, brand.id, input);
    const link = await portal.issueLink(tx, brand.id, customer.id, portalUrl, lifetime, portal.grantorOf(tx));
    const message = messages.portalLink(mail.settingsOf(tx.services), {
      linkId: link.id,
      brand: await mailingBrand(tx, brand),
      to: { name: customer.name, address: customer.email },
      url: link.url,
      validMinutes: portal.LINK_TTL_MS / 60_000,
    });
    await audit.record(tx, { brandId: brand.id, entityType: 'portal_link', entityId: link.id, event: 'portal_link.created', metadata: { contactId: customer.id, portalUrl } });
    // The mail carries the token until it is sent: the link works once, for 15 minutes.
    await outbox.enqueue(tx, { kind: 'mail', brandId: brand.id, event: PORTAL_LINK_MAIL_EVENT, payload: { message } });
    return { success: true as const, message: `A sign-in link was sent to ${customer.email}; it works once, within 15 minutes`, expiresAt: link.expiresAt.toISOString() };
  });
}

const INVALID_LINK = 'This sign-in link is not valid: it is unknown, already used or expired. Ask for a new one.';

/** POST /v1/portal/verify: spends a mailed link and mints a portal token; `origin`: the page's, when a browser sent it. */
export async function verifyLink(base: BaseCtx, token: string, origin: string | undefined): Promise<PortalTokenView> {
  return withTx(base, async (tx) => {
    const spent = await portal.consumeLink(tx, token);
    if (!spent) throw badRequest(INVALID_LINK, [{ field: 'token', message: 'is unknown, used or expired' }], 'invalid_token');
    // Refused before anything is written: the transaction rolls back and the link stays unspent.
    if (origin !== undefined && !portalOriginAllowed(spent.portalOrigins, origin)) {
      throw forbidden(`Portal links are spent from the brand's portal origins only (portalOrigins); ${origin} is not one`, 'origin_not_allowed');
    }
    const scoped = tenantCtx(tx, spent.accountId, spent.livemode, { allBrands: false, brandIds: [spent.brandId] });
    const contact = await contacts.get(scoped, spent.brandId, spent.contactId);
    const customer = { id: contact.id, email: contact.email, name: contact.name };
    const asCustomer = { ...scoped, actor: { type: 'customer' as const, id: customer.id, name: customer.name ?? customer.email } };
    const minted = await portal.mint(asCustomer, spent.brandId, customer.id, spent.lifetimeSeconds, { apiKeyId: spent.apiKeyId, memberId: spent.memberId });
    return portal.tokenView(spent.brandId, minted, customer, tx.services.now());
  });
}

/** POST /v1/portal/refresh: a new token for the same customer, lifetime and grantor. */
export async function refreshToken(ctx: TenantCtx): Promise<PortalTokenView> {
  const me = portalCaller(ctx);
  return withTx(ctx, async (tx) => {
    const { lifetimeSeconds, grantor } = await portal.current(tx);
    const minted = await portal.mint(tx, me.brandId, me.contactId, lifetimeSeconds, grantor);
    return portal.tokenView(me.brandId, minted, { id: me.contactId, email: me.email, name: me.name }, tx.services.now());
  });
}

// ---------------------------------------------------------------------------------------------
// The customer's own tickets.

function portalView(ticket: TicketView, brand: Brand): PortalTicketView {
  return {
    id: ticket.id,
    object: 'ticket',
    brandId: ticket.brandId,
    ticketNumber: ticket.ticketNumber,
    title: ticket.title,
    body: ticket.body,
    status: ticket.status,
    priority: ticket.priority,
    source: ticket.source,
    customerId: ticket.customerId,
    commentCount: ticket.commentCount,
    attachmentCount: ticket.attachmentCount,
    createdAt: ticket.createdAt,
    updatedAt: ticket.updatedAt,
    brand: { name: brand.name, ticketPrefix: brand.ticketPrefix },
  };
}

/**
 * The one place that decides what is the caller's: a live ticket of the token's brand whose
 * customer is the token's contact. Another customer's ticket, a deleted one, another brand's: 404.
 */
async function ownTicket(ctx: TenantCtx, ticketId: string): Promise<TicketView> {
  const me = portalCaller(ctx);
  const ticket = await tickets.get(ctx, me.brandId, ticketId);
  if (ticket.customerId !== me.contactId) throw notFound('Ticket');
  return ticket;
}

export async function listTickets(ctx: TenantCtx, input: PortalTicketListInput): Promise<Page<PortalTicketView> & { tickets: PortalTicketView[] }> {
  const me = portalCaller(ctx);
  const brand = await requireBrand(ctx, me.brandId);
  const page = await tickets.list(ctx, brand.id, {
    customerId: me.contactId,
    status: input.status,
    sort: (input.sort ?? 'createdAt') as never, // typebox types the mapped literal union as undefined
    order: input.order ?? 'desc',
    limit: input.limit,
    cursor: input.cursor,
  });
  const data = page.data.map((t) => portalView(t, brand));
  return { data, tickets: data, pagination: page.pagination };
}

type CommentFields = Omit<CommentView, 'replies'>;

function portalComment(c: CommentFields, me: { contactId: string }, brand: Brand): PortalCommentView {
  const customer = c.authorType === 'CUSTOMER';
  return {
    id: c.id,
    object: 'comment',
    ticketId: c.ticketId,
    body: c.body,
    authorType: customer ? 'CUSTOMER' : 'STAFF',
    authorName: c.authorName ?? (customer ? null : brand.name),
    authorId: customer && c.authorId === me.contactId ? c.authorId : null,
    createdAt: c.createdAt,
  };
}

/** A ticket of the caller's with its public comments, replies in their place, oldest first. */
export async function getTicket(ctx: TenantCtx, ticketId: string): Promise<PortalTicketDetailView> {
  const me = portalCaller(ctx);
  const ticket = await ownTicket(ctx, ticketId);
  const brand = await requireBrand(ctx, me.brandId);
  const visible = (await comments.list(ctx, brand.id, ticket.id, 'flat')).filter((c) => !c.isInternal);
  return { ...portalView(ticket, brand), comments: visible.map((c) => portalComment(c, me, brand)) };
}

/** A customer's idempotency keys are theirs alone: the same key from someone else is another request. */
const ownKey = (ctx: TenantCtx, key: string | undefined) => (key === undefined ? undefined : `portal:${portalCaller(ctx).contactId}:${key}`);

/** A ticket from the portal: the caller is its customer, its source `web`; pending uploads must be their own. */
export async function createOwnTicket(ctx: TenantCtx, input: PortalCreateTicketInput, idempotencyKey?: string): Promise<{ created: boolean; ticket: PortalTicketView }> {
  const me = portalCaller(ctx);
  const brand = await requireBrand(ctx, me.brandId);
  const result = await createTicket(
    ctx,
    brand.id,
    {
      title: input.title,
      body: input.body ?? null,
      customerEmail: me.email,
      source: 'web' as never, // typebox types the mapped literal union as undefined
      ...(input.attachmentIds?.length ? { attachmentIds: input.attachmentIds } : {}),
    },
    ownKey(ctx, idempotencyKey),
    { pendingUploadsOf: me.contactId },
  );
  return { created: result.created, ticket: portalView(result.ticket, brand) };
}

/** A public comment by the customer on their ticket; it reopens a pending, resolved or closed one. A merged ticket's goes to its target. */
export async function addComment(ctx: TenantCtx, ticketId: string, body: string, idempotencyKey?: string): Promise<{ created: boolean; comment: PortalCommentView }> {
  const me = portalCaller(ctx);
  const replied = await ownTicket(ctx, ticketId);
  // A merged ticket's conversation goes on in the ticket it was merged into (as a reply by mail does).
  const ticket = replied.mergedIntoId ? await ownTicket(ctx, replied.mergedIntoId) : replied;
  const brand = await requireBrand(ctx, me.brandId);
  const { created, comment } = await createComment(
    ctx,
    brand.id,
    ticket.id,
    { body, authorType: 'CUSTOMER' as never, authorId: me.contactId, authorName: me.name ?? me.email, source: 'web' as never },
    ownKey(ctx, idempotencyKey),
    { reopenFrom: REOPENED_FROM },
  );
  return { created, comment: portalComment(comment, me, brand) };
}

/** The rating request of the caller's ticket: its latest resolution's, or null when none was asked for. */
export async function getFeedback(ctx: TenantCtx, ticketId: string): Promise<{ feedback: PortalFeedbackView | null }> {
  const me = portalCaller(ctx);
  const ticket = await ownTicket(ctx, ticketId);
  return { feedback: await csat.latestOf(ctx, me.brandId, ticket.id) };
}

/** The customer rates the latest resolution of their ticket (once, as by the mailed link). */
export async function rateTicket(ctx: TenantCtx, ticketId: string, input: RateInput): Promise<PortalFeedbackView> {
  const me = portalCaller(ctx);
  return withTx(ctx, async (tx) => {
    const ticket = await ownTicket(tx, ticketId);
    return csat.rateLatest(tx, me.brandId, ticket.id, input);
  });
}

// ---------------------------------------------------------------------------------------------
// Uploads: declared, PUT to the signed URL, confirmed (the three steps of the attachments domain).

export type { AttachmentDeps };

/** The attachment deps with the base URL of the request's links. */
export function requestIo(deps: AttachmentDeps, protocol: string, host: string): AttachmentIo {
  return attachments.forRequest(deps, protocol, host);
}

/**
 * What a customer may upload: documents, images, audio and video a support team opens. Anything
 * a browser would run (HTML, SVG, scripts) or an installer is refused, whatever its name.
 */
const CUSTOMER_CONTENT_TYPES: ReadonlySet<string> = new Set([
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'image/avif',
  'image/bmp',
  'image/heic',
  'image/heif',
  'image/tiff',
  'application/pdf',
  'text/plain',
  'text/csv',
  'application/json',
  'application/zip',
  'application/msword',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'application/vnd.ms-excel',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  'application/vnd.ms-powerpoint',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  'application/vnd.oasis.opendocument.text',
  'application/vnd.oasis.opendocument.spreadsheet',
  'audio/mpeg',
  'audio/ogg',
  'audio/wav',
  'audio/webm',
  'audio/mp4',
  'video/mp4',
  'video/webm',
  'video/quicktime',
]);

function customerUpload(me: { email: string }, input: PortalUploadInput) {
  const type = input.contentType.split(';')[0]!.trim().toLowerCase();
  if (!CUSTOMER_CONTENT_TYPES.has(type)) {
    throw badRequest(
      `Files of type ${type} cannot be uploaded here: send images, PDFs, text, office documents, archives, audio or video`,
      [{ field: 'contentType', message: 'is not a type customers may upload' }],
      'unsupported_content_type',
    );
  }
  return { filename: input.filename, contentType: input.contentType, size: input.size, uploadedBy: me.email };
}

/** Before the ticket exists: a pending upload that is the caller's alone. */
export async function createPendingUpload(ctx: TenantCtx, io: AttachmentIo, input: PortalUploadInput): Promise<UploadGrantView> {
  const me = portalCaller(ctx);
  return attachments.createUpload(ctx, io, me.brandId, null, customerUpload(me, input), me.contactId);
}

export async function confirmPendingUpload(ctx: TenantCtx, io: AttachmentIo, attachmentId: string): Promise<AttachmentView> {
  const me = portalCaller(ctx);
  return attachments.confirm(ctx, io, me.brandId, null, attachmentId, me.contactId);
}

export async function createTicketUpload(ctx: TenantCtx, io: AttachmentIo, ticketId: string, input: PortalUploadInput): Promise<UploadGrantView> {
  const me = portalCaller(ctx);
  const ticket = await ownTicket(ctx, ticketId);
  return attachments.createUpload(ctx, io, me.brandId, ticket.id, customerUpload(me, input), me.contactId);
}

export async function confirmTicketUpload(ctx: TenantCtx, io: AttachmentIo, ticketId: string, attachmentId: string): Promise<AttachmentView> {
  const me = portalCaller(ctx);
  const ticket = await ownTicket(ctx, ticketId);
  return attachments.confirm(ctx, io, me.brandId, ticket.id, attachmentId);
}

/** The ticket's attachments a customer may see: none on an internal note. */
export async function listAttachments(ctx: TenantCtx, ticketId: string): Promise<AttachmentView[]> {
  const me = portalCaller(ctx);
  const ticket = await ownTicket(ctx, ticketId);
  return attachments.list(ctx, me.brandId, ticket.id, 'customer');
}

export async function getAttachment(ctx: TenantCtx, io: AttachmentIo, ticketId: string, attachmentId: string): Promise<AttachmentWithUrlView> {
  const me = portalCaller(ctx);
  const ticket = await ownTicket(ctx, ticketId);
  return attachments.get(ctx, io, me.brandId, ticket.id, attachmentId, 'customer');
}
