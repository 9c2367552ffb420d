import { ALL_BRANDS, hasRole, withTx, type BaseCtx, type BrandScope, type MemberRole, type TenantCtx } from '../../core/context.js';
import { assertBrandsExist } from '../../core/brand.js';
import { badRequest } from '../../core/errors.js';
import { newId, ID_PREFIX, normalizeBrandId } from '../../core/ids.js';
import { normalizeEmail } from '../../core/text.js';
import * as audit from '../../core/audit.js';
import { credentialsChanged } from '../../core/credential-cache.js';
import * as ticketNames from '../../core/ticket-names.js';
import { lockAcrossAccounts } from '../../core/model.js';
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
  const row = await Member.query(ctx.db)
    .insert({
      id: newId(ID_PREFIX.member),
      accountId: ctx.accountId,
      email: normalizeEmail(email),
      name,
      role: 'owner',
      status: 'active',
    })
    .returning('*');
  await audit.record(ctx, { brandId: null, entityType: 'member', entityId: row.id, event: 'member.created', metadata: { email: row.email, role: row.role } });
  return toView(row);
}

/** Members in the order they joined; their ids are what tickets take as assigneeId. */
export async function list(ctx: TenantCtx): Promise<MemberView[]> {
  const rows = await Member.ofAccount(ctx).orderBy('id', 'asc');
  return rows.map(toView);
}

/** For tickets: whether `memberId` is an active member of the caller's account (the only valid assignees; an invitee is not one yet). */
export async function isMember(ctx: TenantCtx, memberId: string): Promise<boolean> {
  return Boolean(await Member.ofAccount(ctx).where({ 'members.id': memberId, 'members.status': 'active' }).select('id').first());
}

/** The account's members among `memberIds` (unknown ids, and other accounts' members, are left out). */
export async function findMany(ctx: TenantCtx, memberIds: readonly string[]): Promise<MemberView[]> {
  if (!memberIds.length) return [];
  return (await Member.ofAccount(ctx).whereIn('members.id', [...new Set(memberIds)])).map(toView);
}

/** The account's active owners and admins (they see every brand), in the order they joined. */
export async function activeAdmins(ctx: TenantCtx): Promise<MemberView[]> {
  return (await Member.ofAccount(ctx).where('members.status', 'active').whereIn('members.role', ['owner', 'admin']).orderBy('id', 'asc')).map(toView);
}

/** A person's membership of one account (one organization). */
export interface Membership {
  accountId: string;
  memberId: string;
  email: string;
  name: string | null;
  role: MemberRole;
}

/**
 * A person's active memberships in every account, oldest first: sign-in starts from an email
 * address alone, and a person is their address (one member row per organization).
 */
export async function activeMembershipsOf(ctx: BaseCtx, email: string): Promise<Membership[]> {
  const rows = await Member.query(ctx.db)
    .where({ email: normalizeEmail(email), status: 'active' })
    .orderBy('id', 'asc');
  return rows.map((r) => ({ accountId: r.accountId, memberId: r.id, email: r.email, name: r.name, role: r.role }));
}

/** Who a session acts as: the member, their role, and the brands they may see. */
export interface SessionMember extends Membership {
  brandScope: BrandScope;
}

/** Owners and admins see every brand; other members the brands assigned to them. */
function brandScopeOf(row: Member): BrandScope {
  if (hasRole(row.role, 'admin') || row.allBrands) return ALL_BRANDS;
  return { allBrands: false, brandIds: row.brandIds };
}

function asSessionMember(row: Member): SessionMember {
  return { accountId: row.accountId, memberId: row.id, email: row.email, name: row.name, role: row.role, brandScope: brandScopeOf(row) };
}

/** The member a session belongs to, or null when they were removed or are not active. */
export async function sessionMember(ctx: Pick<TenantCtx, 'db' | 'accountId'>, memberId: string): Promise<SessionMember | null> {
  const row = await Member.ofAccount(ctx).where('members.id', memberId).first();
  if (!row || row.status !== 'active') return null;
  return asSessionMember(row);
}

/** The account's active member with this address (any case), with the brands they may see; null for none. */
export async function activeMemberByEmail(ctx: Pick<TenantCtx, 'db' | 'accountId'>, email: string): Promise<SessionMember | null> {
  const row = await Member.ofAccount(ctx)
    .where({ 'members.email': normalizeEmail(email), 'members.status': 'active' })
    .first();
  return row ? asSessionMember(row) : null;
}

export interface NewMember {
  email: string;
  name?: string | null;
  role: Exclude<MemberRole, 'owner'>;
  allBrands?: boolean;
  brandIds?: string[];
}

