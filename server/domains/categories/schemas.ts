import { Type, type Static } from 'typebox';
import { ByCredential } from '../../core/client-shapes.js';
import { BrandParams, DisplayName, HexColor, Nullable, Timestamp } from '../../core/schemas.js';

const Description = Type.String({ maxLength: 1000 });
const SortOrder = Type.Integer({ minimum: 0, maximum: 1_000_000 });

export const CategoryOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('category'),
  brandId: Type.String(),
  name: Type.String(),
  color: HexColor,
  description: Nullable(Type.String()),
  sortOrder: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const CategoryParams = Type.Object({
  ...BrandParams.properties,
  categoryId: Type.String({ minLength: 1, maxLength: 64, description: 'Category id (`cat_…`)' }),
});

export const CreateCategoryBody = Type.Object(
  {
    name: DisplayName,
    color: Type.Optional(Nullable(HexColor)),
    description: Type.Optional(Nullable(Description)),
    sortOrder: Type.Optional(SortOrder),
  },
  { additionalProperties: false },
);

export const UpdateCategoryBody = Type.Object(
  {
    name: Type.Optional(DisplayName),
    color: Type.Optional(Nullable(HexColor)),
    description: Type.Optional(Nullable(Description)),
    sortOrder: Type.Optional(SortOrder),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ReorderCategoriesBody = Type.Object(
  { categoryIds: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 1000, description: 'Every category of the brand, exactly once, in the new order' }) },
  { additionalProperties: false },
);

const CategoryCount = Type.Object({ id: Type.String(), name: Type.String(), color: HexColor, ticketCount: Type.Integer() });

/** Every category of the brand, with 0 when it has no tickets: a list to a session, keyed by id to an API key. */
export const CategoryStats = ByCredential(
  Type.Array(CategoryCount, { description: '[{ id, name, color, ticketCount }] by sortOrder' }),
  Type.Record(Type.String(), CategoryCount, { description: '{ [categoryId]: { id, name, color, ticketCount } }' }),
  'Ticket count per category; every category of the brand appears, with 0 when it has no tickets',
);

export type CategoryView = Static<typeof CategoryOut>;
export type CreateCategoryInput = Static<typeof CreateCategoryBody>;
export type UpdateCategoryInput = Static<typeof UpdateCategoryBody>;
export type ReorderCategoriesInput = Static<typeof ReorderCategoriesBody>;
export type CategoryCountView = Static<typeof CategoryCount>;
