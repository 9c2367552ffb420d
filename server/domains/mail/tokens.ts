import { createHmac, timingSafeEqual } from 'node:crypto';
import { base32 } from '../../core/base32.js';

/**
 * Reply tokens: the part after `+` in a reply address `<brandId>+<token>@<inbound domain>`, so a
 * reply reaches its ticket even when the mail client drops In-Reply-To and References.
 *
 *   token = <the 26 characters of the ticket id after "tkt_"><8 characters of MAC>
 *
 * The MAC is the first 40 bits of HMAC-SHA256("v1.<brandId>.<ticketId>") under the server's reply
 * key (server_secrets), in lower-case Crockford base32 like our ids: the address stays within the
 * 64-character local-part limit (29 + 1 + 34), survives MTAs that lower-case local parts, and a
 * token is bound to its brand (another brand's address with it does not verify). 40 bits is
 * plenty against guessing through the mail system; a token grants nothing but "this mail is a
 * reply to that ticket", which any In-Reply-To header may claim as well.
 */

const TICKET_BODY = /^[0-9a-hjkmnp-tv-z]{26}$/;

function mac(key: Buffer, brandId: string, ticketId: string): string {
  return base32(createHmac('sha256', key).update(`v1.${brandId}.${ticketId}`).digest().subarray(0, 5));
}

export function signReplyToken(key: Buffer, brandId: string, ticketId: string): string {
  const body = ticketId.slice('tkt_'.length);
  if (!ticketId.startsWith('tkt_') || !TICKET_BODY.test(body)) throw new Error(`not a ticket id: ${ticketId}`);
  return `${body}${mac(key, brandId, ticketId)}`;
}

/** The ticket id the token names, if its MAC is right for this brand (compared in constant time); else null. */
export function verifyReplyToken(key: Buffer, brandId: string, token: string): string | null {
  const lower = token.toLowerCase();
  if (lower.length !== 34 || !TICKET_BODY.test(lower.slice(0, 26))) return null;
  const ticketId = `tkt_${lower.slice(0, 26)}`;
  const given = Buffer.from(lower.slice(26));
  const expected = Buffer.from(mac(key, brandId, ticketId));
  return given.length === expected.length && timingSafeEqual(given, expected) ? ticketId : null;
}
