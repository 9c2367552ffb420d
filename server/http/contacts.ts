import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BrandParams } from '../core/schemas.js';
import {
  ContactListQuery,
  ContactOut,
  ContactPage,
  ContactParams,
  ContactSearchQuery,
  CreateContactBody,
  UpdateContactBody,
  type ContactListInput,
  type CreateContactInput,
  type UpdateContactInput,
} from '../domains/contacts/schemas.js';
import * as contacts from '../domains/contacts/service.js';
import { createContact, updateContact } from '../flows/customers.js';

type Route<B = undefined, Q = undefined> = { Params: { brandId: string; contactId: string }; Body: B; Querystring: Q };

/** One implementation, mounted at /contacts (interface spec) and /customers (what clients call). */
function contactRoutesAt(path: '/contacts' | '/customers') {
  const tags = [path === '/contacts' ? 'Contacts' : 'Customers (alias of contacts)'];
  return async function routes(app: FastifyInstance): Promise<void> {
    app.post<{ Params: { brandId: string }; Body: CreateContactInput }>(
      path,
      {
        config: { auth: ['api-key', 'session'], permission: 'contacts:write' },
        schema: { tags, summary: 'Create a contact', params: BrandParams, body: CreateContactBody, response: { 201: ContactOut } },
      },
      async (req, reply) => reply.status(201).send(await createContact(req.ctx, req.params.brandId, req.body)),
    );

    app.get<{ Params: { brandId: string }; Querystring: ContactListInput }>(
      path,
      {
        config: { auth: ['api-key', 'session'], permission: 'contacts:read' },
        schema: { tags, summary: 'List contacts (cursor pages)', params: BrandParams, querystring: ContactListQuery, response: { 200: ContactPage } },
      },
      async (req) => contacts.list(req.ctx, req.params.brandId, req.query),
    );

    // Before /:contactId, so "search" is never read as an id.
    app.get<{ Params: { brandId: string }; Querystring: { q: string } }>(
      `${path}/search`,
      {
        config: { auth: ['api-key', 'session'], permission: 'contacts:read' },
        schema: {
          tags,
          summary: 'Autocomplete: up to 10 contacts whose email or name starts with q (bare array)',
          params: BrandParams,
          querystring: ContactSearchQuery,
          response: { 200: Type.Array(ContactOut) },
        },
      },
      async (req) => contacts.search(req.ctx, req.params.brandId, req.query.q),
    );

    app.get<Route>(
      `${path}/:contactId`,
      {
        config: { auth: ['api-key', 'session'], permission: 'contacts:read' },
        schema: { tags, summary: 'Get a contact', params: ContactParams, response: { 200: ContactOut } },
      },
      async (req) => contacts.get(req.ctx, req.params.brandId, req.params.contactId),
    );

    app.patch<Route<UpdateContactInput>>(
      `${path}/:contactId`,
      {
        config: { auth: ['api-key', 'session'], permission: 'contacts:write' },
        schema: { tags, summary: 'Update a contact (companyId: null unlinks)', params: ContactParams, body: UpdateContactBody, response: { 200: ContactOut } },
      },
      async (req) => updateContact(req.ctx, req.params.brandId, req.params.contactId, req.body),
    );

    app.delete<Route>(
      `${path}/:contactId`,
      {
        config: { auth: ['api-key', 'session'], permission: 'contacts:write' },
        schema: { tags, summary: 'Delete a contact; returns the deleted contact', params: ContactParams, response: { 200: ContactOut } },
      },
      async (req) => contacts.remove(req.ctx, req.params.brandId, req.params.contactId),
    );
  };
}

export const contactRoutes = contactRoutesAt('/contacts');
export const customerRoutes = contactRoutesAt('/customers');
