import t from 'tap';
import { assertErrorShape, assertNotFound, client, makeBrand, makeTicket, mustCreate, servicesOf, signup, testApp } from '../helpers/app.js';
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

t.test('POST …/tickets/bulk: the dashboard reads { success, failed } as numbers, the SDK { success: boolean, count }', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const [a, b, c] = [await makeTicket(sdk, base), await makeTicket(sdk, base), await makeTicket(sdk, base)];
  const gone = 'tkt_00000000000000000000000000';

  // dashboard facts §8.5: both counts are toasted.
  const shown = await dashboard('POST', `${base}/tickets/bulk`, { action: 'resolve', ticketIds: [a.id, b.id, gone] });
  t.equal(shown.status, 200);
  t.same(shown.body, { success: 2, count: 2, failed: 1, failedIds: [gone] }, 'dashboard (session): success and failed are numbers');

  // compat contract §4: { success, count }; the SDK tests success === true.
  const all = await sdk('POST', `${base}/tickets/bulk`, { action: 'close', ticketIds: [a.id, c.id] });
  t.same(all.body, { success: true, count: 2, failed: 0, failedIds: [] }, 'SDK (API key): every ticket acted on, success is true');
  const some = await sdk('POST', `${base}/tickets/bulk`, { action: 'close', ticketIds: [b.id, gone] });
  t.same(some.body, { success: false, count: 1, failed: 1, failedIds: [gone] }, 'SDK (API key): an id it could not act on makes success false');

  for (const [who, call] of [
    ['dashboard', dashboard],
    ['SDK', sdk],
  ] as const) {
    assertErrorShape(t, await call('POST', `${base}/tickets/bulk`, { action: 'explode', ticketIds: [a.id] }), 400, 'validation_failed');
    const stranger = await signup(app);
    assertNotFound(
      t,
      await call('POST', `/v1/brands/${(await makeBrand(stranger.live)).id}/tickets/bulk`, { action: 'resolve', ticketIds: [a.id] }),
      `${who}: another account's brand`,
    );
  }
});

t.test('comments: the dashboard reads metadata.authorName and one flat list, the SDK authorName and threads', async (t) => {
  const { sdk, dashboard, base } = await bothClients();
  const comments = `${base}/tickets/${(await makeTicket(sdk, base)).id}/comments`;
  // dashboard facts §9: what the dashboard sends; compat contract §3: what the SDK sends.
  const fromDashboard = await mustCreate(dashboard, comments, { body: 'On it', authorType: 'AGENT', authorName: 'Ann', metadata: { authorName: 'Ann' } });
  const fromSdk = await mustCreate(sdk, comments, { body: 'Synced from the CRM', authorName: 'CRM bot' });
  const reply = await mustCreate(sdk, comments, { body: 'Customer answered', authorType: 'CUSTOMER', authorName: 'Cleo', parentId: fromDashboard.id });

  // dashboard facts §9: a bare array, oldest first, the last element the newest; labelled by metadata.authorName.
  const shown = (await dashboard('GET', comments)).body;
  t.same(
    shown.map((c: { id: string; metadata: { authorName: string } }) => [c.id, c.metadata.authorName]),
    [
      [fromDashboard.id, 'Ann'],
      [fromSdk.id, 'CRM bot'],
      [reply.id, 'Cleo'],
    ],
    'dashboard (session): every comment in one list, the newest last, each named in metadata',
  );
  t.match(shown[0], { authorId: String, authorType: 'AGENT', body: 'On it', createdAt: String }, 'dashboard (session): the comment it posted names the member');
  t.equal(fromSdk.metadata.authorName, 'CRM bot', 'dashboard: the create answer of an SDK comment carries metadata.authorName');

  // compat contract §3: authorName at the top level, replies? nested.
  const read = (await sdk('GET', comments)).body;
  t.same(
    read.map((c: { id: string; authorName: string }) => [c.id, c.authorName]),
    [
      [fromDashboard.id, 'Ann'],
      [fromSdk.id, 'CRM bot'],
    ],
    'SDK (API key): top-level comments with authorName',
  );
  t.match(read[0].replies, [{ id: reply.id, parentId: fromDashboard.id, authorName: 'Cleo' }], 'SDK (API key): the reply in its thread');
  t.match(await sdk('DELETE', `${base}/comments/${reply.id}`), { status: 200, body: { id: reply.id, deletedAt: String, authorName: 'Cleo' } }, 'SDK: delete returns the comment');
});

t.test('the OpenAPI document names the credential of each shape of a two-shape response', async (t) => {
  const doc = (await client(app)('GET', '/v1/openapi.json')).body;
  for (const [method, path] of [
    ['get', '/v1/brands/{brandId}/categories/stats'],
    ['get', '/v1/brands/{brandId}/tags/stats'],
    ['post', '/v1/brands/{brandId}/tickets/bulk'],
    ['get', '/v1/brands/{brandId}/tickets/{ticketId}/comments'],
  ]) {
    const schema = doc.paths[path][method].responses['200'].content['application/json'].schema;
    t.equal(schema.oneOf?.length, 2, `${path}: oneOf two shapes`);
    t.match(schema.oneOf[0], { description: /^To a session \(the dashboard\)/ }, `${path}: the dashboard's shape, to a session`);
    t.match(schema.oneOf[1], { description: /^To an API key \(the SDK, integrations\)/ }, `${path}: the SDK's shape, to an API key`);
  }
});
