import { Type, type Static } from 'typebox';
import { Nullable, Timestamp } from '../../core/schemas.js';

const BrandIds = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 500, uniqueItems: true });

export const ApiKeyOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('api_key'),
  name: Type.String(),
  keyPreview: Type.String({ description: 'The start and last four characters of the secret' }),
  prefix: Type.String({ description: 'Same as keyPreview; the name the dashboard reads' }),
  livemode: Type.Boolean(),
  allBrands: Type.Boolean(),
  brandIds: Type.Array(Type.String()),
  lastUsedAt: Nullable(Timestamp),
  expiresAt: Nullable(Timestamp),
  createdAt: Timestamp,
});

export const ApiKeyWithSecret = Type.Object({ ...ApiKeyOut.properties, key: Type.String({ description: 'The full secret. Shown only in this response.' }) });

export const CreateApiKeyBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    allBrands: Type.Optional(Type.Boolean()),
    brandIds: Type.Optional(BrandIds),
  },
  { additionalProperties: false },
);

export const UpdateScopeBody = Type.Object(
  { allBrands: Type.Optional(Type.Boolean()), brandIds: Type.Optional(BrandIds) },
  // An empty body must not read as "all brands": a PATCH that names nothing is refused.
  { additionalProperties: false, minProperties: 1 },
);

export const RotateBody = Type.Object(
  {
    graceMinutes: Type.Optional(Type.Integer({ minimum: 0, maximum: 60 * 24 * 30, description: 'Minutes the old key keeps working (default 0: revoked now)' })),
  },
  { additionalProperties: false },
);

export const KeyParams = Type.Object({ keyId: Type.String({ minLength: 1, maxLength: 64 }) });

export const RevokeResult = Type.Object({ success: Type.Literal(true), id: Type.String(), revokedAt: Timestamp });
export const RotateResult = Type.Object({ newKey: ApiKeyWithSecret, oldKey: ApiKeyOut });

export type CreateApiKeyInput = Static<typeof CreateApiKeyBody>;
export type UpdateScopeInput = Static<typeof UpdateScopeBody>;
export type ApiKeyView = Static<typeof ApiKeyOut>;
export type ApiKeyWithSecretView = Static<typeof ApiKeyWithSecret>;
