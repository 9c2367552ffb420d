import { randomBytes } from 'node:crypto';
import type { Config } from '../../core/config.js';
import type { MailAddress, MailMessage } from '../../core/ports.js';
import { escapeHtml } from '../../core/text.js';
import { signReplyToken } from './tokens.js';

/**
 * Pure builders of outbound messages: plain objects, no I/O. Every message carries
 * - a stable Message-ID derived from its event (`<comment id>@<mail domain>`, …), so a retried
 *   send is recognisably the same message;
 * - In-Reply-To/References into the ticket's conversation: the ticket's first and latest inbound
 *   Message-IDs and a per-ticket root `<ticket id>@<mail domain>`;
 * - `X-Ticketd-Brand` and `X-Ticketd-Ticket`, by which inbound mail recognises our own messages;
 * - a Reply-To `<brandId>+<reply token>@<inbound domain>` that routes a reply to its ticket even
 *   when the client drops the threading headers;
 * - a brand's message, when the brand has a verified domain of its own, `brandDomain`: the address
 *   there it goes from if the domain is still verified when sent (the dispatcher signs it).
 */

export interface MailSettings {
  /** Sender unless the brand has fromEmail; its domain names our Message-IDs. */
  fromAddress: string;
  inboundDomain: string;
}

export function mailSettings(config: Pick<Config, 'mailFrom' | 'inboundDomain'>): MailSettings {
  return { fromAddress: config.mailFrom.toLowerCase(), inboundDomain: config.inboundDomain.toLowerCase() };
}

export function messageIdDomain(settings: MailSettings): string {
  return settings.fromAddress.slice(settings.fromAddress.lastIndexOf('@') + 1);
}

export interface BrandInfo {
  id: string;
  name: string;
  ticketPrefix: string;
  fromName: string | null;
  fromEmail: string | null;
  autoresponseSubject: string | null;
  autoresponseBody: string | null;
  /** The verified primary OUTBOUND domain its mail goes out from; null: from mailFrom (or fromEmail). */
  sendingDomain: SendingDomain | null;
}

/** A brand's own domain as its messages use it (brand_domains). */
export interface SendingDomain {
  id: string;
  domain: string;
  fromName: string | null;
  fromEmail: string | null;
  /** MATCH: from the address at the domain the customer wrote to, when there is one. */
  replyMode: 'SINGLE' | 'MATCH';
}

/** The sender at a brand's domain when neither the domain nor the brand names one there (decision 0071). */
export const DEFAULT_DOMAIN_LOCAL_PART = 'support';

export interface TicketInfo {
  id: string;
  ticketNumber: number;
  title: string;
  /** The addresses the customer's mail that opened the ticket was written to (To, then Cc), lower case; none for other sources. */
  writtenTo?: readonly string[];
}

/** A ticket's conversation: the Message-IDs of its inbound mail, oldest first. */
export interface Thread {
  inboundMessageIds: string[];
}

export const DEFAULT_AUTORESPONSE_SUBJECT = 'Re: {{ticketTitle}} [#{{ticketNumber}}]';
export const DEFAULT_AUTORESPONSE_BODY = `Hello,

Thank you for contacting {{brandName}}. We received your request and will get back to you as soon as we can.
Your ticket number is #{{ticketNumber}}. To add anything, reply to this email.`;

/** Plain text as HTML: everything escaped, line breaks kept. */
function htmlOf(text: string): string {
  return `<!doctype html><html><body><div style="font-family:sans-serif;white-space:pre-wrap">${escapeHtml(text)}</div></body></html>`;
}

/**
 * `{{name}}` placeholders replaced by their values; unknown placeholders stay as written. Templates
 * are plain text: the HTML part is the rendered text escaped, so neither a template nor a value
 * (a brand or ticket name with `<` or `&`) can inject markup.
 */
export function renderTemplate(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{\s*(\w+)\s*\}\}/g, (whole, name: string) => (Object.hasOwn(values, name) ? values[name]! : whole));
}

/** A header-safe subject: one line, at most 250 characters. */
function subjectLine(text: string): string {
  return text
    .replace(/[\r\n\t]+/g, ' ')
    .replace(/\s{2,}/g, ' ')
    .trim()
    .slice(0, 250);
}

function sender(settings: MailSettings, brand: BrandInfo): MailAddress {
  return { name: brand.fromName ?? brand.name, address: brand.fromEmail ?? settings.fromAddress };
}

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase();

/**
 * The brand's own domain and address a message goes out from, if it has a verified one: in MATCH
 * mode the address at the domain the customer wrote to, else the domain's fromEmail, else the
 * brand's fromEmail when it is at the domain, else support@<domain>. The name is the domain's
 * fromName, else what the brand's mail is signed with today.
 */
