import t from 'tap';
import { systemCtx, tenantCtx, withTx, type TenantCtx } from '../../server/core/context.js';
import { newId, ID_PREFIX } from '../../server/core/ids.js';
import * as comments from '../../server/domains/comments/service.js';
import { Member } from '../../server/domains/members/model.js';
import * as mentions from '../../server/domains/mentions/service.js';
import * as tickets from '../../server/domains/tickets/service.js';
import { createAccount } from '../../server/flows/accounts.js';
import { createBrand } from '../../server/flows/brands.js';
import { createComment, mentionedMemberIds, MAX_MENTIONS_PER_COMMENT } from '../../server/flows/comment-create.js';
import { createTicket } from '../../server/flows/ticket-create.js';
import { merge } from '../../server/flows/ticket-merge.js';
import { servicesOf } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';

const { db } = await freshDatabase(t);

interface Team {
  ctx: TenantCtx;
  test: TenantCtx;
  brandId: string;
  otherBrandId: string;
  ann: string;
  bob: string;
  pending: string;
}

async function member(ctx: TenantCtx, name: string, status: 'active' | 'pending' = 'active'): Promise<string> {
  const id = newId(ID_PREFIX.member);
  await Member.query(db).insert({ id, accountId: ctx.accountId, email: `${name.toLowerCase()}-${id}@example.com`, name, role: 'member', status });
  return id;
}

async function team(): Promise<Team> {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `owner-${Math.random().toString(36).slice(2)}@example.com` });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), created.account.id, true);
  const test = tenantCtx(systemCtx(servicesOf(db)), created.account.id, false);
  const brand = await createBrand(ctx, { name: 'Acme Support', ticketPrefix: 'ACME' });
  const other = await createBrand(ctx, { name: 'Other' });
  return { ctx, test, brandId: brand.id, otherBrandId: other.id, ann: await member(ctx, 'Ann'), bob: await member(ctx, 'Bob'), pending: await member(ctx, 'Pat', 'pending') };
}

const comment = (ctx: TenantCtx, brandId: string, ticketId: string, body: string, metadata: Record<string, unknown> = {}) =>
  createComment(ctx, brandId, ticketId, { body, authorName: 'Carol Agent', metadata });

t.test('the member ids a comment names: in its body and in metadata.mentions, each once, at most 50', async (t) => {
  t.same(mentionedMemberIds('Hi @[Ann Lee](mem_a) and @[Bob](mem_b), again @[Ann](mem_a)', {}), ['mem_a', 'mem_b']);
  t.same(
    mentionedMemberIds('no mention here, not even @Ann or [x](mem_c)', { mentions: [{ memberId: 'mem_d' }, { memberId: 7 }, null, 'x'] }),
    ['mem_d'],
    'only string memberIds of metadata.mentions',
  );
  t.same(mentionedMemberIds('@[](mem_e)', { mentions: 'not a list' }), ['mem_e']);
  const many = Array.from({ length: 80 }, (_, i) => `@[M${i}](mem_${i})`).join(' ');
  t.equal(mentionedMemberIds(many, {}).length, MAX_MENTIONS_PER_COMMENT);
});

