import { Type, type Static } from 'typebox';
import { PaginationOut } from '../../core/pagination.js';
import { Nullable } from '../../core/schemas.js';
import { SOURCES, TicketListQuery, TicketOut } from './schemas.js';

/** At most this many brands may be named in brandIds (and workspaceIds together). */
export const MAX_BRAND_FILTER = 100;
/** The longest date range the trends and team metrics count over, in days. */
export const MAX_RANGE_DAYS = 366;
export const DEFAULT_RANGE_DAYS = 30;

const BrandIdList = (description: string) => Type.String({ minLength: 1, maxLength: 7000, description });
const BrandIdsParams = {
  brandIds: Type.Optional(
    BrandIdList(`Comma-separated brand ids (\`br_…\` or \`ws_…\`, at most ${MAX_BRAND_FILTER}); absent: every brand the credential may see. A brand it may not see is a 404`),
  ),
  workspaceIds: Type.Optional(BrandIdList('Deprecated alias of brandIds (both given: the union)')),
};
const DateParam = (description: string) =>
  Type.String({
    pattern: '^\\d{4}-\\d{2}-\\d{2}(T[0-9:.]+(Z|[+-]\\d{2}:\\d{2}))?$',
    maxLength: 40,
    description: `${description}; a date (YYYY-MM-DD) or a date-time, its UTC day counts`,
  });
const DateRange = {
  startDate: Type.Optional(DateParam('First day counted (UTC)')),
  endDate: Type.Optional(DateParam('Last day counted (UTC), included')),
};
const Days = (description: string) => Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_RANGE_DAYS, description }));

export const CrossBrandListQuery = Type.Object(
  {
    ...TicketListQuery.properties,
    ...BrandIdsParams,
    source: Type.Optional(
      Type.Union(
        SOURCES.map((s) => Type.Literal(s)),
        { description: 'Only tickets from this origin' },
      ),
    ),
  },
  { additionalProperties: false },
);

export const TicketBrand = Type.Object({
  id: Type.String(),
  name: Type.String(),
  slug: Type.String(),
  ticketPrefix: Nullable(Type.String()),
  iconUrl: Nullable(Type.String()),
});

export const DashboardTicketOut = Type.Object({ ...TicketOut.properties, brand: TicketBrand });
export const DashboardTicketPage = Type.Object({ data: Type.Array(DashboardTicketOut), pagination: PaginationOut });

export const StatsQuery = Type.Object(
  { ...BrandIdsParams, days: Days('Count only tickets created in the last N days (UTC days, today included); absent: all time') },
  { additionalProperties: false },
);

const Count = Type.Integer({ minimum: 0 });
export const StatsOut = Type.Object({
  total: Count,
  open: Count,
  pending: Count,
  resolved: Count,
  closed: Count,
  byStatus: Type.Record(Type.String(), Count, { description: 'Every status key with tickets, custom ones included' }),
  byBrand: Type.Record(
    Type.String(),
    Type.Object({ name: Type.String(), prefix: Nullable(Type.String()), total: Count, open: Count, pending: Count, resolved: Count, closed: Count }),
    { description: 'Every brand counted, keyed by brand id (brands without tickets too)' },
  ),
  responseMetrics: Type.Object({
    avgFirstResponseMinutes: Nullable(Type.Integer({ description: 'Not measured yet: always null' })),
    avgResolutionMinutes: Nullable(Type.Integer({ description: 'From creation to resolution, over the tickets resolved (in the window when days is given); null when none' })),
    ticketsWithResponse: Type.Integer({ description: 'Not measured yet: always 0' }),
    ticketsResolved: Count,
  }),
});

export const TrendsQuery = Type.Object(
  { ...BrandIdsParams, days: Days(`The last N UTC days, today included (default ${DEFAULT_RANGE_DAYS}); not with startDate/endDate`), ...DateRange },
  { additionalProperties: false },
);

export const TrendsOut = Type.Object({
  data: Type.Array(Type.Object({ date: Type.String({ description: 'YYYY-MM-DD (UTC)' }), created: Count, resolved: Count }), {
    description: 'One entry per day of the period, oldest first; days without tickets count 0',
  }),
  period: Type.Object({ start: Type.String(), end: Type.String() }),
});

export const TeamMetricsQuery = Type.Object({ ...BrandIdsParams, ...DateRange }, { additionalProperties: false });

/** Service-level attainment of the resolutions (resolved or closed) in a period that had a dueAt. */
const SlaAttainment = Type.Object({
  slaTracked: Type.Integer({ minimum: 0, description: 'Tickets resolved or closed in the period that had a dueAt' }),
  slaMet: Type.Integer({ minimum: 0, description: 'Of those, resolved or closed at or before their dueAt' }),
  slaAttainment: Nullable(Type.Integer({ minimum: 0, maximum: 100, description: 'slaMet in percent of slaTracked, rounded; null when none was tracked' })),
});

export const TeamMetricsOut = Type.Object({
  members: Type.Array(
    Type.Object({
      memberId: Type.String(),
      memberEmail: Nullable(Type.String()),
      memberName: Nullable(Type.String()),
      ticketsResolved: Count,
      ticketsClosed: Count,
      csatCount: Count,
      csatPositive: Count,
      csatScore: Nullable(Type.Integer({ minimum: 0, maximum: 100 })),
      ...SlaAttainment.properties,
    }),
  ),
  sla: Type.Object(SlaAttainment.properties, { description: "The whole team's resolutions in the period, unassigned tickets included" }),
  period: Type.Object({ start: Type.String(), end: Type.String() }),
});

export type CrossBrandListInput = Static<typeof CrossBrandListQuery>;
export type DashboardTicketView = Static<typeof DashboardTicketOut>;
export type StatsInput = Static<typeof StatsQuery>;
export type StatsView = Static<typeof StatsOut>;
export type TrendsInput = Static<typeof TrendsQuery>;
export type TrendsView = Static<typeof TrendsOut>;
export type TeamMetricsInput = Static<typeof TeamMetricsQuery>;
export type TeamMetricsView = Static<typeof TeamMetricsOut>;
