import type { Knex } from 'knex';
import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { tenantCtx } from '../../core/context.js';
import { badRequest } from '../../core/errors.js';
import { sameTenant, tenantScope } from '../../core/model.js';
import { hashSecret, randomBase62, TOKEN_RANDOM_LENGTH } from '../../core/secrets.js';
import { TicketFeedback, type RatingType } from './model.js';

/**
 * Satisfaction ratings. The requests are made when a ticket is resolved (core/ticket-writes.ts); here they
 * are found (by a mailed link's token, or as a ticket's latest), sent, cancelled and rated. The
 * mailed token (`fb_` and 256 random bits) is stored as its SHA-256 only.
 */

const TOKEN_PREFIX = 'fb_';
const TOKEN_FORMAT = new RegExp(`^${TOKEN_PREFIX}[0-9A-Za-z]{${TOKEN_RANDOM_LENGTH}}$`);
/** How long a mailed rating link works. */
export const LINK_TTL_DAYS = 30;

export function newToken(): { token: string; tokenHash: string } {
  const token = `${TOKEN_PREFIX}${randomBase62()}`;
  return { token, tokenHash: hashSecret(token) };
}

const RANGES: Readonly<Record<RatingType, { valid: (n: number) => boolean; says: string }>> = {
  thumbs: { valid: (n) => n === 1 || n === -1, says: '1 (good) or -1 (bad)' },
  scale5: { valid: (n) => n >= 1 && n <= 5, says: 'from 1 to 5' },
  scale10: { valid: (n) => n >= 1 && n <= 10, says: 'from 1 to 10' },
};

/** A rating must fit the scale the request was made with. */
export function checkRating(type: RatingType, rating: number): void {
  const range = RANGES[type];
  if (!range.valid(rating)) throw badRequest(`This rating is ${type}: rating must be ${range.says}`, [{ field: 'rating', message: `must be ${range.says}` }], 'invalid_rating');
}

/** A request found by its mailed token, with what the rating page shows and who is asked. */
export interface TokenFeedback extends TicketFeedback {
  ticketTitle: string;
  ticketNumber: number;
  ticketPrefix: string;
  brandName: string;
  contactEmail: string | null;
  contactName: string | null;
}

/**
 * The request a mailed link's token names, whatever its state (null for an unknown token): found by
 * the token's hash alone, across tenants. Not locked: read before the rating's transaction (on
 * Citus the lookup asks every shard), which locks it with lockFound.
 */
export async function findByToken(ctx: BaseCtx, token: string): Promise<TokenFeedback | null> {
  if (!TOKEN_FORMAT.test(token)) return null;
  return readOne(ctx, ctx.db.raw('f.token_hash = ?', [hashSecret(token)]));
}

/** The request findByToken found, locked in the rating's transaction and read again in its tenant. */
export async function lockFound(tx: TenantCtx, found: { id: string }): Promise<TokenFeedback | null> {
  await TicketFeedback.scoped(tx).where('ticketFeedback.id', found.id).forUpdate();
  return readOne(tx, tx.db.raw('? and f.id = ?', [tenantScope(tx, 'f'), found.id]));
}

async function readOne(ctx: BaseCtx, where: Knex.Raw): Promise<TokenFeedback | null> {
  const { rows } = (await ctx.db.raw(
    `select f.account_id as "accountId", f.livemode, f.brand_id as "brandId", f.id, f.ticket_id as "ticketId", f.contact_id as "contactId",
        f.resolver_id as "resolverId", f.rating_type as "ratingType", f.status, f.send_at as "sendAt", f.sent_at as "sentAt", f.expires_at as "expiresAt",
        f.rating, f.comment, f.submitted_at as "submittedAt", f.created_at as "createdAt",
        t.title as "ticketTitle", t.ticket_number as "ticketNumber", b.ticket_prefix as "ticketPrefix", b.name as "brandName",
        c.email as "contactEmail", c.name as "contactName"
      from ticket_feedback f
      join tickets t on ${sameTenant('t', 'f')} and t.brand_id = f.brand_id and t.id = f.ticket_id
      join brands b on ${sameTenant('b', 'f')} and b.id = f.brand_id
      left join contacts c on ${sameTenant('c', 'f')} and c.brand_id = f.brand_id and c.id = f.contact_id
      where ?`,
    [where],
  )) as { rows: TokenFeedback[] };
  return rows[0] ?? null;
}

/** The ticket's latest request that was not cancelled: the one the customer may rate now, or rated. Locked in a transaction. */
export async function latestForTicket(ctx: TenantCtx, brandId: string, ticketId: string): Promise<TicketFeedback | null> {
  const q = TicketFeedback.scoped(ctx)
    .where({ 'ticketFeedback.brandId': brandId, 'ticketFeedback.ticketId': ticketId })
    .whereNot('ticketFeedback.status', 'cancelled')
    .orderBy('ticketFeedback.id', 'desc')
    .first();
  if (ctx.db.isTransaction) q.forUpdate();
  return (await q) ?? null;
}

