import t from 'tap';
import { buildApp } from '../../server/app.js';
import { createDb } from '../../server/core/db.js';
import { assertErrorShape, client, signup, testApp, testConfig } from '../helpers/app.js';
import { cuttableProxy } from '../helpers/proxy.js';
import { testNow } from '../helpers/clock.js';

const { app, url } = await testApp(t, { TICKETD_BODY_LIMIT_BYTES: '2048', TICKETD_CORS_ORIGINS: 'https://app.example.com' });
const owner = await signup(app);
const anonymous = client(app);

t.test('every response carries X-Request-Id: a sane incoming one is echoed, others replaced', async (t) => {
  const echoed = await anonymous('GET', '/v1/health/live', undefined, { 'x-request-id': 'client-abc.123' });
  t.equal(echoed.headers['x-request-id'], 'client-abc.123');
  const insane = await anonymous('GET', '/v1/health/live', undefined, { 'x-request-id': 'bad id with spaces <script>' });
  t.match(insane.headers['x-request-id'], /^req_[0-9a-z]{26}$/);
  const missing = await anonymous('GET', '/v1/nowhere');
  t.match(missing.headers['x-request-id'], /^req_/);
  const a = await anonymous('GET', '/v1/health/live');
  const b = await anonymous('GET', '/v1/health/live');
  t.not(a.headers['x-request-id'], b.headers['x-request-id'], 'each request gets its own id');
});

t.test('unknown routes are 404 in the error shape', async (t) => {
  assertErrorShape(t, await anonymous('GET', '/v1/nowhere'), 404, 'route_not_found');
  assertErrorShape(t, await owner.live('DELETE', '/v1/accounts'), 404, 'route_not_found');
});

t.test('malformed JSON is 400 and changes nothing', async (t) => {
  const res = await owner.live('POST', '/v1/brands', '{"name": "Broken",');
  assertErrorShape(t, res, 400, 'invalid_json');
  const brands = await owner.live('GET', '/v1/brands');
  t.same(brands.body, [], 'no brand was created');
});

t.test('bodies over the limit are 413', async (t) => {
  const res = await owner.live('POST', '/v1/brands', { name: 'x'.repeat(5000) });
  assertErrorShape(t, res, 413, 'payload_too_large');
});

t.test('bodies that are not JSON are 415', async (t) => {
  const res = await owner.live('POST', '/v1/brands', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' });
  assertErrorShape(t, res, 415, 'unsupported_media_type');
});

t.test('validation errors list every failing field', async (t) => {
  const res = await owner.live('POST', '/v1/brands', { name: 7, slug: 'Not A Slug', surprise: true });
  assertErrorShape(t, res, 400, 'validation_failed');
  const fields = res.body.errors.map((e: { field: string }) => e.field).sort();
  t.same(fields, ['name', 'slug', 'surprise']);
  for (const e of res.body.errors) t.type(e.message, 'string');
});

t.test('CORS: preflight from an allowed origin names the headers clients send', async (t) => {
  const res = await app.inject({
    method: 'OPTIONS',
    url: '/v1/brands',
    headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-idempotency-key' },
  });
  t.equal(res.statusCode, 204);
  t.equal(res.headers['access-control-allow-origin'], 'https://app.example.com');
  t.match(String(res.headers['access-control-allow-headers']), /X-Idempotency-Key/i);
  t.match(String(res.headers['access-control-allow-methods']), /PATCH/);
  const other = await app.inject({ method: 'OPTIONS', url: '/v1/brands', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } });
  t.not(other.headers['access-control-allow-origin'], 'https://evil.example', 'other origins are not allowed');
});

