import { Type, type Static } from 'typebox';
import { PageQuery } from '../../core/pagination.js';
import { VisibilitySchema as Visibility } from '../../core/saved-items.js';
import { Nullable, Timestamp } from '../../core/schemas.js';
import { TICKET_SORTS, TicketListQuery } from '../tickets/schemas.js';

/**
 * Views: a named ticket list query (docs/api.md "Views"). `filters` are the ticket list's own
 * query parameters, checked by its own schema, as JSON values (a flag is true, not "true").
 */

const Id = Type.String({ minLength: 1, maxLength: 64 });
const BrandId = Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' });
const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });

/** The ticket list's filters: its query parameters but the order and the page. */
export const ViewFilters = Type.Omit(TicketListQuery, ['sort', 'order', 'limit', 'cursor'], {
  additionalProperties: false,
  description: 'The query parameters of GET …/tickets (but sort, order, limit and cursor), as JSON values',
});
export type ViewFilters = Static<typeof ViewFilters>;

export const ViewSort = Type.Object(
  {
    field: Type.Optional(
      Type.Union(
        TICKET_SORTS.map((s) => Type.Literal(s)),
        { description: 'As the list’s sort; absent: createdAt (relevance when filters.search is given)' },
      ),
    ),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { description: 'Default desc' })),
  },
  { additionalProperties: false },
);
export type ViewSort = Static<typeof ViewSort>;

const viewFields = { name: Name, visibility: Visibility, filters: ViewFilters, sort: Type.Optional(ViewSort) };
export const CreateViewBody = Type.Object(viewFields, { additionalProperties: false });
export type CreateViewInput = Static<typeof CreateViewBody>;
export const UpdateViewBody = Type.Partial(Type.Object(viewFields), { additionalProperties: false, minProperties: 1 });
export type UpdateViewInput = Static<typeof UpdateViewBody>;

/** A view's order as stored: the field null when the list's default decides. */
export interface StoredSort {
  field: NonNullable<ViewSort['field']> | null;
  order: 'asc' | 'desc';
}

export const ViewOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('view'),
  brandId: Type.String(),
  name: Type.String(),
  visibility: Type.String(),
  ownerId: Nullable(Type.String({ description: 'The member a personal view belongs to; null for the brand’s' })),
  filters: Type.Record(Type.String(), Type.Unknown()),
  sort: Type.Object({ field: Nullable(Type.String()), order: Type.String() }),
  createdBy: Nullable(Type.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type ViewView = Static<typeof ViewOut>;
export const ViewListOut = Type.Object({ data: Type.Array(ViewOut) });

export const ViewParams = Type.Object({ brandId: BrandId, viewId: Id });
export const ViewTicketsQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });
export type ViewTicketsInput = Static<typeof ViewTicketsQuery>;

export const ViewCountsOut = Type.Object({
  data: Type.Array(
    Type.Object({
      id: Type.String(),
      count: Type.Integer({ description: 'The tickets the view lists' }),
      fresh: Type.Boolean({ description: 'true: counted now; false: counted at countedAt, less than a minute ago' }),
      countedAt: Timestamp,
    }),
  ),
});
export type ViewCount = Static<typeof ViewCountsOut>['data'][number];
