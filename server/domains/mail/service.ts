import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { scopeOf, tenantScope } from '../../core/model.js';
import { keptServerSecret } from '../../core/secrets.js';
import { part, type Services } from '../../core/services.js';
import type { MailMessage } from '../../core/ports.js';
import type { SqlFragment } from '../../core/db.js';
import * as outbox from '../../core/outbox/service.js';
import type { Brand } from '../../core/brand.js';
import { autoresponse, mailSettings, type BrandInfo, type MailSettings, type SendingDomain, type TicketInfo } from './messages.js';
import type { MailAuthentication } from '../../integrations/mail-auth.js';
import { InboundEmail, QueuedMail, type InboundAction } from './model.js';

/**
 * Mail of a brand: outbound queuing (queueMail and the events that call it) and the records of
 * inbound mail (idempotency and threading). Messages are built here, in the transaction of the
 * change that causes them, and handed to the outbox; nothing here touches the network (see
 * docs/design.md, "Mail").
 */

/** The addresses outbound mail is built with: the process's configuration, read once. */
const settingsPart = part('mail.settings', (services) => mailSettings(services.config));
export function settingsOf(services: Services): MailSettings {
  return services.get(settingsPart);
}

/** The key of reply tokens (server_secrets): shared by every process on the database, kept once read. */
export const replyTokenKey: (ctx: Pick<BaseCtx, 'db' | 'services'>) => Promise<Buffer> = keptServerSecret('mail_reply_token_key');

// ---------------------------------------------------------------------------------------------
// Outbound.

/**
 * Queues a built message for delivery, inside the transaction of the change that caused it: the
 * change and its mail commit together or not at all. The message is recorded in mail_messages
 * (inbound replies are threaded against it) and enqueued as an outbox row of kind mail carrying the
 * whole message, which the dispatcher's mail handler (server/worker/handlers/mail.ts) sends outside
 * any transaction, with the same Message-ID on every attempt. A second queue of the same
 * Message-ID (the same event) records and enqueues nothing.
 */
export async function queueMail(tx: TenantCtx, brandId: string, ticketId: string | null, message: MailMessage): Promise<void> {
  await queueMails(tx, brandId, ticketId, [message]);
}

/**
 * queueMail for several messages of one change, in ONE statement: each recorded in mail_messages
 * and, if it was new there, enqueued in the outbox, in the order given.
 */
export async function queueMails(tx: TenantCtx, brandId: string, ticketId: string | null, messages: readonly MailMessage[]): Promise<void> {
  await queueTicketMails(
    tx,
    brandId,
    messages.map((message) => ({ ticketId, message })),
  );
}

/** queueMails for messages of several tickets of one brand (a group of inbound mail's autoresponses), in ONE statement. */
async function queueTicketMails(tx: TenantCtx, brandId: string, mails: readonly TicketMail[]): Promise<void> {
  if (!mails.length) return;
  if (!tx.db.isTransaction) throw new Error(`mail ${mails[0]!.message.messageId} must be queued inside the change's transaction`);
  const { sql, bindings } = queueMailsParts(tx, brandId, mails);
  const result = (await tx.db.raw(`with ${sql} select 1 from queued`, bindings as never[])) as { rowCount: number | null };
  await outbox.outboxAdded(tx, result.rowCount ?? 0);
}

/** A message to queue and the ticket it is about (null for none). */
export interface TicketMail {
  ticketId: string | null;
  message: MailMessage;
}

/**
 * queueMails' CTEs (`queued`: the outbox rows inserted, one per message new in mail_messages), for
 * a statement that also makes the change the mail is about (a comment: flows/comment-create-statement.ts).
 * `when`: a condition each message waits on (e.g. "the comment was inserted").
 */
