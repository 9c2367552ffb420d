import { Type, type Static } from 'typebox';
import { BrandParams, Metadata, Nullable, Timestamp } from '../../core/schemas.js';

export const MAX_URL_IDS = 100;

const Id = Type.String({ minLength: 1, maxLength: 64 });
export const Filename = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^[^\\u0000-\\u001f\\u007f]*\\S[^\\u0000-\\u001f\\u007f]*$',
  description: 'Shown and offered on download; not used as a file name on the server',
});
export const ContentType = Type.String({
  minLength: 3,
  maxLength: 255,
  pattern: '^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(\\s*;[^\\u0000-\\u001f\\u007f]*)?$',
  description: 'MIME type such as image/png',
});

export const AttachmentOut = Type.Object({
  id: Type.String({ description: '`att_…`' }),
  object: Type.Literal('attachment'),
  brandId: Type.String(),
  ticketId: Nullable(Type.String({ description: 'null while pending (uploaded before its ticket exists)' })),
  commentId: Nullable(Type.String()),
  filename: Type.String(),
  contentType: Type.String(),
  size: Type.Integer({ description: 'Bytes' }),
  status: Type.Union([Type.Literal('PENDING'), Type.Literal('UPLOADED'), Type.Literal('FAILED')]),
  sha256: Nullable(Type.String({ description: 'Hex SHA-256 of the stored bytes, once they arrived' })),
  scanStatus: Type.Union([Type.Literal('clean'), Type.Literal('unscanned'), Type.Literal('not_scanned')], {
    description:
      'The virus scan of its bytes: clean; unscanned (the scanner was down and the installation lets files through); not_scanned (no scanner configured when stored, or no bytes yet). An infected file is never stored.',
  }),
  uploadedBy: Nullable(Type.String()),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const UploadGrantFields = {
  id: Type.String({ description: 'The attachment id (same as attachmentId)' }),
  attachmentId: Type.String(),
  filename: Type.String(),
  attachment: AttachmentOut,
  uploadUrl: Type.String({ description: 'Absolute URL: PUT the raw bytes here, no Authorization header' }),
  expiresIn: Type.Integer({ description: 'Seconds the uploadUrl stays valid' }),
  expiresAt: Timestamp,
};
export const UploadGrantOut = Type.Object(UploadGrantFields);

/** Single GET: the flat attachment (SDK) plus `{ attachment, downloadUrl }` (dashboard). */
export const AttachmentWithUrlOut = Type.Object({
  ...AttachmentOut.properties,
  attachment: AttachmentOut,
  downloadUrl: Nullable(Type.String({ description: 'Absolute, signed, expiring; null until the bytes are uploaded' })),
  expiresAt: Nullable(Timestamp),
});

export const UploadedOut = Type.Object({
  attachment: AttachmentOut,
  downloadUrl: Type.String({ description: 'Absolute, signed, expiring' }),
  expiresAt: Timestamp,
});

export const CreateAttachmentBody = Type.Object(
  {
    filename: Filename,
    contentType: ContentType,
    size: Type.Integer({ minimum: 0, description: 'Bytes the client will PUT; the upload must match it exactly' }),
    uploadedBy: Type.Optional(Nullable(Type.String({ maxLength: 200 }))),
    commentId: Type.Optional(Nullable(Id)),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);

export const UrlsBody = Type.Object(
  { ids: Type.Array(Id, { minItems: 0, maxItems: MAX_URL_IDS, description: `Attachment ids (at most ${MAX_URL_IDS})` }) },
  { additionalProperties: false },
);

export const UrlsOut = Type.Record(Type.String(), Nullable(Type.Object({ url: Type.String(), filename: Type.String(), contentType: Type.String(), expiresAt: Timestamp })), {
  description: 'Keyed by each requested id; null for ids that are unknown here or not uploaded',
});

export const TicketAttachmentsParams = Type.Object({ ...BrandParams.properties, ticketId: Id });
export const TicketAttachmentParams = Type.Object({ ...TicketAttachmentsParams.properties, attachmentId: Id });
export const PendingAttachmentParams = Type.Object({ ...BrandParams.properties, attachmentId: Id });
export const GrantParams = Type.Object({ token: Type.String({ minLength: 1, maxLength: 512 }) });

export const UploadReceiptOut = Type.Object({
  id: Type.String(),
  size: Type.Integer(),
  sha256: Type.String(),
  status: Type.String({ description: 'Still PENDING: confirm the upload next' }),
});

/** Documentation of the multipart routes (the file is read as a stream, not validated as JSON). */
export const MultipartBody = Type.Object({ file: Type.Optional(Type.Unknown({ description: 'The file (multipart/form-data field `file`)' })) });

export type AttachmentView = Static<typeof AttachmentOut>;
export type UploadGrantView = Static<typeof UploadGrantOut>;
export type AttachmentWithUrlView = Static<typeof AttachmentWithUrlOut>;
export type UploadedView = Static<typeof UploadedOut>;
export type CreateAttachmentInput = Static<typeof CreateAttachmentBody>;
export type UrlsView = Static<typeof UrlsOut>;
export type UploadReceiptView = Static<typeof UploadReceiptOut>;
