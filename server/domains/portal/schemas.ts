import { Type, type Static } from 'typebox';
import { PageQuery, PaginationOut } from '../../core/pagination.js';
import { EmailAddress, Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';
import { ContentType, Filename } from '../attachments/schemas.js';
import { MAX_COMMENT_BODY_LENGTH } from '../comments/schemas.js';
import { MAX_BODY_LENGTH, MAX_TITLE_LENGTH } from '../tickets/schemas.js';

/** Lifetimes of portal tokens: `expiresIn` as `30m`, `24h`, `7d`, `90s` or a number of seconds. */
export const DEFAULT_TOKEN_LIFETIME_SECONDS = 24 * 3600;
export const MIN_TOKEN_LIFETIME_SECONDS = 5 * 60;
export const MAX_TOKEN_LIFETIME_SECONDS = 7 * 24 * 3600;

const Email = EmailAddress('The customer: found or created as a contact of the brand (stored trimmed and lower-cased)');
const CustomerName = Nullable(Type.String({ maxLength: 200, description: "The customer's name, for a contact created now" }));
const ExpiresIn = Type.Union([Type.String({ minLength: 2, maxLength: 12, pattern: '^\\s*\\d{1,9}\\s*[smhd]\\s*$' }), Type.Integer({ minimum: 1, maximum: 1_000_000_000 })], {
  description: `How long the token works: \`30m\`, \`24h\`, \`7d\`, \`90s\` or seconds; ${MIN_TOKEN_LIFETIME_SECONDS / 60} minutes to ${MAX_TOKEN_LIFETIME_SECONDS / 86400} days (default 24h)`,
});

/** Who the customer is: the SDK's `{ email, name }` or the interface's `{ customerEmail, customerName }`. */
const customerFields = {
  email: Type.Optional(Email),
  name: Type.Optional(CustomerName),
  customerEmail: Type.Optional(Email),
  customerName: Type.Optional(CustomerName),
};

export const MintTokenBody = Type.Object(
  {
    ...customerFields,
    expiresIn: Type.Optional(ExpiresIn),
    companyName: Type.Optional(Type.String({ maxLength: 200, description: 'Accepted (the hosted dashboard sends it); not stored' })),
    sourceOrgId: Type.Optional(Type.String({ maxLength: 200, description: 'Accepted (the hosted dashboard sends it); not stored' })),
  },
  { additionalProperties: false },
);

export const PortalTokenOut = Type.Object({
  object: Type.Literal('portal_token'),
  token: Type.String({ description: "The portal token (`pt_…`), shown once: hand it to the customer's browser" }),
  accessToken: Type.String({ description: "The same token (the interface's name for it)" }),
  expiresAt: Timestamp,
  expiresIn: Type.Integer({ description: 'Seconds from now' }),
  brandId: Type.String(),
  customerId: Type.String({ description: 'The contact id' }),
  email: Type.String(),
  name: Nullable(Type.String()),
});

export const MagicLinkBody = Type.Object(
  {
    ...customerFields,
    portalUrl: Type.String({
      minLength: 1,
      maxLength: 2048,
      pattern: PATTERNS.httpUrl,
      description: "The portal page the link opens (`?token=pl_…` is added); its origin must be one of the brand's portalOrigins",
    }),
    expiresIn: Type.Optional(ExpiresIn),
  },
  { additionalProperties: false },
);

export const LinkSent = Type.Object({ success: Type.Literal(true), message: Type.String(), expiresAt: Timestamp });

export const VerifyBody = Type.Object(
  { token: Type.String({ minLength: 1, maxLength: 512, description: 'The `pl_…` token of the mailed link' }) },
  { additionalProperties: false },
);

// ---------------------------------------------------------------------------------------------
// What a customer sees: their own tickets, public comments, attachments.

const portalTicketFields = {
  id: Type.String(),
  object: Type.Literal('ticket'),
  brandId: Type.String(),
  ticketNumber: Type.Integer(),
  title: Type.String(),
  body: Nullable(Type.String()),
  status: Type.String(),
  priority: Nullable(Type.String()),
  source: Type.String(),
  customerId: Nullable(Type.String()),
  commentCount: Type.Integer({ description: 'Public comments and internal notes alike' }),
  attachmentCount: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  brand: Type.Object({ name: Type.String(), ticketPrefix: Type.String() }),
};

export const PortalTicketOut = Type.Object(portalTicketFields);

export const PortalCommentOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('comment'),
  ticketId: Type.String(),
  body: Type.String(),
  authorType: Type.Union([Type.Literal('CUSTOMER'), Type.Literal('STAFF')]),
  authorName: Nullable(Type.String()),
  authorId: Nullable(Type.String({ description: "The customer's contact id on their own comments; null on staff comments" })),
  createdAt: Timestamp,
});

