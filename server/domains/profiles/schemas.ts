import { Type, type Static } from 'typebox';
import { Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';
import { AVATAR_TYPES } from './images.js';

/** The profile exactly as the dashboard reads it (it writes the answer of every change straight into its cache). */
export const ProfileOut = Type.Object({
  displayName: Nullable(Type.String({ description: "The name the member's comments are signed with; defaults to the member's name" })),
  avatarUrl: Nullable(Type.String({ description: 'An absolute URL a browser can load (an uploaded avatar is served by ticketd), or null' })),
  notifyEmail: Type.Boolean({ description: 'Mail when mentioned or when a watched ticket gets a comment' }),
  notifyToast: Type.Boolean(),
  notifyDesktop: Type.Boolean(),
});

export const UpdateProfileBody = Type.Object(
  {
    displayName: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 100, pattern: PATTERNS.notBlank, description: "null: back to the member's name" }))),
    avatarUrl: Type.Optional(
      Nullable(
        Type.String({
          maxLength: 2048,
          pattern: PATTERNS.httpUrl,
          description: 'An http(s) URL of an image elsewhere, or null for none (an uploaded avatar is removed either way)',
        }),
      ),
    ),
    notifyEmail: Type.Optional(Type.Boolean()),
    notifyToast: Type.Optional(Type.Boolean()),
    notifyDesktop: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export const AvatarUploadBody = Type.Object(
  {
    filename: Type.String({ minLength: 1, maxLength: 255, pattern: PATTERNS.notBlank, description: 'For the client only: the content decides what the file is' }),
    contentType: Type.String({ minLength: 1, maxLength: 100, description: `One of ${AVATAR_TYPES.join(', ')}` }),
    size: Type.Integer({ minimum: 1, description: 'Bytes; at most 5 MiB' }),
  },
  { additionalProperties: false },
);

export const AvatarGrantOut = Type.Object({
  uploadUrl: Type.String({ description: 'PUT the raw bytes here (exactly `size` of them), without Authorization, then confirm' }),
  storageKey: Type.String({ description: 'The upload, as POST /v1/auth/profile/avatar/confirm may name it' }),
  expiresAt: Timestamp,
  expiresIn: Type.Integer({ description: 'Seconds' }),
  method: Type.Literal('PUT'),
});

export const ConfirmAvatarBody = Type.Object(
  { storageKey: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Default: the newest upload asked for' })) },
  { additionalProperties: false },
);

export const AvatarParams = Type.Object({
  accountId: Type.String({ minLength: 1, maxLength: 64 }),
  avatarId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const AvatarReceiptOut = Type.Object({
  storageKey: Type.String(),
  size: Type.Integer(),
  status: Type.Literal('PENDING', { description: 'Confirm the upload next' }),
});

export const MultipartFile = Type.Object({ file: Type.Optional(Type.Unknown({ description: 'The image (multipart/form-data field `file`)' })) });

export type ProfileView = Static<typeof ProfileOut>;
export type UpdateProfileInput = Static<typeof UpdateProfileBody>;
export type AvatarUploadInput = Static<typeof AvatarUploadBody>;
export type AvatarGrantView = Static<typeof AvatarGrantOut>;
export type AvatarReceiptView = Static<typeof AvatarReceiptOut>;
