import { createHash } from 'node:crypto';
import type { AddressObject, ParsedMail } from 'mailparser';
import { tenantCtx, withTx, type BaseCtx, type TenantCtx } from '../core/context.js';
import { badRequest, HttpError } from '../core/errors.js';
import { isEmail, normalizeEmail } from '../core/text.js';
import * as attachments from '../domains/attachments/service.js';
import * as billing from '../domains/billing/service.js';
import type { SessionMember } from '../domains/members/service.js';
import * as blockedSources from '../domains/blocked-sources/service.js';
import * as brandDomains from '../domains/brand-domains/service.js';
import * as comments from '../domains/comments/service.js';
import { locate, type Brand } from '../core/brand.js';
import { MAX_COMMENT_BODY_LENGTH } from '../domains/comments/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import { MAX_BODY_LENGTH, type TicketView } from '../domains/tickets/schemas.js';
import type { InboundAction } from '../domains/mail/model.js';
import { stripQuotedReply } from '../domains/mail/quotes.js';
import * as mail from '../domains/mail/service.js';
import type { TicketInfo } from '../domains/mail/messages.js';
import * as rawMails from '../domains/raw-mails/service.js';
import { verifyReplyToken } from '../domains/mail/tokens.js';
import { createTogether, type GroupedCreate } from './ticket-create.js';
import { createComment } from './comment-create.js';
import { writerOf } from './inbound-writer.js';
import { findOrCreateContact } from './customers.js';
import { mailingBrand } from './brand-domains.js';
import { authenticationOf, dmarcSpamReason, fromIsAuthenticated, type MailAuthentication, type SmtpClient } from './inbound-authentication.js';
import type { StagedObject } from '../core/ports.js';

/**
 * Inbound mail: one raw RFC 822 message, from `POST /v1/inbound/email`, the SMTP listener or a
 * brand's own mailbox (flows/mailbox-sync.ts), becomes a ticket, a comment on the ticket it replies
 * to, or nothing (ignored), in one transaction.
 *
 * 1. The brand comes from the first recipient at the inbound domain (SMTP envelope, then
 *    Delivered-To, X-Original-To, To, Cc): `<brandId>@<domain>` or `<brandId>+<reply token>@<domain>`;
 *    else from the first at a brand's verified INBOUND domain (any address there); a message from
 *    a brand's mailbox is that brand's. The brand row is read once, before the transaction.
 * 2. The Message-ID (a hash of the raw message when there is none) is claimed for the brand: the
 *    same message delivered again answers with what the first delivery did, and creates nothing.
 * 3. Our own messages (an X-Ticketd-* header, or From our sending address) are ignored: no loop.
 * 4. A valid reply token, else In-Reply-To/References naming a message we sent or received for a
 *    ticket, thread it to that ticket; who wrote it decides what it adds (flows/inbound-writer.ts):
 *    its customer or another participant a CUSTOMER comment, a member who may see the brand an
 *    AGENT comment mailed on to the customer (never their auto-replies or bounces: ignored), anyone
 *    else nothing there (a new ticket). Quoted history and signature are trimmed (the full text
 *    kept in metadata.email.originalText); a customer reply to a pending, resolved or closed ticket
 *    reopens it (status open), except an auto-reply. Anything else is a new ticket (source email).
 * 5. Blocked senders: a new ticket is created as spam (ticket create's own check, in its
 *    statement); a reply from one adds nothing (action spam).
 * 6. The brand's autoresponse goes to the sender of a new ticket unless the message is itself
 *    automatic (Auto-Submitted other than no, X-Autoreply, X-Autorespond, Precedence
 *    bulk/junk/list/auto_reply, List-Id, List-Unsubscribe) or spam.
 * 7. A new ticket beyond the plan's ticket allowance: the message is held (kept, raw), and becomes
 *    the ticket when the billing period rolls over or the plan grows (receiveHeld).
 * 8. SPF, DKIM, DMARC and ARC are checked before the transaction (inbound-authentication.ts) and
 *    kept on the inbound record, the ticket's sourceData and the comment's metadata. A message
 *    failing DMARC of a domain publishing p=reject or p=quarantine is spam, as from a blocked sender.
 * Attachments over attachmentMaxBytes are skipped and listed in metadata.email.skippedAttachments.
 * The raw message of a ticket or comment is kept rawMailRetentionDays (domains/raw-mails).
 */

