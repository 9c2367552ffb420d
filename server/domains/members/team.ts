import * as audit from '../../core/audit.js';
import { credentialsChanged } from '../../core/credential-cache.js';
import { assertBrandsExist, Brand, requireBrand } from '../../core/brand.js';
import { canSeeBrand, hasRole, tenantCtx, withTx, type BaseCtx, type MemberRole, type SessionCaller, type TenantCtx } from '../../core/context.js';
import { badRequest, forbidden, HttpError, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX, normalizeBrandId } from '../../core/ids.js';
import { normalizeEmail } from '../../core/text.js';
import { Member } from './model.js';
import { queueFileDeletions } from '../../core/file-deletions.js';
import { accountScope, lockAcrossAccounts } from '../../core/model.js';
import * as ticketNames from '../../core/ticket-names.js';
import type { BrandAssignmentsInput, BrandAssignmentsView, InviteInput, TeamListView, TeamMemberView } from './team-schemas.js';

/**
 * Team management by signed-in members: the team list, invitations (a pending member row; its id is
 * the invite id), roles, removal, ownership and brand assignments. Every change is audited as the
 * member who made it, in its transaction. Sessions read their member on every request, so a
 * change of role or brands, or a removal, holds from the member's next request on.
 * See docs/decisions/0047-member-invitations.md and 0048-team-management-rules.md.
 */

/** How long an invitation (and its link) works. */
export const INVITE_TTL_MS = 7 * 24 * 60 * 60_000;

function callerOf(ctx: TenantCtx): SessionCaller {
  if (!ctx.session) throw new Error('team management takes a member session (auth: session)');
  return ctx.session;
}

function nameParts(name: string | null): { firstName?: string; lastName?: string } {
  const [first, ...rest] = (name ?? '').trim().split(/\s+/);
  return { ...(first ? { firstName: first } : {}), ...(rest.length ? { lastName: rest.join(' ') } : {}) };
}

/** Whether the member's session may work in the brand: owners, admins, all-brand members, those assigned to it. */
function canWorkIn(row: Member, brandId: string): boolean {
  return hasRole(row.role, 'admin') || row.allBrands || row.brandIds.includes(brandId);
}

/** A member as the dashboard reads it; assigned brands outside the caller's own scope are left out (they read as 404 to the caller anyway). */
function teamView(ctx: TenantCtx, row: Member): TeamMemberView {
  const pending = row.status === 'pending';
  return {
    id: row.id,
    email: row.email,
    ...nameParts(row.name),
    role: row.role,
    status: row.status,
    ...(pending && row.invitedAt ? { sentAt: row.invitedAt.toISOString() } : {}),
    ...(pending && row.inviteExpiresAt ? { expiresAt: row.inviteExpiresAt.toISOString() } : {}),
    brandAssignment: { allBrands: row.allBrands, brandIds: row.allBrands ? [] : row.brandIds.filter((id) => canSeeBrand(ctx.brandScope, id)) },
  };
}

function memberFact(row: Member, event: string, changes: audit.Change[] = [], metadata: Record<string, unknown> = {}): audit.AuditFact {
  return { brandId: null, entityType: 'member', entityId: row.id, event, changes, metadata: { email: row.email, ...metadata } };
}

/** The member, locked for the rest of the transaction; another account's id reads as unknown. */
async function lockMember(tx: TenantCtx, memberId: string): Promise<Member> {
  const row = await Member.ofAccount(tx).where('members.id', memberId).forUpdate().first();
  if (!row) throw notFound('Member');
  return row;
}

/** Active members and pending invitations, in the order they were added; with brandId, those who may work in that brand. */
export async function listTeam(ctx: TenantCtx, brandId?: string): Promise<TeamListView> {
  const brand = brandId === undefined ? null : (await requireBrand(ctx, brandId)).id;
  const rows = (await Member.ofAccount(ctx).orderBy('members.id', 'asc')).filter((r) => brand === null || canWorkIn(r, brand));
  return {
    members: rows.filter((r) => r.status === 'active').map((r) => teamView(ctx, r)),
    invites: rows.filter((r) => r.status === 'pending').map((r) => teamView(ctx, r)),
  };
}

/** Brand assignments as given, checked as an API key's scope is: live brands of the account, not both all and a list. */
async function resolveAssignments(ctx: TenantCtx, input: { allBrands?: boolean; brandIds?: string[] }): Promise<{ allBrands: boolean; brandIds: string[] }> {
  const brandIds = [...new Set((input.brandIds ?? []).map(normalizeBrandId))];
  const allBrands = input.allBrands ?? input.brandIds === undefined;
  if (allBrands && brandIds.length > 0) {
    throw badRequest('Give either allBrands: true or a list of brandIds, not both', [{ field: 'brandIds', message: 'must be empty when allBrands is true' }]);
  }
  await assertBrandsExist(ctx, brandIds);
  return { allBrands, brandIds };
}

