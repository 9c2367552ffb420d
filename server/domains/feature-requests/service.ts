import { withTx, type TenantCtx } from '../../core/context.js';
import { notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { accountIs, accountScope, BOUND_TENANT, boundToTenant } from '../../core/model.js';
import * as audit from '../../core/audit.js';
import { FeatureRequest } from './model.js';
import type { CreateFeatureRequestInput, FeatureRequestListInput, FeatureRequestView } from './schemas.js';

/** Each request with its vote count, counted as it is read. */
const VOTE_COUNT = `(select count(*)::int from feature_request_votes v where ${accountIs('v', BOUND_TENANT.account)} and v.feature_request_id = feature_requests.id)`;

type Row = FeatureRequest & { voteCount: number };

function toView(row: Row): FeatureRequestView {
  return {
    id: row.id,
    object: 'feature_request',
    title: row.title,
    featureDetails: row.featureDetails,
    description: row.featureDetails,
    currentBehavior: row.currentBehavior,
    whyItMatters: row.whyItMatters,
    category: row.category,
    images: row.images,
    status: row.status,
    voteCount: Number(row.voteCount),
    authorId: row.authorId,
    createdAt: new Date(row.createdAt).toISOString(),
    updatedAt: new Date(row.updatedAt).toISOString(),
  };
}

function withVotes(ctx: TenantCtx) {
  return FeatureRequest.ofAccount(ctx).select('featureRequests.*', boundToTenant(ctx, `${VOTE_COUNT} as vote_count`));
}

/** The account's board; ties in votes go to the newer request. Ids sort by creation time. */
export async function list(ctx: TenantCtx, input: FeatureRequestListInput): Promise<FeatureRequestView[]> {
  const q = withVotes(ctx).limit(input.limit ?? 50);
  if (input.status) q.where('featureRequests.status', input.status);
  const sortBy = input.sortBy ?? 'votes';
  if (sortBy === 'votes') q.orderByRaw('? desc, feature_requests.id desc', [boundToTenant(ctx, VOTE_COUNT)]);
  else q.orderBy('featureRequests.id', sortBy === 'newest' ? 'desc' : 'asc');
  return ((await q) as Row[]).map(toView);
}

export async function get(ctx: TenantCtx, id: string): Promise<FeatureRequestView> {
  const row = (await withVotes(ctx).where('featureRequests.id', id).first()) as Row | undefined;
  if (!row) throw notFound('Feature request');
  return toView(row);
}

export async function create(ctx: TenantCtx, authorId: string, input: CreateFeatureRequestInput): Promise<FeatureRequestView> {
  return withTx(ctx, async (tx) => {
    const row = await FeatureRequest.query(tx.db)
      .insert({
        id: newId(ID_PREFIX.featureRequest),
        accountId: tx.accountId,
        title: input.title.trim(),
        featureDetails: input.featureDetails,
        currentBehavior: input.currentBehavior ?? null,
        whyItMatters: input.whyItMatters ?? null,
        category: input.category ?? null,
        images: input.images ?? [],
        authorId,
      })
      .returning('*');
    await audit.record(tx, { brandId: null, entityType: 'feature_request', entityId: row.id, event: 'feature_request.created', metadata: { title: row.title } });
    return toView(Object.assign(row, { voteCount: 0 }));
  });
}

/**
 * One vote per member and request: voting again, or taking back a vote never cast, changes
 * nothing and is not an error (the dashboard's button may be pressed twice). 404 for a request the
 * caller's account does not have. Answers whether anything changed.
 */
export async function vote(ctx: TenantCtx, memberId: string, id: string, on: boolean): Promise<boolean> {
  return withTx(ctx, async (tx) => {
    if (!(await FeatureRequest.ofAccount(tx).where('featureRequests.id', id).select('id').first())) throw notFound('Feature request');
    const changed = on
      ? await tx.db.raw<{ rowCount: number }>('insert into feature_request_votes (account_id, feature_request_id, member_id) values (?, ?, ?) on conflict do nothing', [
          tx.accountId,
          id,
          memberId,
        ])
      : await tx.db.raw<{ rowCount: number }>('delete from feature_request_votes v where ? and v.feature_request_id = ? and v.member_id = ?', [
          accountScope(tx, 'v'),
          id,
          memberId,
        ]);
    if (!changed.rowCount) return false;
    await audit.record(tx, { brandId: null, entityType: 'feature_request', entityId: id, event: on ? 'feature_request.voted' : 'feature_request.unvoted', metadata: {} });
    return true;
  });
}

/** What the member voted for (newest vote first) and proposed (newest first). */
export async function activity(ctx: TenantCtx, memberId: string): Promise<{ voted: FeatureRequestView[]; authored: FeatureRequestView[] }> {
  const voted = (await withVotes(ctx)
    .join('featureRequestVotes as mv', (j) => j.on('mv.accountId', 'featureRequests.accountId').andOn('mv.featureRequestId', 'featureRequests.id'))
    .where('mv.memberId', memberId)
    .orderBy('mv.createdAt', 'desc')
    .limit(200)) as Row[];
  const authored = (await withVotes(ctx).where('featureRequests.authorId', memberId).orderBy('featureRequests.id', 'desc').limit(200)) as Row[];
  return { voted: voted.map(toView), authored: authored.map(toView) };
}

/** Owners and admins move a request along the board. */
export async function setStatus(ctx: TenantCtx, id: string, status: string): Promise<FeatureRequestView> {
  return withTx(ctx, async (tx) => {
    const before = await get(tx, id);
    if (before.status === status) return before;
    await FeatureRequest.ofAccount(tx)
      .where('featureRequests.id', id)
      .patch({ status, updatedAt: new Date(ctx.services.now()) });
    await audit.record(tx, {
      brandId: null,
      entityType: 'feature_request',
      entityId: id,
      event: 'feature_request.updated',
      changes: [{ field: 'status', from: before.status, to: status }],
    });
    return get(tx, id);
  });
}
