import { Type, type Static } from 'typebox';
import { HttpUrl, Nullable, Timestamp } from '../../core/schemas.js';

const Status = (options: { description?: string } = {}) =>
  Type.Union(
    [Type.Literal('new'), Type.Literal('under_review'), Type.Literal('planned'), Type.Literal('in_progress'), Type.Literal('completed'), Type.Literal('declined')],
    options,
  );
const Category = Type.Union([Type.Literal('billing'), Type.Literal('auth'), Type.Literal('api'), Type.Literal('dashboard'), Type.Literal('analytics'), Type.Literal('other')]);

const Image = Type.Object({ url: HttpUrl, name: Type.Optional(Nullable(Type.String({ maxLength: 200 }))) }, { additionalProperties: false });

export const FeatureRequestOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('feature_request'),
  title: Type.String(),
  featureDetails: Type.String(),
  description: Type.String({ description: 'The same text as featureDetails, under the name older clients read' }),
  currentBehavior: Nullable(Type.String()),
  whyItMatters: Nullable(Type.String()),
  category: Nullable(Type.String()),
  images: Type.Array(Type.Object({ url: Type.String(), name: Type.Optional(Nullable(Type.String())) })),
  status: Type.String(),
  voteCount: Type.Integer(),
  authorId: Type.String(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type FeatureRequestView = Static<typeof FeatureRequestOut>;

export const FeatureRequestList = Type.Object({ requests: Type.Array(FeatureRequestOut) });
export const FeatureRequestActivity = Type.Object({
  voted: Type.Array(FeatureRequestOut, { description: 'Requests the caller has voted for, newest vote first' }),
  authored: Type.Array(FeatureRequestOut, { description: 'Requests the caller proposed, newest first' }),
});

export const FeatureRequestListQuery = Type.Object(
  {
    status: Type.Optional(Status({ description: 'Omit for every status' })),
    sortBy: Type.Optional(Type.Union([Type.Literal('votes'), Type.Literal('newest'), Type.Literal('oldest')], { default: 'votes' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
  },
  { additionalProperties: false },
);
export type FeatureRequestListInput = Static<typeof FeatureRequestListQuery>;

export const CreateFeatureRequestBody = Type.Object(
  {
    title: Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' }),
    featureDetails: Type.String({ minLength: 1, maxLength: 10_000, pattern: '\\S' }),
    currentBehavior: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))),
    whyItMatters: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))),
    category: Type.Optional(Nullable(Category)),
    images: Type.Optional(Type.Array(Image, { maxItems: 10 })),
  },
  { additionalProperties: false },
);
export type CreateFeatureRequestInput = Static<typeof CreateFeatureRequestBody>;

export const FeatureRequestParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export const UpdateFeatureRequestBody = Type.Object({ status: Status() }, { additionalProperties: false });
export type UpdateFeatureRequestInput = Static<typeof UpdateFeatureRequestBody>;