t.test("/v1/openapi.json holds every route of the app's catalog, with its method", async (t) => {
  const doc = (await anonymous('GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
  const missing: string[] = [];
  let checked = 0;
  for (const r of app.routeCatalog) {
    // Preflights, HEAD twins and the docs' own pages are not API operations.
    if (['HEAD', 'OPTIONS'].includes(r.method) || !r.url.startsWith('/v1/') || r.url === '/v1/openapi.json') continue;
    const path = r.url.replace(/:(\w+)/g, '{$1}');
    checked++;
    if (!doc.paths[path]?.[r.method.toLowerCase()]) missing.push(`${r.method} ${path}`);
  }
  t.ok(checked > 200, `${checked} operations checked`);
  t.same(missing, [], 'none missing');
});

t.test('OpenAPI 3.1 document lists every route, and /docs serves a page', async (t) => {
  const res = await anonymous('GET', '/v1/openapi.json');
  t.equal(res.status, 200);
  t.equal(res.body.openapi, '3.1.0');
  const paths = Object.keys(res.body.paths);
  for (const p of [
    '/v1/accounts',
    '/v1/accounts/me',
    '/v1/accounts/me/usage',
    '/v1/accounts/me/members',
    '/v1/accounts/me/api-keys',
    '/v1/accounts/me/api-keys/{keyId}',
    '/v1/accounts/me/api-keys/{keyId}/scope',
    '/v1/brands',
    '/v1/brands/{brandId}',
    '/v1/workspaces',
    '/v1/workspaces/{brandId}',
    '/v1/health',
    '/v1/health/live',
    '/v1/health/ready',
    '/v1/auth/check-email',
    '/v1/auth/signup',
    '/v1/auth/magic-link',
    '/v1/auth/verify',
    '/v1/auth/session',
    '/v1/auth/logout',
    '/v1/auth/organizations',
    '/v1/auth/organization',
  ]) {
    t.ok(paths.includes(p), `${p} is documented`);
  }
  t.same(res.body.paths['/v1/brands'].get.security, [{ apiKey: [] }, { session: [] }, { sessionCookie: [] }], 'brand routes declare an API key or a session');
  t.same(res.body.paths['/v1/auth/session'].get.security, [{ session: [] }, { sessionCookie: [] }], 'session routes declare the session alone');
  t.notOk(res.body.paths['/v1/auth/verify'].post.security, 'routes without credentials declare none');
  t.ok(res.body.paths['/v1/brands'].post.requestBody, 'request bodies are documented');
  const docs = await app.inject({ method: 'GET', url: '/docs/' });
  t.equal(docs.statusCode, 200);
  t.match(docs.headers['content-type'], /text\/html/);
});

t.test('health: live and ready answer 200 while the database is up', async (t) => {
  t.same((await anonymous('GET', '/v1/health/live')).body, { status: 'ok' });
  t.same((await anonymous('GET', '/v1/health/ready')).body, { status: 'ready' });
  const health = await anonymous('GET', '/v1/health');
  t.equal(health.body.status, 'ok');
  t.equal(health.body.checks.database, 'ok');
});

t.test('ready fails with 503 while the database is unreachable, and recovers by itself', async (t) => {
  const proxy = await cuttableProxy(t, url);
  const db = createDb(proxy.url, { poolMax: 2, poolMin: 0, acquireTimeoutMs: 1500 });
  const config = testConfig({ DATABASE_URL: proxy.url });
  const viaProxy = await buildApp({ clock: testNow, config, db });
  t.teardown(async () => {
    await viaProxy.close();
    await db.destroy();
  });
  const call = client(viaProxy);

  t.equal((await call('GET', '/v1/health/ready')).status, 200, 'ready through the proxy');
  proxy.cut();
  const down = await call('GET', '/v1/health/ready');
  assertErrorShape(t, down, 503, 'database_unavailable');
  t.equal((await call('GET', '/v1/health/live')).status, 200, 'liveness does not depend on the database');
  t.equal((await call('GET', '/v1/health')).body.checks.database, 'unavailable');
  proxy.restore();
  let recovered = 0;
  for (let i = 0; i < 20 && recovered !== 200; i++) recovered = (await call('GET', '/v1/health/ready')).status;
  t.equal(recovered, 200, 'ready again without a restart');
});

t.test('a route that does not declare auth and permission refuses to boot', async (t) => {
  const { requireAuthDeclaration } = await import('../../server/core/auth.js');
  t.throws(() => requireAuthDeclaration({ method: 'GET', url: '/v1/x', config: {} } as never), /must declare config.auth/);
  t.throws(() => requireAuthDeclaration({ method: 'GET', url: '/v1/x', config: { auth: 'api-key', permission: 'nope' } } as never), /known config.permission/);
  t.doesNotThrow(() => requireAuthDeclaration({ method: 'GET', url: '/v1/x', config: { auth: 'none', permission: 'health:read' } } as never));
});

t.test("route schemas compile on a route's first request, and every one of them compiles", async (t) => {
  const { LazySchemas } = await import('../../server/core/http.js');
  const lazy = new LazySchemas();
  let compiled = 0;
  const double = lazy.defer(() => {
    compiled += 1;
    return (n: number) => n * 2;
  });
  t.equal(compiled, 0, 'nothing compiled when the function is made');
  t.equal(double.get()(2), 4);
  t.equal(double.get()(3), 6);
  t.equal(compiled, 1, 'compiled once, on first use');

  // A broken validator or serializer would otherwise surface only on its route's first request.
  t.doesNotThrow(() => app.compileAllSchemas(), "every route's validators and serializers compile");
  const res = await anonymous('GET', '/v1/brands');
  assertErrorShape(t, res, 401, 'missing_credentials');
});
