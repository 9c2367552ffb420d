import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { buildApp } from '../../server/app.js';
import { emptyDir, testConfig } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

// `ticketd plans list` and `ticketd accounts plan ACCOUNT PLAN`, through the real binary.
const configFile = path.join(emptyDir, `plans-cli-${process.pid}.json`);
const plan = (slug: string, name: string, price: number, brands: number | null) => ({
  slug,
  name,
  price,
  currency: 'eur',
  interval: 'month',
  ticketsPerPeriod: null,
  brands,
  members: null,
  customDomain: false,
});
writeFileSync(configFile, JSON.stringify({ defaultPlan: 'solo', plans: [plan('team', 'Team', 4900, 5), plan('solo', 'Solo', 0, 1)] }));
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url, TICKETD_CONFIG: configFile };
const app = await buildApp({ clock: testNow, config: testConfig(env), db });
t.teardown(() => app.close());

t.test('plans list: cheapest first, the default marked', async (t) => {
  const json = await runCli(['plans', 'list', '--json'], env);
  t.equal(json.code, 0, 'exit 0', { stderr: json.stderr });
  t.match(json.json(), [
    { id: 'solo', default: true, price: 0, entitlements: { brands_limit: 1, tickets_per_period: -1 } },
    { id: 'team', default: false, price: 4900, currency: 'eur' },
  ]);
  const human = await runCli(['plans', 'list'], env);
  t.match(human.stdout, /solo \(default\)\s+Solo\s+0\.00 eur\/month\s+unlimited\s+1\s+unlimited/);
});

t.test('accounts plan: the override lifts the limits at once; none removes it; bad input', async (t) => {
  const created = await runCli(['accounts', 'create', '--email', 'ops@example.com', '--brand', 'First', '--json'], env);
  t.equal(created.code, 0, 'an account', { stderr: created.stderr });
  const { account, apiKeys } = created.json();
  const second = () => app.inject({ method: 'POST', url: '/v1/brands', headers: { authorization: `Bearer ${apiKeys.live.key}` }, payload: { name: 'Second' } });
  t.equal((await second()).statusCode, 403, 'the Solo plan allows one brand');

  const moved = await runCli(['accounts', 'plan', account.id, 'team', '--json'], env);
  t.equal(moved.code, 0, 'exit 0', { stderr: moved.stderr });
  t.match(moved.json(), { accountId: account.id, plan: { id: 'team', entitlements: { brands_limit: 5 } } });
  t.equal((await second()).statusCode, 201, 'on Team: a second brand');

  const cleared = await runCli(['accounts', 'plan', account.id, 'none'], env);
  t.equal(cleared.code, 0);
  t.match(cleared.stdout, /has no plan override/);
  t.equal((await app.inject({ method: 'GET', url: '/v1/brands', headers: { authorization: `Bearer ${apiKeys.live.key}` } })).json().length, 2, 'existing brands stay');

  const unknownPlan = await runCli(['accounts', 'plan', account.id, 'gold'], env);
  t.equal(unknownPlan.code, 2, 'no such plan: usage error');
  t.match(unknownPlan.stderr, /no plan gold/);
  const unknownAccount = await runCli(['accounts', 'plan', 'acct_nope', 'team', '--json'], env);
  t.equal(unknownAccount.code, 1);
  t.match(unknownAccount.json(), { error: { code: 'not_found' } });
});
