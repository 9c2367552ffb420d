import type { TenantCtx } from './context.js';
import type { SqlFragment } from './db.js';
import { tenantIs, tenantScope } from './model.js';
import { emailDomain } from './text.js';

/**
 * Whether an address is blocked in a brand, as SQL over the blocked_sources table. Contacts (their
 * isBlocked), ticket create (is_spam) and inbound mail all ask it inside their own statements, so
 * it sits in the kernel beside the brand lookup; the blocked-sources domain owns the rows.
 * An entry blocks an address itself, or a domain and every subdomain of it (`example.com` blocks
 * `a@example.com` and `a@mail.example.com`, not `a@notexample.com`).
 */

/** The domains an entry may block an address by: its domain and each parent domain with a dot. */
export function blockedDomainsOf(address: string): string[] {
  const labels = emailDomain(address).split('.');
  return labels.map((_, i) => labels.slice(i).join('.')).filter((d) => d.includes('.'));
}

/**
 * True when the address in `emailColumn` (a normalized email column of `table`, whose rows carry
 * the tenant and brand_id) is blocked. For list queries: blocked state is computed in the same
 * statement, not per row. The tenant is the row's, or the bound one (BOUND_TENANT) of a statement
 * whose own tenant is bound.
 */
export function blockedCondition(table: string, emailColumn: string, tenant = { account: `${table}.account_id`, livemode: `${table}.livemode` }): string {
  const domain = `substring(${table}.${emailColumn} from '@([^@]*)$')`;
  return `exists (select 1 from blocked_sources bs where ${tenantIs('bs', tenant)} and bs.brand_id = ${table}.brand_id
    and ((bs.type = 'email' and bs.value = ${table}.${emailColumn})
      or (bs.type = 'domain' and (bs.value = ${domain} or right(${domain}, length(bs.value) + 1) = '.' || bs.value))))`;
}

/**
 * The blocked test as one SQL boolean over SQL expressions for the brand id (one the caller
 * checked), the normalized address and its blockedDomainsOf as a text[], for a statement that
 * decides inside the database (ticket create sets is_spam with it). The bindings are the scope.
 */
export function isBlockedSql(ctx: TenantCtx, brandIdSql: string, addressSql: string, domainsSql: string): SqlFragment {
  return { sql: blockedTest('?', brandIdSql, addressSql, domainsSql), bindings: [tenantScope(ctx, 'bs')] };
}

/** isBlockedSql's text alone, for a statement whose tenant is given as SQL (its named placeholders: tenantIs). */
export function isBlockedText(tenant: { account: string; livemode: string }, brandIdSql: string, addressSql: string, domainsSql: string): string {
  return blockedTest(tenantIs('bs', tenant), brandIdSql, addressSql, domainsSql);
}

function blockedTest(scope: string, brandIdSql: string, addressSql: string, domainsSql: string): string {
  return `exists (select 1 from blocked_sources bs where ${scope} and bs.brand_id = ${brandIdSql}
      and ((bs.type = 'email' and bs.value = ${addressSql}) or (bs.type = 'domain' and bs.value = any(${domainsSql}))))`;
}
