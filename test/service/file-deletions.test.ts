import t from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import { newId } from '../../server/core/ids.js';
import type { Storage } from '../../server/core/ports.js';
import * as attachments from '../../server/domains/attachments/service.js';
import * as members from '../../server/domains/members/service.js';
import * as team from '../../server/domains/members/team.js';
import { createAccount, deleteAccount } from '../../server/flows/accounts.js';
import { createBrand, deleteBrand } from '../../server/flows/brands.js';
import { createTicket } from '../../server/flows/ticket-create.js';
import { servicesOf } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';

/**
 * A deleted attachment or avatar row queues its file in attachment_file_deletions in the deleting
 * transaction, whichever way it goes: its own DELETE, or a cascade from its brand, member or
 * account. A storage that cannot delete keeps the queue entries in sight after the commit (the
 * after-commit removal fails; the dispatcher would retry).
 */

const { db } = await freshDatabase(t);
const services = servicesOf(db);
const unreachable = { delete: async () => Promise.reject(new Error('storage unreachable')) } as unknown as Storage;

async function setup(): Promise<{ ctx: TenantCtx; brandId: string; ownerId: string }> {
  const created = await createAccount(systemCtx(services), { email: `fd-${Math.random().toString(36).slice(2)}@example.com` });
  const ctx: TenantCtx = { ...tenantCtx(systemCtx(services), created.account.id, true), actor: { type: 'api', id: 'key_test', name: 'CI key' } };
  const brand = await createBrand(ctx, { name: 'Files' });
  return { ctx, brandId: brand.id, ownerId: created.owner.id };
}

async function attachment(ctx: TenantCtx, brandId: string, ticketId: string | null, status = 'UPLOADED'): Promise<string> {
  const id = newId('att');
  await db('attachments').insert({
    id,
    accountId: ctx.accountId,
    livemode: ctx.livemode,
    brandId,
    ticketId,
    filename: 'a.txt',
    contentType: 'text/plain',
    size: 1,
    status,
    sha256: status === 'UPLOADED' ? 'a'.repeat(64) : null,
    metadata: {},
  });
  return id;
}

async function avatar(ctx: TenantCtx, memberId: string): Promise<string> {
  const id = newId('avt');
  await db('avatars').insert({ id, accountId: ctx.accountId, memberId, status: 'UPLOADED', contentType: 'image/png', size: 1 });
  return id;
}

const queued = async (accountId: string): Promise<string[]> =>
  (await db('attachmentFileDeletions').where({ accountId }).orderBy('attachmentId').select('attachmentId')).map((r: { attachmentId: string }) => r.attachmentId);

t.test('no trigger queues files any more', async (t) => {
  const found = (await db.raw(`select tgname from pg_trigger where tgrelid in ('attachments'::regclass, 'avatars'::regclass) and not tgisinternal`)).rows;
  t.same(found, []);
  t.same((await db.raw(`select proname from pg_proc where proname = 'attachments_queue_file_deletion'`)).rows, []);
});

t.test("an attachment's own delete queues its file", async (t) => {
  const { ctx, brandId } = await setup();
  const ticket = await createTicket(ctx, brandId, { title: 'With a file' });
  const id = await attachment(ctx, brandId, ticket.ticket.id);
  await attachments.remove(ctx, { ...attachments.attachmentDepsOf(services), storage: unreachable }, brandId, ticket.ticket.id, id);
  t.same(await db('attachments').where({ accountId: ctx.accountId, id }), [], 'the row is gone');
  t.same(await queued(ctx.accountId), [id], 'its file is queued');
});

t.test("a brand's deletion queues the files of its attachments, on tickets and pending", async (t) => {
  const { ctx, brandId } = await setup();
  const other = await createBrand(ctx, { name: 'Kept' });
  const ticket = await createTicket(ctx, brandId, { title: 'With files' });
  const ids = [await attachment(ctx, brandId, ticket.ticket.id), await attachment(ctx, brandId, null, 'PENDING')].sort();
  const kept = await attachment(ctx, other.id, null, 'PENDING');
  await deleteBrand(ctx, brandId, true);
  t.same(await queued(ctx.accountId), ids);
  t.ok(await db('attachments').where({ accountId: ctx.accountId, id: kept }).first(), "another brand's attachment stays, unqueued");
});

t.test("a member's removal queues their avatars' files", async (t) => {
  const { ctx, ownerId } = await setup();
  const member = await members.add(ctx, { email: `m-${Math.random().toString(36).slice(2)}@example.com`, role: 'member' });
  const gone = await avatar(ctx, member.id);
  const kept = await avatar(ctx, ownerId);
  await team.remove(ctx, member.id);
  t.same(await db('avatars').where({ accountId: ctx.accountId, id: gone }), [], 'the cascade deleted it');
  t.same(await queued(ctx.accountId), [gone]);
  t.ok(await db('avatars').where({ accountId: ctx.accountId, id: kept }).first(), "the owner's avatar stays");
});

t.test("an account's deletion queues every file of it: attachments of both modes and avatars", async (t) => {
  const { ctx, brandId, ownerId } = await setup();
  const test = tenantCtx(ctx, ctx.accountId, false);
  const testBrand = await createBrand(test, { name: 'Test files' });
  const ids = [await attachment(ctx, brandId, null, 'PENDING'), await attachment(test, testBrand.id, null, 'PENDING'), await avatar(ctx, ownerId)].sort();
  const bystander = await setup();
  const untouched = await attachment(bystander.ctx, bystander.brandId, null, 'PENDING');
  await deleteAccount(ctx, 'DELETE', unreachable);
  t.same(await queued(ctx.accountId), ids);
  t.same(await queued(bystander.ctx.accountId), [], 'another account queues nothing');
  t.ok(await db('attachments').where({ accountId: bystander.ctx.accountId, id: untouched }).first());
});

t.test('a rolled-back delete queues nothing', async (t) => {
  const { ctx, brandId } = await setup();
  const id = await attachment(ctx, brandId, null, 'PENDING');
  await t.rejects(
    withTx(ctx, async (tx) => {
      await deleteBrand(tx, brandId, true);
      throw new Error('changed my mind');
    }),
  );
  t.same(await queued(ctx.accountId), []);
  t.ok(await db('attachments').where({ accountId: ctx.accountId, id }).first(), 'and the attachment is still there');
});
