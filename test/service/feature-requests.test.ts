import t from 'tap';
import { systemCtx, tenantCtx, type TenantCtx } from '../../server/core/context.js';
import { newId, ID_PREFIX } from '../../server/core/ids.js';
import * as featureRequests from '../../server/domains/feature-requests/service.js';
import { Member } from '../../server/domains/members/model.js';
import { createAccount } from '../../server/flows/accounts.js';
import { servicesOf } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';

const { db } = await freshDatabase(t);

async function member(ctx: TenantCtx, name: string): Promise<string> {
  const id = newId(ID_PREFIX.member);
  await Member.query(db).insert({ id, accountId: ctx.accountId, email: `${name.toLowerCase()}-${id}@example.com`, name, role: 'member', status: 'active' });
  return id;
}

async function board(): Promise<{ ctx: TenantCtx; ann: string; bob: string; cy: string }> {
  const created = await createAccount(systemCtx(servicesOf(db)), { email: `owner-${Math.random().toString(36).slice(2)}@example.com` });
  const ctx = tenantCtx(systemCtx(servicesOf(db)), created.account.id, true);
  return { ctx, ann: await member(ctx, 'Ann'), bob: await member(ctx, 'Bob'), cy: await member(ctx, 'Cy') };
}

const idea = (title: string) => ({ title, featureDetails: `${title}, please` });

t.test('create answers the request as the dashboard reads it, with an audit entry', async (t) => {
  const { ctx, ann } = await board();
  const made = await featureRequests.create(ctx, ann, {
    title: '  Dark mode ',
    featureDetails: 'A dark theme',
    whyItMatters: 'Night shifts',
    category: 'dashboard',
    images: [{ url: 'https://example.com/mock.png', name: 'mock' }],
  });
  t.match(made, {
    object: 'feature_request',
    title: 'Dark mode',
    featureDetails: 'A dark theme',
    description: 'A dark theme',
    currentBehavior: null,
    whyItMatters: 'Night shifts',
    category: 'dashboard',
    images: [{ url: 'https://example.com/mock.png', name: 'mock' }],
    status: 'new',
    voteCount: 0,
    authorId: ann,
  });
  t.same(await featureRequests.get(ctx, made.id), made, 'read back the same');
  const entry = await db('audit_log').where({ account_id: ctx.accountId, entity_id: made.id }).first();
  t.equal(entry?.event, 'feature_request.created');
});

t.test('one vote per member: voting twice or taking back a vote never cast changes nothing', async (t) => {
  const { ctx, ann, bob } = await board();
  const { id } = await featureRequests.create(ctx, ann, idea('Exports'));
  t.equal(await featureRequests.vote(ctx, bob, id, true), true);
  t.equal(await featureRequests.vote(ctx, bob, id, true), false, 'a second vote is the same vote');
  t.equal((await featureRequests.get(ctx, id)).voteCount, 1);
  t.equal(await featureRequests.vote(ctx, ann, id, false), false, 'Ann never voted');
  t.equal(await featureRequests.vote(ctx, ann, id, true), true);
  t.equal((await featureRequests.get(ctx, id)).voteCount, 2);
  t.equal(await featureRequests.vote(ctx, bob, id, false), true);
  t.equal((await featureRequests.get(ctx, id)).voteCount, 1);
  await Promise.all([1, 2, 3, 4].map(() => featureRequests.vote(ctx, bob, id, true)));
  t.equal((await featureRequests.get(ctx, id)).voteCount, 2, 'concurrent votes of one member count once');
});

t.test('another account cannot see, vote on or read the activity of a request', async (t) => {
  const a = await board();
  const b = await board();
  const { id } = await featureRequests.create(a.ctx, a.ann, idea('Private idea'));
  await t.rejects(featureRequests.get(b.ctx, id), { statusCode: 404, code: 'not_found' });
  await t.rejects(featureRequests.vote(b.ctx, b.ann, id, true), { statusCode: 404, code: 'not_found' });
  await t.rejects(featureRequests.vote(b.ctx, b.ann, id, false), { statusCode: 404, code: 'not_found' });
  t.same(await featureRequests.list(b.ctx, {}), [], "b's board is empty");
  t.equal((await featureRequests.get(a.ctx, id)).voteCount, 0);
});

t.test('list: by votes (ties to the newer), newest, oldest; a status filter; a limit', async (t) => {
  const { ctx, ann, bob, cy } = await board();
  const one = await featureRequests.create(ctx, ann, idea('One'));
  const two = await featureRequests.create(ctx, ann, idea('Two'));
  const three = await featureRequests.create(ctx, bob, idea('Three'));
  for (const m of [ann, bob, cy]) await featureRequests.vote(ctx, m, one.id, true);
  await featureRequests.vote(ctx, cy, three.id, true);
  const titles = async (input: Parameters<typeof featureRequests.list>[1]) => (await featureRequests.list(ctx, input)).map((r) => r.title);
  t.same(await titles({}), ['One', 'Three', 'Two'], 'votes by default');
  t.same(await titles({ sortBy: 'newest' }), ['Three', 'Two', 'One']);
  t.same(await titles({ sortBy: 'oldest' }), ['One', 'Two', 'Three']);
  t.same(await titles({ sortBy: 'votes', limit: 2 }), ['One', 'Three']);
  t.same(await titles({ status: 'planned' }), [], 'nothing is planned yet');
  await db('feature_requests').where({ account_id: ctx.accountId, id: two.id }).update({ status: 'planned' });
  t.same(await titles({ status: 'planned' }), ['Two']);
});

t.test("activity: what the member voted for, newest vote first, and proposed; a removed member's votes go", async (t) => {
  const { ctx, ann, bob } = await board();
  const one = await featureRequests.create(ctx, ann, idea('One'));
  const two = await featureRequests.create(ctx, bob, idea('Two'));
  await featureRequests.vote(ctx, ann, two.id, true);
  await featureRequests.vote(ctx, ann, one.id, true);
  await featureRequests.vote(ctx, bob, one.id, true);
  const mine = await featureRequests.activity(ctx, ann);
  t.same(
    mine.voted.map((r) => r.title),
    ['One', 'Two'],
  );
  t.same(
    mine.authored.map((r) => r.title),
    ['One'],
  );
  t.equal(mine.voted[0]!.voteCount, 2);
  await db('members').where({ account_id: ctx.accountId, id: bob }).delete();
  t.equal((await featureRequests.get(ctx, one.id)).voteCount, 1, "Bob's vote went with him");
  await t.rejects(featureRequests.get(ctx, two.id), { statusCode: 404, code: 'not_found' }, 'and so did his request');
});
