import { Type, type Static } from 'typebox';
import { BrandParams, Metadata, Nullable, Timestamp } from '../../core/schemas.js';
import { PageOf, PageQuery } from '../../core/pagination.js';

const Domain = Type.String({ minLength: 1, maxLength: 253, description: 'A host name such as acme.com; stored lower-case (a leading @ is dropped). Unique per brand.' });

export const CompanyOut = Type.Object({
  id: Type.String(),
  brandId: Type.String(),
  name: Type.String(),
  domain: Nullable(Type.String()),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  _count: Type.Object({ customers: Type.Integer() }),
});

export const CreateCompanyBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    domain: Type.Optional(Nullable(Domain)),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);

export const UpdateCompanyBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    domain: Type.Optional(Nullable(Domain)),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const CompanyListQuery = Type.Object(
  {
    search: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Case- and accent-insensitive; contained in the name or the domain' })),
    sort: Type.Optional(Type.Union([Type.Literal('createdAt'), Type.Literal('name')], { default: 'createdAt' })),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { default: 'desc' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const CompanyParams = Type.Object({
  ...BrandParams.properties,
  companyId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const CompanyPage = PageOf(CompanyOut);

export type CompanyView = Static<typeof CompanyOut>;
export type CreateCompanyInput = Static<typeof CreateCompanyBody>;
export type UpdateCompanyInput = Static<typeof UpdateCompanyBody>;
export type CompanyListInput = Static<typeof CompanyListQuery>;
