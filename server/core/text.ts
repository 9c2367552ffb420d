/**
 * Text normalization shared by search and identity checks. Done in JavaScript, not SQL, so the
 * result never depends on the database's collation (lower() in a "C" database folds ASCII only).
 */

/** Folded form for case- and accent-insensitive search: "ÉMILE" -> "emile", "Straße" -> "strasse", "Zoë" -> "zoe". */
export function foldText(s: string): string {
  return s.toLowerCase().normalize('NFKD').replace(/\p{M}/gu, '').replace(/ß/g, 'ss').normalize('NFC');
}

/** Emails are compared and stored trimmed and lower-cased. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** A practical email check: one @, no spaces, a dotted domain. */
const EMAIL_ADDRESS = '[^\\s@]+@[^\\s@.]+(?:\\.[^\\s@.]+)+';
export const EMAIL_PATTERN = `^${EMAIL_ADDRESS}$`;
/** The same address as a client may send it: surrounding spaces allowed (normalizeEmail trims them). */
export const SENT_EMAIL_PATTERN = `^\\s*${EMAIL_ADDRESS}\\s*$`;
const EMAIL_RE = new RegExp(EMAIL_PATTERN, 'u');
export function isEmail(s: string): boolean {
  return s.length <= 320 && EMAIL_RE.test(s);
}

/** Lower-case host names such as `acme.com` or `mail.acme.co.uk` (ASCII / punycode labels). */
const DOMAIN_RE = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}$/;
export function normalizeDomain(s: string): string {
  return s.trim().toLowerCase().replace(/^@/, '').replace(/\.$/, '');
}
export function isDomain(s: string): boolean {
  return DOMAIN_RE.test(s) && !/^[0-9.]+$/.test(s);
}

/** The domain part of a normalized email. */
export function emailDomain(email: string): string {
  return email.slice(email.lastIndexOf('@') + 1);
}

/** Escapes LIKE wildcards so user text matches literally (PostgreSQL's default escape is \). */
export function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text made safe to place in HTML, in an element or a quoted attribute. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}
