import { Type, type Static } from 'typebox';
import { Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';
import { AccountOut } from '../accounts/schemas.js';
import { MemberRoleOut, OrganizationOut } from '../organizations/schemas.js';

const Email = Type.String({ pattern: PATTERNS.email, maxLength: 320, description: 'An email address' });
const PersonName = Type.String({ minLength: 1, maxLength: 200, pattern: PATTERNS.notBlank });

export const CheckEmailBody = Type.Object({ email: Email }, { additionalProperties: false });

export const MagicLinkBody = Type.Object(
  {
    email: Email,
    organizationId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: "Which of the person's organizations to sign in to; default: the one they joined first" }),
    ),
  },
  { additionalProperties: false },
);

export const SignupBody = Type.Object(
  {
    email: Email,
    name: Type.Optional(PersonName),
    firstName: Type.Optional(PersonName),
    lastName: Type.Optional(PersonName),
    organizationName: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: PATTERNS.notBlank, description: 'Defaults to the name or email' })),
  },
  { additionalProperties: false },
);

/** The dashboard page asking for a link: the link points back there (`<origin>/auth/callback?token=…`). */
export const OriginHeaders = Type.Object({
  origin: Type.String({ minLength: 1, maxLength: 2048, description: 'The dashboard origin; must be one of the configured dashboard origins' }),
});

export const VerifyBody = Type.Object(
  { token: Type.String({ minLength: 1, maxLength: 512, description: 'The `ml_…` token of the sign-in link' }) },
  { additionalProperties: false },
);

export const VerifyQuery = Type.Object({
  setCookies: Type.Optional(
    Type.Boolean({
      default: false,
      description: 'true: the session is set as an HttpOnly cookie and its token left out of the body; false (default): the token is in the body (`sessionToken`)',
    }),
  ),
});

export const CheckEmailResult = Type.Object({ exists: Type.Boolean() });
export const LinkSent = Type.Object({ success: Type.Literal(true), message: Type.String() });
export const SignupResult = Type.Object({ ...LinkSent.properties, organizationId: Type.String() });

export const SessionOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('session'),
  createdAt: Timestamp,
  expiresAt: Type.String({ format: 'date-time', description: 'Ends then unless used again; each use moves it forward' }),
  maxExpiresAt: Type.String({ format: 'date-time', description: 'Ends then however much it is used' }),
});

export const SignedInMember = Type.Object({
  id: Type.String(),
  email: Type.String(),
  name: Nullable(Type.String()),
  firstName: Nullable(Type.String()),
  lastName: Nullable(Type.String()),
  role: MemberRoleOut,
});

/** What the hosted product's dashboard reads, flat, beside the full records. */
const DashboardFields = {
  customerId: Type.String({ description: 'The member id (the dashboard compares it with member ids)' }),
  memberId: Type.String(),
  email: Type.String(),
  organizationId: Type.String({ description: 'The account id' }),
  orgRole: MemberRoleOut,
  connected: Type.Boolean({ description: 'Always true: the organization is the account its API keys belong to' }),
  expiresAt: Timestamp,
  firstName: Nullable(Type.String()),
  lastName: Nullable(Type.String()),
  session: SessionOut,
  account: AccountOut,
  organization: OrganizationOut,
  member: SignedInMember,
};

export const VerifyResult = Type.Object({
  success: Type.Literal(true),
  sessionToken: Type.Optional(Type.String({ description: 'The session token (`ts_…`), shown once; absent with setCookies=true' })),
  ...DashboardFields,
});

export const SessionState = Type.Object({ valid: Type.Literal(true), ...DashboardFields });

export type CheckEmailInput = Static<typeof CheckEmailBody>;
export type MagicLinkInput = Static<typeof MagicLinkBody>;
export type SignupInput = Static<typeof SignupBody>;
export type SessionStateView = Static<typeof SessionState>;
export type SignedInView = Omit<SessionStateView, 'valid'>;
