import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signed, expiring grants for one attachment: the token in `PUT /v1/uploads/<token>` and
 * `GET /v1/files/<token>`. A token is its payload in clear, dot-separated, then an HMAC-SHA256 of
 * that text under the server's signing key (base64url):
 *
 *   v1.<attachment id>.<account id>.<l|t (mode)>.<u|d (purpose)>.<expiry, unix seconds>.<mac>
 *
 * Every field is covered by the MAC, so changing any of them (a longer expiry, the other
 * purpose, another attachment) invalidates it. Ids are [a-z0-9_] only, so '.' never occurs in them.
 */

export type GrantPurpose = 'upload' | 'download';

export interface Grant {
  attachmentId: string;
  accountId: string;
  livemode: boolean;
  purpose: GrantPurpose;
  /** Unix seconds. */
  expiresAt: number;
}

export type GrantCheck = { ok: true; grant: Grant } | { ok: false; reason: 'invalid' | 'wrong_purpose' | 'expired' };

const VERSION = 'v1';
const ID = /^[a-z]+_[0-9a-z]{1,64}$/;

function mac(key: Buffer, text: string): Buffer {
  return createHmac('sha256', key).update(text).digest();
}

export function signGrant(key: Buffer, grant: Grant): string {
  const text = [VERSION, grant.attachmentId, grant.accountId, grant.livemode ? 'l' : 't', grant.purpose === 'upload' ? 'u' : 'd', String(grant.expiresAt)].join('.');
  return `${text}.${mac(key, text).toString('base64url')}`;
}

/** Checks the signature first (constant time), then the purpose, then the expiry. */
export function verifyGrant(key: Buffer, token: string, purpose: GrantPurpose, nowSeconds: number): GrantCheck {
  const parts = token.split('.');
  if (parts.length !== 7 || parts[0] !== VERSION) return { ok: false, reason: 'invalid' };
  const [, attachmentId, accountId, mode, kind, expiry, signature] = parts as [string, string, string, string, string, string, string];
  const given = Buffer.from(signature, 'base64url');
  const expected = mac(key, parts.slice(0, 6).join('.'));
  // Compare the decoded bytes at a fixed length; a signature of another length cannot match.
  const same = given.length === expected.length && timingSafeEqual(given, expected);
  if (!same || !ID.test(attachmentId) || !ID.test(accountId) || !['l', 't'].includes(mode) || !['u', 'd'].includes(kind) || !/^\d{1,12}$/.test(expiry)) {
    return { ok: false, reason: 'invalid' };
  }
  // base64url decoding ignores some trailing bits: only the canonical spelling is accepted.
  if (expected.toString('base64url') !== signature) return { ok: false, reason: 'invalid' };
  const grant: Grant = { attachmentId, accountId, livemode: mode === 'l', purpose: kind === 'u' ? 'upload' : 'download', expiresAt: Number(expiry) };
  if (grant.purpose !== purpose) return { ok: false, reason: 'wrong_purpose' };
  if (grant.expiresAt <= nowSeconds) return { ok: false, reason: 'expired' };
  return { ok: true, grant };
}