/** An invitation made or renewed: who to mail, and until when its link works. */
export interface Invitation {
  memberId: string;
  email: string;
  role: MemberRole;
  expiresAt: Date;
  /** The address was already invited: the invitation was renewed with the new role and brands. */
  renewed: boolean;
}

/**
 * Invites an address (in the caller's transaction): a new pending member, or, for an address
 * already invited, the same pending member with the new role and brands and a fresh expiry. An
 * active member's address is refused (400 already_member).
 */
export async function invite(tx: TenantCtx, input: InviteInput): Promise<Invitation> {
  const email = normalizeEmail(input.email);
  // Two invitations of one address at once: the second waits for the first, then renews it.
  await tx.db.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [`ticketd:invite:${tx.accountId}:${email}`]);
  const existing = await Member.ofAccount(tx).where('members.email', email).forUpdate().first();
  if (existing?.status === 'active') {
    throw badRequest(`${email} is already a member of this organization`, [{ field: 'email', message: 'is already a member' }], 'already_member');
  }
  const scope = await resolveAssignments(tx, input);
  const now = new Date(tx.services.now());
  const expiresAt = new Date(now.getTime() + INVITE_TTL_MS);
  const fields = { role: input.role, ...scope, invitedAt: now, inviteExpiresAt: expiresAt };
  if (existing) {
    await Member.ofAccount(tx)
      .where('members.id', existing.id)
      .patch({ ...fields, updatedAt: now });
    await credentialsChanged(tx, 'sessions', [existing.id]);
    const changes = audit.changesBetween({ role: existing.role, allBrands: existing.allBrands, brandIds: existing.brandIds }, { role: input.role, ...scope }, [
      'role',
      'allBrands',
      'brandIds',
    ]);
    await audit.record(tx, memberFact(existing, 'member.invited', changes, { renewed: true, expiresAt: expiresAt.toISOString() }));
    return { memberId: existing.id, email, role: input.role, expiresAt, renewed: true };
  }
  const row = await Member.query(tx.db)
    .insert({ id: newId(ID_PREFIX.member), accountId: tx.accountId, email, name: null, status: 'pending', ...fields })
    .returning('*');
  await audit.record(tx, memberFact(row, 'member.invited', [], { role: row.role, ...scope, expiresAt: expiresAt.toISOString() }));
  return { memberId: row.id, email, role: row.role, expiresAt, renewed: false };
}

/** A pending member's invitation, sent again with a fresh expiry (in the caller's transaction); 400 member_not_pending once they joined. */
export async function renewInvite(tx: TenantCtx, memberId: string): Promise<Invitation> {
  const row = await lockMember(tx, memberId);
  if (row.status !== 'pending') {
    throw badRequest(`${row.email} is not a pending invitation: they already joined`, [{ field: 'memberId', message: 'is not pending' }], 'member_not_pending');
  }
  const now = new Date(tx.services.now());
  const expiresAt = new Date(now.getTime() + INVITE_TTL_MS);
  await Member.ofAccount(tx).where('members.id', row.id).patch({ invitedAt: now, inviteExpiresAt: expiresAt, updatedAt: now });
  await credentialsChanged(tx, 'sessions', [row.id]);
  await audit.record(tx, memberFact(row, 'member.invite_resent', [], { expiresAt: expiresAt.toISOString() }));
  return { memberId: row.id, email: row.email, role: row.role, expiresAt, renewed: true };
}

const isOpen = (row: Member, now: number) => row.status === 'pending' && row.inviteExpiresAt !== null && row.inviteExpiresAt.getTime() > now;

/** The pending member becomes active, audited as themselves: accepting is the invitee's own act. */
async function activate(ctx: TenantCtx, row: Member, via: 'link' | 'accept_invite' | 'sso'): Promise<void> {
  const mctx: TenantCtx = { ...ctx, actor: { type: 'user', id: row.id, name: row.name ?? row.email } };
  await Member.ofAccount(mctx)
    .where('members.id', row.id)
    .patch({ status: 'active', updatedAt: new Date(ctx.services.now()) });
  await credentialsChanged(ctx, 'sessions', [row.id]);
  await audit.record(mctx, memberFact(row, 'member.invite_accepted', [{ field: 'status', from: 'pending', to: 'active' }], { role: row.role, via }));
}

/**
 * Signing in with an invitation's link accepts the invitation (in verify's transaction): that is
 * how an invitee without any other membership gets a session at all. An expired invitation stays
 * pending, and the sign-in is refused as for any stale link.
 */
