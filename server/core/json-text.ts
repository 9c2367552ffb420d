/**
 * What every JSON request body must satisfy before it is parsed, checked in one pass over its text:
 * - nesting at most MAX_JSON_DEPTH levels: deeper values would overflow a recursive walk somewhere
 *   (the parser, the validator, PostgreSQL's jsonb), and no request of this API needs them;
 * - no lone UTF-16 surrogate (`"\ud800"` not followed by a low surrogate, or a low one alone):
 *   PostgreSQL refuses such text in text and jsonb columns, so it is refused here, by name, before
 *   it reaches SQL (docs/decisions: lone surrogates are refused, not replaced).
 * Raw UTF-8 cannot carry a lone surrogate (Node decodes invalid bytes to U+FFFD), so escapes are the
 * only way one arrives.
 */
export const MAX_JSON_DEPTH = 64;

export type JsonTextProblem = { kind: 'too_deep'; depth: number } | { kind: 'lone_surrogate'; offset: number };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const LOWER_U = 0x75;

/** The code unit of the `\uXXXX` escape starting at `at` (the backslash), or -1 when it is not one. */
function escapedUnit(text: string, at: number): number {
  if (text.charCodeAt(at) !== BACKSLASH || text.charCodeAt(at + 1) !== LOWER_U) return -1;
  const hex = text.slice(at + 2, at + 6);
  return /^[0-9a-fA-F]{4}$/.test(hex) ? parseInt(hex, 16) : -1;
}

const isHigh = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLow = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;

/** The first problem of a JSON text, or null. Malformed JSON is left to the parser to name. */
export function jsonTextProblem(text: string, maxDepth = MAX_JSON_DEPTH): JsonTextProblem | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === QUOTE) inString = false;
      else if (c === BACKSLASH) {
        const unit = escapedUnit(text, i);
        if (unit < 0) {
          i++; // a one-character escape: skip the escaped character
          continue;
        }
        if (isLow(unit)) return { kind: 'lone_surrogate', offset: i };
        if (isHigh(unit)) {
          if (!isLow(escapedUnit(text, i + 6))) return { kind: 'lone_surrogate', offset: i };
          i += 6; // the pair's low half
        }
        i += 5;
      }
      continue;
    }
    if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return { kind: 'too_deep', depth };
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return null;
}