export interface InboundDeps {
  attachments: attachments.AttachmentDeps;
}

export interface InboundResult {
  action: InboundAction;
  brandId: string;
  ticketId?: string;
  commentId?: string;
  reason?: string;
  /** The same Message-ID was delivered before: this answer is the first delivery's. */
  duplicate?: boolean;
}

const BRAND_LOCAL = /^((?:br|ws)_[0-9a-z]{26})(?:\+([0-9a-z]{1,64}))?$/;
const ADDRESS = /[^\s<>,;:"()[\]]+@[^\s<>,;:"()[\]]+/g;
const HEADER_LINE = /^[\x21-\x39\x3b-\x7e]+:/;

/** An RFC 822 message starts with header fields up to a blank line (or the end). */
function looksLikeMessage(raw: Buffer): boolean {
  const head = raw.subarray(0, 64 * 1024).toString('latin1');
  const end = head.search(/\r?\n\r?\n/);
  const lines = (end < 0 ? head : head.slice(0, end)).split(/\r?\n/);
  if (!lines[0] || !HEADER_LINE.test(lines[0])) return false;
  return lines.every((l, i) => HEADER_LINE.test(l) || (i > 0 && /^[ \t]/.test(l)) || (end < 0 && i === lines.length - 1));
}

function addressesOf(value: unknown): string[] {
  if (!value) return [];
  if (Array.isArray(value)) return value.flatMap(addressesOf);
  if (typeof value === 'object' && 'value' in (value as object)) {
    return ((value as AddressObject).value ?? []).flatMap((a) => [a.address ?? '', ...addressesOf(a.group)]).filter(Boolean);
  }
  return String(typeof value === 'object' && 'text' in (value as object) ? (value as { text: string }).text : value).match(ADDRESS) ?? [];
}

interface Recipient {
  brandId: string;
  token: string | null;
}

/** Where the message was sent, most telling first: the SMTP envelope, then the headers. */
function recipientsOf(parsed: ParsedMail, envelope: readonly string[]): string[] {
  const h = parsed.headers;
  return [...envelope, ...['delivered-to', 'x-original-to', 'to', 'cc'].flatMap((name) => addressesOf(h.get(name)))].map(normalizeEmail);
}

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1);

/** A brand address at the server's inbound domain: `<brandId>@` or `<brandId>+<reply token>@`. */
function findBrandAddress(recipients: readonly string[], inboundDomain: string): Recipient | null {
  for (const address of recipients) {
    if (domainOf(address) !== inboundDomain) continue;
    const local = BRAND_LOCAL.exec(address.slice(0, address.lastIndexOf('@')));
    if (local) return { brandId: local[1]!.replace(/^ws_/, 'br_'), token: local[2] ?? null };
  }
  return null;
}

/** The brand address the message was sent to, else the brand of a verified INBOUND domain it was sent to (any address there). */
async function findRecipient(base: BaseCtx, recipients: readonly string[], inboundDomain: string): Promise<Recipient | null> {
  const addressed = findBrandAddress(recipients, inboundDomain);
  if (addressed) return addressed;
  const owner = await brandDomains.inboundBrand(base, recipients.map(domainOf));
  return owner && { brandId: owner.brandId, token: null };
}

function header(parsed: ParsedMail, name: string): string {
  const value = parsed.headers.get(name);
  if (value == null) return '';
  return (typeof value === 'object' && 'text' in (value as object) ? (value as { text: string }).text : String(value)).trim().toLowerCase();
}

/** Sent by a machine in answer to something (out-of-office, autoresponders). */
function isAutoReply(parsed: ParsedMail): boolean {
  const autoSubmitted = header(parsed, 'auto-submitted');
  return (
    (autoSubmitted !== '' && autoSubmitted !== 'no') || parsed.headers.has('x-autoreply') || parsed.headers.has('x-autorespond') || header(parsed, 'precedence') === 'auto_reply'
  );
}

