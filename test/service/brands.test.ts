import t from 'tap';
import { systemCtx, tenantCtx, withTx } from '../../server/core/context.js';
import * as brands from '../../server/domains/brands/service.js';
import { freshDatabase } from '../helpers/db.js';
import { createBrand } from '../../server/flows/brands.js';
import { createAccount } from '../../server/flows/accounts.js';
import { servicesOf } from '../helpers/app.js';

const { db } = await freshDatabase(t);

t.test('a taken derived slug inside an open transaction gets a suffix, and the transaction stays usable', async (t) => {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: 'tx@example.com' });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), created.account.id, true);
  await createBrand(ctx, { name: 'Helpdesk' });
  const [again, after] = await withTx(ctx, async (tx) => [await createBrand(tx, { name: 'Helpdesk' }), await createBrand(tx, { name: 'Billing' })]);
  t.match(again.slug, /^helpdesk-[0-9a-f]{4}$/, 'the collision got a suffix');
  t.equal(after.slug, 'billing', 'a later statement in the same transaction still works');
  t.same((await brands.list(ctx)).map((b) => b.slug).sort(), ['billing', again.slug, 'helpdesk'].sort(), 'everything committed');
});

t.test('an explicit taken slug inside a transaction is a 409 and rolls the whole transaction back', async (t) => {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: 'tx2@example.com' });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), created.account.id, true);
  await createBrand(ctx, { name: 'One', slug: 'one' });
  await t.rejects(
    withTx(ctx, async (tx) => {
      await createBrand(tx, { name: 'Two', slug: 'two' });
      await createBrand(tx, { name: 'Again', slug: 'one' });
    }),
    { statusCode: 409, code: 'slug_taken' },
  );
  t.same(
    (await brands.list(ctx)).map((b) => b.slug),
    ['one'],
    '"two" was rolled back with the failed transaction',
  );
});
