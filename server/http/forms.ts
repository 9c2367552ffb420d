import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import { CreateFormBody, FormOut, FormParams, UpdateFormBody, type CreateFormInput, type UpdateFormInput } from '../domains/forms/schemas.js';
import * as forms from '../domains/forms/service.js';

type BrandRoute<B = undefined> = { Params: { brandId: string }; Body: B };
type FormRoute<B = undefined> = { Params: { brandId: string; formId: string }; Body: B };

/** Mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. The public submission route is in public-routes.ts. */
export async function formRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Web forms'];
  const read = { auth: ['api-key', 'session'], permission: 'forms:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'forms:write' } as const;

  app.get<BrandRoute>(
    '/forms',
    { config: read, schema: { tags, summary: 'List the web forms of a brand (bare array, oldest first)', params: BrandParams, response: { 200: Type.Array(FormOut) } } },
    async (req) => forms.list(req.ctx, req.params.brandId),
  );

  app.post<BrandRoute<CreateFormInput>>(
    '/forms',
    {
      config: write,
      schema: {
        tags,
        summary: 'Create a web form; its token makes the public URL POST /v1/forms/{token} that the embed code posts to',
        params: BrandParams,
        body: CreateFormBody,
        response: { 201: FormOut },
      },
    },
    async (req, reply) => reply.status(201).send(await forms.create(req.ctx, req.params.brandId, req.body)),
  );

  app.get<FormRoute>('/forms/:formId', { config: read, schema: { tags, summary: 'Get a web form', params: FormParams, response: { 200: FormOut } } }, async (req) =>
    forms.get(req.ctx, req.params.brandId, req.params.formId),
  );

  app.patch<FormRoute<UpdateFormInput>>(
    '/forms/:formId',
    {
      config: write,
      schema: {
        tags,
        summary: 'Change a web form: name, successUrl, errorUrl, thankYouMessage, fieldMapping, enabled, honeypotField, allowedOrigins',
        params: FormParams,
        body: UpdateFormBody,
        response: { 200: FormOut },
      },
    },
    async (req) => forms.update(req.ctx, req.params.brandId, req.params.formId, req.body),
  );

  app.delete<FormRoute>(
    '/forms/:formId',
    { config: write, schema: { tags, summary: 'Delete a web form (its URL answers 404 from now on); returns it', params: FormParams, response: { 200: FormOut } } },
    async (req) => forms.remove(req.ctx, req.params.brandId, req.params.formId),
  );

  app.post<FormRoute>(
    '/forms/:formId/regenerate',
    {
      config: write,
      schema: { tags, summary: 'Give the form a new token: the old URL answers 404 at once; returns the form', params: FormParams, response: { 200: FormOut } },
    },
    async (req) => forms.regenerate(req.ctx, req.params.brandId, req.params.formId),
  );
}