/** Mailing lists and bulk mail: never answered automatically. */
function isBulk(parsed: ParsedMail): boolean {
  return ['bulk', 'junk', 'list'].includes(header(parsed, 'precedence')) || parsed.headers.has('list-id') || parsed.headers.has('list-unsubscribe');
}

/** A delivery status notification (a bounce): RFC 3464's multipart/report. */
function isDeliveryReport(parsed: ParsedMail): boolean {
  const type = parsed.headers.get('content-type') as { value?: string } | string | undefined;
  return String((typeof type === 'object' ? type.value : type) ?? '').toLowerCase() === 'multipart/report';
}

function isOwnMessage(parsed: ParsedMail, from: string, ownAddresses: readonly string[]): boolean {
  return [...parsed.headers.keys()].some((k) => k.startsWith('x-ticketd-')) || ownAddresses.includes(from);
}

function referencedIds(parsed: ParsedMail): string[] {
  const refs = Array.isArray(parsed.references) ? parsed.references : parsed.references ? parsed.references.split(/\s+/) : [];
  const inReplyTo = parsed.inReplyTo?.match(/<[^<>\s]+>/g) ?? [];
  return [...inReplyTo, ...refs.reverse()].map((id) => id.trim()).filter((id) => /^<[^<>\s]+>$/.test(id));
}

const clip = (text: string, max: number) => (text.length > max ? text.slice(0, max) : text);

function titleOf(subject: string | undefined): string {
  return clip((subject ?? '').replace(/\s+/g, ' ').trim(), 500) || '(no subject)';
}

interface Files {
  kept: attachments.FileContent[];
  skipped: { filename: string; size: number }[];
}

function filesOf(parsed: ParsedMail, maxBytes: number): Files {
  const files: Files = { kept: [], skipped: [] };
  for (const a of parsed.attachments) {
    const filename = a.filename ?? (a.contentType === 'message/rfc822' ? 'message.eml' : 'attachment');
    if (a.content.length > maxBytes) files.skipped.push({ filename, size: a.content.length });
    else files.kept.push({ filename, contentType: a.contentType, content: a.content });
  }
  return files;
}

/** Without the mbox "From sender date" line some delivery pipes put before the headers. */
function withoutEnvelopeLine(raw: Buffer): Buffer {
  if (raw.subarray(0, 5).toString('latin1') !== 'From ') return raw;
  const end = raw.indexOf(0x0a);
  return end < 0 ? raw : raw.subarray(end + 1);
}

async function parse(input: Buffer): Promise<ParsedMail> {
  const raw = withoutEnvelopeLine(input);
  if (!looksLikeMessage(raw)) throw badRequest('The body is not an RFC 822 message: it must start with header fields such as From: and Subject:', [], 'invalid_message');
  // Loaded on first use, like mailauth and imapflow: a process that receives no mail never pays for them.
  const { simpleParser } = await import('mailparser');
  try {
    return await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true });
  } catch {
    throw badRequest('The message could not be parsed as MIME', [], 'invalid_message');
  }
}

/**
 * The thread the message replies to, by reply token, else by the Message-IDs it names: the ticket
 * named, then the one it was merged into; the last is live. Null when it names no live ticket.
 */
async function repliedThread(ctx: TenantCtx, brandId: string, token: string | null, parsed: ParsedMail): Promise<TicketView[] | null> {
  let ticketId = token ? verifyReplyToken(await mail.replyTokenKey(ctx), brandId, token) : null;
  ticketId ??= await mail.ticketForMessageIds(ctx, brandId, referencedIds(parsed));
  const thread: TicketView[] = [];
  // A merged ticket's replies go to the ticket it was merged into (one step).
  for (let hop = 0; ticketId && hop < 2; hop++) {
    const ticket = await tickets.fetchView(ctx, brandId, ticketId).catch((err: unknown) => {
      if (err instanceof HttpError && err.statusCode === 404) return null;
      throw err;
    });
    if (!ticket) return null;
    thread.push(ticket);
    if (!ticket.mergedIntoId) return thread;
    ticketId = ticket.mergedIntoId;
  }
  return null;
}