export const PortalTicketDetailOut = Type.Object({
  ...portalTicketFields,
  comments: Type.Array(PortalCommentOut, { description: 'Public comments, oldest first (internal notes never)' }),
});

export const PortalTicketPage = Type.Object({
  data: Type.Array(PortalTicketOut),
  tickets: Type.Array(PortalTicketOut, { description: 'The same tickets (the interface names this key)' }),
  pagination: PaginationOut,
});

export const PortalTicketListQuery = Type.Object(
  {
    status: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Comma-separated status keys; `active` = open,pending; `all` or none = every status' })),
    sort: Type.Optional(Type.Union([Type.Literal('createdAt'), Type.Literal('updatedAt')], { default: 'createdAt' })),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { default: 'desc' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const PortalCreateTicketBody = Type.Object(
  {
    title: Type.String({ minLength: 1, maxLength: MAX_TITLE_LENGTH, pattern: PATTERNS.notBlank, description: 'Stored trimmed' }),
    body: Type.Optional(Nullable(Type.String({ maxLength: MAX_BODY_LENGTH }))),
    attachmentIds: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: 20,
        description: 'Your pending uploads (POST /v1/portal/tickets/attachments/pending, confirmed) to put on the new ticket',
      }),
    ),
  },
  { additionalProperties: false },
);

export const PortalCommentBody = Type.Object(
  { body: Type.String({ minLength: 1, maxLength: MAX_COMMENT_BODY_LENGTH, pattern: PATTERNS.notBlank, description: 'Plain text or Markdown' }) },
  { additionalProperties: false },
);

export const PortalUploadBody = Type.Object(
  { filename: Filename, contentType: ContentType, size: Type.Integer({ minimum: 0, description: 'Bytes you will PUT' }) },
  { additionalProperties: false },
);

export const PortalIdempotencyHeaders = Type.Object({
  'x-idempotency-key': Type.Optional(
    Type.String({ minLength: 1, maxLength: 200, description: 'Same key and body within 24 h returns the first result (200); another body is a 409' }),
  ),
});

const Id = Type.String({ minLength: 1, maxLength: 64 });
export const PortalTicketParams = Type.Object({ ticketId: Id });
export const PortalAttachmentParams = Type.Object({ ticketId: Id, attachmentId: Id });
export const PortalPendingParams = Type.Object({ attachmentId: Id });

export type MintTokenInput = Static<typeof MintTokenBody>;
export type MagicLinkInput = Static<typeof MagicLinkBody>;
export type PortalTokenView = Static<typeof PortalTokenOut>;
export type PortalTicketView = Static<typeof PortalTicketOut>;
export type PortalTicketDetailView = Static<typeof PortalTicketDetailOut>;
export type PortalCommentView = Static<typeof PortalCommentOut>;
export type PortalTicketListInput = Static<typeof PortalTicketListQuery>;
export type PortalCreateTicketInput = Static<typeof PortalCreateTicketBody>;
export type PortalUploadInput = Static<typeof PortalUploadBody>;
