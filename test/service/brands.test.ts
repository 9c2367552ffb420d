import t from 'tap';
import { systemCtx, tenantCtx, withTx } from '../../server/core/context.js';
import * as accounts from '../../server/domains/accounts/service.js';
import * as brands from '../../server/domains/brands/service.js';
import { freshDatabase } from '../helpers/db.js';

const { db } = await freshDatabase(t);

t.test('a taken derived slug inside an open transaction gets a suffix, and the transaction stays usable', async (t) => {
  const created = await accounts.create(systemCtx(db), { email: 'tx@example.com' });
  const ctx = tenantCtx(systemCtx(db), created.account.id, true);
  await brands.create(ctx, { name: 'Helpdesk' });
  const [again, after] = await withTx(ctx, async (tx) => [
    await brands.create(tx, { name: 'Helpdesk' }),
    await brands.create(tx, { name: 'Billing' }),
  ]);
  t.match(again.slug, /^helpdesk-[0-9a-f]{4}$/, 'the collision got a suffix');
  t.equal(after.slug, 'billing', 'a later statement in the same transaction still works');
  t.same((await brands.list(ctx)).map((b) => b.slug).sort(), ['billing', again.slug, 'helpdesk'].sort(), 'everything committed');
});

t.test('an explicit taken slug inside a transaction is a 409 and rolls the whole transaction back', async (t) => {
  const created = await accounts.create(systemCtx(db), { email: 'tx2@example.com' });
  const ctx = tenantCtx(systemCtx(db), created.account.id, true);
  await brands.create(ctx, { name: 'One', slug: 'one' });
  await t.rejects(withTx(ctx, async (tx) => {
    await brands.create(tx, { name: 'Two', slug: 'two' });
    await brands.create(tx, { name: 'Again', slug: 'one' });
  }), { statusCode: 409, code: 'slug_taken' });
  t.same((await brands.list(ctx)).map((b) => b.slug), ['one'], '"two" was rolled back with the failed transaction');
});