const REOPENED_FROM = ['pending', 'resolved', 'closed'];
// Valid values of the create inputs; typebox types those mapped literal unions as undefined.
const SOURCE_EMAIL = 'email' as never;
const AUTHOR_CUSTOMER = 'CUSTOMER' as never;
const AUTHOR_AGENT = 'AGENT' as never;

/** The member's mail acts as the member, as their own comment in the dashboard would. */
function memberCtx(tx: TenantCtx, member: SessionMember): TenantCtx {
  return { ...tx, actor: { type: 'user', id: member.memberId, name: member.name ?? member.email, source: 'email' }, brandScope: member.brandScope };
}

/** Where a message comes from, besides its bytes. */
export interface InboundSource {
  /** The SMTP envelope's recipients: looked at first for the brand address. */
  envelope?: readonly string[];
  /**
   * The inbound_emails id of a message held over the plan's ticket allowance, received again
   * (receiveHeld); refused again, it stays held.
   */
  held?: string | null;
  /** A brand's own mailbox, taken in over IMAP. */
  mailbox?: MailboxSource;
  /** The SMTP client that handed the message over (the SMTP listener): what SPF checks. */
  client?: SmtpClient;
}

/**
 * A message from a brand's own mailbox: its brand is the mailbox's, whatever the recipients say
 * (a reply token in them still counts when it is this brand's).
 */
export interface MailboxSource {
  brandId: string;
  /** The brand's row, read by the sync once for a batch of messages (else read for this one). */
  brand?: Brand | null;
  /**
   * Runs in the transaction that records the message's outcome, a duplicate's included, so the
   * mailbox's place is saved with what the message created; throwing rolls that back.
   */
  taken: (tx: TenantCtx) => Promise<void>;
}

export async function receive(base: BaseCtx, deps: InboundDeps, raw: Buffer, source: InboundSource = {}): Promise<InboundResult> {
  return (await prepare(base, deps, raw, source)).receive();
}

/**
 * A message read, its brand found, authenticated, and its raw copy staged: all that comes before
 * the transaction, so that a mailbox sync prepares the next message while one is taken in.
 * Taken in once, either by receive() (its own transaction), or by within(tx) in a transaction the
 * caller shares between several messages of one account and ends, then end(committed). A message
 * prepared and never taken in is discarded.
 */
export interface PreparedInbound {
  receive(): Promise<InboundResult>;
  /**
   * What the message becomes, recorded in `tx` (of its brand's account); errors are thrown as they
   * come (a plan's allowance reached included: receive() is what holds a message). The mailbox's
   * place is the caller's to save.
   */
  within(tx: TenantCtx): Promise<InboundResult>;
  /** After within(): its staged copies let go, and its stored files too if `committed` is false. */
  end(committed: boolean): Promise<void>;
  discard(): Promise<void>;
  /**
   * Set when the message can only open a ticket (or be a duplicate): nothing threads it (no reply
   * token, no In-Reply-To or References), it is not our own, its brand takes mail, it is not held.
   * receiveTogether then takes it in with others of its kind, their tickets made by one statement.
   */
  opening: Opening | null;
}

/** A message that opens a ticket unless its Message-ID was claimed before. */
interface Opening {
  brand: Brand;
  claim: { brandId: string; messageId: string; fromEmail: string; authentication: MailAuthentication };
  /** The first delivery's answer, when the claim found the Message-ID taken. */
  duplicate(tx: TenantCtx): Promise<InboundResult>;
  /** Its attachments staged (before the create statement takes the brand row), and its create. */
  create(tx: TenantCtx): Promise<GroupedCreate>;
  /** After its ticket is made: its files kept, and what is left to write for it, with others'. */
  opened(tx: TenantCtx, claimed: string, ticket: TicketView): Promise<Opened>;
}

interface Opened {
  result: InboundResult;
  record: mail.InboundRecord;
  raw: { staged: StagedObject; link: rawMails.RawMailLink; kept: (id: string) => void } | null;
  /** The brand's autoresponse it is owed. */
  answer: { ticket: TicketInfo; customer: { name: string | null; address: string }; inboundMessageIds: string[] } | null;
}

