import t from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import { newId } from '../../server/core/ids.js';
import * as audit from '../../server/core/audit.js';
import * as comments from '../../server/domains/comments/service.js';
import * as tickets from '../../server/domains/tickets/service.js';
import { freshDatabase } from '../helpers/db.js';
import { createBrand, deleteBrand } from '../../server/flows/brands.js';
import { createAccount } from '../../server/flows/accounts.js';
import { servicesOf } from '../helpers/app.js';
import { createTicket } from '../../server/flows/ticket-create.js';
import { createComment } from '../../server/flows/comment-create.js';

const { db } = await freshDatabase(t);

async function setup(): Promise<{ ctx: TenantCtx; brandId: string }> {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `cmt-${Math.random().toString(36).slice(2)}@example.com` });
  const ctx: TenantCtx = { ...tenantCtx(systemCtx(servicesOf(db)), created.account.id, true), actor: { type: 'api', id: 'key_test', name: 'CI key' } };
  const brand = await createBrand(ctx, { name: 'Comments' });
  return { ctx, brandId: brand.id };
}

const newTicket = async (ctx: TenantCtx, brandId: string, title = 'T') => (await createTicket(ctx, brandId, { title })).ticket;
const add = async (ctx: TenantCtx, brandId: string, ticketId: string, body: string, parentId?: string) => (await createComment(ctx, brandId, ticketId, { body, parentId })).comment;
const count = async (ctx: TenantCtx, brandId: string, ticketId: string) => (await tickets.get(ctx, brandId, ticketId)).commentCount;

async function pgError(promise: Promise<unknown>): Promise<{ code?: string; constraint?: string }> {
  try {
    await promise;
    return {};
  } catch (err) {
    const e = err as { code?: string; constraint?: string; nativeError?: { code?: string; constraint?: string } };
    return { code: e.nativeError?.code ?? e.code, constraint: e.nativeError?.constraint ?? e.constraint };
  }
}

t.test('moveToTicket moves whole threads (deleted comments too) and recounts both sides', async (t) => {
  const { ctx, brandId } = await setup();
  const a = await newTicket(ctx, brandId, 'A');
  const b = await newTicket(ctx, brandId, 'B');
  const target = await newTicket(ctx, brandId, 'Target');
  const a1 = await add(ctx, brandId, a.id, 'a1');
  const a2 = await add(ctx, brandId, a.id, 'a2, reply to a1', a1.id);
  const a3 = await add(ctx, brandId, a.id, 'a3, deleted');
  await comments.remove(ctx, brandId, a3.id);
  const b1 = await add(ctx, brandId, b.id, 'b1');
  const t1 = await add(ctx, brandId, target.id, 't1');

  const result = await comments.moveToTicket(ctx, brandId, [a.id, b.id, a.id], target.id);
  t.same(result, { moved: 3 }, 'three live comments moved');
  t.equal(await count(ctx, brandId, a.id), 0);
  t.equal(await count(ctx, brandId, b.id), 0);
  t.equal(await count(ctx, brandId, target.id), 4);
  const list = await comments.list(ctx, brandId, target.id);
  t.same(
    list.map((c) => c.id),
    [a1.id, b1.id, t1.id],
    'oldest first across the merged tickets',
  );
  t.same(
    list[0]!.replies.map((c) => c.id),
    [a2.id],
    'the thread came along',
  );
  t.same(await comments.list(ctx, brandId, a.id), []);
  const moved = await db('comments').where({ id: a3.id }).first();
  t.equal(moved.ticketId, target.id, 'the deleted comment moved too (threads stay whole)');
  t.equal((await comments.get(ctx, brandId, a2.id, target.id)).ticketId, target.id, 'reachable under the target');
  await t.rejects(comments.get(ctx, brandId, a2.id, a.id), { statusCode: 404, code: 'not_found' }, 'no longer under the source');
});

