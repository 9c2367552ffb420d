import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import * as members from '../../server/domains/members/service.js';
import { client, servicesOf, signup, testApp, type Reply } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';
import { buildWorld, fillPath, INBOUND_SECRET, MARKER, pathValues, routeKey, type Payload } from '../helpers/world.js';

/**
 * Tenant isolation on every route the app registers (its route catalog, so a route added later is
 * swept too): with the ids of one account's objects in the path, another account, the other mode
 * of the same account and a key of the same account limited to another brand, and the sessions of
 * another account's owner and of a member assigned to another brand, must get 404 (a route of the
 * account itself may answer 403 to the limited key or member), change nothing, and read nothing
 * of it. A route whose path parameter the world cannot fill, or a write route without a
 * request that would succeed (so the 404 comes from the scope check, not from validation), fails
 * the sweep. On a brand's routes the brand is checked before the body or query is read, so the
 * same callers with an empty body, a body of the wrong types or a query the route refuses get
 * the brand's 404 too.
 */

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_INBOUND_SECRET: INBOUND_SECRET });
const world = await buildWorld(app, servicesOf(db));
const { owner, stranger } = world;

/** A dashboard session of `email`, through a printed sign-in link (no mail needed). */
const signedIn = async (accountId: string, email: string) => client(app, await sessionToken(app, servicesOf(db), accountId, email));

/** The owner of a new organization of its own, signed in: what deleting an account may delete. */
async function throwawayOwner(): Promise<ReturnType<typeof client>> {
  const email = `throwaway-${Math.random().toString(36).slice(2)}@example.com`;
  return signedIn((await signup(app, email)).accountId, email);
}

/** A caller with a session; logging out spends a session of its own and deleting the account an organization of its own, so the sweep goes on signed in. */
async function sessionOf(accountId: string, email: string): Promise<ReturnType<typeof client>> {
  const session = await signedIn(accountId, email);
  return async (method, url, ...rest) => {
    if (url.startsWith('/v1/auth/logout')) return (await signedIn(accountId, email))(method, url, ...rest);
    if (method === 'DELETE' && url.startsWith('/v1/auth/account')) return (await throwawayOwner())(method, url, ...rest);
    return session(method, url, ...rest);
  };
}
const strangerEmail = ((await stranger.live('GET', '/v1/accounts/me/members')).body.data as { email: string }[])[0]!.email;
const sideMember = await members.add(tenantCtx(systemCtx(servicesOf(db)), owner.accountId, true), {
  email: 'side-desk@example.com',
  role: 'member',
  brandIds: [world.sideBrand.id],
});

interface Caller {
  label: string;
  kind: 'api-key' | 'session' | 'portal';
  /** Limited to some brands: account routes may answer 403 instead of 404. */
  limited: boolean;
  call: (method: string, url: string, body?: unknown, headers?: Record<string, string>) => Promise<Reply>;
  /** A brand inside the caller's own scope. */
  ownBrand: string;
  /** What must never appear in an answer to this caller. */
  secrets: string[];
  /** A member of the owner's own account: the account-wide board is theirs too. */
  sameAccount?: boolean;
}
const privateToAll = [MARKER, ...world.privateIds];
/** Customers in the portal: another account's, and another customer of the owner's own brand (who sees its name and id, and nothing else). */
const portalOf = async (call: typeof owner.live, base: string, email: string) => client(app, (await call('POST', `${base}/portal/token`, { email })).body.token as string);
const strangerCustomer = await portalOf(stranger.live, stranger.base, 'someone@stranger.example');
const neighbour = await portalOf(owner.live, owner.base, 'neighbour@example.net');
const strangerSecrets = [...privateToAll, ...world.accountWideIds, owner.accountId, owner.ownerId, world.params.memberId!];
const callers: Caller[] = [
  { label: 'another account', kind: 'api-key', limited: false, call: stranger.live, ownBrand: stranger.brand.id, secrets: strangerSecrets },
  { label: 'the other mode', kind: 'api-key', limited: false, call: owner.test, ownBrand: world.testBrand.id, secrets: privateToAll },
  { label: 'a key limited to another brand', kind: 'api-key', limited: true, call: world.scoped, ownBrand: world.sideBrand.id, secrets: privateToAll },
  {
    label: "another account's owner, signed in",
    kind: 'session',
    limited: false,
    call: await sessionOf(stranger.accountId, strangerEmail),
    ownBrand: stranger.brand.id,
    secrets: strangerSecrets,
  },
  {
    label: 'a member signed in, assigned to another brand',
    kind: 'session',
    limited: true,
    call: await sessionOf(owner.accountId, sideMember.email),
    ownBrand: world.sideBrand.id,
    secrets: privateToAll,
    sameAccount: true,
  },
  { label: "another account's customer, in the portal", kind: 'portal', limited: true, call: strangerCustomer, ownBrand: stranger.brand.id, secrets: strangerSecrets },
  {
    label: 'another customer of the same brand, in the portal',
    kind: 'portal',
    limited: true,
    call: neighbour,
    ownBrand: owner.brand.id,
    secrets: [...world.privateIds.filter((id) => id !== owner.brand.id), 'peter@initech.example', `${MARKER} ticket`, `${MARKER} comment`, world.portalToken],
  },
];

