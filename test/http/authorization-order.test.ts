import t from 'tap';
import { once } from 'node:events';
import { assertBrandVisible, startBrandCache } from '../../server/core/brand.js';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { credentialCacheOf } from '../../server/core/credential-cache.js';
import { createDb } from '../../server/core/db.js';
import { createServices } from '../../server/compose.js';
import { assertErrorShape, assertNotFound, client, makeBrand, mustCreate, servicesOf, signup, statementsDuring, testApp, type Reply } from '../helpers/app.js';
import { teamOfThree } from '../helpers/sign-in.js';
import { testNow } from '../helpers/clock.js';

/**
 * On a brand's routes the caller and the brand are checked before the body is read: 401 (no or
 * bad credentials), then 403 for rules that are not about a brand, then 404 for a brand the caller
 * may not see, and only then 400 for the body. Whatever an out-of-scope request carries (nothing,
 * the wrong types, malformed JSON, a type we do not take, too many bytes), it reads as 404.
 */

const first = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000', TICKETD_BODY_LIMIT_BYTES: '65536' });
const { app, db } = first;
const services = servicesOf(db);

const owner = await signup(app);
const [mine, other] = [await makeBrand(owner.live, 'Mine'), await makeBrand(owner.live, 'Other')];
const limited = client(app, (await mustCreate(owner.live, '/v1/accounts/me/api-keys', { name: 'Mine only', brandIds: [mine.id] })).key);
const stranger = await signup(app);
const otherMode = await makeBrand(owner.test, 'Test mode');

/** Routes where the empty body used to be 400 before the brand was looked at. */
const WRITES = ['tickets', 'statuses', 'forms', 'portal/magic-link', 'portal/token', 'categories', 'webhooks'];
/** Bodies that fail validation, or never parse. */
const BAD_BODIES: [string, unknown, Record<string, string>][] = [
  ['an empty body', {}, {}],
  ['wrong types', { title: 1, name: [], email: false, key: {}, url: 7 }, {}],
  ['malformed JSON', '{"title":', {}],
  ['a content type we do not take', 'title=x', { 'content-type': 'text/csv' }],
  ['too many bytes', JSON.stringify({ title: 'x'.repeat(70_000) }), {}],
];

t.test('a brand outside the caller’s reach is 404 on every write, whatever the body', async (t) => {
  const cases: [string, (m: string, u: string, b?: unknown, h?: Record<string, string>) => Promise<Reply>, string][] = [
    ['a key limited to another brand', limited, `/v1/brands/${other.id}`],
    ['the same, through /v1/workspaces', limited, `/v1/workspaces/${other.id.replace(/^br_/, 'ws_')}`],
    ["another account's key", stranger.live, `/v1/brands/${mine.id}`],
    ["the other mode's key", owner.test, `/v1/brands/${mine.id}`],
    ['a brand of the other mode, with the live key', owner.live, `/v1/brands/${otherMode.id}`],
  ];
  for (const [who, call, base] of cases) {
    for (const route of WRITES) {
      for (const [what, body, headers] of BAD_BODIES) assertNotFound(t, await call('POST', `${base}/${route}`, body, headers), `${who}, POST …/${route} with ${what}`);
    }
  }
});

t.test('within reach, the same bodies get their own errors', async (t) => {
  const base = `/v1/brands/${mine.id}`;
  assertErrorShape(t, await limited('POST', `${base}/tickets`, {}), 400, 'validation_failed');
  assertErrorShape(t, await limited('POST', `${base}/tickets`, '{"title":'), 400, 'invalid_json');
  assertErrorShape(t, await limited('POST', `${base}/tickets`, 'title=x', { 'content-type': 'text/csv' }), 415, 'unsupported_media_type');
  assertErrorShape(t, await limited('POST', `${base}/tickets`, JSON.stringify({ title: 'x'.repeat(70_000) })), 413, 'payload_too_large');
  assertErrorShape(t, await limited('POST', `${base}/forms`, { name: 1 }), 400, 'validation_failed');
  t.equal((await limited('POST', `${base}/tickets`, { title: 'Fine' })).status, 201);
});

t.test('the order: 401, then 403 not about a brand, then 404, then 400', async (t) => {
  const unknown = `/v1/brands/br_${'0'.repeat(26)}`;
  assertErrorShape(t, await client(app)('POST', `${unknown}/tickets`, {}), 401, 'missing_credentials');
  assertErrorShape(t, await client(app, 'sk_live_nope')('POST', `${unknown}/tickets`, {}), 401, 'invalid_api_key');
  // Creating a brand is account-wide: a limited key is refused whatever the body.
  assertErrorShape(t, await limited('POST', '/v1/brands', {}), 403, 'insufficient_scope');
  assertNotFound(t, await owner.live('POST', `${unknown}/tickets`, {}), 'an unknown brand');
  assertErrorShape(t, await owner.live('POST', `/v1/brands/${mine.id}/tickets`, {}), 400, 'validation_failed');
});

