import { Readable } from 'node:stream';
import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { sameTenant, scopeOf, tenantScope } from '../../core/model.js';
import type { StagedObject, Storage } from '../../core/ports.js';
import { requireBrand } from '../../core/brand.js';
import { RawMail } from './model.js';
import type { RawMailView } from './schemas.js';

/**
 * Inbound messages exactly as they arrived, for the ticket's readers to see what came (headers,
 * authentication results, the parts ticketd did not keep). Kept rawMailRetentionDays (0: not at
 * all), in attachment storage like attachments, then deleted by the dispatcher (purgeExpired).
 * Written like inbound attachments: staged before the transaction, moved under the row's id in it.
 */

const DAY_MS = 86_400_000;
const PURGE_BATCH = 500;

/** The raw bytes in staging, or null when raw mail is not kept (retention 0). */
export async function stage(storage: Storage, retentionDays: number, raw: Buffer): Promise<StagedObject | null> {
  if (retentionDays <= 0) return null;
  return storage.stage(Readable.from([raw]), raw.length);
}

export interface RawMailLink {
  brandId: string;
  ticketId: string;
  commentId: string | null;
  inboundEmailId: string;
  messageId: string;
}

/** In the transaction of the ticket or comment the message became; returns the storage key (the id). */
export async function keep(tx: TenantCtx, staged: StagedObject, link: RawMailLink): Promise<string> {
  return (await keepMany(tx, [{ staged, link }]))[0]!;
}

/** keep for several messages (a group of inbound mail): their rows in one statement; the storage keys in the order given. */
export async function keepMany(tx: TenantCtx, kept: readonly { staged: StagedObject; link: RawMailLink }[]): Promise<string[]> {
  if (!kept.length) return [];
  if (!tx.db.isTransaction) throw new Error('raw mail is kept inside the transaction of the ticket or comment it became');
  const rows = kept.map(({ staged, link }) => ({ id: newId(ID_PREFIX.rawMail), ...scopeOf(tx), ...link, size: staged.size, sha256: staged.sha256 }));
  await RawMail.query(tx.db).insert(rows);
  for (const [i, { staged }] of kept.entries()) await staged.commit(rows[i]!.id);
  return rows.map((r) => r.id);
}

function toView(row: RawMail, retentionDays: number): RawMailView {
  return {
    id: row.id,
    ticketId: row.ticketId,
    commentId: row.commentId,
    messageId: row.messageId,
    size: Number(row.size),
    sha256: row.sha256,
    createdAt: row.createdAt.toISOString(),
    expiresAt: new Date(row.createdAt.getTime() + retentionDays * DAY_MS).toISOString(),
  };
}

/** The ticket's brand id, when the caller may see the brand and the ticket is live (a deleted ticket's raw mail reads as not found). */
async function liveTicketBrand(ctx: TenantCtx, brandId: string, ticketId: string): Promise<string> {
  const brand = await requireBrand(ctx, brandId);
  const live = await ctx
    .db('tickets')
    .where({ ...scopeOf(ctx), brandId: brand.id, id: ticketId })
    .whereNull('deletedAt')
    .first('id');
  if (!live) throw notFound('Ticket');
  return brand.id;
}

/** A ticket's raw messages, oldest first. */
export async function list(ctx: TenantCtx, brandId: string, ticketId: string): Promise<RawMailView[]> {
  const rows = await RawMail.scoped(ctx)
    .where({ brandId: await liveTicketBrand(ctx, brandId, ticketId), ticketId })
    .orderBy('id');
  return rows.map((row) => toView(row, ctx.services.config.rawMailRetentionDays));
}

/** One raw message's bytes (message/rfc822). */
export async function open(ctx: TenantCtx, storage: Storage, brandId: string, ticketId: string, rawMailId: string): Promise<{ stream: Readable; size: number; filename: string }> {
  const row = await RawMail.scoped(ctx)
    .where({ brandId: await liveTicketBrand(ctx, brandId, ticketId), ticketId, id: rawMailId })
    .first();
  const file = row ? await storage.open(row.id) : null;
  if (!row || !file) throw notFound('Raw mail');
  return { ...file, filename: `${row.id}.eml` };
}

/**
 * The dispatcher's job: raw messages older than the retention (all of them at 0), of every
 * account, a batch a tick, but those of tickets under legal hold. The same statement queues their files, which the attachment purge
 * removes after the commit. No locking read across accounts (refused on a cluster distributed by
 * account): a row another transaction holds is waited for and deleted after, still expired.
 */
export async function purgeExpired(base: BaseCtx, retentionDays: number, now: number): Promise<number> {
  const cutoff = new Date(now - retentionDays * DAY_MS);
  // A ticket under legal hold keeps its raw mail whatever the retention (flows/retention.ts).
  const held = (alias: string) =>
    `exists (select 1 from tickets t where ${sameTenant('t', alias)} and t.brand_id = ${alias}.brand_id and t.id = ${alias}.ticket_id and t.legal_hold)`;
  const queued = (await base.db.raw(
    `with gone as (
       delete from raw_mails where (account_id, id) in (
         select account_id, id from raw_mails m where created_at <= ? and not ${held('m')} order by created_at limit ?)
       and created_at <= ? and not ${held('raw_mails')}
       returning account_id, id)
     insert into attachment_file_deletions (account_id, attachment_id) select account_id, id from gone on conflict do nothing`,
    [cutoff, PURGE_BATCH, cutoff],
  )) as { rowCount: number };
  return queued.rowCount;
}

/** Before a brand is deleted (its tickets' raw mails go with it): their files, queued for removal after the commit. */
export async function forgetBrand(tx: TenantCtx, brandId: string): Promise<void> {
  await tx.db.raw(
    `insert into attachment_file_deletions (account_id, attachment_id)
     select account_id, id from raw_mails where ? and brand_id = ? on conflict do nothing`,
    [tenantScope(tx, 'raw_mails'), brandId],
  );
}