/** A grant is the credential of the token routes: the owner's live grant, claimed for the test mode (its signature no longer matches). */
const otherModeToken = (token: string) => token.replace(/^(v1\.[^.]+\.[^.]+\.)l\./, '$1t.');

const routes = [...new Map(app.routeCatalog.map((r) => [`${r.method} ${r.url}`, r])).values()];
const BRAND_PATH = /^\/v1\/(brands|workspaces)\/:brandId(\/|$)/;
/** The path parameters that name an object (entityType names a kind; `*` is a plugin's wildcard). */
const idsIn = (url: string) => [...url.matchAll(/:(\w+)/g)].map((m) => m[1]!).filter((p) => p !== 'entityType');

/** Path values for one route: the owner's ids, the brand spelled as the path family spells it. */
function valuesFor(key: string, url: string, brandId: string): Record<string, string> {
  const values = pathValues(world, key, url, brandId);
  // A wildcard (CORS preflight, the docs' static files) gets a brand path of the owner.
  return { ...values, token: otherModeToken(values.token!), '*': `${url === '*' ? '/' : ''}v1/brands/${brandId}` };
}

t.test('the catalog holds every route, and the world can call each', async (t) => {
  t.ok(routes.length > 200, `${routes.length} routes in the catalog`);
  for (const r of routes) {
    const key = routeKey(r.method, r.url);
    t.doesNotThrow(() => fillPath(r.url, valuesFor(key, r.url, world.params.brandId!)), `${key}: every path parameter has a value`);
    if (!['GET', 'HEAD', 'OPTIONS'].includes(r.method)) t.ok(key in world.requests, `${key}: has a request in the world's table`);
  }
});

function leaked(res: Reply, secrets: string[], sent: string): string[] {
  // Lower-cased once, not once per secret: the sweep reads tens of thousands of responses.
  const text = (typeof res.body === 'string' ? res.body : JSON.stringify(res.body ?? '')).toLowerCase();
  return secrets.filter((s) => !sent.includes(s) && text.includes(s.toLowerCase()));
}

/**
 * What a brand route is refused with before its body or query is read: nothing, the valid body's
 * fields with the wrong types (or a field it does not take), and for reads a query it would refuse.
 */
function invalidInputs(method: string, valid: unknown): [string, unknown, string][] {
  if (method === 'GET' || method === 'HEAD') return [['an invalid query', undefined, '?limit=-1&sort=nope&cursor=%25']];
  const fields = valid && typeof valid === 'object' && !Array.isArray(valid) ? Object.entries(valid) : [];
  const wrong = fields.length ? Object.fromEntries(fields.map(([k, v]) => [k, typeof v === 'string' ? 12345 : `not a ${typeof v}`])) : { unexpected: [1] };
  return [
    ['an empty body', {}, ''],
    ['a body of the wrong types', wrong, ''],
  ];
}

