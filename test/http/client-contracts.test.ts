import t from 'tap';
import { assertNotFound, client, makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';

/**
 * The hosted product's two real clients, route by route: what each reads, asked with the credential
 * it calls with. The dashboard signs in (a member's session) and its reads are those of the
 * dashboard facts (dashboard-client-facts.md, by section); the SDK and integrations send an API key
 * and read what the compat contract records (compat-contract.md, by section); both portal clients
 * send a portal token. A change that breaks what one client reads fails here, naming the client.
 * Where the two read different shapes, the credential picks (docs/decisions/0095).
 */

const { app, db } = await testApp(t, { TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '10000' });

let people = 0;
/** An account with a live brand, its owner's API key (the SDK) and the owner's session (the dashboard). */
async function bothClients() {
  const email = `contracts-${process.pid}-${++people}@example.com`;
  const owner = await signup(app, email);
  const brand = await makeBrand(owner.live);
  return {
    owner,
    brand,
    base: `/v1/brands/${brand.id}`,
    sdk: owner.live,
    dashboard: client(app, await sessionToken(app, servicesOf(db), owner.accountId, email)),
  };
}

for (const [what, path] of [
  ['category', 'categories'],
  ['tag', 'tags'],
] as const) {
  t.test(`GET …/${path}/stats: the dashboard reads a list, the SDK an object keyed by ${what} id`, async (t) => {
    const { sdk, dashboard, base } = await bothClients();
    t.same((await dashboard('GET', `${base}/${path}/stats`)).body, [], 'dashboard: none yet, an empty list');
    t.same((await sdk('GET', `${base}/${path}/stats`)).body, {}, 'SDK: none yet, an empty object');
    const quiet = await mustCreate(sdk, `${base}/${path}`, { name: 'Alpha', color: '#111111' });
    const busy = await mustCreate(sdk, `${base}/${path}`, { name: 'Beta' });
    const on = what === 'category' ? { categoryId: busy.id } : { tags: [busy.id] };
    for (const title of ['One', 'Two']) await makeTicket(sdk, base, { title, ...on });
    const counts = [
      { id: quiet.id, name: 'Alpha', color: '#111111', ticketCount: 0 },
      { id: busy.id, name: 'Beta', color: '#6b7280', ticketCount: 2 },
    ];

    for (const prefix of ['/v1/brands', '/v1/workspaces']) {
      const url = `${base.replace('/v1/brands', prefix)}/${path}/stats`;
      // dashboard facts §7: the settings page calls .find on [{ id, name, color, ticketCount }].
      const listed = await dashboard('GET', url);
      t.equal(listed.status, 200);
      t.same(listed.body, counts, `dashboard (session), ${prefix}: a list, in the order the settings page shows`);
      // compat contract §3: { [id]: { ticketCount } }, with the fields the dashboard reads beside it.
      const keyed = await sdk('GET', url);
      t.equal(keyed.status, 200);
      t.same(keyed.body, { [quiet.id]: counts[0], [busy.id]: counts[1] }, `SDK (API key), ${prefix}: keyed by ${what} id`);
    }

    const stranger = await signup(app);
    const elsewhere = `/v1/brands/${(await makeBrand(stranger.live)).id}/${path}/stats`;
    assertNotFound(t, await dashboard('GET', elsewhere), "dashboard: another account's brand");
    assertNotFound(t, await sdk('GET', elsewhere), "SDK: another account's brand");
  });
}

t.test('the OpenAPI document names the credential of each shape of a two-shape response', async (t) => {
  const doc = (await client(app)('GET', '/v1/openapi.json')).body;
  for (const path of ['/v1/brands/{brandId}/categories/stats', '/v1/brands/{brandId}/tags/stats']) {
    const schema = doc.paths[path].get.responses['200'].content['application/json'].schema;
    t.equal(schema.oneOf?.length, 2, `${path}: oneOf two shapes`);
    t.match(schema.oneOf[0], { type: 'array', description: /session/ }, `${path}: the list, to a session`);
    t.match(schema.oneOf[1], { type: 'object', description: /API key/ }, `${path}: the keyed object, to an API key`);
  }
});