t.test('a comment records one mention per active member of the account it names; other ids are only text', async (t) => {
  const a = await team();
  const b = await team();
  const { ticket } = await createTicket(a.ctx, a.brandId, { title: 'Printer on fire' });
  const made = await comment(a.ctx, a.brandId, ticket.id, `@[Ann](${a.ann}) please look; also @[Ann](${a.ann}), @[Pat](${a.pending}) and @[Stranger](${b.ann})`, {
    mentions: [{ memberId: a.ann }, { memberId: a.bob }, { memberId: 'mem_nobody' }],
  });
  t.equal(made.created, true, 'the comment itself is made whatever it names');
  const ann = await mentions.unread(a.ctx, a.ann);
  t.equal(ann.length, 1, 'Ann is mentioned once for the comment, though named three times');
  t.match(ann[0], {
    ticketId: ticket.id,
    brandId: a.brandId,
    commentId: made.comment.id,
    ticketNumber: ticket.ticketNumber,
    ticketTitle: 'Printer on fire',
    brandName: 'Acme Support',
    ticketPrefix: 'ACME',
    mentionedBy: 'Carol Agent',
  });
  t.equal((await mentions.unread(a.ctx, a.bob)).length, 1, 'Bob, named in metadata.mentions only');
  t.same(await mentions.unread(a.ctx, a.pending), [], 'an invited member who has not joined is not mentioned');
  t.same(await mentions.unread(b.ctx, b.ann), [], "another account's member named by id is not");
  t.equal(
    await db('mentions')
      .where({ account_id: b.ctx.accountId })
      .count()
      .first()
      .then((r) => Number(r!.count)),
    0,
  );
});

t.test('unread: newest first; acknowledging one is idempotent and only for the member it names', async (t) => {
  const a = await team();
  const other = await team();
  const { ticket } = await createTicket(a.ctx, a.brandId, { title: 'One' });
  const first = await comment(a.ctx, a.brandId, ticket.id, `@[Ann](${a.ann}) first`);
  const second = await comment(a.ctx, a.brandId, ticket.id, `@[Ann](${a.ann}) second; @[Bob](${a.bob})`);
  const unread = await mentions.unread(a.ctx, a.ann);
  t.same(
    unread.map((m) => m.commentId),
    [second.comment.id, first.comment.id],
    'newest first',
  );
  const bobs = await mentions.unread(a.ctx, a.bob);
  await t.rejects(mentions.acknowledge(a.ctx, a.ann, bobs[0]!.id), { statusCode: 404, code: 'not_found' }, "Bob's mention is not Ann's to acknowledge");
  await t.rejects(mentions.acknowledge(other.ctx, other.ann, unread[0]!.id), { statusCode: 404, code: 'not_found' }, 'nor anyone of another account');
  await t.rejects(mentions.acknowledge(a.test, a.ann, unread[0]!.id), { statusCode: 404, code: 'not_found' }, 'nor in the other mode');
  t.equal(await mentions.acknowledge(a.ctx, a.ann, unread[0]!.id), 1);
  t.equal(await mentions.acknowledge(a.ctx, a.ann, unread[0]!.id), 0, 'again: nothing more to do, no error');
  t.same(
    (await mentions.unread(a.ctx, a.ann)).map((m) => m.commentId),
    [first.comment.id],
  );
  t.equal((await mentions.unread(a.ctx, a.bob)).length, 1, "Bob's stays unread");
});

t.test("acknowledging a ticket's mentions: all of the member's on it, none elsewhere; 404 for a ticket the caller cannot see", async (t) => {
  const a = await team();
  const other = await team();
  const { ticket: one } = await createTicket(a.ctx, a.brandId, { title: 'One' });
  const { ticket: two } = await createTicket(a.ctx, a.brandId, { title: 'Two' });
  await comment(a.ctx, a.brandId, one.id, `@[Ann](${a.ann}) a`);
  await comment(a.ctx, a.brandId, one.id, `@[Ann](${a.ann}) b @[Bob](${a.bob})`);
  await comment(a.ctx, a.brandId, two.id, `@[Ann](${a.ann}) c`);
  t.equal(await mentions.acknowledgeTicket(a.ctx, a.ann, one.id), 2);
  t.same(
    (await mentions.unread(a.ctx, a.ann)).map((m) => m.ticketId),
    [two.id],
    "the other ticket's mention stays",
  );
  t.equal((await mentions.unread(a.ctx, a.bob)).length, 1, "and so does Bob's on the same ticket");
  t.equal(await mentions.acknowledgeTicket(a.ctx, a.ann, one.id), 0);
  await t.rejects(mentions.acknowledgeTicket(other.ctx, other.ann, one.id), { statusCode: 404, code: 'not_found' }, "another account's ticket");
  await t.rejects(mentions.acknowledgeTicket(a.ctx, a.ann, 'tkt_unknown'), { statusCode: 404, code: 'not_found' });
  const limited = { ...a.ctx, brandScope: { allBrands: false, brandIds: [a.otherBrandId] } };
  await t.rejects(mentions.acknowledgeTicket(limited, a.ann, two.id), { statusCode: 404, code: 'not_found' }, 'a brand outside the caller’s scope');
});