export function queueMailsParts(tx: TenantCtx, brandId: string, mails: readonly TicketMail[], when?: SqlFragment): SqlFragment {
  if (mails.some((m) => m.message.kind === 'test')) throw new Error('test messages are sent directly, never queued');
  const rows = mails.map(({ ticketId, message }) => ({
    id: newId(ID_PREFIX.mailMessage),
    delivery_id: newId(ID_PREFIX.delivery),
    ticket_id: ticketId,
    kind: message.kind,
    message,
    message_id: message.messageId,
  }));
  const { accountId, livemode } = scopeOf(tx);
  return {
    sql: `mail_given as (
      select * from jsonb_to_recordset(?::jsonb) as r(id text, delivery_id text, ticket_id text, kind text, message jsonb, message_id text)${when ? ` where ${when.sql}` : ''}
    ), mail_recorded as (
      insert into mail_messages (id, account_id, livemode, brand_id, ticket_id, kind, message, message_id)
      select id, ?, ?, ?, ticket_id, kind, message, message_id from mail_given
      on conflict (account_id, livemode, brand_id, message_id) do nothing
      returning id, kind, message
    ), queued as (
      insert into outbox (id, account_id, livemode, brand_id, kind, event, payload)
      select g.delivery_id, ?, ?, ?, 'mail', 'mail.' || r.kind, jsonb_build_object('mailMessageId', r.id, 'message', r.message)
      from mail_recorded r, mail_given g where g.id = r.id
      order by g.delivery_id
      returning id
    )`,
    bindings: [JSON.stringify(rows), ...(when?.bindings ?? []), accountId, livemode, brandId, accountId, livemode, brandId],
  };
}

/** `sendingDomain`: the brand's verified primary OUTBOUND domain (brand_domains), read by the caller; null for none. */
export function brandInfo(brand: Brand, sendingDomain: SendingDomain | null): BrandInfo {
  return {
    id: brand.id,
    name: brand.name,
    ticketPrefix: brand.ticketPrefix,
    fromName: brand.fromName,
    fromEmail: brand.fromEmail,
    autoresponseSubject: brand.autoresponseSubject,
    autoresponseBody: brand.autoresponseBody,
    sendingDomain: sendingDomain && {
      id: sendingDomain.id,
      domain: sendingDomain.domain,
      fromName: sendingDomain.fromName,
      fromEmail: sendingDomain.fromEmail,
      replyMode: sendingDomain.replyMode,
    },
  };
}

/** The reason recorded with a member's reply by mail, an AGENT comment (decision 0074). */
export const AGENT_REPLY = 'agent_reply';

/**
 * The Message-IDs of a ticket's inbound mail from its customers, oldest first: what our mail to
 * them threads on (a member's reply by mail never reached them).
 */
export async function inboundMessageIds(ctx: TenantCtx, brandId: string, ticketId: string): Promise<string[]> {
  const rows = await InboundEmail.scoped(ctx)
    .where({ brandId, ticketId })
    .where((q) => q.whereNull('reason').orWhereNot('reason', AGENT_REPLY))
    .orderBy('id')
    .select('messageId');
  return rows.map((r) => r.messageId);
}

/** The addresses an email ticket's first message was written to, as inbound mail recorded them in its sourceData. */
function writtenTo(source: string | null | undefined, sourceData: Record<string, unknown> | null | undefined): string[] {
  if (source !== 'email' || !sourceData) return [];
  return [sourceData.to, sourceData.cc].flatMap((list) => (Array.isArray(list) ? list.filter((a): a is string => typeof a === 'string').map((a) => a.toLowerCase()) : []));
}

export function ticketInfo(ticket: { id: string; ticketNumber: number; title: string; source?: string | null; sourceData?: Record<string, unknown> | null }): TicketInfo {
  return { id: ticket.id, ticketNumber: ticket.ticketNumber, title: ticket.title, writtenTo: writtenTo(ticket.source, ticket.sourceData) };
}

/** The brand's autoresponse to the sender of a new email ticket (the caller checked it is wanted). */
export async function queueAutoresponse(tx: TenantCtx, brand: BrandInfo, ticket: TicketInfo, customer: { name: string | null; address: string }): Promise<void> {
  await queueAutoresponses(tx, brand, [{ ticket, customer, inboundMessageIds: await inboundMessageIds(tx, brand.id, ticket.id) }]);
}

