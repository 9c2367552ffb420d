import t from 'tap';
import { buildApp } from '../../server/app.js';
import { ownerWithBrand, testConfig } from '../helpers/app.js';
import { fakeBigCommerceStore } from '../helpers/bigcommerce-store.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// `ticketd stores list|sync`, through the real binary against a fake BigCommerce store: an operator
// sees a brand's stores and syncs them now, in the CLI's own process. Four spawns in all.
const store = await fakeBigCommerceStore({ orders: 30, products: 4 });
t.teardown(() => store.close());
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url, TICKETD_COMMERCE_BIGCOMMERCE_API_URL: store.url };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

t.test('stores list and sync: the store, then its orders read now', async (t) => {
  const { owner, brand, base } = await ownerWithBrand(app);
  const connected = (await owner.live('POST', `${base}/ecommerce/stores/connect`, { platform: 'BIGCOMMERCE', accessToken: store.token, storeHash: store.hash })).body;

  const listed = await runCli(['stores', 'list', brand.id], env);
  t.equal(listed.code, 0, { stderr: listed.stderr });
  t.match(listed.stdout, new RegExp(`${connected.id}\\s+Fake Outfitters\\s+BIGCOMMERCE\\s+${store.hash}\\s+PENDING_SETUP\\s+-\\s+0`));

  const synced = await runCli(['stores', 'sync', `ws_${brand.id.slice(3)}`, '--json'], env);
  t.equal(synced.code, 0, { stderr: synced.stderr });
  t.same(
    synced.json(),
    [{ storeId: connected.id, name: 'Fake Outfitters', outcome: 'synced', orders: 30, products: 4, status: 'ACTIVE', errorMessage: null }],
    'a ws_ id works too',
  );
  t.equal(Number((await db('commerceOrders').where({ storeId: connected.id }).count({ n: '*' }))[0]!.n), 30);

  const json = await runCli(['stores', 'list', brand.id, '--json'], env);
  t.match(json.json(), [{ id: connected.id, status: 'ACTIVE', lastSyncAt: String, errorCount: 0 }], 'as GET …/ecommerce/stores');

  store.revoke();
  const refused = await runCli(['stores', 'sync', brand.id, connected.id, '--json'], env);
  t.equal(refused.code, 0, { stderr: refused.stderr });
  t.match(refused.json(), [{ storeId: connected.id, outcome: 'failed', status: 'DISCONNECTED', errorMessage: /refused the access token/ }]);
});
