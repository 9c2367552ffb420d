import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { sameTenant, tenantScope } from '../../core/model.js';

/**
 * automation_firings: which automation fired on which ticket, and the ticket's updated_at after
 * it. An automation fires on a ticket once until the ticket changes again: a ticket whose row for
 * it still holds the ticket's updated_at is left alone. The rows are written in the firing's
 * transaction, after its writes, so the automation's own change does not count as a change.
 */

/** A brand with enabled automations. */
export interface AutomatedBrand {
  accountId: string;
  livemode: boolean;
  brandId: string;
}

/** The brands of every account that have an enabled automation (rules_automations_idx, read whole). */
export async function automatedBrands(base: BaseCtx): Promise<AutomatedBrand[]> {
  const { rows } = await base.db.raw<{ rows: AutomatedBrand[] }>(
    `select distinct r.account_id as "accountId", r.livemode, r.brand_id as "brandId" from rules r where r.kind = 'automation' and r.enabled`,
  );
  return rows;
}

/** For each of these tickets, the automations that fired on it as it is now (ticket ids → rule ids). */
export async function firedOnCurrent(tx: TenantCtx, brandId: string, ticketIds: readonly string[]): Promise<Map<string, string[]>> {
  const { rows } = await tx.db.raw<{ rows: { ticket_id: string; rule_id: string }[] }>(
    `select f.ticket_id, f.rule_id from automation_firings f
    join tickets t on ${sameTenant('t', 'f')} and t.brand_id = f.brand_id and t.id = f.ticket_id
    where ? and f.brand_id = ? and f.ticket_id = any(?::text[]) and f.ticket_updated_at = t.updated_at`,
    [tenantScope(tx, 'f'), brandId, [...ticketIds]],
  );
  const fired = new Map<string, string[]>();
  for (const r of rows) fired.set(r.ticket_id, [...(fired.get(r.ticket_id) ?? []), r.rule_id]);
  return fired;
}

/**
 * Records, after the firings' writes: `ruleId` fired on each ticket `fired` at `at`, and the
 * automations that had fired on it before (`carried`, ticket → rule ids, read before the writes)
 * stay fired: one automation's change re-arms none of them, so two cannot undo each other forever.
 */
export async function record(tx: TenantCtx, brandId: string, ruleId: string, fired: readonly string[], carried: ReadonlyMap<string, readonly string[]>, at: Date): Promise<void> {
  if (!fired.length) return;
  await tx.db.raw(
    `insert into automation_firings (account_id, livemode, brand_id, rule_id, ticket_id, ticket_updated_at, fired_at)
    select t.account_id, t.livemode, t.brand_id, ?, t.id, t.updated_at, ? from tickets t
    where ? and t.brand_id = ? and t.id = any(?::text[])
    on conflict (account_id, rule_id, ticket_id) do update set ticket_updated_at = excluded.ticket_updated_at, fired_at = excluded.fired_at`,
    [ruleId, at, tenantScope(tx, 't'), brandId, [...fired]],
  );
  const pairs = fired.flatMap((ticketId) => (carried.get(ticketId) ?? []).filter((r) => r !== ruleId).map((r) => [ticketId, r] as const));
  if (!pairs.length) return;
  await tx.db.raw(
    `update automation_firings f set ticket_updated_at = t.updated_at
    from tickets t where ${sameTenant('t', 'f')} and t.brand_id = f.brand_id and t.id = f.ticket_id
      and ? and f.brand_id = ? and (f.ticket_id, f.rule_id) in (select * from unnest(?::text[], ?::text[]))`,
    [tenantScope(tx, 'f'), brandId, pairs.map((p) => p[0]), pairs.map((p) => p[1])],
  );
}
