import type { TenantCtx } from '../../core/context.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { normalizeEmail } from '../../core/text.js';
import * as audit from '../../core/audit.js';
import { Member } from './model.js';
import type { MemberView } from './schemas.js';

export function toView(row: Member): MemberView {
  const [firstName, ...rest] = (row.name ?? '').trim().split(/\s+/);
  return {
    id: row.id,
    object: 'member',
    email: row.email,
    name: row.name,
    firstName: firstName || null,
    lastName: rest.length ? rest.join(' ') : null,
    role: row.role,
    status: row.status,
    createdAt: row.createdAt.toISOString(),
  };
}

/**
 * Called inside the account-creation transaction. Members belong to the account in both modes;
 * their audit entries are account-level (brandId null) and written in live mode (ctx is live).
 */
export async function createOwner(ctx: TenantCtx, email: string, name: string | null): Promise<MemberView> {
  const row = await Member.query(ctx.db).insertAndFetch({
    id: newId(ID_PREFIX.member),
    accountId: ctx.accountId,
    email: normalizeEmail(email),
    name,
    role: 'owner',
    status: 'active',
  });
  await audit.record(ctx, { brandId: null, entityType: 'member', entityId: row.id, event: 'member.created', metadata: { email: row.email, role: row.role } });
  return toView(row);
}

/** Members in the order they joined; their ids are what tickets take as assigneeId. */
export async function list(ctx: TenantCtx): Promise<MemberView[]> {
  const rows = await Member.ofAccount(ctx).orderBy('id', 'asc');
  return rows.map(toView);
}

/** For tickets: whether `memberId` is a member of the caller's account (the only valid assignees). */
export async function isMember(ctx: TenantCtx, memberId: string): Promise<boolean> {
  return Boolean(await Member.ofAccount(ctx).where('members.id', memberId).select('id').first());
}

/** The account's members among `memberIds` (unknown ids, and other accounts' members, are left out). */
export async function findMany(ctx: TenantCtx, memberIds: readonly string[]): Promise<MemberView[]> {
  if (!memberIds.length) return [];
  return (await Member.ofAccount(ctx).whereIn('members.id', [...new Set(memberIds)])).map(toView);
}
