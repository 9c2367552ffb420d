import type { ErrorObject } from 'ajv';
import { PATTERNS } from './schemas.js';

/** ajv errors as the `errors: [{ field, message }]` of the error shape: for routes and services alike. */

function fieldOf(e: ErrorObject): string {
  const base = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const child = e.keyword === 'required' ? String(e.params.missingProperty) : e.keyword === 'additionalProperties' ? String(e.params.additionalProperty) : '';
  return [base, child].filter(Boolean).join('.') || '(body)';
}

/** What the shared patterns mean, in words: a client should not have to read a regular expression. */
const PATTERN_MEANINGS: Record<string, string> = {
  [PATTERNS.email]: 'must be an email address',
  [PATTERNS.notBlank]: 'must not be blank',
  [PATTERNS.hexColor]: 'must be a hex colour such as #6b7280',
  [PATTERNS.httpUrl]: 'must be an http:// or https:// URL',
  [PATTERNS.origin]: 'must be an origin such as https://app.example.com (no path)',
  [PATTERNS.timeOfDay]: 'must be a time of day as HH:MM (00:00-23:59)',
};

function messageOf(e: ErrorObject): string {
  if (e.keyword === 'required') return 'is required';
  const meaning = e.keyword === 'pattern' ? PATTERN_MEANINGS[String(e.params.pattern)] : undefined;
  if (meaning) return meaning;
  if (e.keyword === 'additionalProperties') return 'is not a known field';
  if (e.keyword === 'enum') return `must be one of: ${(e.params.allowedValues as unknown[]).join(', ')}`;
  return e.message ?? 'is invalid';
}

export function validationErrors(errors: ErrorObject[]): { field: string; message: string }[] {
  const seen = new Set<string>();
  const out: { field: string; message: string }[] = [];
  const isNullBranch = (o: ErrorObject) => o.keyword === 'type' && o.params.type === 'null';
  // A nullable field reports each branch of its anyOf: the summary, "must be null", and the real
  // problem. Keep the real problem; "must be null" only when nothing else was said about the field.
  const saidElse = (path: string) => errors.some((o) => o.keyword !== 'anyOf' && !isNullBranch(o) && (o.instancePath === path || o.instancePath.startsWith(`${path}/`)));
  // A set of values (TypeBox: a union of literals) fails once per value, each "must be equal to
  // constant": when that is all that was said about the field, name the values it takes.
  const valuesOf = (path: string): string | null => {
    const about = errors.filter((o) => o.instancePath === path && o.keyword !== 'anyOf' && !isNullBranch(o));
    if (!about.every((o) => o.keyword === 'const')) return null;
    const values = about.map((o) => String(o.params.allowedValue));
    const orNull = errors.some((o) => o.instancePath === path && isNullBranch(o)) ? ' (or null)' : '';
    return values.length === 1 ? `must be ${values[0]}${orNull}` : `must be one of: ${values.join(', ')}${orNull}`;
  };
  for (const e of errors) {
    if (e.keyword === 'anyOf' || e.keyword === 'oneOf') continue;
    if (isNullBranch(e) && saidElse(e.instancePath)) continue;
    const item = { field: fieldOf(e), message: (e.keyword === 'const' ? valuesOf(e.instancePath) : null) ?? messageOf(e) };
    if (seen.has(item.field)) continue;
    seen.add(item.field);
    out.push(item);
  }
  return out;
}
