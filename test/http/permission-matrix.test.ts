import { readFileSync, writeFileSync } from 'node:fs';
import t from 'tap';
import { PERMISSIONS, type PermissionRule } from '../../server/core/auth.js';
import { hasRole, MEMBER_ROLES, systemCtx, tenantCtx, type MemberRole } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { client, servicesOf, testApp, type Reply } from '../helpers/app.js';
import { sessionToken, SIGN_IN_TEST_ENV } from '../helpers/sign-in.js';
import { buildWorld, fillPath, INBOUND_SECRET, pathValues, routeKey } from '../helpers/world.js';

/**
 * The permission matrix, route by route: every route a session may call is tried by an owner, an
 * admin and a member (all three see every brand). A role below the route's permission gets 403
 * `insufficient_role` for the request that would succeed, and nothing changes; a role at or above
 * it gets past the check (a read answers, a write reaches its body parser). docs/permissions.md is
 * the same matrix for readers, and must stay equal to what the code declares
 * (TICKETD_WRITE_PERMISSIONS_DOC=1 rewrites it).
 */

const { app, db } = await testApp(t, { ...SIGN_IN_TEST_ENV, TICKETD_INBOUND_SECRET: INBOUND_SECRET });
const services = servicesOf(db);
const world = await buildWorld(app, services);
const { owner } = world;
const ownerEmail = ((await owner.live('GET', '/v1/accounts/me/members')).body.data as { email: string }[])[0]!.email;
const inAccount = tenantCtx(systemCtx(services), owner.accountId, true);
await members.add(inAccount, { email: 'matrix-admin@example.com', role: 'admin' });
await members.add(inAccount, { email: 'matrix-member@example.com', role: 'member' });