t.test('moveToTicket refuses a target among the sources, an unknown or foreign ticket, a deleted target', async (t) => {
  const { ctx, brandId } = await setup();
  const other = await setup();
  const a = await newTicket(ctx, brandId);
  const target = await newTicket(ctx, brandId);
  await add(ctx, brandId, a.id, 'x');
  const foreign = await newTicket(other.ctx, other.brandId);
  const otherBrand = await createBrand(ctx, { name: 'Other brand' });
  const otherBrandTicket = await newTicket(ctx, otherBrand.id);

  await t.rejects(comments.moveToTicket(ctx, brandId, [a.id, target.id], target.id), { statusCode: 400, code: 'invalid_request' });
  await t.rejects(comments.moveToTicket(ctx, brandId, ['tkt_nope'], target.id), { statusCode: 404, code: 'not_found' });
  await t.rejects(comments.moveToTicket(ctx, brandId, [foreign.id], target.id), { statusCode: 404, code: 'not_found' }, "another account's ticket");
  await t.rejects(comments.moveToTicket(ctx, brandId, [otherBrandTicket.id], target.id), { statusCode: 404, code: 'not_found' }, "another brand's ticket");
  await t.rejects(comments.moveToTicket(ctx, brandId, [a.id], foreign.id), { statusCode: 404, code: 'not_found' }, "into another account's ticket");
  await tickets.remove(ctx, brandId, target.id);
  await t.rejects(comments.moveToTicket(ctx, brandId, [a.id], target.id), { statusCode: 404, code: 'not_found' }, 'into a deleted ticket');
  t.same(await comments.moveToTicket(ctx, brandId, [], target.id), { moved: 0 });
  t.equal(await count(ctx, brandId, a.id), 1, 'nothing moved');
});

t.test('addSystemComment adds a counted, audited SYSTEM comment', async (t) => {
  const { ctx, brandId } = await setup();
  const ticket = await newTicket(ctx, brandId);
  const note = await comments.addSystemComment(ctx, brandId, ticket.id, 'Merged into #1001', { mergedIntoId: 'tkt_x', isInternal: true });
  t.match(note, { authorType: 'SYSTEM', authorId: null, body: 'Merged into #1001', isInternal: true, source: 'api', ticketId: ticket.id });
  t.same(note.metadata, { authorName: null, mergedIntoId: 'tkt_x', isInternal: true });
  const after = await tickets.get(ctx, brandId, ticket.id);
  t.equal(after.commentCount, 1);
  t.ok(after.updatedAt >= ticket.updatedAt);
  const entries = await audit.forEntity(ctx, 'comment', note.id);
  t.match(entries, [{ event: 'comment.created', ticketId: ticket.id, metadata: { ticketNumber: ticket.ticketNumber, isInternal: true } }]);
  await t.rejects(comments.addSystemComment(ctx, brandId, ticket.id, '   '), { statusCode: 400, code: 'invalid_request' });
  await t.rejects(comments.addSystemComment(ctx, brandId, 'tkt_nope', 'x'), { statusCode: 404, code: 'not_found' });
});

t.test("merge-style use: move and note in the caller's transaction roll back together", async (t) => {
  const { ctx, brandId } = await setup();
  const source = await newTicket(ctx, brandId);
  const target = await newTicket(ctx, brandId);
  await add(ctx, brandId, source.id, 's1');
  await t.rejects(
    withTx(ctx, async (tx) => {
      await comments.moveToTicket(tx, brandId, [source.id], target.id);
      await comments.addSystemComment(tx, brandId, source.id, `Merged into #${target.ticketNumber}`);
      t.equal(await count(tx, brandId, target.id), 1, 'inside: moved');
      throw new Error('merge failed');
    }),
    /merge failed/,
  );
  t.equal(await count(ctx, brandId, source.id), 1, 'after: nothing moved');
  t.equal(await count(ctx, brandId, target.id), 0);
  t.equal((await comments.list(ctx, brandId, source.id)).length, 1);
});

t.test('the schema: a parent must be a comment of the same ticket; comments go with their ticket and brand', async (t) => {
  const { ctx, brandId } = await setup();
  const a = await newTicket(ctx, brandId);
  const b = await newTicket(ctx, brandId);
  const parent = await add(ctx, brandId, a.id, 'parent');
  await add(ctx, brandId, a.id, 'reply', parent.id);
  const row = { id: newId('cmt'), accountId: ctx.accountId, livemode: true, brandId, ticketId: b.id, body: 'sneaky', parentId: parent.id };
  t.same(await pgError(db('comments').insert(row)), { code: '23503', constraint: 'comments_parent_fk' }, 'a parent on another ticket is refused');
  t.equal((await pgError(db('comments').insert({ ...row, parentId: null, livemode: false }))).code, '23503', 'the other mode cannot reference the ticket');
  t.equal((await pgError(db('comments').insert({ ...row, parentId: null, authorType: 'BOT' }))).code, '23514', 'unknown author types are refused');

  await db('tickets').where({ id: a.id }).delete();
  t.equal(Number(((await db('comments').where({ ticketId: a.id }).count({ n: '*' }).first()) as { n: string }).n), 0, 'a hard-deleted ticket takes its threads');
  await add(ctx, brandId, b.id, 'on b');
  await deleteBrand(ctx, brandId, true);
  t.equal(Number(((await db('comments').where({ brandId }).count({ n: '*' }).first()) as { n: string }).n), 0, 'a deleted brand takes its comments');
});