export async function prepare(base: BaseCtx, deps: InboundDeps, raw: Buffer, source: InboundSource = {}): Promise<PreparedInbound> {
  const { envelope = [], held = null, mailbox } = source;
  const settings = mail.settingsOf(base.services);
  const parsed = await parse(raw);
  const sender = parsed.from?.value.find((a) => a.address);
  const from = sender?.address ? normalizeEmail(sender.address) : '';
  if (!from) throw badRequest('The message has no From address', [{ field: 'from', message: 'is missing' }], 'missing_from');
  if (!isEmail(from)) throw badRequest(`The From address ${from} is not an email address`, [{ field: 'from', message: 'is not an email address' }], 'invalid_from');
  const fromName = sender?.name?.trim() || null;

  const recipients = recipientsOf(parsed, envelope);
  let recipient: Recipient | null;
  if (mailbox) {
    const addressed = findBrandAddress(recipients, settings.inboundDomain);
    recipient = { brandId: mailbox.brandId, token: addressed?.brandId === mailbox.brandId ? addressed.token : null };
  } else recipient = await findRecipient(base, recipients, settings.inboundDomain);
  const brand = mailbox?.brand !== undefined ? mailbox.brand : recipient ? await locate(base, recipient.brandId) : null;
  if (!recipient || !brand) {
    throw new HttpError(
      404,
      'unknown_recipient',
      `No recipient is a brand address at ${settings.inboundDomain} (<brandId>@${settings.inboundDomain}) or an address at a brand's verified INBOUND domain`,
    );
  }
  const ctx = tenantCtx({ ...base, actor: { type: 'customer', id: null, name: fromName ? `${fromName} <${from}>` : from, source: 'email' } }, brand.accountId, brand.livemode);
  const messageId = parsed.messageId?.trim() || `<${createHash('sha256').update(raw).digest('hex')}@message-id.invalid>`;
  const brandId = brand.id;
  const authentication = await authenticationOf(ctx, raw, source);
  const dmarcSpam = dmarcSpamReason(authentication);

  const files = filesOf(parsed, deps.attachments.maxBytes);
  // Before any transaction (network I/O), and before anything is staged: the scanner down under
  // scanFailure refuse is a 503, and the message is tried again later.
  const scanned = await attachments.scanFiles(base.services, files.kept);
  const rawCopy = await rawMails.stage(deps.attachments.storage, base.services.config.rawMailRetentionDays, raw);
  const stored: string[] = [];
  let staged: attachments.StagedFile[] = [];
  const keepRaw = async (tx: TenantCtx, inboundEmailId: string, ticketId: string, commentId: string | null) => {
    if (rawCopy) stored.push(await rawMails.keep(tx, rawCopy, { brandId, ticketId, commentId, inboundEmailId, messageId }));
  };
  const own = [settings.fromAddress, ...(brand.fromEmail ? [normalizeEmail(brand.fromEmail)] : [])];
  const automatic = isAutoReply(parsed);
  const text = (parsed.text ?? '').replace(/\r\n?/g, '\n').trim();
  const email = {
    messageId,
    from,
    subject: parsed.subject ?? null,
    ...(automatic ? { autoReply: true } : {}),
    ...(files.skipped.length ? { skippedAttachments: files.skipped } : {}),
    ...(scanned.infected.length ? { infectedAttachments: scanned.infected } : {}),
  };
  /** Infected files are kept out; an internal note on the ticket says which and why. */
  const noteInfected = async (tx: TenantCtx, ticketId: string, commentId: string | null) => {
    if (!scanned.infected.length) return;
    const names = scanned.infected.map((f) => `${f.filename} (${f.size} bytes): ${f.signature}`).join('; ');
    await comments.addSystemComment(
      tx,
      brandId,
      ticketId,
      `The virus scanner found ${scanned.infected.length === 1 ? 'a file' : 'files'} of this message infected; not kept: ${names}.`,
      {
        isInternal: true,
        infectedAttachments: scanned.infected,
        ...(commentId ? { commentId } : {}),
      },
    );
  };
  const opening: Opening = {
    brand,
    claim: { brandId, messageId, fromEmail: from, authentication },
    duplicate: async (tx) => {
      const first = (await mail.findInbound(tx, brandId, messageId))!;
      return { action: first.action, brandId, duplicate: true, ...present(first) };
    },
    create: async (tx) => {
      // Written now, before the ticket's statement takes the brand row lock (held to the commit).
      staged = await attachments.stageFiles(deps.attachments, scanned.kept);
      const input = {
        title: titleOf(parsed.subject),
        body: clip(text, MAX_BODY_LENGTH) || null,
        customerEmail: from,
        customerName: fromName,
        source: SOURCE_EMAIL,
        sourceId: clip(messageId, 500),
        sourceData: {
          messageId,
          from,
          to: addressesOf(parsed.to),
          cc: addressesOf(parsed.cc),
          subject: parsed.subject ?? null,
          date: parsed.date?.toISOString() ?? null,
          authentication,
        },
        ...(files.skipped.length || scanned.infected.length || automatic ? { metadata: { email } } : {}),
      };
      return { ctx: { ...tx, actor: ctx.actor }, brandId, input, options: { spam: dmarcSpam !== null } };
    },
    opened: async (tx, claimed, created) => {
      for (const file of staged) stored.push((await attachments.addStagedFile({ ...tx, actor: ctx.actor }, brandId, created.id, null, file, from)).id);
      await noteInfected(tx, created.id, null);
      const raw = rawCopy && {
        staged: rawCopy,
        link: { brandId, ticketId: created.id, commentId: null, inboundEmailId: claimed, messageId },
        kept: (id: string) => void stored.push(id),
      };
      const settled = (result: InboundResult): Opened['record'] => ({
        id: claimed,
        action: result.action,
        reason: result.reason ?? null,
        ticketId: result.ticketId ?? null,
        commentId: null,
      });
      if (created.isSpam) {
        const result: InboundResult = { brandId, action: 'spam', reason: dmarcSpam ?? 'blocked_sender', ticketId: created.id };
        return { result, record: settled(result), raw, answer: null };
      }
      const result: InboundResult = { brandId, action: 'ticket_created', ticketId: created.id };
      // Its own Message-ID is all the new ticket's inbound mail: what the autoresponse threads on.
      const answered = brand.autoresponseEnabled && !automatic && !isBulk(parsed);
      const answer = answered ? { ticket: mail.ticketInfo(created), customer: { name: fromName, address: from }, inboundMessageIds: [messageId] } : null;
      return { result, record: settled(result), raw, answer };
    },
  };
  /** What the message becomes, recorded in tx. */
  const receiveIn = async (tx: TenantCtx): Promise<InboundResult> => {
    const claimed = held ? await mail.claimHeld(tx, held) : await mail.claimInbound(tx, brandId, messageId, from, authentication);
    if (!claimed) return opening.duplicate(tx);
    const settle = async (outcome: { action: InboundAction; reason?: string; ticketId?: string; commentId?: string }): Promise<InboundResult> => {
      await mail.settleInbound(tx, claimed, { action: outcome.action, reason: outcome.reason ?? null, ticketId: outcome.ticketId ?? null, commentId: outcome.commentId ?? null });
      return { brandId, ...outcome };
    };

    if (isOwnMessage(parsed, from, own)) return settle({ action: 'ignored', reason: 'own_message' });
    if (!brand.inboundEmailEnabled) return settle({ action: 'ignored', reason: 'inbound_email_disabled' });

    const thread = await repliedThread(tx, brandId, recipient.token, parsed);
    // A stranger's message is theirs alone: it goes on to a new ticket below.
    const writer = thread ? await writerOf(tx, brandId, thread, from, fromIsAuthenticated(authentication, from)) : { as: 'stranger' as const };
    const ticket = thread && writer.as !== 'stranger' ? thread[thread.length - 1]! : null;
    if (!ticket) return (await openTickets(tx, [{ opening, claimed }]))[0]!;

    const asAgent = writer.as === 'agent' ? writer.member : null;
    // An agent's out-of-office or bounce must not reach the customer as the agent's answer.
    if (asAgent && (automatic || isDeliveryReport(parsed))) return settle({ action: 'ignored', reason: 'agent_auto_reply' });
    if (dmarcSpam) return settle({ action: 'spam', reason: dmarcSpam, ticketId: ticket.id });
    if (!asAgent && (await blockedSources.isBlocked(tx, brandId, from))) return settle({ action: 'spam', reason: 'blocked_sender', ticketId: ticket.id });
    if (!asAgent) await findOrCreateContact(tx, brandId, from, fromName);
    // Written now, before the comment's statement.
    staged = await attachments.stageFiles(deps.attachments, scanned.kept);
    const reply = stripQuotedReply(text);
    const { comment } = await createComment(asAgent ? memberCtx(tx, asAgent) : tx, brandId, ticket.id, {
      body: clip(reply || (files.kept.length ? '(attachments only)' : '(empty message)'), MAX_COMMENT_BODY_LENGTH),
      authorType: asAgent ? AUTHOR_AGENT : AUTHOR_CUSTOMER,
      authorName: asAgent ? (asAgent.name ?? asAgent.email) : (fromName ?? from),
      source: SOURCE_EMAIL,
      sourceId: clip(messageId, 500),
      metadata: { email: { ...email, authentication, ...(reply !== text ? { originalText: clip(text, MAX_COMMENT_BODY_LENGTH) } : {}) } },
      ...(!asAgent && REOPENED_FROM.includes(ticket.status) && !automatic ? { setStatus: 'open' } : {}),
    });
    for (const file of staged) stored.push((await attachments.addStagedFile(tx, brandId, ticket.id, comment.id, file, from)).id);
    await noteInfected(tx, ticket.id, comment.id);
    await keepRaw(tx, claimed, ticket.id, comment.id);
    return settle({ action: 'comment_created', ticketId: ticket.id, commentId: comment.id, ...(asAgent ? { reason: mail.AGENT_REPLY } : {}) });
  };
  const end = async (committed: boolean) => {
    if (!committed) await attachments.discardFiles(deps.attachments, stored);
    await attachments.discardStaged(staged);
    await rawCopy?.discard();
  };
  const receiveNow = async (): Promise<InboundResult> => {
    let result: InboundResult;
    try {
      result = await withTx(ctx, async (tx): Promise<InboundResult> => {
        const received = await receiveIn(tx);
        await mailbox?.taken(tx);
        return received;
      });
    } catch (err) {
      await end(false);
      if (!held && billing.isLimitReached(err)) return hold(ctx, { brandId, messageId, fromEmail: from, raw, envelope, authentication }, mailbox);
      throw err;
    }
    await end(true);
    return result;
  };
  return {
    receive: receiveNow,
    // The message's own actor (its sender) in the shared transaction.
    within: (tx) => receiveIn({ ...tx, actor: ctx.actor }),
    end,
    discard: async () => void (await rawCopy?.discard()),
    opening: !held && !recipient.token && !referencedIds(parsed).length && !isOwnMessage(parsed, from, own) && brand.inboundEmailEnabled ? opening : null,
  };
}