export async function acceptOnSignIn(ctx: TenantCtx, memberId: string): Promise<void> {
  const row = await Member.ofAccount(ctx).where('members.id', memberId).forUpdate().first();
  if (row && isOpen(row, ctx.services.now())) await activate(ctx, row, 'link');
}

/**
 * Single sign-on admits the person the organization's identity provider vouched for, in the
 * sign-in's transaction: its active member with that address; a pending invitee, who accepts the
 * invitation (expired or not: the provider's word is what an invitation's link stands for); or a new
 * active member with `role` and every brand, as an invitation that names no brands makes one.
 * Serialized with invitations of the same address. The new member is audited as themselves.
 */
export async function admitBySso(tx: TenantCtx, email: string, name: string | null, role: Exclude<MemberRole, 'owner'>): Promise<{ memberId: string; created: boolean }> {
  const address = normalizeEmail(email);
  await tx.db.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [`ticketd:invite:${tx.accountId}:${address}`]);
  const existing = await Member.ofAccount(tx).where('members.email', address).forUpdate().first();
  if (existing?.status === 'pending') await activate(tx, existing, 'sso');
  if (existing) return { memberId: existing.id, created: false };
  const id = newId(ID_PREFIX.member);
  const joined: TenantCtx = { ...tx, actor: { type: 'user', id, name: name ?? address } };
  const row = await Member.query(tx.db).insert({ id, accountId: tx.accountId, email: address, name, role, status: 'active', allBrands: true, brandIds: [] }).returning('*');
  await audit.record(joined, memberFact(row, 'member.created', [], { role, allBrands: true, brandIds: [], via: 'sso' }));
  return { memberId: row.id, created: true };
}

/**
 * POST /v1/auth/accept-invite: the invitation `inviteId` addressed to `email` (the session's
 * member's address) is accepted. The session may be one of another organization (the person signed
 * in elsewhere), so the invitation is found by address and id in any account: the address is what
 * the invitation names and what the session proves. A session opened by single sign-on proves the
 * address to its own organization only (`onlyAccountId`). Accepting again is answered as the first
 * time; unknown, expired, withdrawn or someone else's invitations are 404.
 */
export async function acceptInvite(ctx: BaseCtx, email: string, inviteId: string, onlyAccountId?: string): Promise<{ accountId: string; memberId: string }> {
  return withTx(ctx, async (tx) => {
    const query = Member.query(tx.db)
      .where({ email: normalizeEmail(email), id: inviteId })
      .whereNotNull('invitedAt');
    if (onlyAccountId !== undefined) query.where('accountId', onlyAccountId);
    await lockAcrossAccounts(tx, 'members', await query.clone().select('accountId', 'id'));
    const rows = await query.orderBy('accountId');
    const open = rows.find((r) => isOpen(r, tx.services.now()));
    if (open) {
      await activate(tenantCtx(tx, open.accountId, true), open, 'accept_invite');
      return { accountId: open.accountId, memberId: open.id };
    }
    const joined = rows.find((r) => r.status === 'active');
    if (joined) return { accountId: joined.accountId, memberId: joined.id };
    throw new HttpError(
      404,
      'not_found',
      'Invitation not found: it is unknown, expired, withdrawn, or addressed to another email address. Ask an owner or admin to send it again.',
    );
  });
}

/**
 * Moves ownership to an active member; the owner becomes an admin. The caller's row is locked and
 * read again first (a second transfer racing this one finds them an admin), then the new owner's:
 * always in that order, so two transfers never wait on each other in a circle.
 */
async function transfer(tx: TenantCtx, newOwnerId: string): Promise<'unchanged' | 'transferred'> {
  const me = await Member.ofAccount(tx).where('members.id', callerOf(tx).memberId).forUpdate().first();
  if (!me || me.role !== 'owner') throw forbidden('Only the owner transfers ownership', 'insufficient_role');
  if (newOwnerId === me.id) return 'unchanged';
  const target = await Member.ofAccount(tx).where('members.id', newOwnerId).forUpdate().first();
  if (!target || target.status !== 'active') throw new HttpError(404, 'not_found', 'Member not found: the new owner must be an active member of this organization');
  const now = new Date(tx.services.now());
  // One owner per account (a unique index): the old owner steps down first.
  await Member.ofAccount(tx).where('members.id', me.id).patch({ role: 'admin', updatedAt: now });
  await Member.ofAccount(tx).where('members.id', target.id).patch({ role: 'owner', updatedAt: now });
  await audit.recordMany(tx, [
    memberFact(me, 'member.updated', [{ field: 'role', from: 'owner', to: 'admin' }], { reason: 'ownership_transferred', newOwnerId: target.id }),
    memberFact(target, 'member.updated', [{ field: 'role', from: target.role, to: 'owner' }], { reason: 'ownership_transferred', previousOwnerId: me.id }),
  ]);
  await credentialsChanged(tx, 'sessions', [me.id, target.id]);
  return 'transferred';
}

