import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { requireBrand, type Brand } from '../core/brand.js';
import * as audit from '../core/audit.js';
import * as events from '../core/outbox/events.js';
import * as messages from '../domains/mail/messages.js';
import * as mail from '../domains/mail/service.js';
import * as members from '../domains/members/service.js';
import * as profiles from '../domains/profiles/service.js';
import { markOverdue, overdueCandidates, type MarkedOverdue } from '../domains/tickets/overdue.js';
import { mailingBrand } from './brand-domains.js';

/** Tickets looked at per statement, and statements per run: 5,000 deadlines a tick, 60,000 a minute. */
const BATCH = 500;
const MAX_BATCHES = 10;

/**
 * The dispatcher's job: every ticket that passed its dueAt unresolved is announced once, with a
 * ticket.overdue audit entry and webhook and, where the brand asks for it (slaNotifyOverdue), a
 * mail to the assignee (to the brand's owners and admins when there is none), all in the
 * transaction that marks it. One transaction per account and mode, so no statement locks rows of
 * two accounts. Returns how many were announced.
 */
export async function announceOverdue(base: BaseCtx, now: Date): Promise<number> {
  let announced = 0;
  for (let batch = 0; batch < MAX_BATCHES; batch++) {
    const found = await overdueCandidates(base, now, BATCH);
    const byTenant = new Map<string, { accountId: string; livemode: boolean; ids: string[] }>();
    for (const t of found) {
      const key = `${t.accountId}:${t.livemode}`;
      const group = byTenant.get(key) ?? byTenant.set(key, { accountId: t.accountId, livemode: t.livemode, ids: [] }).get(key)!;
      group.ids.push(t.id);
    }
    for (const group of byTenant.values()) {
      announced += await withTx(tenantCtx(base, group.accountId, group.livemode), (tx) => announce(tx, group.ids, now));
    }
    if (found.length < BATCH) break;
  }
  return announced;
}

async function announce(tx: TenantCtx, ids: readonly string[], now: Date): Promise<number> {
  const marked = await markOverdue(tx, ids, now);
  if (!marked.length) return 0;
  await audit.recordMany(
    tx,
    marked.map((t) => ({
      brandId: t.brandId,
      ticketId: t.id,
      entityType: 'ticket',
      entityId: t.id,
      event: 'ticket.overdue',
      metadata: { ticketNumber: t.ticketNumber, title: t.title, dueAt: t.dueAt.toISOString() },
    })),
  );
  await events.ticketsOverdue(
    tx,
    marked.map((t) => ({ brandId: t.brandId, ticketId: t.id })),
  );
  for (const brandId of new Set(marked.map((t) => t.brandId))) {
    const brand = await requireBrand(tx, brandId);
    if (brand.slaNotifyOverdue)
      await mailOverdue(
        tx,
        brand,
        marked.filter((t) => t.brandId === brandId),
      );
  }
  return marked.length;
}

/** The overdue mail of one brand's tickets: each to its assignee, or to the owners and admins. */
async function mailOverdue(tx: TenantCtx, brand: Brand, overdue: readonly MarkedOverdue[]): Promise<void> {
  const assignees = new Map(
    (
      await members.findMany(
        tx,
        overdue.flatMap((t) => (t.assigneeId ? [t.assigneeId] : [])),
      )
    ).map((m) => [m.id, m]),
  );
  const admins = overdue.some((t) => !t.assigneeId || assignees.get(t.assigneeId)?.status !== 'active') ? await members.activeAdmins(tx) : [];
  const optedOut = await profiles.mailOptedOut(tx, [...assignees.keys(), ...admins.map((m) => m.id)]);
  const common = { settings: mail.settingsOf(tx.services), key: await mail.replyTokenKey(tx), brand: await mailingBrand(tx, brand) };
  for (const ticket of overdue) {
    const assignee = ticket.assigneeId ? assignees.get(ticket.assigneeId) : undefined;
    const to = (assignee?.status === 'active' ? [assignee] : admins).filter((m) => !optedOut.has(m.id)).map((m) => ({ name: m.name, address: m.email }));
    if (!to.length) continue;
    const message = messages.overdueNotification({ ...common, ticket: mail.ticketInfo(ticket), thread: { inboundMessageIds: [] }, dueAt: ticket.dueAt, to });
    await mail.queueMail(tx, brand.id, ticket.id, message);
  }
}