/**
 * Messages prepared for one account and mode, taken in in `tx` (the caller's: it ends it, then
 * calls each one's end), answered in the order given. Runs of messages that can only open tickets
 * (PreparedInbound.opening) are claimed by one statement and their tickets made by one create
 * statement (their settling, raw copies and autoresponses by one statement each); any other
 * message is taken in on its own, after the run before it, so that a reply finds the ticket of a
 * message before it, and a Message-ID seen twice is the first one's duplicate. Errors are thrown
 * as they come (see within).
 */
export async function receiveTogether(tx: TenantCtx, group: readonly PreparedInbound[]): Promise<InboundResult[]> {
  const results: InboundResult[] = [];
  let run: { at: number; opening: Opening }[] = [];
  const key = (o: Opening) => `${o.claim.brandId} ${o.claim.messageId}`;
  const takeRun = async () => {
    const openings = run;
    run = [];
    const claims = await mail.claimInbounds(
      tx,
      openings.map((o) => o.opening.claim),
    );
    const claimed = openings.flatMap((o, i) => (claims[i] ? [{ ...o, claimed: claims[i]! }] : []));
    const opened = await openTickets(tx, claimed);
    claimed.forEach((o, i) => (results[o.at] = opened[i]!));
    for (const [i, o] of openings.entries()) if (!claims[i]) results[o.at] = await o.opening.duplicate(tx);
  };
  for (const [at, prepared] of group.entries()) {
    const opening = prepared.opening;
    if (opening && !run.some((o) => key(o.opening) === key(opening))) {
      run.push({ at, opening });
      continue;
    }
    if (run.length) await takeRun();
    if (opening) run.push({ at, opening });
    else results[at] = await prepared.within(tx);
  }
  if (run.length) await takeRun();
  return results;
}

