import { Type, type Static } from 'typebox';
import { ByCredential } from '../../core/client-shapes.js';
import { BrandParams, EmailAddress, FreeObject, MAX_FREE_JSON_BYTES, Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';
import { Link, SOURCES } from '../tickets/schemas.js';

export const AUTHOR_TYPES = ['CUSTOMER', 'AGENT', 'SYSTEM'] as const;
export const MAX_COMMENT_BODY_LENGTH = 100_000;
export const MAX_CC = 50;

const AuthorType = Type.Union(AUTHOR_TYPES.map((a) => Type.Literal(a)));
const Source = Type.Union(SOURCES.map((s) => Type.Literal(s)));
const AnyObject = FreeObject();
const Email = EmailAddress('Stored trimmed and lower-cased');
const Body = Type.String({ minLength: 1, maxLength: MAX_COMMENT_BODY_LENGTH, pattern: PATTERNS.notBlank, description: 'Markdown or plain text (not blank), stored as sent' });
const CommentMetadata = Type.Record(Type.String(), Type.Unknown(), {
  maxJsonBytes: MAX_FREE_JSON_BYTES,
  maxProperties: 50, // the limits of core's Metadata
  propertyNames: { maxLength: 40 },
  description:
    'Free-form (at most 50 keys). Known keys: isInternal (boolean: an internal note, also the isInternal column), authorName, mentions [{ memberId, displayName, email }] (stored as given).',
});

const commentFields = {
  id: Type.String(),
  object: Type.Literal('comment'),
  ticketId: Type.String(),
  brandId: Type.String(),
  body: Type.String(),
  authorId: Nullable(Type.String()),
  authorName: Nullable(Type.String()),
  authorType: Type.String(),
  parentId: Nullable(Type.String()),
  isInternal: Type.Boolean(),
  links: Type.Array(Type.Object({ url: Type.String(), title: Type.Optional(Nullable(Type.String())), type: Type.Optional(Nullable(Type.String())) })),
  metadata: AnyObject,
  source: Type.String(),
  sourceId: Nullable(Type.String()),
  sourceData: Nullable(AnyObject),
  cc: Type.Array(Type.String()),
  connectionId: Nullable(Type.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  deletedAt: Nullable(Timestamp),
};

/** A reply inside a thread: replies are one level deep, so its own `replies` is always empty. */
const ReplyOut = Type.Object({ ...commentFields, replies: Type.Array(Type.Unknown(), { maxItems: 0, description: 'Always empty' }) });

export const CommentOut = Type.Object({
  ...commentFields,
  replies: Type.Array(ReplyOut, {
    description: 'On a top-level comment: every live reply of its thread (replies to replies included, each with its parentId), oldest first. Empty on replies.',
  }),
});

/** The dashboard reads every comment in one list and takes the last as the newest; the SDK reads threads. */
export const CommentList = ByCredential(
  Type.Array(ReplyOut, { description: 'every live comment, oldest first, each reply in its place with its parentId (replies always empty)' }),
  Type.Array(CommentOut, { description: 'top-level comments, oldest first, each with its thread in replies' }),
  'The comments of the ticket, oldest first, without the ticket body',
);

export const CreateCommentBody = Type.Object(
  {
    body: Body,
    authorId: Type.Optional(Nullable(Type.String({ maxLength: 200, description: 'Your id of the author (a member id, a customer id, …); stored as given' }))),
    authorName: Type.Optional(Nullable(Type.String({ maxLength: 200, description: 'Default: metadata.authorName' }))),
    authorType: Type.Optional(AuthorType),
    parentId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, description: 'A live comment of the same ticket: makes this a reply' }))),
    links: Type.Optional(Type.Array(Link, { maxItems: 50 })),
    metadata: Type.Optional(CommentMetadata),
    source: Type.Optional(Source),
    sourceId: Type.Optional(Nullable(Type.String({ maxLength: 500 }))),
    sourceData: Type.Optional(Nullable(AnyObject)),
    setStatus: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Also set the ticket status (a status key of the brand), in the same transaction' })),
    connectionId: Type.Optional(Nullable(Type.String({ maxLength: 200, description: 'Email connection to send from; stored for outbound mail' }))),
    cc: Type.Optional(Type.Array(Email, { maxItems: MAX_CC, description: 'Extra recipients of outbound mail; stored for it' })),
  },
  { additionalProperties: false },
);

export const UpdateCommentBody = Type.Object(
  {
    body: Type.Optional(Body),
    links: Type.Optional(Type.Array(Link, { maxItems: 50 })),
    metadata: Type.Optional(CommentMetadata),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const CommentTicketParams = Type.Object({
  ...BrandParams.properties,
  ticketId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const CommentParams = Type.Object({
  ...BrandParams.properties,
  commentId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const TicketCommentParams = Type.Object({
  ...CommentTicketParams.properties,
  commentId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const IdempotencyHeaders = Type.Object({
  'x-idempotency-key': Type.Optional(
    Type.String({ minLength: 1, maxLength: 255, description: 'Same key and body within 24 h returns the first comment (200); another body is a 409' }),
  ),
});

export type CommentView = Static<typeof CommentOut>;
export type CreateCommentInput = Static<typeof CreateCommentBody>;
export type UpdateCommentInput = Static<typeof UpdateCommentBody>;