function domainSender(brand: BrandInfo, ticket?: TicketInfo): Pick<MailMessage, 'brandDomain'> {
  const d = brand.sendingDomain;
  if (!d) return {};
  const atDomain = (address: string | null | undefined) => (address && domainOf(address) === d.domain ? address.toLowerCase() : undefined);
  const address =
    (d.replyMode === 'MATCH' ? ticket?.writtenTo?.find(atDomain) : undefined) ?? d.fromEmail ?? atDomain(brand.fromEmail) ?? `${DEFAULT_DOMAIN_LOCAL_PART}@${d.domain}`;
  return { brandDomain: { id: d.id, domain: d.domain, from: { name: d.fromName ?? brand.fromName ?? brand.name, address } } };
}

/** `<brandId>+<token>@<inbound domain>`: replies to it become comments on the ticket. */
export function replyAddress(settings: MailSettings, key: Buffer, brandId: string, ticketId: string): string {
  return `${brandId}+${signReplyToken(key, brandId, ticketId)}@${settings.inboundDomain}`;
}

function threading(settings: MailSettings, ticket: TicketInfo, thread: Thread): { inReplyTo: string; references: string[] } {
  const root = `<${ticket.id}@${messageIdDomain(settings)}>`;
  const ids = thread.inboundMessageIds;
  const latest = ids[ids.length - 1];
  return { inReplyTo: latest ?? root, references: [...new Set([ids[0], root, latest].filter((id): id is string => Boolean(id)))] };
}

function ticketRef(brand: BrandInfo, ticket: TicketInfo): string {
  return `${brand.ticketPrefix}-${ticket.ticketNumber}`;
}

interface Common {
  settings: MailSettings;
  /** The reply-token key (server_secrets). */
  key: Buffer;
  brand: BrandInfo;
  ticket: TicketInfo;
  thread: Thread;
}

function base(c: Common): Pick<MailMessage, 'from' | 'replyTo' | 'inReplyTo' | 'references' | 'headers' | 'brandDomain'> {
  return {
    from: sender(c.settings, c.brand),
    ...domainSender(c.brand, c.ticket),
    replyTo: replyAddress(c.settings, c.key, c.brand.id, c.ticket.id),
    ...threading(c.settings, c.ticket, c.thread),
    headers: { 'X-Ticketd-Brand': c.brand.id, 'X-Ticketd-Ticket': c.ticket.id },
  };
}

/** A public agent comment, mailed to the ticket's customer with the comment's CCs. */
export function agentReply(c: Common & { comment: { id: string; body: string; cc: string[] }; customer: MailAddress }): MailMessage {
  const text = c.comment.body;
  return {
    kind: 'agent_reply',
    ...base(c),
    to: [c.customer],
    cc: c.comment.cc.filter((a) => a !== c.customer.address).map((address) => ({ address })),
    subject: subjectLine(`Re: ${c.ticket.title} [${ticketRef(c.brand, c.ticket)}]`),
    text,
    html: htmlOf(text),
    messageId: `<${c.comment.id}@${messageIdDomain(c.settings)}>`,
  };
}

/** The brand's autoresponse to the sender of a new email ticket. */
export function autoresponse(c: Common & { customer: MailAddress }): MailMessage {
  const values = { ticketNumber: String(c.ticket.ticketNumber), brandName: c.brand.name, ticketTitle: c.ticket.title };
  const text = renderTemplate(c.brand.autoresponseBody?.trim() || DEFAULT_AUTORESPONSE_BODY, values);
  const b = base(c);
  return {
    kind: 'autoresponse',
    ...b,
    to: [c.customer],
    cc: [],
    subject: subjectLine(renderTemplate(c.brand.autoresponseSubject?.trim() || DEFAULT_AUTORESPONSE_SUBJECT, values)),
    text,
    html: htmlOf(text),
    messageId: `<${c.ticket.id}.autoresponse@${messageIdDomain(c.settings)}>`,
    // RFC 3834: a machine's answer; well-behaved responders never answer it, Exchange is asked not to.
    headers: { ...b.headers, 'Auto-Submitted': 'auto-replied', 'X-Auto-Response-Suppress': 'All' },
  };
}

