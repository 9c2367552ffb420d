import { withTx, type TenantCtx } from '../core/context.js';
import { badRequest, notFound } from '../core/errors.js';
import { newId, ID_PREFIX } from '../core/ids.js';
import { scopeOf } from '../core/model.js';
import { normalizeEmail } from '../core/text.js';
import * as audit from '../core/audit.js';
import type { Change } from '../core/audit.js';
import { requireBrand } from '../core/brand.js';
import * as members from '../domains/members/service.js';
import type { MemberView } from '../domains/members/schemas.js';
import { requireTicket } from '../domains/tickets/service.js';
import { TicketWatcher } from '../domains/watchers/model.js';
import type { AddWatcherInput, UpdateWatcherInput, WatcherInputValue, WatcherView } from '../domains/watchers/schemas.js';

/**
 * Watchers: members of the account who follow a ticket, with their notification preferences.
 * Routes address a watcher by its member id (one watcher per ticket and member). memberEmail and
 * memberName are copied from the member when not given, so notifications have an address even if
 * the member record changes later. A removed member stops watching (foreign key cascade).
 */

type Row = Pick<TicketWatcher, 'id' | 'ticketId' | 'memberId' | 'memberEmail' | 'memberName' | 'addedBy' | 'notifyOnComment' | 'notifyOnStatusChange' | 'createdAt'>;

function toView(row: Row): WatcherView {
  return {
    id: row.id,
    ticketId: row.ticketId,
    memberId: row.memberId,
    memberEmail: row.memberEmail,
    memberName: row.memberName,
    addedBy: row.addedBy,
    addedAt: new Date(row.createdAt).toISOString(),
    notifyOnComment: row.notifyOnComment,
    notifyOnStatusChange: row.notifyOnStatusChange,
  };
}

/** The members named by `memberIds` (account members only), or a 400 on the first unknown one. */
async function requireMembers(ctx: TenantCtx, memberIds: readonly string[], fieldOf: (i: number) => string): Promise<Map<string, MemberView>> {
  const found = new Map((await members.findMany(ctx, memberIds)).map((m) => [m.id, m]));
  const i = memberIds.findIndex((id) => !found.has(id));
  if (i >= 0) {
    throw badRequest(
      `memberId ${memberIds[i]} is not a member of this account; see GET /v1/accounts/me/members`,
      [{ field: fieldOf(i), message: 'is not a member of this account' }],
      'invalid_member',
    );
  }
  return found;
}

interface NewWatcher {
  memberId: string;
  memberEmail?: string;
  memberName?: string | null;
  notifyOnComment?: boolean;
  notifyOnStatusChange?: boolean;
}

/**
 * Inserts watchers (ON CONFLICT DO NOTHING: a member already watching keeps their row) and audits
 * the new ones; returns the inserted rows.
 */
async function insert(ctx: TenantCtx, brandId: string, ticketId: string, given: readonly NewWatcher[], byId: Map<string, MemberView>): Promise<Row[]> {
  const rows = given.map((w) => {
    const member = byId.get(w.memberId)!;
    return {
      id: newId(ID_PREFIX.watcher),
      ...scopeOf(ctx),
      brandId,
      ticketId,
      memberId: w.memberId,
      memberEmail: w.memberEmail !== undefined ? normalizeEmail(w.memberEmail) : member.email,
      memberName: w.memberName !== undefined ? w.memberName : member.name,
      addedBy: ctx.actor.id,
      notifyOnComment: w.notifyOnComment ?? true,
      notifyOnStatusChange: w.notifyOnStatusChange ?? true,
    };
  });
  const inserted = (await ctx.db('ticketWatchers').insert(rows).onConflict(['accountId', 'livemode', 'brandId', 'ticketId', 'memberId']).ignore().returning('*')) as Row[];
  await audit.recordMany(
    ctx,
    inserted.map((w) => ({
      brandId,
      ticketId,
      entityType: 'watcher',
      entityId: w.id,
      event: 'watcher.added',
      metadata: { memberId: w.memberId, memberEmail: w.memberEmail },
    })),
  );
  return inserted;
}

/**
 * For ticket create, inside its transaction and before the ticket row exists (the foreign key to
 * the ticket is deferred to commit). A member named twice is added once.
 */
