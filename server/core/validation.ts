import type { ErrorObject } from 'ajv';

/** ajv errors as the `errors: [{ field, message }]` of the error shape: for routes and services alike. */

function fieldOf(e: ErrorObject): string {
  const base = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const child =
    e.keyword === 'required' ? String(e.params.missingProperty)
    : e.keyword === 'additionalProperties' ? String(e.params.additionalProperty)
    : '';
  return [base, child].filter(Boolean).join('.') || '(body)';
}

function messageOf(e: ErrorObject): string {
  if (e.keyword === 'required') return 'is required';
  if (e.keyword === 'additionalProperties') return 'is not a known field';
  if (e.keyword === 'enum') return `must be one of: ${(e.params.allowedValues as unknown[]).join(', ')}`;
  return e.message ?? 'is invalid';
}

export function validationErrors(errors: ErrorObject[]): { field: string; message: string }[] {
  const seen = new Set<string>();
  const out: { field: string; message: string }[] = [];
  // A nullable field reports each branch of its anyOf: the summary, "must be null", and the real
  // problem. Keep the real problem; "must be null" only when nothing else was said about the field.
  const saidElse = (path: string) => errors.some((o) => o.keyword !== 'anyOf' && !(o.keyword === 'type' && o.params.type === 'null') && (o.instancePath === path || o.instancePath.startsWith(`${path}/`)));
  for (const e of errors) {
    if (e.keyword === 'anyOf' || e.keyword === 'oneOf') continue;
    if (e.keyword === 'type' && e.params.type === 'null' && saidElse(e.instancePath)) continue;
    const item = { field: fieldOf(e), message: messageOf(e) };
    if (seen.has(item.field)) continue;
    seen.add(item.field);
    out.push(item);
  }
  return out;
}
