import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import { BrandDomainOut, CreateDomainBody, DomainParams, UpdateDomainBody, VerifyOut, type CreateDomainInput, type UpdateDomainInput } from '../domains/brand-domains/schemas.js';
import * as brandDomains from '../domains/brand-domains/service.js';
import { createDomain } from '../flows/brand-domains.js';

type InBrand<B = undefined> = { Params: { brandId: string }; Body: B };
type InDomain<B = undefined> = { Params: { brandId: string; domainId: string }; Body: B };

/** A brand's own mail domains. Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function brandDomainRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Domains'];
  const read = { auth: ['api-key', 'session'], permission: 'domains:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'domains:write' } as const;

  app.get<InBrand>(
    '/domains',
    {
      config: read,
      schema: { tags, summary: "List the brand's domains, oldest first (a bare array; [] without any)", params: BrandParams, response: { 200: Type.Array(BrandDomainOut) } },
    },
    async (req) => brandDomains.list(req.ctx, req.params.brandId),
  );

  app.post<InBrand<CreateDomainInput>>(
    '/domains',
    {
      config: write,
      schema: {
        tags,
        summary:
          'Add a domain with the DNS records to publish (an OUTBOUND one gets its DKIM key; the first is primary). 409 domain_exists; 403 plan_feature_unavailable without the customDomain entitlement',
        params: BrandParams,
        body: CreateDomainBody,
        response: { 201: BrandDomainOut },
      },
    },
    async (req, reply) => reply.status(201).send(await createDomain(req.ctx, req.params.brandId, req.body)),
  );

  app.get<InDomain>(
    '/domains/:domainId',
    { config: read, schema: { tags, summary: 'Get a domain with its records', params: DomainParams, response: { 200: BrandDomainOut } } },
    async (req) => brandDomains.get(req.ctx, req.params.brandId, req.params.domainId),
  );

  app.patch<InDomain<UpdateDomainInput>>(
    '/domains/:domainId',
    {
      config: write,
      schema: {
        tags,
        summary: 'Set the sender (fromEmail at the domain), the reply mode, or make it the primary OUTBOUND domain',
        params: DomainParams,
        body: UpdateDomainBody,
        response: { 200: BrandDomainOut },
      },
    },
    async (req) => brandDomains.update(req.ctx, req.params.brandId, req.params.domainId, req.body),
  );

  app.delete<InDomain>(
    '/domains/:domainId',
    {
      config: write,
      schema: {
        tags,
        summary: 'Delete a domain (its DKIM key with it); returns it. The next OUTBOUND domain becomes primary',
        params: DomainParams,
        response: { 200: BrandDomainOut },
      },
    },
    async (req) => brandDomains.remove(req.ctx, req.params.brandId, req.params.domainId),
  );

  app.post<InDomain>(
    '/domains/:domainId/verify',
    {
      config: write,
      schema: {
        tags,
        summary: "Look the domain's records up in DNS now: { verified } or { verified: false, error } naming what is missing",
        params: DomainParams,
        response: { 200: VerifyOut },
      },
    },
    async (req) => brandDomains.verify(req.ctx, req.params.brandId, req.params.domainId),
  );
}