export async function addToNewTicket(ctx: TenantCtx, brandId: string, ticketId: string, given: readonly WatcherInputValue[]): Promise<void> {
  const byId = await requireMembers(
    ctx,
    given.map((w) => w.memberId),
    (i) => `watchers.${i}.memberId`,
  );
  const seen = new Set<string>();
  const unique = given.filter((w) => !seen.has(w.memberId) && Boolean(seen.add(w.memberId)));
  await insert(ctx, brandId, ticketId, unique, byId);
}

/** The ticket's watchers, in the order they were added (a bare array). */
export async function list(ctx: TenantCtx, brandId: string, ticketId: string): Promise<WatcherView[]> {
  const brand = await requireBrand(ctx, brandId);
  await requireTicket(ctx, brand.id, ticketId);
  return watchersOf(ctx, brand.id, ticketId);
}

/** The watchers of a ticket the caller has already found in a brand it checked (no 404 here). */
export async function watchersOf(ctx: TenantCtx, brandId: string, ticketId: string): Promise<WatcherView[]> {
  return (await watchersOfTickets(ctx, brandId, [ticketId])).get(ticketId) ?? [];
}

/** watchersOf for several tickets in one statement, by ticket id (a ticket without watchers is absent). */
export async function watchersOfTickets(ctx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<Map<string, WatcherView[]>> {
  const byTicket = new Map<string, WatcherView[]>();
  if (!ticketIds.length) return byTicket;
  for (const row of await TicketWatcher.scoped(ctx).where({ brandId }).whereIn('ticketId', ticketIds).orderBy('id')) {
    let list = byTicket.get(row.ticketId);
    if (!list) byTicket.set(row.ticketId, (list = []));
    list.push(toView(row));
  }
  return byTicket;
}

/** Adds a watcher; a member already watching is answered with the existing watcher (created: false). */
export async function add(ctx: TenantCtx, brandId: string, ticketId: string, input: AddWatcherInput): Promise<{ created: boolean; watcher: WatcherView }> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const ticket = await requireTicket(tx, brand.id, ticketId);
    const byId = await requireMembers(tx, [input.memberId], () => 'memberId');
    const [created] = await insert(tx, brand.id, ticket.id, [input], byId);
    if (created) return { created: true, watcher: toView(created) };
    const existing = await TicketWatcher.scoped(tx).where({ brandId: brand.id, ticketId: ticket.id, memberId: input.memberId }).first();
    return { created: false, watcher: toView(existing!) };
  });
}

/** Stops a member watching; returns the removed watcher. */
export async function remove(ctx: TenantCtx, brandId: string, ticketId: string, memberId: string): Promise<WatcherView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const ticket = await requireTicket(tx, brand.id, ticketId);
    const [row] = (await TicketWatcher.scoped(tx).where({ brandId: brand.id, ticketId: ticket.id, memberId }).delete().returning('*')) as unknown as TicketWatcher[];
    if (!row) throw notFound('Watcher');
    await audit.record(tx, {
      brandId: brand.id,
      ticketId: ticket.id,
      entityType: 'watcher',
      entityId: row.id,
      event: 'watcher.removed',
      metadata: { memberId, memberEmail: row.memberEmail },
    });
    return toView(row);
  });
}

/** Changes a watcher's notification preferences; only real changes are written and audited. */
export async function update(ctx: TenantCtx, brandId: string, ticketId: string, memberId: string, input: UpdateWatcherInput): Promise<WatcherView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const ticket = await requireTicket(tx, brand.id, ticketId);
    const row = await TicketWatcher.scoped(tx).where({ brandId: brand.id, ticketId: ticket.id, memberId }).forUpdate().first();
    if (!row) throw notFound('Watcher');
    const changes: Change[] = [];
    const patch: Partial<Pick<TicketWatcher, 'notifyOnComment' | 'notifyOnStatusChange'>> = {};
    for (const field of ['notifyOnComment', 'notifyOnStatusChange'] as const) {
      const to = input[field];
      if (to !== undefined && to !== row[field]) {
        changes.push({ field, from: row[field], to });
        patch[field] = to;
      }
    }
    if (!changes.length) return toView(row);
    const updated = (await TicketWatcher.scoped(tx).where('id', row.id).patch(patch).returning('*').first()) as unknown as TicketWatcher;
    await audit.record(tx, { brandId: brand.id, ticketId: ticket.id, entityType: 'watcher', entityId: row.id, event: 'watcher.updated', changes, metadata: { memberId } });
    return toView(updated);
  });
}