/** A comment on a watched ticket, to the watchers who asked for comment notifications. */
export function watcherNotification(
  c: Common & {
    comment: { id: string; body: string; authorName: string | null; authorType: string; isInternal: boolean };
    watchers: MailAddress[];
  },
): MailMessage {
  const who = c.comment.authorName ?? (c.comment.authorType === 'CUSTOMER' ? 'The customer' : c.comment.authorType === 'SYSTEM' ? 'ticketd' : 'An agent');
  const text = `${who} ${c.comment.isInternal ? 'added an internal note' : 'wrote'} on ${ticketRef(c.brand, c.ticket)} "${c.ticket.title}":\n\n${c.comment.body}`;
  const b = base(c);
  return {
    kind: 'watcher_notification',
    ...b,
    to: c.watchers,
    cc: [],
    subject: subjectLine(`[${ticketRef(c.brand, c.ticket)}] ${c.ticket.title}`),
    text,
    html: htmlOf(text),
    messageId: `<${c.comment.id}.watchers@${messageIdDomain(c.settings)}>`,
    headers: { ...b.headers, 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'All' },
  };
}

/**
 * A ticket that passed its dueAt unresolved, to its assignee (or the brand's admins when it has
 * none). One message per deadline: its Message-ID is the ticket's and the deadline's.
 */
export function overdueNotification(c: Common & { dueAt: Date; to: MailAddress[] }): MailMessage {
  const text = `${ticketRef(c.brand, c.ticket)} "${c.ticket.title}" was due ${c.dueAt.toISOString()} and is not resolved yet.`;
  const b = base(c);
  return {
    kind: 'overdue',
    ...b,
    to: c.to,
    cc: [],
    subject: subjectLine(`Overdue: [${ticketRef(c.brand, c.ticket)}] ${c.ticket.title}`),
    text,
    html: htmlOf(text),
    messageId: `<${c.ticket.id}.overdue.${c.dueAt.getTime()}@${messageIdDomain(c.settings)}>`,
    headers: { ...b.headers, 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'All' },
  };
}

/** A member named in a comment (a mention), one message each; its Message-ID is the comment's and the member's. */
export function mentionNotification(
  c: Common & {
    comment: { id: string; body: string; authorName: string | null; isInternal: boolean };
    member: { id: string } & MailAddress;
  },
): MailMessage {
  const who = c.comment.authorName ?? 'Someone';
  const text = `${who} mentioned you ${c.comment.isInternal ? 'in an internal note ' : ''}on ${ticketRef(c.brand, c.ticket)} "${c.ticket.title}":\n\n${c.comment.body}`;
  const b = base(c);
  return {
    kind: 'mention',
    ...b,
    to: [{ name: c.member.name, address: c.member.address }],
    cc: [],
    subject: subjectLine(`[${ticketRef(c.brand, c.ticket)}] ${who} mentioned you: ${c.ticket.title}`),
    text,
    html: htmlOf(text),
    messageId: `<${c.comment.id}.mention.${c.member.id}@${messageIdDomain(c.settings)}>`,
    headers: { ...b.headers, 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'All' },
  };
}

/**
 * A mail a rule sends (a trigger's, an automation's), its subject and text rendered already: to the
 * ticket's customer in the ticket's thread, or to members. Marked as a machine's (RFC 3834), so
 * responders never answer it; its Message-ID is the firing's, so a retry cannot send it twice.
 */
export function ruleMail(c: Common & { firingId: string; to: MailAddress[]; subject: string; text: string }): MailMessage {
  const b = base(c);
  return {
    kind: 'rule',
    ...b,
    to: c.to,
    cc: [],
    subject: subjectLine(c.subject),
    text: c.text,
    html: htmlOf(c.text),
    messageId: `<${c.firingId}@${messageIdDomain(c.settings)}>`,
    headers: { ...b.headers, 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'All' },
  };
}

export const DEFAULT_CSAT_SUBJECT = 'How did we do? [#{{ticketNumber}}] {{ticketTitle}}';
export const DEFAULT_CSAT_BODY = `Hello,

Your request #{{ticketNumber}} "{{ticketTitle}}" was resolved. How would you rate the help you got from {{brandName}}?

{{ratingUrl}}

It takes one click, and a comment if you like. Thank you.`;

/**
 * A satisfaction rating request for a resolved ticket, from the brand, in the ticket's thread. The
 * brand's templates may place the link with `{{ratingUrl}}`; a template without it gets the link
 * appended, so no request goes out without one. Its Message-ID is the rating request's.
 */