/** Records the rating of a request the caller has locked and checked. */
export async function saveRating(tx: TenantCtx, id: string, rating: number, comment: string | null, now: Date): Promise<TicketFeedback> {
  const [row] = (await TicketFeedback.scoped(tx)
    .where('ticketFeedback.id', id)
    .patch({ status: 'rated', rating, comment, submittedAt: now })
    .returning('*')) as unknown as TicketFeedback[];
  return row!;
}

/** A due request, claimed by the dispatcher, with what deciding and mailing it takes. */
export interface DueFeedback {
  accountId: string;
  livemode: boolean;
  brandId: string;
  id: string;
  ticketId: string;
  /** The ticket is still resolved, live and not spam: the mail goes. */
  stillResolved: boolean;
  ticketTitle: string;
  ticketNumber: number;
  /** Where the ticket came from; an email ticket's sourceData names the addresses it was written to. */
  ticketSource: string;
  ticketSourceData: Record<string, unknown> | null;
  contactEmail: string | null;
  contactName: string | null;
}

/**
 * Up to `limit` requests due at `now` (scheduled, send_at passed), of every account, locked for
 * this transaction; concurrent dispatchers skip each other's (SKIP LOCKED). A look-out reads the
 * due requests without a lock, then each account's are locked by a statement that names the
 * account (on a cluster distributed by account a locking read across accounts is refused); one
 * another dispatcher took meanwhile is skipped, or no longer due.
 */
export async function claimDue(tx: BaseCtx, now: Date, limit: number): Promise<DueFeedback[]> {
  const seen = (
    (await tx.db.raw(`select account_id as "accountId", livemode, id from ticket_feedback where status = 'scheduled' and send_at <= ? order by send_at, id limit ?`, [
      now,
      limit,
    ])) as {
      rows: { accountId: string; livemode: boolean; id: string }[];
    }
  ).rows;
  const byTenant = new Map<string, { ctx: TenantCtx; ids: string[] }>();
  for (const r of seen) {
    const key = `${r.accountId}:${r.livemode}`;
    if (!byTenant.has(key)) byTenant.set(key, { ctx: tenantCtx(tx, r.accountId, r.livemode), ids: [] });
    byTenant.get(key)!.ids.push(r.id);
  }
  const claimed: (DueFeedback & { sendAt: string })[] = [];
  for (const { ctx, ids } of byTenant.values()) {
    const { rows } = (await tx.db.raw(
      `with due as (
         select d.account_id, d.livemode, d.id from ticket_feedback d
         where ? and d.id = any(?::text[]) and d.status = 'scheduled' and d.send_at <= ? for update skip locked)
       select f.account_id as "accountId", f.livemode, f.brand_id as "brandId", f.id, f.ticket_id as "ticketId",
         (t.status = 'resolved' and t.deleted_at is null and not t.is_spam) as "stillResolved",
         t.title as "ticketTitle", t.ticket_number as "ticketNumber", t.source as "ticketSource", t.source_data as "ticketSourceData", c.email as "contactEmail", c.name as "contactName",
         to_char(f.send_at at time zone 'UTC', 'YYYYMMDDHH24MISSUS') as "sendAt"
       from due join ticket_feedback f on ${sameTenant('f', 'due')} and f.id = due.id
       join tickets t on ${sameTenant('t', 'f')} and t.brand_id = f.brand_id and t.id = f.ticket_id
       left join contacts c on ${sameTenant('c', 'f')} and c.brand_id = f.brand_id and c.id = f.contact_id
       where ?`,
      [tenantScope(ctx, 'd'), ids, now, tenantScope(ctx, 'f')],
    )) as { rows: (DueFeedback & { sendAt: string })[] };
    claimed.push(...rows);
  }
  claimed.sort((a, b) => (a.sendAt < b.sendAt ? -1 : a.sendAt > b.sendAt ? 1 : a.id < b.id ? -1 : 1));
  return claimed.map(({ sendAt: _, ...row }) => row);
}

/** The request's mail is on its way: its token (hashed) and the link's expiry. */
export async function markSent(tx: TenantCtx, id: string, tokenHash: string, now: Date): Promise<Date> {
  const expiresAt = new Date(now.getTime() + LINK_TTL_DAYS * 86_400_000);
  await TicketFeedback.scoped(tx).where('ticketFeedback.id', id).patch({ status: 'sent', tokenHash, sentAt: now, expiresAt });
  return expiresAt;
}

/** Requests that will not be sent (the ticket was reopened, or the brand stopped asking). */
export async function cancel(tx: TenantCtx, id: string): Promise<void> {
  await tx.db.raw(`update ticket_feedback f set status = 'cancelled' where ? and f.id = ? and f.status = 'scheduled'`, [tenantScope(tx, 'f'), id]);
}
