import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import t from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import * as attachments from '../../server/domains/attachments/service.js';
import * as tickets from '../../server/domains/tickets/service.js';
import { testConfig, servicesOf } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';
import { createBrand } from '../../server/flows/brands.js';
import { createAccount } from '../../server/flows/accounts.js';
import { createTicket } from '../../server/flows/ticket-create.js';
import { testNow } from '../helpers/clock.js';

const { db, url } = await freshDatabase(t);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ticketd-attachments-svc-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const deps = attachments.attachmentDeps(testConfig({ DATABASE_URL: url, TICKETD_DATA_DIR: dataDir }), db, testNow);
const io = attachments.forRequest(deps, 'http', 'localhost');

async function setup(): Promise<{ ctx: TenantCtx; brandId: string }> {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `att-${Math.random().toString(36).slice(2)}@example.com` });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), created.account.id, true);
  const brand = await createBrand(ctx, { name: 'Files' });
  return { ctx, brandId: brand.id };
}

const file = (name: string, text: string): attachments.IncomingFile => ({
  stream: Readable.from([Buffer.from(text)]),
  filename: name,
  contentType: 'text/plain',
  truncated: () => false,
});

async function counts(ctx: TenantCtx, brandId: string, ids: string[]): Promise<number[]> {
  return Promise.all(ids.map(async (id) => (await tickets.get(ctx, brandId, id)).attachmentCount));
}

t.test('moveToTicket re-links every attachment of the source tickets and fixes the counts on both sides', async (t) => {
  const { ctx, brandId } = await setup();
  const [a, b, target] = await Promise.all(['A', 'B', 'Target'].map(async (title) => (await createTicket(ctx, brandId, { title })).ticket));
  await attachments.uploadFile(ctx, io, brandId, a!.id, file('a1.txt', 'a1'));
  await attachments.uploadFile(ctx, io, brandId, a!.id, file('a2.txt', 'a2'));
  await attachments.uploadFile(ctx, io, brandId, b!.id, file('b1.txt', 'b1'));
  await attachments.uploadFile(ctx, io, brandId, target!.id, file('t1.txt', 't1'));
  // Not uploaded yet: moves along, but does not count.
  const pending = await attachments.createUpload(ctx, io, brandId, b!.id, { filename: 'later.txt', contentType: 'text/plain', size: 1 });
  t.same(await counts(ctx, brandId, [a!.id, b!.id, target!.id]), [2, 1, 1]);

  const moved = await withTx(ctx, (tx) => attachments.moveToTicket(tx, brandId, [a!.id, b!.id, target!.id], target!.id));
  t.equal(moved, 4, "three uploaded and one pending moved; the target's own stays");
  t.same(await counts(ctx, brandId, [a!.id, b!.id, target!.id]), [0, 0, 4]);
  t.same(
    (await attachments.list(ctx, brandId, target!.id)).map((x) => x.filename),
    ['a1.txt', 'a2.txt', 'b1.txt', 't1.txt', 'later.txt'],
  );
  t.same(await attachments.list(ctx, brandId, a!.id), []);
  t.equal((await attachments.get(ctx, io, brandId, target!.id, pending.id)).ticketId, target!.id);

  t.equal(await withTx(ctx, (tx) => attachments.moveToTicket(tx, brandId, [a!.id], target!.id)), 0, 'nothing left to move');
  t.same(await counts(ctx, brandId, [target!.id]), [4]);
});

t.test('moveToTicket stays inside its brand and tenant; it rolls back with the merge', async (t) => {
  const { ctx, brandId } = await setup();
  const other = await setup();
  const mine = (await createTicket(ctx, brandId, { title: 'Mine' })).ticket;
  const target = (await createTicket(ctx, brandId, { title: 'Target' })).ticket;
  const theirs = (await createTicket(other.ctx, other.brandId, { title: 'Theirs' })).ticket;
  await attachments.uploadFile(ctx, io, brandId, mine.id, file('m.txt', 'm'));
  await attachments.uploadFile(other.ctx, io, other.brandId, theirs.id, file('o.txt', 'o'));

  t.equal(await withTx(ctx, (tx) => attachments.moveToTicket(tx, brandId, [theirs.id], target.id)), 0, "another account's ticket moves nothing");
  t.same(await counts(other.ctx, other.brandId, [theirs.id]), [1]);
  await t.rejects(
    withTx(ctx, (tx) => attachments.moveToTicket(tx, other.brandId, [theirs.id], target.id)),
    { message: 'Brand not found' },
    "another account's brand is 404",
  );

  await t.rejects(
    withTx(ctx, async (tx) => {
      await attachments.moveToTicket(tx, brandId, [mine.id], target.id);
      throw new Error('merge failed');
    }),
    /merge failed/,
  );
  t.same(await counts(ctx, brandId, [mine.id, target.id]), [1, 0], 'rolled back with the merge');
});

t.test('two ticket creates racing for one pending attachment: one links it, the other is a 400', async (t) => {
  const { ctx, brandId } = await setup();
  const pending = await attachments.uploadFile(ctx, io, brandId, null, file('p.txt', 'p'));
  const results = await Promise.allSettled([1, 2].map((n) => createTicket(ctx, brandId, { title: `Race ${n}`, attachmentIds: [pending.attachment.id] })));
  const won = results.filter((r) => r.status === 'fulfilled') as PromiseFulfilledResult<import('../../server/flows/ticket-create.js').CreateResult>[];
  const lost = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
  t.equal(won.length, 1, 'one create wins');
  t.equal(lost.length, 1);
  t.match(lost[0]!.reason, { statusCode: 400, code: 'invalid_attachments' });
  t.equal(won[0]!.value.ticket.attachmentCount, 1);
  t.same(
    (await attachments.list(ctx, brandId, won[0]!.value.ticket.id)).map((x) => x.id),
    [pending.attachment.id],
  );
});
