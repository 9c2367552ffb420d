import type { Change } from '../../core/audit.js';
import type { TenantCtx } from '../../core/context.js';
import type { Brand } from '../../core/brand.js';
import { normalizeBrandId } from '../../core/ids.js';
import { part } from '../../core/services.js';
import { updateTickets } from '../../core/ticket-writes.js';
import { Ticket } from './model.js';
import { ALWAYS_OPEN, workingTimeOf, type BusinessHoursSpec, type WorkingTime } from '../../core/working-time.js';

/**
 * A brand's service level: how long a ticket of each priority may stay unresolved, counted in
 * the brand's working time, and whether time waiting on the customer (`pending`) counts. The
 * rules (docs/decisions/0077):
 * - a ticket gets its dueAt when it is created and again when its priority changes, from
 *   `slaByPriority[priority]` (a ticket without one counts as normal) or else `slaDefaultHours`,
 *   counted from its creation plus the working time it spent paused;
 * - a dueAt given by hand wins until the priority changes again;
 * - with `slaPauseOnPending`, a running clock stops when the ticket goes pending (dueAt null) and
 *   starts again when it leaves pending, dueAt moved on by the working time it waited.
 */
export interface ServiceLevel {
  /** brands.settings_revision when read: a create computed with it checks the brand still has it. */
  revision: number;
  pauseOnPending: boolean;
  working: WorkingTime;
  /** The seconds a ticket of this priority may take, or null when none applies. */
  targetSeconds(priority: string | null): number | null;
}

/** The brand columns a service level is made of. */
export const SERVICE_LEVEL_COLUMNS = [
  'id',
  'settingsRevision',
  'slaEnabled',
  'slaDefaultHours',
  'slaByPriority',
  'slaBusinessHoursOnly',
  'slaBusinessHours',
  'slaPauseOnPending',
] as const;
export type ServiceLevelRow = Pick<Brand, (typeof SERVICE_LEVEL_COLUMNS)[number]>;

/** The brand's service level, or null when it has none (off, or no hours for any priority). */
export function serviceLevelOf(brand: ServiceLevelRow): ServiceLevel | null {
  if (!brand.slaEnabled) return null;
  const byPriority = brand.slaByPriority ?? {};
  const defaultHours = brand.slaDefaultHours;
  if (defaultHours === null && Object.keys(byPriority).length === 0) return null;
  const spec = brand.slaBusinessHours as BusinessHoursSpec | null;
  // Business hours saved before they were checked (or none) cannot be counted in: every hour counts.
  const working = brand.slaBusinessHoursOnly ? workingTimeOf(spec) : ALWAYS_OPEN;
  return {
    revision: brand.settingsRevision,
    pauseOnPending: brand.slaPauseOnPending,
    working,
    targetSeconds: (priority) => {
      const hours = byPriority[priority ?? 'normal'] ?? defaultHours;
      return hours === null || hours === undefined ? null : hours * 3600;
    },
  };
}

/** The deadline of a ticket created at `createdAt` that has been paused `pausedSeconds` of working time. */
export function dueAtOf(level: ServiceLevel | null, createdAt: number, priority: string | null, pausedSeconds = 0): Date | null {
  const target = level?.targetSeconds(priority) ?? null;
  const due = target === null ? null : level!.working.after(createdAt, target + pausedSeconds);
  return due === null ? null : new Date(due);
}

/** Where a ticket's service-level clock stands (the columns next to due_at). */
export interface Clock {
  createdAt: Date;
  status: string;
  priority: string | null;
  dueAt: Date | null;
  dueAtManual: boolean;
  slaPausedAt: Date | null;
  slaPausedSeconds: number;
}

/** What a change does to a ticket: its new status, its new priority and a dueAt given by hand (undefined: unchanged). */
export interface ClockChange {
  status: string;
  priority?: string | null;
  dueAt?: Date | null;
}

/** The clock columns to write (only those that change); `dueAt` changing re-arms the overdue event. */
export type ClockPatch = Partial<Pick<Clock, 'dueAt' | 'dueAtManual' | 'slaPausedAt' | 'slaPausedSeconds'>> & { overdueAt?: null };

