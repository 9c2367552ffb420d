import t from 'tap';
import { client, testApp } from '../helpers/app.js';

/**
 * The interface's route table (docs' source: the interface specification, section 4), row by
 * row, against /v1/openapi.json: every row must be served and documented. Rows given as a path
 * suffix exist under /v1/brands/{brandId} and /v1/workspaces/{brandId}; path parameters are
 * compared by position, not by name (the table names some differently).
 */
const INTERFACE_ROUTES = [
  // 4.1 Accounts
  'POST /v1/accounts',
  'GET /v1/accounts/me',
  'GET /v1/accounts/me/usage',
  'GET /v1/accounts/me/members',
  'GET /v1/accounts/me/api-keys',
  'POST /v1/accounts/me/api-keys',
  'PATCH /v1/accounts/me/api-keys/{keyId}/scope',
  'DELETE /v1/accounts/me/api-keys/{keyId}',
  // 4.2 Sign-in, session, organization, profile
  'POST /v1/auth/check-email',
  'POST /v1/auth/checkout',
  'POST /v1/auth/signup',
  'POST /v1/auth/magic-link',
  'POST /v1/auth/verify',
  'GET /v1/auth/session',
  'POST /v1/auth/logout',
  'POST /v1/auth/accept-invite',
  'POST /v1/auth/connect',
  'GET /v1/auth/members',
  'POST /v1/auth/members/invite',
  'POST /v1/auth/members/{memberId}/resend-invite',
  'PATCH /v1/auth/members/{memberId}',
  'DELETE /v1/auth/members/{memberId}',
  'POST /v1/auth/transfer-ownership',
  'GET /v1/auth/members/{memberId}/brands',
  'PUT /v1/auth/members/{memberId}/brands',
  'GET /v1/auth/organizations',
  'POST /v1/auth/switch-organization',
  'GET /v1/auth/organization',
  'PATCH /v1/auth/organization',
  'GET /v1/auth/profile',
  'PATCH /v1/auth/profile',
  'POST /v1/auth/profile/avatar',
  'DELETE /v1/auth/profile/avatar',
  'POST /v1/auth/profile/avatar/upload',
  'POST /v1/auth/profile/avatar/confirm',
  'DELETE /v1/auth/account',
  // 4.3 Billing, plans, subscription
  'GET /v1/auth/plans',
  'GET /v1/auth/coupons',
  'PATCH /v1/auth/coupons/{code}',
  'GET /v1/auth/subscription',
  'GET /v1/auth/usage',
  'POST /v1/auth/subscription/upgrade',
  'POST /v1/auth/subscription/cancel-pending-change',
  'POST /v1/auth/subscription/cancel',
  'POST /v1/auth/subscription/reactivate',
  'POST /v1/auth/subscription/confirm',
  'GET /v1/auth/invoices',
  'GET /v1/auth/subscription/history',
  'GET /v1/auth/payment-methods/client-token',
  'GET /v1/auth/payment-methods',
  'POST /v1/auth/payment-methods/add',
  'POST /v1/auth/payment-methods/{id}/default',
  'DELETE /v1/auth/payment-methods/{id}',
  'GET /v1/billing/config',
  'POST /v1/billing/<billing-provider>-webhooks',
  'POST /v1/webhooks/<identity-provider>',
  // 4.4 Feature requests and mentions (session-token)
  'GET /v1/auth/feature-requests',
  'POST /v1/auth/feature-requests',
  'GET /v1/auth/feature-requests/activity',
  'POST /v1/auth/feature-requests/{id}/vote',
  'DELETE /v1/auth/feature-requests/{id}/vote',
  'GET /v1/auth/mentions/unread',
  'POST /v1/auth/mentions/{id}/ack',
  'POST /v1/auth/mentions/ack-ticket/{ticketId}',
  // 4.5 Audit logs and health
  'GET /v1/brands/{brandId}/logs and /v1/workspaces/{brandId}/logs',
  'GET /v1/brands/{brandId}/tickets/{ticketId}/logs and /v1/workspaces/{brandId}/tickets/{ticketId}/logs',
  'GET /v1/health',
  'GET /v1/health/live',
  'GET /v1/health/ready',
  // 4.6 Brands (api-key)
  'POST /v1/brands',
  'GET /v1/brands',
  'GET /v1/brands/{brandId}',
  'PATCH /v1/brands/{brandId}',
  'DELETE /v1/brands/{brandId}',
  'GET /v1/brands/{brandId}/schema',
  'PUT /v1/brands/{brandId}/schema',
  // 4.7 Statuses (bearer)
  'GET /statuses',
  'POST /statuses',
  'GET /statuses/stats',
  'GET /statuses/{id}',
  'PATCH /statuses/{id}',
  'DELETE /statuses/{id}',
  'POST /statuses/reorder',
  // 4.8 Tickets (api-key)
  'POST /tickets',
  'GET /tickets',
  'GET /tickets/{ticketId}',
  'PATCH /tickets/{ticketId}',
  'DELETE /tickets/{ticketId}',
  'POST /tickets/{ticketId}/spam',
  'POST /tickets/{ticketId}/merge',
  'GET /tickets/{ticketId}/watchers',
  'POST /tickets/{ticketId}/watchers',
  'DELETE /tickets/{ticketId}/watchers/{memberId}',
  'PATCH /tickets/{ticketId}/watchers/{memberId}',
  'POST /tickets/bulk',
  'GET /blocked-sources',
  'POST /blocked-sources',
  'DELETE /blocked-sources/{sourceId}',
  // 4.9 Cross-brand dashboard (session)
  'GET /v1/tickets',
  'GET /v1/tickets/stats',
  'GET /v1/tickets/trends',
  'GET /v1/tickets/team-metrics',
  // 4.10 Contacts (api-key)
  'POST /contacts',
  'GET /contacts',
  'GET /contacts/search',
  'GET /contacts/{contactId}',
  'PATCH /contacts/{contactId}',
  'DELETE /contacts/{contactId}',
  // 4.11 Portal and other
  'GET /v1/portal/tickets',
];

const { app } = await testApp(t);

const BRAND_PREFIXES = ['/v1/brands/{brandId}', '/v1/workspaces/{brandId}'];
/** The paths a row stands for: both spellings of a brand route; the providers' notification routes as ticketd names them. */
function pathsOf(path: string): string[] {
  if (path.includes(' and ')) return path.split(' and ');
  if (!path.startsWith('/v1/')) return BRAND_PREFIXES.map((prefix) => `${prefix}${path}`);
  return [path.replace('<billing-provider>', 'stripe').replace('<identity-provider>', '{provider}')];
}
const shape = (path: string) => path.replace(/\{[^}]+\}/g, '{}');

t.test("every route of the interface's table is served and in the OpenAPI document", async (t) => {
  t.equal(INTERFACE_ROUTES.length, 109, 'the whole table: 109 rows');
  const doc = (await client(app)('GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
  const documented = new Set(Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${shape(path)}`)));
  const missing: string[] = [];
  let served = 0;
  for (const row of INTERFACE_ROUTES) {
    const [method, ...rest] = row.split(' ');
    const paths = pathsOf(rest.join(' '));
    if (paths.every((path) => documented.has(`${method} ${shape(path)}`))) served++;
    else missing.push(row);
  }
  t.same(missing, [], 'none missing');
  t.equal(served, 109, `${served} of 109 routes in /v1/openapi.json`);
});
