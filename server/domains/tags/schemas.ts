import { Type, type Static } from 'typebox';
import { ByCredential } from '../../core/client-shapes.js';
import { BrandParams, DisplayName, HexColor, Nullable, Timestamp } from '../../core/schemas.js';

const TagId = Type.String({ minLength: 1, maxLength: 64, description: 'Tag id (`tag_…`)' });
const SourceTagIds = Type.Array(TagId, { minItems: 1, maxItems: 100, description: 'Tags to merge into the target; they are deleted' });

export const TagOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('tag'),
  brandId: Type.String(),
  name: Type.String(),
  color: HexColor,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const TagParams = Type.Object({ ...BrandParams.properties, tagId: TagId });
export const MergeTargetParams = Type.Object({ ...BrandParams.properties, targetId: TagId });

export const CreateTagBody = Type.Object({ name: DisplayName, color: Type.Optional(Nullable(HexColor)) }, { additionalProperties: false });

export const UpdateTagBody = Type.Object({ name: Type.Optional(DisplayName), color: Type.Optional(Nullable(HexColor)) }, { additionalProperties: false, minProperties: 1 });

/** POST …/tags/{targetId}/merge, as the SDK sends it. */
export const MergeIntoBody = Type.Object({ sourceTagIds: SourceTagIds }, { additionalProperties: false });

/** POST …/tags/merge, as the dashboard sends it. */
export const MergeBody = Type.Object({ targetTagId: TagId, sourceTagIds: SourceTagIds }, { additionalProperties: false });

const TagCount = Type.Object({ id: Type.String(), name: Type.String(), color: HexColor, ticketCount: Type.Integer() });

/** Every tag of the brand, with 0 when no ticket carries it: a list to a session, keyed by id to an API key. */
export const TagStats = ByCredential(
  Type.Array(TagCount, { description: '[{ id, name, color, ticketCount }] by name' }),
  Type.Record(Type.String(), TagCount, { description: '{ [tagId]: { id, name, color, ticketCount } }' }),
  'Ticket count per tag; every tag of the brand appears, with 0 when no ticket carries it',
);

export type TagView = Static<typeof TagOut>;
export type CreateTagInput = Static<typeof CreateTagBody>;
export type UpdateTagInput = Static<typeof UpdateTagBody>;
export type MergeIntoInput = Static<typeof MergeIntoBody>;
export type MergeInput = Static<typeof MergeBody>;
export type TagCountView = Static<typeof TagCount>;
