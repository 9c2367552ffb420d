import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import {
  AllFieldsOut,
  CreateFieldBody,
  EntityParams,
  FieldOut,
  FieldParams,
  PutTicketSchemaBody,
  ReorderFieldsBody,
  TicketSchemaOut,
  UpdateFieldBody,
  type CreateFieldInput,
  type PutTicketSchemaInput,
  type ReorderFieldsInput,
  type UpdateFieldInput,
} from '../domains/fields/schemas.js';
import * as fields from '../domains/fields/service.js';
import { putTicketSchema } from '../flows/ticket-schema.js';

type InBrand<B = undefined> = { Params: { brandId: string }; Body: B };
type InEntity<B = undefined> = { Params: { brandId: string; entityType: string }; Body: B };
type InField<B = undefined> = { Params: { brandId: string; entityType: string; key: string }; Body: B };

/** Custom field definitions, mounted under /v1/brands/:brandId and /v1/workspaces/:brandId. */
export async function fieldRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Fields'];
  const read = { auth: ['api-key', 'session'], permission: 'fields:read' } as const;
  const write = { auth: ['api-key', 'session'], permission: 'fields:write' } as const;

  app.get<InBrand>(
    '/fields',
    {
      config: read,
      schema: { tags, summary: 'Field definitions of every entity type (contact repeats customer)', params: BrandParams, response: { 200: AllFieldsOut } },
    },
    async (req) => fields.listAll(req.ctx, req.params.brandId),
  );

  app.get<InEntity>(
    '/fields/:entityType',
    {
      config: read,
      schema: { tags, summary: 'Field definitions of one entity type, in display order', params: EntityParams, response: { 200: Type.Array(FieldOut) } },
    },
    async (req) => fields.list(req.ctx, req.params.brandId, req.params.entityType),
  );

  app.post<InEntity<CreateFieldInput>>(
    '/fields/:entityType',
    {
      config: write,
      schema: { tags, summary: 'Create a field definition (409 field_key_taken when the key exists)', params: EntityParams, body: CreateFieldBody, response: { 201: FieldOut } },
    },
    async (req, reply) => reply.status(201).send(await fields.create(req.ctx, req.params.brandId, req.params.entityType, req.body)),
  );

  app.post<InEntity<ReorderFieldsInput>>(
    '/fields/:entityType/reorder',
    {
      config: write,
      schema: {
        tags,
        summary: 'Reorder field definitions: keys lists every field of the entity type once',
        params: EntityParams,
        body: ReorderFieldsBody,
        response: { 200: Type.Array(FieldOut) },
      },
    },
    async (req) => fields.reorder(req.ctx, req.params.brandId, req.params.entityType, req.body),
  );

  app.patch<InField<UpdateFieldInput>>(
    '/fields/:entityType/:key',
    {
      config: write,
      schema: { tags, summary: 'Update a field definition', params: FieldParams, body: UpdateFieldBody, response: { 200: FieldOut } },
    },
    async (req) => fields.update(req.ctx, req.params.brandId, req.params.entityType, req.params.key, req.body),
  );

  app.delete<InField>(
    '/fields/:entityType/:key',
    {
      config: write,
      schema: { tags, summary: 'Delete a field definition; returns it', params: FieldParams, response: { 200: FieldOut } },
    },
    async (req) => fields.remove(req.ctx, req.params.brandId, req.params.entityType, req.params.key),
  );
}

/** The brand's ticket schema: GET and PUT /schema. */
export async function ticketSchemaRoutes(app: FastifyInstance): Promise<void> {
  const tags = ['Ticket schema'];

  app.get<InBrand>(
    '/schema',
    {
      config: { auth: ['api-key', 'session'], permission: 'schema:read' },
      schema: { tags, summary: 'The ticket schema: hand-written, generated from ticket fields, and the effective one', params: BrandParams, response: { 200: TicketSchemaOut } },
    },
    async (req) => fields.getTicketSchema(req.ctx, req.params.brandId),
  );

  app.put<InBrand<PutTicketSchemaInput>>(
    '/schema',
    {
      config: { auth: ['api-key', 'session'], permission: 'schema:write' },
      schema: {
        tags,
        summary: 'Set the hand-written ticket schema ({ schema }, a bare JSON Schema, or null to clear); 400 invalid_ticket_schema when it is not a JSON Schema',
        params: BrandParams,
        body: PutTicketSchemaBody,
        response: { 200: TicketSchemaOut },
      },
    },
    async (req) => putTicketSchema(req.ctx, req.params.brandId, req.body),
  );

  app.delete<InBrand>(
    '/schema',
    {
      config: { auth: ['api-key', 'session'], permission: 'schema:write' },
      schema: { tags, summary: 'Clear the hand-written ticket schema (the field definitions still apply)', params: BrandParams, response: { 200: TicketSchemaOut } },
    },
    async (req) => putTicketSchema(req.ctx, req.params.brandId, { schema: null }),
  );
}
