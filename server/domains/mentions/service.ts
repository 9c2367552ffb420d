import { canSeeBrand, type TenantCtx } from '../../core/context.js';
import { notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { preparedRows, sameTenant, scopeOf, tenantScope } from '../../core/model.js';
import type { SqlFragment } from '../../core/db.js';
import { Mention } from './model.js';
import type { MentionView } from './schemas.js';

/** Unread mentions a member is shown at once; older ones wait until these are acknowledged. */
export const UNREAD_LIMIT = 100;

export interface MentionsOfComment {
  brandId: string;
  ticketId: string;
  commentId: string;
  mentionedBy: string | null;
  /** Members of the account, already checked by the caller. */
  memberIds: readonly string[];
}

/** In the comment's transaction: one mention per member named; a member named twice counts once. */
export async function record(tx: TenantCtx, m: MentionsOfComment): Promise<number> {
  if (!m.memberIds.length) return 0;
  const rows = [...new Set(m.memberIds)].map((memberId) => ({
    ...scopeOf(tx),
    id: newId(ID_PREFIX.mention),
    brandId: m.brandId,
    ticketId: m.ticketId,
    commentId: m.commentId,
    memberId,
    mentionedBy: m.mentionedBy,
  }));
  const inserted = await Mention.query(tx.db).insert(rows).onConflict(['accountId', 'commentId', 'memberId']).ignore().returning('id');
  return (inserted as unknown as { id: string }[]).length;
}

/**
 * record's INSERT as a CTE `mentioned`, for a statement that also inserts the comment (flows/comment-create-statement.ts):
 * `when`, a condition the rows wait on (e.g. "the comment was inserted").
 */
export function recordParts(tx: TenantCtx, m: MentionsOfComment, when: SqlFragment): SqlFragment {
  const rows = [...new Set(m.memberIds)].map((memberId) => ({ id: newId(ID_PREFIX.mention), member_id: memberId }));
  const { accountId, livemode } = scopeOf(tx);
  return {
    sql: `mentioned as (
      insert into mentions (account_id, livemode, id, brand_id, ticket_id, comment_id, member_id, mentioned_by)
      select ?, ?, r.id, ?, ?, ?, r.member_id, ? from jsonb_to_recordset(?::jsonb) as r(id text, member_id text) where ${when.sql}
      on conflict (account_id, comment_id, member_id) do nothing
    )`,
    bindings: [accountId, livemode, m.brandId, m.ticketId, m.commentId, m.mentionedBy, JSON.stringify(rows), ...when.bindings],
  };
}

/** Brands the caller may not see are left out, as if their mentions did not exist. */
function visibleBrands(ctx: TenantCtx, alias: string): { sql: string; bindings: unknown[] } {
  return ctx.brandScope.allBrands ? { sql: 'true', bindings: [] } : { sql: `${alias}.brand_id = any(?::text[])`, bindings: [[...ctx.brandScope.brandIds]] };
}

/** The member's unread mentions in live comments of live tickets, newest first, with what the notification shows. */
export async function unread(ctx: TenantCtx, memberId: string): Promise<MentionView[]> {
  const brands = visibleBrands(ctx, 'm');
  const rows = await preparedRows<Record<string, unknown>>(
    ctx,
    ctx.db.raw(
      `select m.id, m.ticket_id, m.brand_id, m.comment_id, m.mentioned_by, m.created_at,
            t.ticket_number, t.title, b.name as brand_name, b.ticket_prefix
       from mentions m
       join comments c on ${sameTenant('c', 'm')} and c.id = m.comment_id and c.deleted_at is null
       join tickets t on ${sameTenant('t', 'm')} and t.id = m.ticket_id and t.deleted_at is null
       join brands b on ${sameTenant('b', 'm')} and b.id = m.brand_id
      where ? and m.member_id = ? and m.acknowledged_at is null and ${brands.sql}
      order by m.created_at desc, m.id desc
      limit ?`,
      [tenantScope(ctx, 'm'), memberId, ...brands.bindings, UNREAD_LIMIT] as never[],
    ),
  );
  return rows.map((r) => ({
    id: r.id as string,
    ticketId: r.ticketId as string,
    brandId: r.brandId as string,
    commentId: r.commentId as string,
    ticketNumber: Number(r.ticketNumber),
    ticketTitle: r.title as string,
    brandName: r.brandName as string,
    ticketPrefix: r.ticketPrefix as string,
    mentionedBy: (r.mentionedBy as string | null) ?? null,
    createdAt: new Date(r.createdAt as string).toISOString(),
  }));
}

/** Acknowledges one of the member's mentions (again: a no-op); 404 when it is not theirs to see. */
export async function acknowledge(ctx: TenantCtx, memberId: string, mentionId: string): Promise<number> {
  const mention = await Mention.scoped(ctx).where({ 'mentions.id': mentionId, 'mentions.memberId': memberId }).select('id', 'brandId', 'acknowledgedAt').first();
  if (!mention || !canSeeBrand(ctx.brandScope, mention.brandId)) throw notFound('Mention');
  if (mention.acknowledgedAt) return 0;
  return Mention.scoped(ctx)
    .where('mentions.id', mentionId)
    .whereNull('acknowledgedAt')
    .patch({ acknowledgedAt: new Date(ctx.services.now()) });
}

/** Acknowledges every mention of the member on one ticket (the ticket must be visible to the caller). */
export async function acknowledgeTicket(ctx: TenantCtx, memberId: string, ticketId: string): Promise<number> {
  const brands = visibleBrands(ctx, 't');
  const visible = await ctx.db.raw<{ rows: unknown[] }>(`select 1 from tickets t where ? and t.id = ? and t.deleted_at is null and ${brands.sql}`, [
    tenantScope(ctx, 't'),
    ticketId,
    ...brands.bindings,
  ] as never[]);
  if (!visible.rows.length) throw notFound('Ticket');
  return Mention.scoped(ctx)
    .where({ 'mentions.ticketId': ticketId, 'mentions.memberId': memberId })
    .whereNull('acknowledgedAt')
    .patch({ acknowledgedAt: new Date(ctx.services.now()) });
}