/**
 * The brand's autoresponses to the senders of several new email tickets, in one statement;
 * `inboundMessageIds`: each ticket's (inboundMessageIds), known to the caller that just made it.
 */
export async function queueAutoresponses(
  tx: TenantCtx,
  brand: BrandInfo,
  answers: readonly { ticket: TicketInfo; customer: { name: string | null; address: string }; inboundMessageIds: string[] }[],
): Promise<void> {
  if (!answers.length) return;
  const key = await replyTokenKey(tx);
  const settings = settingsOf(tx.services);
  await queueTicketMails(
    tx,
    brand.id,
    answers.map((a) => ({
      ticketId: a.ticket.id,
      message: autoresponse({ settings, key, brand, ticket: a.ticket, thread: { inboundMessageIds: a.inboundMessageIds }, customer: a.customer }),
    })),
  );
}

// ---------------------------------------------------------------------------------------------
// Inbound records.

export interface InboundRecord {
  id: string;
  action: InboundAction;
  reason: string | null;
  ticketId: string | null;
  commentId: string | null;
}

/**
 * Claims a Message-ID for the brand, in the caller's transaction: the new row, or null when the
 * message was taken already. A concurrent claim of the same id waits on this uncommitted row (the
 * unique index) and then finds it taken: one delivery wins, however many arrive at once.
 */
export async function claimInbound(tx: TenantCtx, brandId: string, messageId: string, fromEmail: string, authentication: MailAuthentication | null = null): Promise<string | null> {
  const rows = (await tx
    .db('inboundEmails')
    .insert({
      id: newId(ID_PREFIX.inboundEmail),
      ...scopeOf(tx),
      brandId,
      messageId,
      fromEmail,
      action: 'ignored',
      authentication: authentication && JSON.stringify(authentication),
    })
    .onConflict(['accountId', 'livemode', 'brandId', 'messageId'])
    .ignore()
    .returning('id')) as { id: string }[];
  return rows[0]?.id ?? null;
}

/**
 * claimInbound for several messages in one statement (Message-IDs distinct per brand): each one's
 * new row id, or null when it was taken already, in the order given.
 */
export async function claimInbounds(
  tx: TenantCtx,
  messages: readonly { brandId: string; messageId: string; fromEmail: string; authentication: MailAuthentication | null }[],
): Promise<(string | null)[]> {
  if (!messages.length) return [];
  const rows = messages.map((m) => ({
    id: newId(ID_PREFIX.inboundEmail),
    ...scopeOf(tx),
    brandId: m.brandId,
    messageId: m.messageId,
    fromEmail: m.fromEmail,
    action: 'ignored',
    authentication: m.authentication && JSON.stringify(m.authentication),
  }));
  const claimed = new Set(
    ((await tx.db('inboundEmails').insert(rows).onConflict(['accountId', 'livemode', 'brandId', 'messageId']).ignore().returning('id')) as { id: string }[]).map((r) => r.id),
  );
  return rows.map((r) => (claimed.has(r.id) ? r.id : null));
}

/**
 * A message kept for later instead of becoming a ticket now (the plan's ticket allowance is used
 * up): claimed as held, its raw bytes kept to be received again (claimHeld). False when the
 * Message-ID was claimed meanwhile (a concurrent delivery): that delivery's outcome stands.
 */
export async function holdInbound(
  tx: TenantCtx,
  message: { brandId: string; messageId: string; fromEmail: string; raw: Buffer; envelope: readonly string[]; authentication: MailAuthentication },
  reason: string,
): Promise<boolean> {
  const id = await claimInbound(tx, message.brandId, message.messageId, message.fromEmail, message.authentication);
  if (!id) return false;
  await settleInbound(tx, id, { action: 'held', reason, ticketId: null, commentId: null });
  await tx.db('heldInboundEmails').insert({ ...scopeOf(tx), inboundEmailId: id, raw: message.raw, envelope: [...message.envelope] });
  return true;
}

/**
 * Held messages, oldest first, of every account (up to `limit`), without their bytes: what the
 * dispatcher receives again when there is room (heldRaw then reads the ones it takes).
 */