let requests = 0;
for (const r of routes) {
  const key = routeKey(r.method, r.url);
  const params = idsIn(r.url);
  const underBrand = BRAND_PATH.test(r.url);
  const aimsAtOwner = params.length > 0;
  const payload: Payload = world.requests[key] ?? {};
  const query = world.queries[key] ?? world.queries[key.replace(/^HEAD /, 'GET ')] ?? '';
  const bodyText = typeof payload.body === 'string' ? payload.body : JSON.stringify(payload.body ?? '');

  t.test(`${key}${r.url.startsWith('/v1/workspaces') ? ' (workspaces)' : ''}: nothing of another tenant is reachable`, async (t) => {
    const ownersUrl = fillPath(r.url, valuesFor(key, r.url, world.params.brandId!));
    for (const caller of callers) {
      const ownAccountsBoard = caller.sameAccount === true && world.accountWideRoutes.includes(key);
      const attempts: [string, string, boolean, boolean][] = [[`${caller.label}, the owner's ids`, ownersUrl, aimsAtOwner && !ownAccountsBoard, false]];
      // In its own brand, the caller still cannot reach the owner's ids, in the path or in the body.
      if (underBrand && (params.length > 1 || world.privateIds.some((id) => bodyText.includes(id)))) {
        attempts.push([`${caller.label}, its own brand with the owner's ids`, fillPath(r.url, valuesFor(key, r.url, caller.ownBrand)), params.length > 1, true]);
      }
      for (const [label, url, mustBe404, inOwnBrand] of attempts) {
        const headers = { ...payload.headers };
        if (headers.authorization) delete headers.authorization; // the caller's own credential, not the inbound secret
        const res = await caller.call(r.method, `${url}${query}`, payload.body, headers);
        requests++;
        const what = `${label}: ${res.status} ${JSON.stringify(res.body)?.slice(0, 300)}`;
        t.ok(res.status < 500, `${label}: no 5xx`, { got: what });
        t.ok(res.headers['x-request-id'], `${label}: X-Request-Id`);
        if (mustBe404 && r.auth.includes(caller.kind)) {
          const accountScope = !underBrand && caller.limited && res.status === 403 && res.body?.code === 'insufficient_scope';
          // Off a brand's routes, and on a brand the member may see, a member's role (or being an instance administrator) is checked before any id is looked at: the 403 tells nothing of the target.
          const belowRole =
            (!underBrand || inOwnBrand) && caller.kind === 'session' && res.status === 403 && ['insufficient_role', 'instance_admin_required'].includes(res.body?.code);
          t.ok(
            res.status === 404 || accountScope || belowRole,
            `${label}: 404${underBrand && !inOwnBrand ? '' : ' (or 403 insufficient_scope for a limited caller, insufficient_role for a member)'}`,
            {
              got: what,
            },
          );
        } else if (mustBe404) {
          t.ok(res.status >= 400 && res.status < 500, `${label}: refused`, { got: what });
        }
        if (res.status >= 400 && r.method !== 'HEAD') {
          t.equal(res.body?.statusCode, res.status, `${label}: the error shape`);
          t.equal(res.body?.requestId, res.headers['x-request-id'], `${label}: the error names its request id`);
        }
        if (r.method !== 'HEAD') t.same(leaked(res, caller.secrets, `${url}${bodyText}`), [], `${label}: nothing of the owner in the answer`, { got: what });
      }
      // The brand is checked before the body or query is read: whatever they hold, an out-of-scope caller gets the brand's 404.
      if (!underBrand || !r.auth.includes(caller.kind)) continue;
      for (const [what, body, badQuery] of invalidInputs(r.method, payload.body)) {
        const res = await caller.call(r.method, `${ownersUrl}${badQuery}`, body);
        requests++;
        const got = `${res.status} ${JSON.stringify(res.body)?.slice(0, 300)}`;
        t.ok(res.status === 404 && (r.method === 'HEAD' || res.body?.code === 'not_found'), `${key}: ${caller.label}, ${what}: 404 not_found`, { got });
      }
    }
  });
}