/** Claimed messages of one account and mode that open tickets: their tickets made together (ticket create's createTogether), then what each leaves to write, with the others'. */
async function openTickets(tx: TenantCtx, claimed: readonly { opening: Opening; claimed: string }[]): Promise<InboundResult[]> {
  if (!claimed.length) return [];
  const creates: GroupedCreate[] = [];
  for (const c of claimed) creates.push(await c.opening.create(tx));
  const created = await createTogether(creates);
  const opened: Opened[] = [];
  for (const [i, c] of claimed.entries()) opened.push(await c.opening.opened(tx, c.claimed, created[i]!.ticket));
  await mail.settleInbounds(
    tx,
    opened.map((o) => o.record),
  );
  const raws = opened.flatMap((o) => (o.raw ? [o.raw] : []));
  (await rawMails.keepMany(tx, raws)).forEach((id, i) => raws[i]!.kept(id));
  const brands = new Map(claimed.map((c) => [c.opening.brand.id, c.opening.brand]));
  for (const brand of brands.values()) {
    const answers = opened.flatMap((o, i) => (o.answer && claimed[i]!.opening.brand.id === brand.id ? [o.answer] : []));
    if (answers.length) await mail.queueAutoresponses(tx, await mailingBrand(tx, brand), answers);
  }
  return opened.map((o) => o.result);
}

