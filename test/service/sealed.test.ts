import { randomBytes } from 'node:crypto';
import t from 'tap';
import { systemCtx, tenantCtx } from '../../server/core/context.js';
import { createServices } from '../../server/compose.js';
import { Keyring, kekIdOf, keyringPart, parseKey, SealedSecretError } from '../../server/core/sealed.js';
import * as webhooks from '../../server/domains/webhooks/service.js';
import { createAccount } from '../../server/flows/accounts.js';
import { createBrand } from '../../server/flows/brands.js';
import { rotateKey } from '../../server/flows/secrets.js';
import { servicesOf, testConfig } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

/** Secrets ticketd uses itself, sealed: a data key each, wrapped by a key-encryption key (core/sealed.ts). */

const { db } = await freshDatabase(t);
const services = servicesOf(db);
const A = { purpose: 'webhook.secret', accountId: 'acct_a' };
const keyring = () => new Keyring(db, [], Date.now);

t.test('sealed text opens to the secret; the same secret twice seals differently; nothing of it shows', async (t) => {
  const ring = keyring();
  const sealed = await ring.seal('whsec_very-secret', A);
  t.match(sealed, /^v1:[0-9a-f]{16}:[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+:[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  t.notMatch(sealed, /very-secret/);
  t.not(await ring.seal('whsec_very-secret', A), sealed, 'a fresh data key and IV each time');
  t.equal(await ring.open(sealed, A), 'whsec_very-secret');
  t.equal(await keyring().open(sealed, A), 'whsec_very-secret', 'another process opens it: the key is the database’s');
});

t.test('a sealed value does not open for another purpose or account, nor once altered', async (t) => {
  const ring = keyring();
  const sealed = await ring.seal('s3cret', A);
  await t.rejects(ring.open(sealed, { ...A, accountId: 'acct_b' }), SealedSecretError, "another account's row");
  await t.rejects(ring.open(sealed, { ...A, purpose: 'email_connection.secret' }), SealedSecretError, 'another column');
  const [v, id, wrapped, payload] = sealed.split(':');
  const [iv, body, tag] = payload!.split('.');
  const flipped = Buffer.from(body!, 'base64url');
  flipped[0] = flipped[0]! ^ 1;
  await t.rejects(ring.open([v, id, wrapped, [iv, flipped.toString('base64url'), tag].join('.')].join(':'), A), SealedSecretError, 'a bit flipped');
  await t.rejects(ring.open(`v1:${'0'.repeat(16)}:${wrapped}:${payload}`, A), /needs the encryption key 0000000000000000/, 'a key this server does not have');
  t.equal(await ring.open('whsec_stored-before-sealing', A), 'whsec_stored-before-sealing', 'plain text from before sealing reads as it is');
});

t.test('rotate-key: a new key in the database; every secret re-wrapped, its ciphertext kept; plain text sealed; older processes still open', async (t) => {
  const ctx = systemCtx(services);
  const created = await createAccount(ctx, { email: `sealed-${process.pid}@example.com` });
  const tenant = tenantCtx(ctx, created.account.id, true);
  const brand = await createBrand(tenant, { name: 'Sealed' });
  const hook = await webhooks.create(tenant, { allowPrivate: true }, brand.id, { url: 'http://127.0.0.1:9/hook', events: ['ticket.created'] });
  const legacy = await webhooks.create(tenant, { allowPrivate: true }, brand.id, { url: 'http://127.0.0.1:9/legacy', events: ['ticket.created'] });
  await db('webhooks').where({ id: legacy.id }).update({ secret: 'whsec_stored-in-plain-text' });
  const before = (await db('webhooks').where({ id: hook.id }).first()).secret as string;
  const oldKey = kekIdOf(before);
  const oldProcess = keyring();
  await oldProcess.current();

  const rotation = await rotateKey(ctx);
  t.equal(rotation.newKey, true);
  t.not(rotation.keyId, oldKey);
  t.ok(rotation.rewrapped['webhooks.secret']! >= 2, 'the sealed one and the plain one');

  const after = (await db('webhooks').where({ id: hook.id }).first()).secret as string;
  t.equal(kekIdOf(after), rotation.keyId);
  t.equal(after.split(':')[3], before.split(':')[3], 'the secret’s own ciphertext is kept: only its key is re-wrapped');
  const sealedLegacy = (await db('webhooks').where({ id: legacy.id }).first()).secret as string;
  t.equal(kekIdOf(sealedLegacy), rotation.keyId, 'plain text is sealed');
  t.same((await webhooks.deliveryTarget(tenant, hook.id, new Date(testNow())))!.secrets, [hook.secret], 'still signs with the same secret');
  t.same((await webhooks.deliveryTarget(tenant, legacy.id, new Date(testNow())))!.secrets, ['whsec_stored-in-plain-text']);
  t.equal(
    await oldProcess.open(after, { purpose: 'webhook.secret', accountId: created.account.id }),
    hook.secret,
    'a process that read the keys before the rotation reads them again',
  );
  t.same(Object.values((await rotateKey(ctx)).rewrapped).reduce((a, b) => a + b, 0) > 0, true, 'a second rotation re-wraps again under its own new key');
});

t.test('configured keys: the first seals, the rest open; the database’s keys still open; rotate-key moves everything to the first', async (t) => {
  const [k1, k2] = [randomBytes(32).toString('base64'), randomBytes(32).toString('base64')];
  const fromTable = await keyring().seal('kept-in-table-key', A);
  const withKeys = (keys: string[]) => createServices({ clock: testNow, config: testConfig({ TICKETD_ENCRYPTION_KEYS: keys.join(',') }), db });
  const first = withKeys([k1]);
  t.teardown(() => first.close());
  const ring = first.get(keyringPart);
  t.equal((await ring.current()).key.equals(parseKey(k1)), true);
  t.equal(await ring.open(fromTable, A), 'kept-in-table-key');
  const underK1 = await ring.seal('under-k1', A);

  const second = withKeys([k2, k1]);
  t.teardown(() => second.close());
  const rotation = await rotateKey(systemCtx(second));
  t.equal(rotation.newKey, false);
  t.equal(rotation.keyId, (await second.get(keyringPart).current()).id);
  t.equal(await second.get(keyringPart).open(underK1, A), 'under-k1', 'the old key, still listed, opens');
  const k2Only = new Keyring(db, [parseKey(k2)], Date.now);
  const webhookSecrets = (await db('webhooks').pluck('secret')) as string[];
  t.ok(webhookSecrets.length > 0);
  t.ok(
    webhookSecrets.every((s) => kekIdOf(s) === rotation.keyId),
    'every stored secret is under the new key',
  );
  await t.rejects(k2Only.open(underK1, A), /needs the encryption key/, 'a value never stored is not re-wrapped, and needs its key');
});

t.test('a configured key must be 32 bytes of base64', async (t) => {
  t.throws(() => parseKey(randomBytes(16).toString('base64')), /32 bytes/);
  t.throws(() => testConfig({ TICKETD_ENCRYPTION_KEYS: 'not-a-key' }), /encryptionKeys/);
});
