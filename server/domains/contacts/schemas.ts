import { Type, type Static } from 'typebox';
import { BrandParams, EmailAddress, HttpUrl, Metadata, Nullable, Timestamp } from '../../core/schemas.js';
import { PageOf, PageQuery } from '../../core/pagination.js';

const Email = EmailAddress('Stored trimmed and lower-cased; unique per brand');
const Name = Type.String({ maxLength: 200 });

export const ContactOut = Type.Object({
  id: Type.String(),
  brandId: Type.String(),
  email: Type.String(),
  name: Nullable(Type.String()),
  avatarUrl: Nullable(Type.String()),
  companyId: Nullable(Type.String()),
  company: Nullable(Type.Object({ id: Type.String(), name: Type.String() })),
  notifyEmail: Type.Boolean(),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  isBlocked: Type.Boolean({ description: 'The email or its domain is a blocked source of the brand' }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  _count: Type.Object({ tickets: Type.Integer() }),
});

export const CreateContactBody = Type.Object(
  {
    email: Email,
    name: Type.Optional(Nullable(Name)),
    avatarUrl: Type.Optional(Nullable(HttpUrl)),
    companyId: Type.Optional(
      Nullable(Type.String({ minLength: 1, maxLength: 64, description: 'A company of the same brand; when absent, the company whose domain equals the email domain' })),
    ),
    notifyEmail: Type.Optional(Type.Boolean()),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);

export const UpdateContactBody = Type.Object(
  {
    email: Type.Optional(Email),
    name: Type.Optional(Nullable(Name)),
    avatarUrl: Type.Optional(Nullable(HttpUrl)),
    companyId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, description: 'null unlinks' }))),
    notifyEmail: Type.Optional(Type.Boolean()),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ContactListQuery = Type.Object(
  {
    search: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Case- and accent-insensitive; contained in the email or the name' })),
    companyId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    hideBlocked: Type.Optional(Type.Boolean({ default: true, description: 'Leave out contacts whose email or domain is blocked (default true)' })),
    sort: Type.Optional(Type.Union([Type.Literal('createdAt'), Type.Literal('name'), Type.Literal('email')], { default: 'createdAt' })),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { default: 'desc' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const ContactSearchQuery = Type.Object(
  { q: Type.String({ minLength: 1, maxLength: 200, description: 'Prefix of the email or of the name (case- and accent-insensitive)' }) },
  { additionalProperties: false },
);

export const ContactParams = Type.Object({
  ...BrandParams.properties,
  contactId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const ContactPage = PageOf(ContactOut);

export type ContactView = Static<typeof ContactOut>;
export type CreateContactInput = Static<typeof CreateContactBody>;
export type UpdateContactInput = Static<typeof UpdateContactBody>;
export type ContactListInput = Static<typeof ContactListQuery>;

/** Erasure: nothing happens unless the body says confirm: true. */
const Confirm = Type.Literal(true, { description: 'Must be true: erasure cannot be undone' });

export const EraseContactBody = Type.Object({ confirm: Confirm }, { additionalProperties: false });

export const EraseByEmailBody = Type.Object(
  { email: EmailAddress('The person whose contacts, in every brand of the account, are erased'), confirm: Confirm },
  { additionalProperties: false },
);

export const ErasureOut = Type.Object({
  contactId: Type.String(),
  brandId: Type.String(),
  tombstone: Type.String({ description: 'What the contact’s email and name became (`ers_…`; the email is `<tombstone>@erased.invalid`)' }),
  erasedAt: Timestamp,
  counts: Type.Object({
    tickets: Type.Integer({ description: 'Tickets kept, their bodies redacted' }),
    comments: Type.Integer({ description: 'The person’s comments, redacted' }),
    attachments: Type.Integer({ description: 'Attachments deleted' }),
    rawMails: Type.Integer({ description: 'Raw inbound messages deleted' }),
    ratings: Type.Integer({ description: 'Satisfaction ratings kept, their comments redacted' }),
    portalTokens: Type.Integer({ description: 'Portal tokens revoked (deleted)' }),
  }),
});

export const ErasuresOut = Type.Object({ contacts: Type.Array(ErasureOut, { description: 'One per contact erased now or before; none when no contact has the email' }) });

export const ContactExportQuery = Type.Object({ email: EmailAddress('The person whose contacts, in every brand of the account, are exported') }, { additionalProperties: false });

/** The export's shape, for the reference (the document is streamed as it is read). */
export const ContactExportOut = Type.Object(
  {
    exportedAt: Timestamp,
    contacts: Type.Array(
      Type.Object({
        contact: ContactOut,
        portalTokens: Type.Array(Type.Object({}, { additionalProperties: true, description: 'id, lifetimeSeconds, createdAt, expiresAt, revokedAt: never the token or its hash' })),
        ratings: Type.Array(Type.Object({}, { additionalProperties: true })),
        inboundEmails: Type.Array(Type.Object({}, { additionalProperties: true, description: 'Mail received from the address: Message-ID, action, authentication results' })),
        auditEntries: Type.Array(Type.Object({}, { additionalProperties: true })),
        tickets: Type.Array(
          Type.Object(
            {},
            {
              additionalProperties: true,
              description: 'The ticket (form submissions: source form) with comments, attachments (downloadUrl signed), rawMails (metadata) and auditEntries',
            },
          ),
        ),
      }),
    ),
  },
  { description: 'One JSON document of everything held about the person, streamed' },
);

export type EraseByEmailInput = Static<typeof EraseByEmailBody>;
export type ContactExportInput = Static<typeof ContactExportQuery>;
