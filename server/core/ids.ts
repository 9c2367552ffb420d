import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

/** Wire prefixes of every id kind. */
export const ID_PREFIX = {
  account: 'acct',
  member: 'mem',
  apiKey: 'key',
  brand: 'br',
  request: 'req',
} as const;

/**
 * A prefixed, time-sortable id: 10 base32 chars of milliseconds, then 16 of randomness (80 bits),
 * like a ULID. Sorting ids sorts by creation time, which keyset pagination relies on.
 */
export function newId(prefix: string, now = Date.now()): string {
  let time = '';
  let ms = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[ms % 32] + time;
    ms = Math.floor(ms / 32);
  }
  const bytes = randomBytes(16);
  let rand = '';
  for (let i = 0; i < 16; i++) rand += ALPHABET[bytes[i]! % 32];
  return `${prefix}_${time}${rand}`;
}

/** Brand ids are `br_…`; clients of the hosted product also send the workspace spelling `ws_…`. */
export function normalizeBrandId(id: string): string {
  return id.startsWith('ws_') ? `br_${id.slice(3)}` : id;
}
