/**
 * A Retry-After header (a webhook receiver's, an import source's) in milliseconds from `now`:
 * delta-seconds or an HTTP date. Absent, malformed or in the past: null.
 */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at) || at <= now) return null;
  return at - now;
}
