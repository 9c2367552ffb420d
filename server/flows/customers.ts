import type { TenantCtx } from '../core/context.js';
import * as companies from '../domains/companies/service.js';
import type { CompanyView, CreateCompanyInput, UpdateCompanyInput } from '../domains/companies/schemas.js';
import * as contacts from '../domains/contacts/service.js';
import type { ContactView, CreateContactInput, UpdateContactInput } from '../domains/contacts/schemas.js';

/**
 * Contacts and their companies: a contact joins the company of its email domain when it is made,
 * and a company takes in the contacts of its domain that have none. Each domain does its own half;
 * this flow hands each the other's.
 */
const companyLookup: contacts.CompanyLookup = { byId: companies.requireCompanyId, byDomain: companies.idForDomain };

export function createContact(ctx: TenantCtx, brandId: string, input: CreateContactInput): Promise<ContactView> {
  return contacts.create(ctx, brandId, input, companyLookup);
}

export function updateContact(ctx: TenantCtx, brandId: string, contactId: string, input: UpdateContactInput): Promise<ContactView> {
  return contacts.update(ctx, brandId, contactId, input, companyLookup);
}

/** The id of the brand's contact with this email, made (in the company of its domain) if new. */
export function findOrCreateContact(ctx: TenantCtx, brandId: string, email: string, name?: string | null): Promise<{ id: string }> {
  return contacts.findOrCreateByEmail(ctx, companyLookup, brandId, email, name);
}

export function createCompany(ctx: TenantCtx, brandId: string, input: CreateCompanyInput): Promise<CompanyView> {
  return companies.create(ctx, brandId, input, contacts.linkUnlinkedByDomain);
}

export function updateCompany(ctx: TenantCtx, brandId: string, companyId: string, input: UpdateCompanyInput): Promise<CompanyView> {
  return companies.update(ctx, brandId, companyId, input, contacts.linkUnlinkedByDomain);
}
