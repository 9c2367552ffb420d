/**
 * Crockford's base32 in lower case (no i, l, o, u): ids and reply tokens. Lower case survives
 * mail systems that fold local parts; the missing letters cannot be misread. The SQL twin that
 * makes outbox ids (ticketd_new_id, in its migration) uses the same alphabet.
 */
export const BASE32_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** The bytes as base32 digits, most significant bit first; trailing bits short of a digit are dropped. */
export function base32(bytes: Uint8Array): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = ((value << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      out += BASE32_ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}