t.test('what is not shown: brands outside the scope, deleted comments and tickets, the test mode', async (t) => {
  const a = await team();
  const { ticket: kept } = await createTicket(a.ctx, a.brandId, { title: 'Kept' });
  const { ticket: gone } = await createTicket(a.ctx, a.brandId, { title: 'Deleted' });
  const { ticket: elsewhere } = await createTicket(a.ctx, a.otherBrandId, { title: 'Other brand' });
  const withdrawn = await comment(a.ctx, a.brandId, kept.id, `@[Ann](${a.ann}) withdrawn`);
  await comment(a.ctx, a.brandId, kept.id, `@[Ann](${a.ann}) kept`);
  await comment(a.ctx, a.brandId, gone.id, `@[Ann](${a.ann}) on a ticket deleted later`);
  await comment(a.ctx, a.otherBrandId, elsewhere.id, `@[Ann](${a.ann}) other brand`);
  const testBrand = await createBrand(a.test, { name: 'Sandbox' });
  const { ticket: sandbox } = await createTicket(a.test, testBrand.id, { title: 'Sandbox' });
  await comment(a.test, testBrand.id, sandbox.id, `@[Ann](${a.ann}) in test mode`);

  await comments.remove(a.ctx, a.brandId, withdrawn.comment.id);
  await tickets.remove(a.ctx, a.brandId, gone.id);
  t.same((await mentions.unread(a.ctx, a.ann)).map((m) => m.ticketTitle).sort(), ['Kept', 'Other brand']);
  const limited = { ...a.ctx, brandScope: { allBrands: false, brandIds: [a.brandId] } };
  const mine = await mentions.unread(limited, a.ann);
  t.same(
    mine.map((m) => m.ticketTitle),
    ['Kept'],
    'a member assigned to one brand sees its mentions only',
  );
  const hidden = (await mentions.unread(a.ctx, a.ann)).find((m) => m.ticketTitle === 'Other brand')!;
  await t.rejects(mentions.acknowledge(limited, a.ann, hidden.id), { statusCode: 404, code: 'not_found' });
  t.same(
    (await mentions.unread(a.test, a.ann)).map((m) => m.ticketTitle),
    ['Sandbox'],
    'test mode keeps its own',
  );
});

t.test('a merge moves the mentions with their comments to the target ticket', async (t) => {
  const a = await team();
  const { ticket: target } = await createTicket(a.ctx, a.brandId, { title: 'Target' });
  const { ticket: source } = await createTicket(a.ctx, a.brandId, { title: 'Source' });
  await comment(a.ctx, a.brandId, source.id, `@[Ann](${a.ann}) on the source`);
  await merge(a.ctx, a.brandId, target.id, { sourceTicketIds: [source.id] });
  const [moved] = await mentions.unread(a.ctx, a.ann);
  t.match(moved, { ticketId: target.id, ticketTitle: 'Target' });
  t.equal(await mentions.acknowledgeTicket(a.ctx, a.ann, target.id), 1, "acknowledged with the target's");
});

t.test("a comment's mentions commit or roll back with it", async (t) => {
  const a = await team();
  const { ticket } = await createTicket(a.ctx, a.brandId, { title: 'Rolled back' });
  await t.rejects(
    withTx(a.ctx, async (tx) => {
      await comment(tx, a.brandId, ticket.id, `@[Ann](${a.ann})`);
      throw new Error('abandon');
    }),
    /abandon/,
  );
  t.same(await mentions.unread(a.ctx, a.ann), []);
});
