import { Type, type Static } from 'typebox';
import { Nullable, PATTERNS, Timestamp } from '../../core/schemas.js';

export const STATUS_KEY_PATTERN = '^[a-z0-9_]{1,50}$';
const StatusKey = Type.String({
  pattern: STATUS_KEY_PATTERN,
  description: 'Lower-case letters, digits and underscores (1-50); unique per brand. Tickets refer to a status by this key.',
});
const Color = Type.String({ pattern: PATTERNS.hexColor, description: 'A hex color such as #3b82f6' });
const Name = Type.String({ minLength: 1, maxLength: 100 });
const Description = Nullable(Type.String({ maxLength: 1000 }));
const SortOrder = Type.Integer({ minimum: 0, maximum: 1_000_000 });

export const StatusParams = Type.Object({
  brandId: Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' }),
  statusId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const StatusOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('status'),
  brandId: Type.String(),
  key: Type.String(),
  name: Type.String(),
  color: Type.String(),
  description: Nullable(Type.String()),
  isSystem: Type.Boolean({ description: 'System statuses (open, pending, resolved, closed) cannot be deleted and keep their key' }),
  isActive: Type.Boolean(),
  sortOrder: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const StatusWithCount = Type.Object({ ...StatusOut.properties, ticketCount: Type.Integer() });

export const CreateStatusBody = Type.Object(
  {
    key: StatusKey,
    name: Name,
    color: Color,
    description: Type.Optional(Description),
    isActive: Type.Optional(Type.Boolean()),
    sortOrder: Type.Optional(SortOrder),
  },
  { additionalProperties: false },
);

export const UpdateStatusBody = Type.Object(
  {
    key: Type.Optional(Type.String({ ...StatusKey, description: 'Custom statuses only: a system status keeps its key (403 system_status)' })),
    name: Type.Optional(Name),
    color: Type.Optional(Color),
    description: Type.Optional(Description),
    isActive: Type.Optional(Type.Boolean()),
    sortOrder: Type.Optional(SortOrder),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ReorderStatusesBody = Type.Object(
  { statusIds: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 500, description: 'Every status id of the brand, once each, in the new order' }) },
  { additionalProperties: false },
);

export type StatusView = Static<typeof StatusOut>;
export type StatusWithCountView = Static<typeof StatusWithCount>;
export type CreateStatusInput = Static<typeof CreateStatusBody>;
export type UpdateStatusInput = Static<typeof UpdateStatusBody>;
export type ReorderStatusesInput = Static<typeof ReorderStatusesBody>;