export function ratingRequest(
  c: Common & { feedbackId: string; customer: MailAddress; ratingUrl: string; subjectTemplate: string | null; bodyTemplate: string | null },
): MailMessage {
  const values = { ticketNumber: String(c.ticket.ticketNumber), brandName: c.brand.name, ticketTitle: c.ticket.title, ratingUrl: c.ratingUrl };
  const template = c.bodyTemplate?.trim() || DEFAULT_CSAT_BODY;
  const rendered = renderTemplate(template, values);
  const text = /\{\{\s*ratingUrl\s*\}\}/.test(template) ? rendered : `${rendered}\n\nRate the help you got: ${c.ratingUrl}`;
  const b = base(c);
  return {
    kind: 'csat',
    ...b,
    to: [c.customer],
    cc: [],
    subject: subjectLine(renderTemplate(c.subjectTemplate?.trim() || DEFAULT_CSAT_SUBJECT, values)),
    text,
    html: htmlOf(text),
    messageId: `<${c.feedbackId}@${messageIdDomain(c.settings)}>`,
    headers: { ...b.headers, 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'All' },
  };
}

/** `ticketd mail send-test TO`: a fresh Message-ID every time. */
export function testMessage(settings: MailSettings, to: string): MailMessage {
  const text = 'This is a test message from ticketd. If you can read it, outbound mail works.';
  return {
    kind: 'test',
    from: { name: 'ticketd', address: settings.fromAddress },
    to: [{ address: to }],
    cc: [],
    replyTo: null,
    subject: 'ticketd test message',
    text,
    html: htmlOf(text),
    messageId: `<test.${Date.now().toString(36)}.${randomBytes(6).toString('hex')}@${messageIdDomain(settings)}>`,
    inReplyTo: null,
    references: [],
    headers: { 'X-Ticketd-Test': 'true', 'Auto-Submitted': 'auto-generated' },
  };
}

/**
 * A sign-in link for a team member (magic link). Its Message-ID is the link's id, so a retried
 * send is the same message; the text says how long the link works and that it works once.
 */
export function signInLink(
  settings: MailSettings,
  c: { linkId: string; to: MailAddress; url: string; organizationName: string; validMinutes: number; firstSignIn: boolean },
): MailMessage {
  const text = `${c.firstSignIn ? `Your organization "${c.organizationName}" is ready.` : `Sign in to "${c.organizationName}".`} Follow this link to sign in:

${c.url}

The link works once, within ${c.validMinutes} minutes. If you did not ask for it, ignore this mail: nobody can sign in without it.`;
  return linkMail(settings, 'sign_in', c, `Your sign-in link for ${c.organizationName}`, text);
}

/** A mail from ticketd itself carrying a link to one person; its Message-ID is the link's id. */
function linkMail(settings: MailSettings, kind: 'sign_in' | 'invitation' | 'portal_link', c: { linkId: string; to: MailAddress }, subject: string, text: string): MailMessage {
  return {
    kind,
    from: { name: 'ticketd', address: settings.fromAddress },
    to: [c.to],
    cc: [],
    replyTo: null,
    subject: subjectLine(subject),
    text,
    html: htmlOf(text),
    messageId: `<${c.linkId}@${messageIdDomain(settings)}>`,
    inReplyTo: null,
    references: [],
    headers: { 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'All' },
  };
}

/**
 * An invitation to join an organization: its link signs the invitee in and accepts the invitation.
 * Its Message-ID is the link's id, so a resent invitation is a new message and a retried send the same.
 */
export function invitation(
  settings: MailSettings,
  c: { linkId: string; to: MailAddress; url: string; organizationName: string; invitedBy: string; role: string; expiresAt: Date },
): MailMessage {
  const text = `${c.invitedBy} invited you to join "${c.organizationName}" as ${c.role === 'admin' ? 'an admin' : 'a member'}. Follow this link to accept and sign in:

${c.url}

The link works once, until ${c.expiresAt.toISOString().replace('T', ' ').slice(0, 16)} UTC. If you did not expect this invitation, ignore this mail.`;
  return linkMail(settings, 'invitation', c, `You are invited to join ${c.organizationName}`, text);
}

/**
 * A customer's sign-in link to a brand's portal, from the brand. Its Message-ID is the link's id;
 * `X-Ticketd-Brand` marks it as ours, so a reply to it is never taken for a new ticket.
 */
export function portalLink(settings: MailSettings, c: { linkId: string; brand: BrandInfo; to: MailAddress; url: string; validMinutes: number }): MailMessage {
  const text = `Follow this link to see and answer your requests to ${c.brand.name}:

${c.url}

The link works once, within ${c.validMinutes} minutes. If you did not ask for it, ignore this mail: nobody can sign in without it.`;
  return {
    ...linkMail(settings, 'portal_link', c, `Your sign-in link for ${c.brand.name} support`, text),
    from: sender(settings, c.brand),
    ...domainSender(c.brand),
    headers: { 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'All', 'X-Ticketd-Brand': c.brand.id },
  };
}
