import { Type, type Static } from 'typebox';
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

export const TagStats = Type.Record(Type.String(), Type.Object({ id: Type.String(), name: Type.String(), color: HexColor, ticketCount: Type.Integer() }), {
  description: 'Keyed by tag id; every tag of the brand appears, with 0 when no ticket carries it',
});

export type TagView = Static<typeof TagOut>;
export type CreateTagInput = Static<typeof CreateTagBody>;
export type UpdateTagInput = Static<typeof UpdateTagBody>;
export type MergeIntoInput = Static<typeof MergeIntoBody>;
export type MergeInput = Static<typeof MergeBody>;
export type TagStatsView = Static<typeof TagStats>;