t.test('the cross-brand routes: a brand of the owner named in brandIds or workspaceIds is a 404, and nothing of it is read', async (t) => {
  const brandId = world.params.brandId!;
  for (const route of ['/v1/tickets', '/v1/tickets/stats', '/v1/tickets/trends', '/v1/tickets/team-metrics']) {
    for (const caller of callers) {
      for (const query of [`?brandIds=${brandId}`, `?workspaceIds=${brandId.replace(/^br_/, 'ws_')}`, `?brandIds=${caller.ownBrand},${brandId}`, '']) {
        const res = await caller.call('GET', `${route}${query}`);
        requests++;
        const label = `${caller.label}: GET ${route}${query ? ' naming the owner' : ''}`;
        t.equal(res.status, caller.kind === 'portal' ? 401 : query ? 404 : 200, label);
        t.same(leaked(res, caller.secrets, `${route}${query}`), [], `${label}: nothing of the owner in the answer`);
      }
    }
  }
});

t.test('routes that take ids in the body act on nothing of another account', async (t) => {
  const { base } = stranger;
  const res = await stranger.live('POST', `${base}/tickets/bulk`, { action: 'delete', ticketIds: [world.ticketId, world.otherTicketId] });
  t.equal(res.status, 200);
  t.match(res.body, { success: false, count: 0, failed: 2 });
  const urls = await stranger.live('POST', `${base}/attachments/urls`, { ids: [world.attachmentId] });
  t.equal(urls.status, 200);
  t.same(urls.body, { [world.attachmentId]: null }, "no download URL for another account's attachment");
});

t.test("after all of that, the owner's data is untouched", async (t) => {
  const { live, base } = owner;
  const p = world.params;
  const got = await live('GET', `${base}/tickets/${p.ticketId}`);
  t.match(got.body, { title: `${MARKER} ticket`, status: 'open', isSpam: false, deletedAt: null, mergedIntoId: null, commentCount: 1 });
  t.equal((await live('GET', `${base}/tickets/${world.otherTicketId}`)).body.mergedIntoId, null);
  t.equal((await live('GET', `${base}/comments/${p.commentId}`)).body.body, `${MARKER} comment`);
  t.equal((await live('GET', `${base}/categories/${p.categoryId}`)).body.name, `${MARKER} billing`);
  t.equal((await live('GET', `${base}/tags/${world.tagIds[1]}`)).status, 200, 'the tag was not merged away');
  t.equal((await live('GET', `${base}/contacts/${p.contactId}`)).body.name, `${MARKER} Peter`);
  t.equal((await live('GET', `${base}/companies/${p.companyId}`)).body.name, `${MARKER} Initech`);
  t.equal((await live('GET', `${base}/statuses/${p.statusId}`)).body.name, `${MARKER} waiting`);
  t.equal((await live('GET', `${base}/tickets/${p.ticketId}/watchers`)).body.length, 1);
  t.equal((await live('GET', `${base}/blocked-sources`)).body.length, 1);
  t.equal((await live('GET', `${base}/fields/ticket`)).body[0].label, `${MARKER} plan`);
  t.equal((await live('GET', base)).body.name, `${MARKER} brand`);
  t.match((await live('GET', '/v1/accounts/me')).body, { id: owner.accountId, name: 'Test Owner' }, 'the account is there, its name unchanged');
  t.equal((await live('GET', `${base}/tickets/${p.ticketId}/attachments`)).body.length, 2, 'the uploaded and the declared attachment');
  t.match((await live('GET', `${base}/webhooks/${p.webhookId}`)).body, { enabled: true });
  const key = ((await live('GET', '/v1/accounts/me/api-keys')).body as { id: string; allBrands: boolean; expiresAt: string | null }[]).find((k) => k.id === p.keyId);
  t.match(key, { allBrands: true, expiresAt: null }, 'the key was neither narrowed, widened, rotated nor revoked');
});

t.test('figures', async (t) => {
  t.comment(`isolation sweep: ${routes.length} routes, ${requests} requests`);
  t.pass();
});