t.test('members: a brand they are not assigned to is 404 before their role is looked at, and their role before the request', async (t) => {
  const team = await teamOfThree(app, services);
  const hidden = await makeBrand(team.owner.live, 'Hidden');
  t.equal((await team.asOwner('PUT', `/v1/auth/members/${team.member.id}/brands`, { allBrands: false, brandIds: [team.brand.id] })).status, 200);
  assertNotFound(t, await team.asMember('POST', `/v1/brands/${hidden.id}/tickets`, {}), 'a brand not assigned, an empty body');
  assertNotFound(t, await team.asMember('DELETE', `/v1/brands/${hidden.id}`), 'a brand not assigned, a route above their role');
  assertErrorShape(t, await team.asMember('DELETE', `${team.base}?confirm=maybe`), 403, 'insufficient_role');
  assertErrorShape(t, await team.asOwner('DELETE', `${team.base}?confirm=maybe`), 400, 'validation_failed');
  assertErrorShape(t, await team.asMember('POST', `${team.base}/tickets`, {}), 400, 'validation_failed');
  assertNotFound(t, await team.asMember('POST', `/v1/brands/${mine.id}/tickets`, { title: 'x' }), "another account's brand");
});

t.test('what the check costs: a brand once per process, then nothing', async (t) => {
  const brand = await makeBrand(owner.live, 'Counted');
  const base = `/v1/brands/${brand.id}`;
  const asked = await statementsDuring(db, () => stranger.live('POST', `${base}/tickets`, {}));
  t.equal(asked.length, 1, 'another account asking first: one read in its own scope, and nothing kept');
  const firstTime = await statementsDuring(db, () => owner.live('POST', `${base}/tickets`, {}));
  t.equal(firstTime.length, 1, 'the first request reads the brand, once');
  t.match(firstTime[0], /from "brands"/);
  const again = await statementsDuring(db, () => owner.live('POST', `${base}/tickets`, {}));
  t.same(again, [], 'a brand already checked: no statement for a refused body');
  t.same(await statementsDuring(db, () => limited('POST', `${base}/tickets`, {})), [], 'outside a key’s brands: decided in memory');
  t.same(await statementsDuring(db, () => stranger.live('POST', `${base}/tickets`, {})), [], "another account's brand, known here: decided in memory");
  t.same(await statementsDuring(db, () => owner.test('POST', `${base}/tickets`, {})), [], 'the same for the other mode');
  const unknown = `/v1/brands/br_${'1'.repeat(26)}/tickets`;
  t.equal((await statementsDuring(db, () => stranger.live('POST', unknown, {}))).length, 1, 'an id no one has: one read, every time (what is not found is not kept)');
  t.equal((await statementsDuring(db, () => stranger.live('POST', unknown, {}))).length, 1);
});

t.test('a deleted brand is 404 at once, in this process and in the others', async (t) => {
  // Another process's cache: its own pool and LISTEN connection on the same database.
  const anotherDb = createDb(first.url, { poolMax: 2, poolMin: 0 });
  const another = createServices({ clock: testNow, config: first.config, db: anotherDb });
  t.teardown(async () => {
    await another.close();
    await anotherDb.destroy();
  });
  startBrandCache(another);
  const cache = credentialCacheOf(another, 'brands')!;
  if (!cache.live) await once(cache.events, 'up');
  const elsewhere = tenantCtx(systemCtx(another), owner.accountId, true);

  const brand = await makeBrand(owner.live, 'Doomed');
  const base = `/v1/brands/${brand.id}`;
  assertErrorShape(t, await owner.live('POST', `${base}/tickets`, {}), 400, 'validation_failed');
  await assertBrandVisible(elsewhere, brand.id);
  const hits = cache.stats.hits;
  await assertBrandVisible(elsewhere, brand.id);
  t.equal(cache.stats.hits, hits + 1, 'the other process answers from memory');

  t.equal((await owner.live('DELETE', `${base}?confirm=true`)).status, 200);
  assertNotFound(t, await owner.live('POST', `${base}/tickets`, {}), 'where it was deleted');
  await cache.sync();
  await t.rejects(assertBrandVisible(elsewhere, brand.id), { statusCode: 404, code: 'not_found' }, 'in another process, once the deletion is heard');
});
