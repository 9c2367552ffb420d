import { Type, type TSchema } from 'typebox';
import { SENT_EMAIL_PATTERN } from './text.js';

export const Timestamp = Type.String({ format: 'date-time' });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
/**
 * The most a free-form JSON value we keep for a client (metadata, settings, custom fields, a JSON
 * Schema, source data) may take, serialized. Its nesting is bounded for every body at parse time
 * (core/json-text.ts); `maxJsonBytes` is checked by the validators (core/http.ts).
 */
export const MAX_FREE_JSON_BYTES = 65_536;
const freeJsonLimit = { maxJsonBytes: MAX_FREE_JSON_BYTES };

/** A free-form JSON object (at most MAX_FREE_JSON_BYTES serialized). */
export const FreeObject = (options: { description?: string } = {}) => Type.Record(Type.String(), Type.Unknown(), { ...freeJsonLimit, ...options });
/** Any free-form JSON value (at most MAX_FREE_JSON_BYTES serialized). */
export const FreeJson = (options: { description?: string } = {}) => Type.Unknown({ ...freeJsonLimit, ...options });

export const Metadata = Type.Record(Type.String(), Type.Unknown(), {
  ...freeJsonLimit,
  maxProperties: 50,
  // Type.Record drops constraints of its key schema; propertyNames is what enforces them.
  propertyNames: { maxLength: 40 },
  description: 'Free-form key/value data for your own use (at most 50 keys).',
});

export const ErrorResponse = Type.Object(
  {
    statusCode: Type.Integer(),
    error: Type.String({ description: 'HTTP reason phrase' }),
    message: Type.String({ description: 'A human sentence' }),
    code: Type.String({ description: 'Stable machine-readable code' }),
    requestId: Type.String(),
    errors: Type.Optional(Type.Array(Type.Object({ field: Type.String(), message: Type.String() }))),
    sso: Type.Optional(
      Type.Object(
        { organizationId: Type.String(), startPath: Type.String() },
        { description: 'With sso_required: the organization whose members sign in with single sign-on, and the route that starts it (POST, { organizationId, origin })' },
      ),
    ),
  },
  { $id: 'Error' },
);

export const Success = Type.Object({ success: Type.Literal(true) });

export const BrandParams = Type.Object({
  brandId: Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' }),
});

/** The patterns schemas share: validation.ts says in words what each means rather than quote it. */
export const PATTERNS = {
  email: SENT_EMAIL_PATTERN,
  notBlank: '\\S',
  hexColor: '^#[0-9a-fA-F]{6}$',
  httpUrl: '^https?://\\S+$',
  origin: '^https?://[^/\\s]+$',
  timeOfDay: '^([01]\\d|2[0-3]):[0-5]\\d$',
} as const;

/** A colour as clients send it: `#` and six hex digits. */
export const HexColor = Type.String({ pattern: PATTERNS.hexColor, description: 'Hex colour such as #6b7280' });

/** A display name: 1-100 characters with at least one that is not white space; stored trimmed. */
export const DisplayName = Type.String({ minLength: 1, maxLength: 100, pattern: PATTERNS.notBlank });

/** An email address as clients send it: surrounding spaces are allowed (it is stored trimmed and lower-cased). */
export const EmailAddress = (description: string) => Type.String({ minLength: 3, maxLength: 320, pattern: PATTERNS.email, description });

export const HttpUrl = Type.String({ maxLength: 2048, pattern: PATTERNS.httpUrl });