export async function heldMessages(ctx: BaseCtx, limit: number): Promise<HeldMessage[]> {
  return (await ctx.db('heldInboundEmails').orderBy('heldAt').limit(limit).select('accountId', 'livemode', 'inboundEmailId', 'envelope')) as HeldMessage[];
}

export interface HeldMessage {
  accountId: string;
  livemode: boolean;
  inboundEmailId: string;
  envelope: string[];
}

/** A held message's raw bytes; null when it is held no more. */
export async function heldRaw(ctx: TenantCtx, inboundEmailId: string): Promise<Buffer | null> {
  const row = (await ctx
    .db('heldInboundEmails')
    .where({ ...scopeOf(ctx), inboundEmailId })
    .first('raw')) as { raw: Buffer } | undefined;
  return row?.raw ?? null;
}

/**
 * A held message taken back to be received (in the transaction that receives it): its claim
 * becomes an ordinary one and its raw bytes go. Null when it is held no more (received meanwhile).
 */
export async function claimHeld(tx: TenantCtx, inboundEmailId: string): Promise<string | null> {
  const [row] = (await InboundEmail.scoped(tx).where({ id: inboundEmailId, action: 'held' }).patch({ action: 'ignored', reason: null }).returning('id')) as unknown as {
    id: string;
  }[];
  if (!row) return null;
  await tx
    .db('heldInboundEmails')
    .where({ ...scopeOf(tx), inboundEmailId })
    .delete();
  return row.id;
}

/** The checks a message had when it arrived (a held message is not checked again). */
export async function inboundAuthentication(ctx: TenantCtx, inboundEmailId: string): Promise<MailAuthentication | null> {
  const row = await InboundEmail.scoped(ctx).where({ id: inboundEmailId }).select('authentication').first();
  return row?.authentication ?? null;
}

export async function findInbound(ctx: TenantCtx, brandId: string, messageId: string): Promise<InboundRecord | null> {
  const row = await InboundEmail.scoped(ctx).where({ brandId, messageId }).first();
  return row ? { id: row.id, action: row.action, reason: row.reason, ticketId: row.ticketId, commentId: row.commentId } : null;
}

export async function settleInbound(tx: TenantCtx, id: string, outcome: Omit<InboundRecord, 'id'>): Promise<void> {
  await InboundEmail.scoped(tx).where({ id }).patch(outcome);
}

/** settleInbound for several records, in one statement. */
export async function settleInbounds(tx: TenantCtx, outcomes: readonly InboundRecord[]): Promise<void> {
  if (!outcomes.length) return;
  await tx.db.raw(
    `update inbound_emails e set action = o.action, reason = o.reason, ticket_id = o.ticket_id, comment_id = o.comment_id
    from jsonb_to_recordset(?::jsonb) as o(id text, action text, reason text, ticket_id text, comment_id text)
    where ? and e.id = o.id`,
    [JSON.stringify(outcomes.map((o) => ({ id: o.id, action: o.action, reason: o.reason, ticket_id: o.ticketId, comment_id: o.commentId }))), tenantScope(tx, 'e')],
  );
}

/**
 * The ticket a message replies to, from Message-IDs it names (In-Reply-To first, then References
 * newest first): a message we sent for the ticket or one we received for it. Null when none is known.
 */
export async function ticketForMessageIds(ctx: TenantCtx, brandId: string, messageIds: readonly string[]): Promise<string | null> {
  const ids = [...new Set(messageIds)].slice(0, 100);
  if (!ids.length) return null;
  // Sequential: ctx may be a transaction (one connection).
  const received = await InboundEmail.scoped(ctx).where({ brandId }).whereIn('messageId', ids).whereNotNull('ticketId').select('messageId', 'ticketId');
  const sent = await QueuedMail.scoped(ctx).where({ brandId }).whereIn('messageId', ids).whereNotNull('ticketId').select('messageId', 'ticketId');
  const byId = new Map([...received, ...sent].map((r) => [r.messageId, r.ticketId!]));
  for (const id of ids) if (byId.has(id)) return byId.get(id)!;
  return null;
}
