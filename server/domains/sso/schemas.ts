import { Type, type Static } from 'typebox';
import { PATTERNS, Timestamp } from '../../core/schemas.js';

const Role = Type.Union([Type.Literal('admin'), Type.Literal('member')], { description: 'The role of a member created at their first sign-in (never owner); default member' });

const AllowedDomains = Type.Array(Type.String({ minLength: 1, maxLength: 253 }), {
  minItems: 1,
  maxItems: 50,
  description: 'Email domains (example.com; stored lower-case) whose addresses the provider may sign in: exactly these domains, not their subdomains',
});

export const SsoConfigBody = Type.Object(
  {
    issuer: Type.String({
      minLength: 1,
      maxLength: 2048,
      description: "The identity provider's issuer, an https URL; its discovery document (/.well-known/openid-configuration) is read to check it",
    }),
    clientId: Type.String({ minLength: 1, maxLength: 512, pattern: PATTERNS.notBlank, description: 'The OAuth client ticketd is at the provider' }),
    clientSecret: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 4096,
        description: "The client's secret: write-only (never returned), stored sealed. Required the first time; omitted later: the stored one is kept",
      }),
    ),
    allowedDomains: AllowedDomains,
    defaultRole: Type.Optional(Role),
    allowMagicLinks: Type.Optional(
      Type.Boolean({ description: 'Default true. false: single sign-on is required, and a magic link for a member of this organization is 400 sso_required' }),
    ),
  },
  { additionalProperties: false },
);

export const SsoConfigOut = Type.Object({
  object: Type.Literal('sso_connection'),
  id: Type.String(),
  organizationId: Type.String(),
  issuer: Type.String({ description: 'As the provider names itself in its discovery document' }),
  clientId: Type.String(),
  clientSecretSet: Type.Literal(true, { description: 'The secret is stored (it is never returned)' }),
  allowedDomains: Type.Array(Type.String()),
  defaultRole: Role,
  allowMagicLinks: Type.Boolean(),
  redirectUri: Type.String({ description: "The callback to register at the provider as the client's redirect URI" }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const SsoStartBody = Type.Object(
  {
    email: Type.Optional(Type.String({ pattern: PATTERNS.email, maxLength: 320, description: 'Finds the organization by its domain (and is the login hint)' })),
    organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'The organization to sign in to; needed when several sign in addresses of the domain' })),
    origin: Type.Optional(
      Type.String({ minLength: 1, maxLength: 2048, description: 'The dashboard origin to come back to (default: the Origin header); must be a configured dashboard origin' }),
    ),
  },
  { additionalProperties: false },
);

export const SsoStartOut = Type.Object({
  url: Type.String({ description: "The provider's authorization URL: send the browser there" }),
  organizationId: Type.String(),
  expiresAt: Type.String({ format: 'date-time', description: 'The sign-in must come back before then' }),
});

const QueryText = Type.String({ maxLength: 4096 });
export const SsoCallbackQuery = Type.Object({
  code: Type.Optional(QueryText),
  state: Type.Optional(QueryText),
  error: Type.Optional(QueryText),
  error_description: Type.Optional(QueryText),
  iss: Type.Optional(QueryText),
});

export type SsoConfigInput = Static<typeof SsoConfigBody>;
export type SsoConfigView = Static<typeof SsoConfigOut>;
export type SsoStartInput = Static<typeof SsoStartBody>;
export type SsoStartView = Static<typeof SsoStartOut>;