/** A new ticket beyond the plan's allowance: the message is kept (held), to become the ticket later (receiveHeld). */
async function hold(ctx: TenantCtx, message: Parameters<typeof mail.holdInbound>[1], mailbox: MailboxSource | undefined): Promise<InboundResult> {
  const reason = billing.LIMIT_REACHED;
  const held = await withTx(ctx, async (tx) => {
    const kept = await mail.holdInbound(tx, message, reason);
    await mailbox?.taken(tx);
    return kept;
  });
  if (held) return { action: 'held', brandId: message.brandId, reason };
  const first = (await mail.findInbound(ctx, message.brandId, message.messageId))!;
  return { action: first.action, brandId: message.brandId, duplicate: true, ...present(first) };
}

/**
 * The dispatcher's job: held messages received again, oldest first, for the accounts whose
 * allowance has room now (the billing period rolled over, the plan grew). An account still
 * without room is passed over until a later tick; its messages keep their order.
 */
export async function receiveHeld(base: BaseCtx, deps: InboundDeps, limit = 100): Promise<number> {
  const room = new Map<string, number | null>();
  let received = 0;
  for (const message of await mail.heldMessages(base, limit)) {
    const account = `${message.accountId}:${message.livemode}`;
    if (!room.has(account)) room.set(account, await billing.ticketRoom(tenantCtx(base, message.accountId, message.livemode)));
    const left = room.get(account);
    if (left === 0) continue;
    const raw = await mail.heldRaw(tenantCtx(base, message.accountId, message.livemode), message.inboundEmailId);
    if (!raw) continue;
    try {
      await receive(base, deps, raw, { envelope: message.envelope, held: message.inboundEmailId });
      received++;
      if (typeof left === 'number') room.set(account, left - 1);
    } catch (err) {
      if (billing.isLimitReached(err)) room.set(account, 0);
      else base.services.log.warn({ err, inboundEmailId: message.inboundEmailId }, 'a held inbound message could not be received: it stays held');
    }
  }
  return received;
}

function present(r: mail.InboundRecord): Omit<InboundResult, 'action' | 'brandId'> {
  return { ...(r.ticketId ? { ticketId: r.ticketId } : {}), ...(r.commentId ? { commentId: r.commentId } : {}), ...(r.reason ? { reason: r.reason } : {}) };
}
