import { Type, type Static } from 'typebox';
import { BrandParams, Nullable, Timestamp } from '../../core/schemas.js';

export const BlockedSourceOut = Type.Object({
  id: Type.String(),
  brandId: Type.String(),
  type: Type.Union([Type.Literal('email'), Type.Literal('domain')], { description: 'Inferred from value: an address, or a whole domain (which also covers its subdomains)' }),
  value: Type.String({ description: 'Normalized: lower-case address, or a domain without the leading @' }),
  reason: Nullable(Type.String()),
  createdAt: Timestamp,
});

export const CreateBlockedSourceBody = Type.Object(
  {
    value: Type.String({ minLength: 1, maxLength: 320, description: 'An email address (spam@example.com) or a domain (example.com or @example.com)' }),
    reason: Type.Optional(Nullable(Type.String({ maxLength: 500 }))),
  },
  { additionalProperties: false },
);

export const BlockedSourceParams = Type.Object({
  ...BrandParams.properties,
  sourceId: Type.String({ minLength: 1, maxLength: 64 }),
});

export type BlockedSourceView = Static<typeof BlockedSourceOut>;
export type CreateBlockedSourceInput = Static<typeof CreateBlockedSourceBody>;