/**
 * Adds an active member with a role and brand assignments (live brands: sessions work in live
 * mode). allBrands defaults to true unless brandIds are given, as for API keys.
 */
export async function add(ctx: TenantCtx, input: NewMember): Promise<MemberView> {
  return withTx(ctx, async (tx) => {
    const email = normalizeEmail(input.email);
    if (await Member.ofAccount(tx).where('members.email', email).first()) {
      throw badRequest(`${email} is already a member of this organization`, [{ field: 'email', message: 'is already a member' }], 'already_member');
    }
    const brandIds = [...new Set((input.brandIds ?? []).map(normalizeBrandId))];
    const allBrands = input.allBrands ?? input.brandIds === undefined;
    await assertBrandsExist(tx, brandIds);
    const row = await Member.query(tx.db)
      .insert({
        id: newId(ID_PREFIX.member),
        accountId: tx.accountId,
        email,
        name: input.name ?? null,
        role: input.role,
        status: 'active',
        allBrands,
        brandIds: allBrands ? [] : brandIds,
      })
      .returning('*');
    await audit.record(tx, {
      brandId: null,
      entityType: 'member',
      entityId: row.id,
      event: 'member.created',
      metadata: { email: row.email, role: row.role, allBrands, brandIds: row.brandIds },
    });
    return toView(row);
  });
}

/** Drops a deleted brand from every member's assignments, inside the brand delete transaction. */
export async function forgetBrand(ctx: TenantCtx, brandId: string): Promise<void> {
  const changed = await Member.ofAccount(ctx).whereRaw('? = any(brand_ids)', [brandId]).orderBy('id').forUpdate();
  if (!changed.length) return;
  await Member.ofAccount(ctx)
    .whereIn(
      'members.id',
      changed.map((m) => m.id),
    )
    .patch({ brandIds: ctx.db.raw('array_remove(brand_ids, ?)', [brandId]) as unknown as string[] });
  await audit.recordMany(
    ctx,
    changed.map((m) => ({
      brandId: null,
      entityType: 'member',
      entityId: m.id,
      event: 'member.updated',
      changes: [{ field: 'brandIds', from: m.brandIds, to: m.brandIds.filter((id) => id !== brandId) }],
      metadata: { email: m.email, reason: 'brand_deleted' },
    })),
  );
  await credentialsChanged(
    ctx,
    'sessions',
    changed.map((m) => m.id),
  );
}

/** A person as an identity provider describes them. */
export interface ProviderUser {
  provider: string;
  userId: string;
  email: string | null;
  name: string | null;
}

/**
 * The memberships, in every account, of a provider's user: those linked to it, else those of its
 * address, which are linked now (the first notification about a user links them). Locked.
 */
export async function linkedMemberships(tx: BaseCtx, user: ProviderUser): Promise<Member[]> {
  const ofUser = () => Member.query(tx.db).where({ identityProvider: user.provider, identityUserId: user.userId });
  await lockAcrossAccounts(tx, 'members', await ofUser().select('accountId', 'id'));
  const linked = await ofUser().orderBy('id');
  if (linked.length || !user.email) return linked;
  const linkedNow = (await Member.query(tx.db)
    .where({ email: normalizeEmail(user.email) })
    .whereNull('identityUserId')
    .patch({ identityProvider: user.provider, identityUserId: user.userId } as never)
    .returning('*')) as unknown as Member[];
  await credentialsChanged(
    tx,
    'sessions',
    linkedNow.map((m) => m.id),
  );
  return linkedNow;
}

/**
 * The provider's name and address for a membership; the address only when no other member of
 * that account has it (a person is one member per organization). Returns what changed.
 */
export async function applyProviderUser(tx: BaseCtx, member: Member, user: ProviderUser): Promise<{ field: string; from: unknown; to: unknown }[]> {
  const changes: { field: string; from: unknown; to: unknown }[] = [];
  const patch: Partial<Member> = {};
  if (user.name && user.name !== member.name) {
    patch.name = user.name;
    changes.push({ field: 'name', from: member.name, to: user.name });
  }
  const email = user.email ? normalizeEmail(user.email) : null;
  if (email && email !== member.email) {
    const taken = await Member.query(tx.db).where({ accountId: member.accountId, email }).whereNot('id', member.id).first();
    if (!taken) {
      patch.email = email;
      changes.push({ field: 'email', from: member.email, to: email });
    }
  }
  if (changes.length) {
    await Member.query(tx.db)
      .where({ accountId: member.accountId, id: member.id })
      .patch({ ...patch, updatedAt: new Date(tx.services.now()) });
    await ticketNames.memberChanged(tx, member.accountId, member.id);
    await credentialsChanged(tx, 'sessions', [member.id]);
  }
  return changes;
}