/** The clock after a change at `now`: the rules of ServiceLevel, in one place. */
export function clockAfter(level: ServiceLevel | null, clock: Clock, change: ClockChange, now: number): ClockPatch {
  const next = { dueAt: clock.dueAt, dueAtManual: clock.dueAtManual, slaPausedAt: clock.slaPausedAt, slaPausedSeconds: clock.slaPausedSeconds };
  const priority = change.priority === undefined ? clock.priority : change.priority;
  if (change.dueAt !== undefined) {
    Object.assign(next, { dueAt: change.dueAt, dueAtManual: true, slaPausedAt: null });
  } else if (level && priority !== clock.priority) {
    next.dueAtManual = false;
    next.dueAt = next.slaPausedAt ? null : dueAtOf(level, clock.createdAt.getTime(), priority, next.slaPausedSeconds);
  }
  const wasPending = clock.status === 'pending';
  const isPending = change.status === 'pending';
  if (isPending && !wasPending && level?.pauseOnPending && !next.dueAtManual && next.dueAt && next.dueAt.getTime() > now && !next.slaPausedAt) {
    Object.assign(next, { slaPausedAt: new Date(now), dueAt: null });
  } else if (!isPending && next.slaPausedAt) {
    next.slaPausedSeconds = Math.round(next.slaPausedSeconds + (level?.working ?? ALWAYS_OPEN).between(next.slaPausedAt.getTime(), now));
    next.slaPausedAt = null;
    next.dueAt = dueAtOf(level, clock.createdAt.getTime(), priority, next.slaPausedSeconds);
  }
  const patch: ClockPatch = {};
  if (time(next.dueAt) !== time(clock.dueAt)) Object.assign(patch, { dueAt: next.dueAt, overdueAt: null });
  if (next.dueAtManual !== clock.dueAtManual) patch.dueAtManual = next.dueAtManual;
  if (time(next.slaPausedAt) !== time(clock.slaPausedAt)) patch.slaPausedAt = next.slaPausedAt;
  if (next.slaPausedSeconds !== clock.slaPausedSeconds) patch.slaPausedSeconds = next.slaPausedSeconds;
  return patch;
}

const time = (d: Date | null) => d?.getTime() ?? null;

/**
 * The service levels this process has seen, per brand, for creates: a create computes its dueAt
 * from the one remembered and the create statement checks the brand's settings revision is still
 * the one it was read at. A brand never seen is assumed to have none, which the statement checks
 * too (sla_enabled off). A wrong guess, or a level changed since in any process, costs that create
 * a retry step by step, which reads the brand and remembers its level: never a wrong dueAt, and a
 * brand without a service level is never read for it.
 */
const MAX_LEVELS = 10_000;
/** The revision a create passes when it assumed the brand has no service level. */
export const NO_LEVEL_ASSUMED = -1;
const levels = part('tickets.serviceLevels', () => new Map<string, { level: ServiceLevel | null; revision: number }>());

const levelKey = (ctx: TenantCtx, brandId: string) => `${ctx.accountId}:${ctx.livemode}:${normalizeBrandId(brandId)}`;

/** The brand's service level as this process last saw it, with the revision to check; none seen: none assumed. */
export function rememberedServiceLevel(ctx: TenantCtx, brandId: string): { level: ServiceLevel | null; revision: number } {
  return ctx.services.get(levels).get(levelKey(ctx, brandId)) ?? { level: null, revision: NO_LEVEL_ASSUMED };
}

/** A brand row read anyway (a create step by step): its level, remembered for the next creates. */
export function serviceLevelOfRow(ctx: TenantCtx, brand: ServiceLevelRow): ServiceLevel | null {
  const known = ctx.services.get(levels);
  if (known.size >= MAX_LEVELS) known.clear();
  const entry = { level: serviceLevelOf(brand), revision: brand.settingsRevision };
  known.set(levelKey(ctx, brand.id), entry);
  return entry.level;
}

