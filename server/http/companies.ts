import type { FastifyInstance } from 'fastify';
import { BrandParams } from '../core/schemas.js';
import {
  CompanyListQuery,
  CompanyOut,
  CompanyPage,
  CompanyParams,
  CreateCompanyBody,
  UpdateCompanyBody,
  type CompanyListInput,
  type CreateCompanyInput,
  type UpdateCompanyInput,
} from '../domains/companies/schemas.js';
import * as companies from '../domains/companies/service.js';
import { createCompany, updateCompany } from '../flows/customers.js';

type Route<B = undefined, Q = undefined> = { Params: { brandId: string; companyId: string }; Body: B; Querystring: Q };
const tags = ['Companies'];

/** /companies under a brand. */
export async function companyRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Params: { brandId: string }; Body: CreateCompanyInput }>(
    '/companies',
    {
      config: { auth: ['api-key', 'session'], permission: 'companies:write' },
      schema: {
        tags,
        summary: 'Create a company (links existing contacts of its domain that have no company)',
        params: BrandParams,
        body: CreateCompanyBody,
        response: { 201: CompanyOut },
      },
    },
    async (req, reply) => reply.status(201).send(await createCompany(req.ctx, req.params.brandId, req.body)),
  );

  app.get<{ Params: { brandId: string }; Querystring: CompanyListInput }>(
    '/companies',
    {
      config: { auth: ['api-key', 'session'], permission: 'companies:read' },
      schema: { tags, summary: 'List companies (cursor pages)', params: BrandParams, querystring: CompanyListQuery, response: { 200: CompanyPage } },
    },
    async (req) => companies.list(req.ctx, req.params.brandId, req.query),
  );

  app.get<Route>(
    '/companies/:companyId',
    {
      config: { auth: ['api-key', 'session'], permission: 'companies:read' },
      schema: { tags, summary: 'Get a company', params: CompanyParams, response: { 200: CompanyOut } },
    },
    async (req) => companies.get(req.ctx, req.params.brandId, req.params.companyId),
  );

  app.patch<Route<UpdateCompanyInput>>(
    '/companies/:companyId',
    {
      config: { auth: ['api-key', 'session'], permission: 'companies:write' },
      schema: { tags, summary: 'Update a company', params: CompanyParams, body: UpdateCompanyBody, response: { 200: CompanyOut } },
    },
    async (req) => updateCompany(req.ctx, req.params.brandId, req.params.companyId, req.body),
  );

  app.delete<Route>(
    '/companies/:companyId',
    {
      config: { auth: ['api-key', 'session'], permission: 'companies:write' },
      schema: { tags, summary: 'Delete a company (its contacts are unlinked, not deleted); returns the deleted company', params: CompanyParams, response: { 200: CompanyOut } },
    },
    async (req) => companies.remove(req.ctx, req.params.brandId, req.params.companyId),
  );
}
