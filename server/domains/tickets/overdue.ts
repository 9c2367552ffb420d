import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { tenantScope } from '../../core/model.js';

/** A ticket past its dueAt, as the dispatcher finds it. */
export interface OverdueCandidate {
  accountId: string;
  livemode: boolean;
  id: string;
}

/**
 * The earliest `limit` tickets of every account whose dueAt has passed and whose ticket.overdue
 * was not announced: live, not spam, not resolved or closed. One range of tickets_overdue_idx,
 * which holds exactly those tickets (with a dueAt to come); no lock: markOverdue decides.
 */
export async function overdueCandidates(base: BaseCtx, now: Date, limit: number): Promise<OverdueCandidate[]> {
  const { rows } = (await base.db.raw(
    `select t.account_id as "accountId", t.livemode, t.id from tickets t
     where t.due_at <= ? and t.due_at is not null and t.overdue_at is null and t.resolved_at is null and t.deleted_at is null and not t.is_spam
     order by t.due_at limit ?`,
    [now, limit],
  )) as { rows: OverdueCandidate[] };
  return rows;
}

/** A ticket marked overdue by this call, with what its announcement says. */
export interface MarkedOverdue {
  id: string;
  brandId: string;
  ticketNumber: number;
  title: string;
  assigneeId: string | null;
  dueAt: Date;
}

/**
 * Marks those of `ids` (tickets of tx's tenant) still past their dueAt, unresolved and not yet
 * marked, at `now`, and returns them. The condition is checked again under each row's lock, so of
 * two dispatchers marking the same ticket only one gets it back: the announcement happens once.
 */
export async function markOverdue(tx: TenantCtx, ids: readonly string[], now: Date): Promise<MarkedOverdue[]> {
  if (!ids.length) return [];
  const { rows } = (await tx.db.raw(
    `update tickets t set overdue_at = ?
     where ? and t.id = any(?::text[]) and t.due_at <= ? and t.overdue_at is null and t.resolved_at is null and t.deleted_at is null and not t.is_spam
     returning t.id, t.brand_id as "brandId", t.ticket_number as "ticketNumber", t.title, t.assignee_id as "assigneeId", t.due_at as "dueAt"`,
    [now, tenantScope(tx, 't'), [...ids], now],
  )) as { rows: MarkedOverdue[] };
  return rows;
}