/** A change to a ticket's status, priority or dueAt, with the status it had (read under the caller's lock). */
export interface ClockMove {
  ticketId: string;
  fromStatus: string;
  to: ClockChange;
}

/** Most changes cannot move a clock: those cost no read. */
function mayMove(level: ServiceLevel | null, move: ClockMove): boolean {
  if (move.to.dueAt !== undefined) return true;
  if (level && move.to.priority !== undefined) return true;
  return (move.fromStatus === 'pending') !== (move.to.status === 'pending');
}

const CLOCK_COLUMNS = ['id', 'createdAt', 'status', 'priority', 'dueAt', 'dueAtManual', 'slaPausedAt', 'slaPausedSeconds'] as const;

/** A live ticket of the brand locked until the transaction ends, with its clock as the lock read it (undefined: none). */
export async function lockedClock(tx: TenantCtx, brandId: string, ticketId: string): Promise<(Clock & { id: string }) | undefined> {
  return (await Ticket.scoped(tx)
    .where({ brandId, id: ticketId })
    .whereNull('deletedAt')
    .forUpdate()
    .select(...CLOCK_COLUMNS)
    .first()) as unknown as (Clock & { id: string }) | undefined;
}

/**
 * What a change does to the clocks of tickets of `brand`, locked by the caller and not written
 * yet: per ticket it moves, the clock before and the columns to write. A ticket absent moves not.
 */
export async function clockPatches(
  tx: TenantCtx,
  brand: ServiceLevelRow,
  moves: readonly ClockMove[],
  /** The clocks, when the caller read them under its lock already. */
  known?: readonly (Clock & { id: string })[],
): Promise<Map<string, { before: Clock; patch: ClockPatch }>> {
  const level = serviceLevelOfRow(tx, brand);
  const moving = moves.filter((m) => mayMove(level, m));
  const result = new Map<string, { before: Clock; patch: ClockPatch }>();
  if (!moving.length) return result;
  const rows =
    known ??
    ((await Ticket.scoped(tx)
      .where('brandId', brand.id)
      .whereIn(
        'id',
        moving.map((m) => m.ticketId),
      )
      .select(...CLOCK_COLUMNS)) as (Clock & { id: string })[]);
  const byId = new Map(rows.map((r) => [r.id, r]));
  const now = tx.services.now();
  for (const move of moving) {
    const before = byId.get(move.ticketId);
    if (!before) continue;
    const patch = clockAfter(level, before, move.to, now);
    if (Object.keys(patch).length) result.set(move.ticketId, { before, patch });
  }
  return result;
}

/**
 * For changes that write status on their own (bulk actions, a comment's setStatus, a merge):
 * writes the clocks the change moves, before the change writes its columns, and returns each
 * ticket's dueAt change for its audit entry and webhook.
 */
export async function moveClocks(tx: TenantCtx, brand: ServiceLevelRow, moves: readonly ClockMove[]): Promise<Map<string, Change>> {
  const changes = new Map<string, Change>();
  for (const [ticketId, { before, patch }] of await clockPatches(tx, brand, moves)) {
    await updateTickets(tx, brand.id, [ticketId], patch);
    for (const change of dueChange(before, patch)) changes.set(ticketId, change);
  }
  return changes;
}

/**
 * moveClocks for one ticket whose clock the caller read under its lock, not written: the columns
 * for the caller to write with its own change, and the dueAt change for its audit entry.
 */
export async function clockMoveOf(tx: TenantCtx, brand: ServiceLevelRow, move: ClockMove, clock: Clock): Promise<{ set: ClockPatch; changes: Change[] }> {
  const moved = (await clockPatches(tx, brand, [move], [{ ...clock, id: move.ticketId }])).get(move.ticketId);
  return moved ? { set: moved.patch, changes: dueChange(moved.before, moved.patch) } : { set: {}, changes: [] };
}

const dueChange = (before: Clock, patch: ClockPatch): Change[] => ('dueAt' in patch ? [{ field: 'dueAt', from: isoOf(before.dueAt), to: isoOf(patch.dueAt ?? null) }] : []);

const isoOf = (d: Date | null) => (d ? d.toISOString() : null);
