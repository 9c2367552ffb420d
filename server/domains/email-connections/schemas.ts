import { Type, type Static } from 'typebox';
import { EmailAddress, Nullable, Timestamp } from '../../core/schemas.js';

export const ConnectionParams = Type.Object({
  brandId: Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' }),
  connectionId: Type.String({ minLength: 1, maxLength: 64 }),
});

const Status = Type.Union([Type.Literal('ACTIVE'), Type.Literal('SYNCING'), Type.Literal('ERROR'), Type.Literal('DISCONNECTED')], {
  description:
    'ACTIVE: taken in on schedule; SYNCING: a sync is under way; ERROR: the server could not be reached (retried, backing off); DISCONNECTED: the server refused the credentials (waits for new ones)',
});
const Provider = Type.Union([Type.Literal('IMAP'), Type.Literal('GMAIL'), Type.Literal('OUTLOOK')], {
  description:
    'IMAP: any server, signed in with a password (an app password for Google, Microsoft and Fastmail mailboxes). GMAIL, OUTLOOK: Google and Microsoft mailboxes signed in with XOAUTH2, from a refresh token obtained with the OAuth client the operator configured',
});
const Name = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' });
const password = (description: string) => Type.String({ minLength: 1, maxLength: 1000, description });
const folder = (description: string) => Type.String({ minLength: 1, maxLength: 200, pattern: '^[^\\x00-\\x1f]+$', description });

export const EmailConnectionOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('email_connection'),
  brandId: Type.String(),
  name: Type.String({ description: "'Default' is hidden by the dashboard" }),
  isPrimary: Type.Boolean({ description: 'The address the comment editor offers first; the first connection of a brand is primary' }),
  provider: Provider,
  email: Type.String(),
  host: Type.String(),
  port: Type.Integer(),
  tls: Type.Boolean(),
  username: Type.String(),
  passwordSet: Type.Boolean({ description: 'The password (IMAP) or refresh token (GMAIL, OUTLOOK) is stored, sealed, and never shown' }),
  mailbox: Type.String({ description: 'The folder taken in' }),
  moveTo: Nullable(Type.String({ description: 'Where taken-in messages are moved; null: flagged \\Seen and left in place. Nothing is deleted' })),
  status: Status,
  lastSyncAt: Nullable(Timestamp),
  errorMessage: Nullable(Type.String({ description: "The server's own words when a sync failed" })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const CreateConnectionBody = Type.Object(
  {
    provider: Provider,
    name: Type.Optional(Name),
    email: EmailAddress('The mailbox’s address: replies to its mail come from it'),
    host: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 253,
        pattern: '^[A-Za-z0-9.:\\[\\]-]+$',
        description:
          'The IMAP server: a public name or address (a loopback or private one only with webhookAllowPrivate). Required for IMAP; GMAIL: imap.gmail.com, OUTLOOK: outlook.office365.com by default',
      }),
    ),
    port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'Default 993 with tls, 143 without' })),
    tls: Type.Optional(Type.Boolean({ description: 'TLS from the first byte (default true); false: STARTTLS when the server offers it' })),
    username: Type.Optional(Type.String({ minLength: 1, maxLength: 320, description: 'Default: email' })),
    password: Type.Optional(password('IMAP (required): stored sealed, never shown again')),
    refreshToken: Type.Optional(password('GMAIL and OUTLOOK (required): the OAuth refresh token, stored sealed, never shown again')),
    mailbox: Type.Optional(folder('The folder to take in (default INBOX)')),
    moveTo: Type.Optional(Nullable(folder('Move taken-in messages to this folder instead of flagging them \\Seen'))),
  },
  { additionalProperties: false },
);

export const UpdateConnectionBody = Type.Object(
  {
    name: Type.Optional(Name),
    password: Type.Optional(password('IMAP: a new password, stored sealed: the connection is ACTIVE again, taken in from the next round')),
    refreshToken: Type.Optional(password('GMAIL and OUTLOOK: a new refresh token, stored sealed: the connection is ACTIVE again')),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const AuthorizeBody = Type.Object(
  { provider: Type.Optional(Type.String({ maxLength: 50 })), connectionName: Type.Optional(Type.String({ maxLength: 100 })) },
  { additionalProperties: false },
);

export type EmailConnectionView = Static<typeof EmailConnectionOut>;
export type CreateConnectionInput = Static<typeof CreateConnectionBody>;
export type UpdateConnectionInput = Static<typeof UpdateConnectionBody>;

export const SyncQuery = Type.Object(
  {
    full: Type.Optional(Type.Boolean({ description: 'true: read the folder again from its first message (what was taken in before is known by Message-ID and not taken twice)' })),
  },
  { additionalProperties: false },
);

export const SyncResultOut = Type.Object({ ticketsCreated: Type.Integer({ description: 'New tickets the mail created (replies that became comments are not counted)' }) });

export const RetryResultOut = Type.Object({
  success: Type.Boolean({ description: 'The mailbox was reached and read' }),
  ticketsCreated: Type.Integer(),
  error: Type.Optional(Type.String({ description: "Why not: the server's own words, or what failed on the way (also the connection's errorMessage)" })),
});

export type SyncQueryInput = Static<typeof SyncQuery>;