/** Each role's caller; logging out spends a session of its own, so the matrix goes on signed in. */
async function sessionOf(email: string) {
  const session = client(app, await sessionToken(app, services, owner.accountId, email));
  return async (method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<Reply> =>
    (url === '/v1/auth/logout' ? client(app, await sessionToken(app, services, owner.accountId, email)) : session)(method, url, body, headers);
}
const callers: Record<MemberRole, Awaited<ReturnType<typeof sessionOf>>> = {
  owner: await sessionOf(ownerEmail),
  admin: await sessionOf('matrix-admin@example.com'),
  member: await sessionOf('matrix-member@example.com'),
};

const sessionRoutes = app.routeCatalog.filter((r) => r.auth.includes('session') && r.method !== 'OPTIONS');
const ruleOf = (permission: string | null): PermissionRule => PERMISSIONS[permission as keyof typeof PERMISSIONS];
// None of the three is an instance administrator: the installation's routes refuse them all, whatever their role.
const allowed = (role: MemberRole, rule: PermissionRule) => !rule.instanceAdmin && (!rule.minRole || hasRole(role, rule.minRole));
const who = (rule: PermissionRule) => (rule.instanceAdmin ? 'instance administrators' : (rule.minRole ?? 'any member'));
const refusal = (rule: PermissionRule) => (rule.instanceAdmin ? 'instance_admin_required' : 'insufficient_role');

/** What the account looks like to its owner: compared before and after the refused writes. */
async function snapshot() {
  const { live, base } = owner;
  const reads = ['/v1/accounts/me/api-keys', '/v1/accounts/me/members', '/v1/brands', base, `${base}/tickets?limit=100`, `${base}/webhooks`, '/v1/auth/feature-requests?limit=100'];
  const bodies = await Promise.all(reads.map(async (url) => (url.startsWith('/v1/auth/') ? callers.owner('GET', url) : live('GET', url))));
  return bodies.map((b) => b.body);
}
const before = await snapshot();

t.test('every session route declares a permission', async (t) => {
  t.ok(sessionRoutes.length > 100, `${sessionRoutes.length} session routes`);
  for (const r of sessionRoutes) t.ok(r.permission && ruleOf(r.permission), `${r.method} ${r.url}: ${r.permission}`);
});

for (const r of sessionRoutes) {
  const key = routeKey(r.method, r.url);
  const rule = ruleOf(r.permission);
  const url = `${fillPath(r.url, pathValues(world, key, r.url))}${world.queries[key] ?? world.queries[key.replace(/^HEAD /, 'GET ')] ?? ''}`;
  const payload = world.requests[key] ?? {};
  const headers = { ...payload.headers };
  delete headers.authorization;
  const reads = ['GET', 'HEAD'].includes(r.method);

  t.test(`${r.method} ${r.url}: ${r.permission} (${who(rule)})`, async (t) => {
    for (const role of MEMBER_ROLES) {
      const call = callers[role];
      if (!allowed(role, rule)) {
        const res = await call(r.method, url, payload.body, headers);
        t.equal(res.status, 403, `${role}: 403`, { got: res.body });
        if (r.method !== 'HEAD') t.equal(res.body?.code, refusal(rule), `${role}: ${refusal(rule)}`);
      } else if (reads) {
        const res = await call(r.method, url);
        t.ok(res.status < 400, `${role}: answered`, { got: `${res.status} ${JSON.stringify(res.body)?.slice(0, 300)}` });
      } else {
        // A malformed body is refused by the parser, which runs only after the role check has passed.
        const res = await call(r.method, url, '{', { ...headers, 'content-type': 'application/json' });
        t.ok([400, 415].includes(res.status) && res.body?.code !== 'insufficient_role', `${role}: past the role check`, { got: `${res.status} ${JSON.stringify(res.body)}` });
      }
    }
  });
}

t.test('the refused writes changed nothing', async (t) => {
  t.same(await snapshot(), before);
});

/** docs/permissions.md: one row per route (a /v1/workspaces twin is the /v1/brands row). */
function matrixDoc(): string {
  const rows = new Map<string, string>();
  for (const r of sessionRoutes) {
    const key = routeKey(r.method, r.url);
    if (r.method === 'HEAD' || rows.has(key)) continue;
    const rule = ruleOf(r.permission);
    const roles = rule.instanceAdmin ? 'instance administrators only' : MEMBER_ROLES.filter((role) => allowed(role, rule)).join(', ');
    const apiKey = !r.auth.includes('api-key') ? 'no' : rule.accountWide ? 'yes, if it reaches every brand' : 'yes';
    const [method, path] = key.split(' ');
    rows.set(key, `| ${method} | \`${path}\` | \`${r.permission}\` | ${roles} | ${apiKey} |`);
  }
  return [
    '# Permissions of the routes a session may call',
    '',
    'Generated from the code by `test/http/permission-matrix.test.ts`, which also checks each row',
    'against the running app (`TICKETD_WRITE_PERMISSIONS_DOC=1` rewrites this file). A member sees',
    'only the brands assigned to them: any other brand reads as 404 before the role is checked.',
    "Roles rank owner > admin > member; a session below the route's roles gets 403 `insufficient_role`.",
    'Instance administrators are the members whose email the configuration lists in `instanceAdmins`,',
    'whatever their role; anyone else gets 403 `instance_admin_required` on their routes.',
    'A `/v1/workspaces/...` route shares the row of its `/v1/brands/...` twin.',
    "A few fields take more than their route: a brand's `retention`, a ticket's `legalHold` and a",
    "macro's or view's `visibility: brand` take an owner, an admin or an API key; a member who sends",
    'them gets 403 `insufficient_role`.',
    '',
    '| Method | Path | Permission | Roles | API key |',
    '|---|---|---|---|---|',
    ...rows.values(),
    '',
  ].join('\n');
}

t.test('docs/permissions.md is the matrix the code declares', async (t) => {
  const file = new URL('../../../docs/permissions.md', import.meta.url);
  if (process.env.TICKETD_WRITE_PERMISSIONS_DOC === '1') writeFileSync(file, matrixDoc());
  t.equal(readFileSync(file, 'utf8'), matrixDoc());
});