/** POST /v1/auth/transfer-ownership (the owner only); to themselves: nothing changes. */
export async function transferOwnership(ctx: TenantCtx, newOwnerId: string): Promise<'unchanged' | 'transferred'> {
  return withTx(ctx, (tx) => transfer(tx, newOwnerId));
}

/**
 * A member's role. The owner's role changes only by a transfer (403 owner_role_fixed); making
 * someone the owner is that transfer, which only the owner may do.
 */
export async function setRole(ctx: TenantCtx, memberId: string, role: MemberRole): Promise<'unchanged' | 'changed' | 'transferred'> {
  return withTx(ctx, async (tx) => {
    if (role === 'owner') {
      if (callerOf(tx).role !== 'owner') throw forbidden('Only the owner can make someone the owner, by transferring ownership', 'insufficient_role');
      return transfer(tx, memberId);
    }
    const row = await lockMember(tx, memberId);
    if (row.role === role) return 'unchanged';
    if (row.role === 'owner') throw forbidden("The owner's role changes only when the owner transfers ownership (POST /v1/auth/transfer-ownership)", 'owner_role_fixed');
    await Member.ofAccount(tx)
      .where('members.id', row.id)
      .patch({ role, updatedAt: new Date(tx.services.now()) });
    await audit.record(tx, memberFact(row, 'member.updated', [{ field: 'role', from: row.role, to: role }]));
    await credentialsChanged(tx, 'sessions', [row.id]);
    return 'changed';
  });
}

/**
 * Removes a member or withdraws an invitation. Their sessions and links go with the row (foreign
 * keys, cascade), so their next request is 401; their tickets become unassigned. The owner cannot
 * be removed (403 owner_cannot_be_removed).
 */
export async function remove(ctx: TenantCtx, memberId: string): Promise<{ email: string; status: 'active' | 'pending' }> {
  return withTx(ctx, async (tx) => {
    const row = await lockMember(tx, memberId);
    if (row.role === 'owner') throw forbidden('The owner cannot be removed: transfer ownership to another member first', 'owner_cannot_be_removed');
    // Their avatars go with them (a cascade): their files first.
    await queueFileDeletions(tx, 'avatars', { sql: '? and f.member_id = ?', bindings: [accountScope(tx, 'f'), row.id] });
    await ticketNames.memberDeleting(tx, row.accountId, row.id);
    await Member.ofAccount(tx).where('members.id', row.id).delete();
    await audit.record(tx, memberFact(row, 'member.removed', [], { role: row.role, status: row.status }));
    await credentialsChanged(tx, 'sessions', [row.id]);
    return { email: row.email, status: row.status };
  });
}

async function assignmentsView(ctx: TenantCtx, row: Pick<Member, 'id' | 'allBrands' | 'brandIds'>): Promise<BrandAssignmentsView> {
  const brands = Brand.scoped(ctx)
    .select('id', 'name')
    .orderBy([{ column: 'name' }, { column: 'id' }]);
  if (!ctx.brandScope.allBrands) brands.whereIn('id', [...ctx.brandScope.brandIds]);
  return {
    memberId: row.id,
    allBrands: row.allBrands,
    brandIds: row.allBrands ? [] : row.brandIds.filter((id) => canSeeBrand(ctx.brandScope, id)),
    availableBrands: (await brands).map((b) => ({ id: b.id, name: b.name })),
  };
}

/** A member's brand assignments, and the brands the caller could assign (within the caller's own scope). */
export async function brandAssignments(ctx: TenantCtx, memberId: string): Promise<BrandAssignmentsView> {
  const row = await Member.ofAccount(ctx).where('members.id', memberId).first();
  if (!row) throw notFound('Member');
  return assignmentsView(ctx, row);
}

/** Replaces a member's (or an invitation's) brand assignments; the member's sessions see the change on their next request. */
export async function setBrandAssignments(ctx: TenantCtx, memberId: string, input: BrandAssignmentsInput): Promise<BrandAssignmentsView> {
  return withTx(ctx, async (tx) => {
    const row = await lockMember(tx, memberId);
    const scope = await resolveAssignments(tx, { allBrands: input.allBrands, brandIds: input.brandIds ?? [] });
    const changes = audit.changesBetween({ allBrands: row.allBrands, brandIds: row.brandIds }, scope, ['allBrands', 'brandIds']);
    if (changes.length) {
      await Member.ofAccount(tx)
        .where('members.id', row.id)
        .patch({ ...scope, updatedAt: new Date(tx.services.now()) });
      await audit.record(tx, memberFact(row, 'member.updated', changes));
      await credentialsChanged(tx, 'sessions', [row.id]);
    }
    return assignmentsView(tx, { id: row.id, ...scope });
  });
}
