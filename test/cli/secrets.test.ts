import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { kekIdOf } from '../../server/core/sealed.js';
import * as webhooks from '../../server/domains/webhooks/service.js';
import { createAccount } from '../../server/flows/accounts.js';
import { createBrand } from '../../server/flows/brands.js';
import { servicesOf } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/db.js';

// `ticketd secrets rotate-key`, through the real binary, while secrets are stored.
const { url, db } = await freshDatabase(t);
const env = { DATABASE_URL: url };

t.test('secrets rotate-key: a new key, every secret re-wrapped with it; --json for scripts', async (t) => {
  const ctx = systemCtx(servicesOf(db));
  const { account } = await createAccount(ctx, { email: 'rotate@example.com' });
  const tenant = tenantCtx(ctx, account.id, true);
  const brand = await createBrand(tenant, { name: 'Rotating' });
  const hook = await webhooks.create(tenant, { allowPrivate: true }, brand.id, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] });
  const before = kekIdOf((await db('webhooks').where({ id: hook.id }).first()).secret);

  const json = await runCli(['secrets', 'rotate-key', '--json'], env);
  t.equal(json.code, 0, 'exit 0', { stderr: json.stderr });
  const rotation = json.json() as { keyId: string; newKey: boolean; rewrapped: Record<string, number> };
  t.match(rotation, { newKey: true, rewrapped: { 'webhooks.secret': 1, 'webhooks.previous_secret': 0, 'brand_domains.dkim_private_key': 0, 'email_connections.secret': 0 } });
  t.not(rotation.keyId, before);
  t.equal(kekIdOf((await db('webhooks').where({ id: hook.id }).first()).secret), rotation.keyId);

  const human = await runCli(['secrets', 'rotate-key'], env);
  t.equal(human.code, 0);
  t.match(human.stdout, /Secrets are sealed with key [0-9a-f]{16} \(new, kept in the database\)\.\n {2}webhooks\.secret: 1 re-wrapped/);
});
