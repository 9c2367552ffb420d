import type { BaseCtx, TenantCtx } from '../../core/context.js';
import { withTx } from '../../core/context.js';
import type { Change } from '../../core/audit.js';
import * as audit from '../../core/audit.js';
import { requireBrand } from '../../core/brand.js';
import { badRequest, notFound } from '../../core/errors.js';
import { newId, ID_PREFIX } from '../../core/ids.js';
import { scopeOf } from '../../core/model.js';
import { normalizeOrigin } from '../../core/origins.js';
import { randomBase62 } from '../../core/secrets.js';
import { Form } from './model.js';
import { STANDARD_TARGETS, type CreateFormInput, type FormView, type UpdateFormInput } from './schemas.js';

/**
 * Web forms of a brand: their settings, and the token of their public URL. The token (`ft_` and
 * 256 random bits) is stored and shown as it is: it is published in the page that embeds the form
 * (docs/decisions/0055). Regenerating it ends the old one at once.
 */

export const TOKEN_PREFIX = 'ft_';

export function generateToken(): string {
  return `${TOKEN_PREFIX}${randomBase62()}`;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export function toView(row: Form): FormView {
  return {
    id: row.id,
    object: 'form',
    brandId: row.brandId,
    name: row.name,
    token: row.token,
    successUrl: row.successUrl,
    errorUrl: row.errorUrl,
    thankYouMessage: row.thankYouMessage,
    fieldMapping: row.fieldMapping,
    enabled: row.enabled,
    honeypotField: row.honeypotField,
    allowedOrigins: row.allowedOrigins,
    submissionCount: row.submissionCount,
    lastSubmissionAt: iso(row.lastSubmissionAt),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** Blank: none. Otherwise an absolute http(s) URL without credentials. */
function checkUrl(field: 'successUrl' | 'errorUrl', raw: string | null | undefined): string | null | undefined {
  if (raw === undefined) return undefined;
  if (raw === null || raw.trim() === '') return null;
  const invalid = (why: string) => badRequest(`${field} ${why}`, [{ field, message: why }], 'invalid_url');
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw invalid('must be an absolute http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('must use http or https');
  if (url.username || url.password) throw invalid('must not contain credentials');
  return url.toString();
}

function checkOrigins(raw: readonly string[] | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const origins = raw.map((value, i) => {
    const origin = normalizeOrigin(value.trim());
    if (!origin) {
      const why = 'is not an origin: scheme, host and port only, such as https://www.example.com';
      throw badRequest(`allowedOrigins[${i}] ${why}`, [{ field: `allowedOrigins/${i}`, message: why }], 'invalid_origin');
    }
    return origin;
  });
  return [...new Set(origins)];
}

/** Two fields may not fill the same target (which would win is anyone's guess). Empty: none. */
function checkMapping(raw: Record<string, string> | null | undefined): Record<string, string> | null | undefined {
  if (raw === undefined || raw === null) return raw;
  const seen = new Map<string, string>();
  for (const [field, target] of Object.entries(raw)) {
    if (!/^[\x21-\x7e]{1,100}$/.test(field)) {
      throw badRequest(`fieldMapping: "${field}" is not a field name (1-100 printable ASCII characters, no spaces)`, [
        { field: 'fieldMapping', message: 'has an invalid field name' },
      ]);
    }
    const other = seen.get(target);
    if (other !== undefined) {
      throw badRequest(`fieldMapping maps both "${other}" and "${field}" to ${target}: one field per target`, [
        { field: `fieldMapping/${field}`, message: `${target} is filled by "${other}" already` },
      ]);
    }
    seen.set(target, field);
  }
  return Object.keys(raw).length ? raw : null;
}

/** The fields a submission is read from: the standard names fill themselves unless the mapping sends them elsewhere. */
export function effectiveMapping(mapping: Record<string, string> | null): Map<string, string> {
  const fields = new Map<string, string>();
  const mapped = new Set(Object.values(mapping ?? {}));
  for (const target of STANDARD_TARGETS) if (!mapped.has(target)) fields.set(target, target);
  for (const [field, target] of Object.entries(mapping ?? {})) fields.set(field, target);
  return fields;
}

function checkHoneypot(honeypot: string | null, mapping: Record<string, string> | null): void {
  if (honeypot !== null && effectiveMapping(mapping).has(honeypot)) {
    throw badRequest(`honeypotField "${honeypot}" is a field the form reads: people fill it, so every submission would be dropped`, [
      { field: 'honeypotField', message: 'is a field the form reads' },
    ]);
  }
}

const blankToNull = (text: string | null | undefined) => (text === undefined ? undefined : text === null || text.trim() === '' ? null : text);

const ofBrand = (ctx: TenantCtx, brandId: string) => Form.scoped(ctx).where('forms.brandId', brandId);

async function requireForm(ctx: TenantCtx, brandId: string, formId: string, lock = false): Promise<Form> {
  const brand = await requireBrand(ctx, brandId);
  const q = ofBrand(ctx, brand.id).findById(formId);
  const row = await (lock ? q.forUpdate() : q);
  if (!row) throw notFound('Form');
  return row;
}

export async function list(ctx: TenantCtx, brandId: string): Promise<FormView[]> {
  const brand = await requireBrand(ctx, brandId);
  return (await ofBrand(ctx, brand.id).orderBy('id')).map(toView);
}

export async function get(ctx: TenantCtx, brandId: string, formId: string): Promise<FormView> {
  return toView(await requireForm(ctx, brandId, formId));
}

export async function create(ctx: TenantCtx, brandId: string, input: CreateFormInput): Promise<FormView> {
  const fieldMapping = checkMapping(input.fieldMapping) ?? null;
  const honeypotField = input.honeypotField ?? null;
  checkHoneypot(honeypotField, fieldMapping);
  const values = {
    name: input.name.trim(),
    successUrl: checkUrl('successUrl', input.successUrl) ?? null,
    errorUrl: checkUrl('errorUrl', input.errorUrl) ?? null,
    thankYouMessage: blankToNull(input.thankYouMessage) ?? null,
    fieldMapping,
    enabled: input.enabled ?? true,
    honeypotField,
    allowedOrigins: checkOrigins(input.allowedOrigins) ?? [],
  };
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = (await Form.query(tx.db)
      .insert({ id: newId(ID_PREFIX.form), ...scopeOf(tx), brandId: brand.id, token: generateToken(), ...values })
      .returning('*')) as unknown as Form;
    await audit.record(tx, { brandId: brand.id, entityType: 'form', entityId: row.id, event: 'form.created', metadata: { name: row.name, enabled: row.enabled } });
    return toView(row);
  });
}

type Settings = Pick<Form, 'name' | 'successUrl' | 'errorUrl' | 'thankYouMessage' | 'fieldMapping' | 'enabled' | 'honeypotField' | 'allowedOrigins'>;

export async function update(ctx: TenantCtx, brandId: string, formId: string, input: UpdateFormInput): Promise<FormView> {
  const given: Partial<Settings> = {
    name: input.name?.trim(),
    successUrl: checkUrl('successUrl', input.successUrl),
    errorUrl: checkUrl('errorUrl', input.errorUrl),
    thankYouMessage: blankToNull(input.thankYouMessage),
    fieldMapping: checkMapping(input.fieldMapping),
    enabled: input.enabled,
    honeypotField: input.honeypotField,
    allowedOrigins: checkOrigins(input.allowedOrigins),
  };
  return withTx(ctx, async (tx) => {
    const current = await requireForm(tx, brandId, formId, true);
    const changes: Change[] = [];
    const patch: Partial<Settings> = {};
    for (const [field, value] of Object.entries(given) as [keyof Settings, Settings[keyof Settings]][]) {
      if (value === undefined || JSON.stringify(value) === JSON.stringify(current[field])) continue;
      changes.push({ field, from: current[field], to: value });
      Object.assign(patch, { [field]: value });
    }
    checkHoneypot(patch.honeypotField !== undefined ? patch.honeypotField : current.honeypotField, patch.fieldMapping !== undefined ? patch.fieldMapping : current.fieldMapping);
    if (!changes.length) return toView(current);
    const [row] = (await ofBrand(tx, current.brandId)
      .where('forms.id', current.id)
      .patch({ ...patch, updatedAt: tx.db.fn.now() as unknown as Date })
      .returning('*')) as unknown as Form[];
    await audit.record(tx, { brandId: current.brandId, entityType: 'form', entityId: current.id, event: 'form.updated', changes });
    return toView(row!);
  });
}

/** Deletes the form: its URL answers 404 from now on. Returns it as it was. */
export async function remove(ctx: TenantCtx, brandId: string, formId: string): Promise<FormView> {
  return withTx(ctx, async (tx) => {
    const row = await requireForm(tx, brandId, formId, true);
    await ofBrand(tx, row.brandId).where('forms.id', row.id).delete();
    await audit.record(tx, { brandId: row.brandId, entityType: 'form', entityId: row.id, event: 'form.deleted', metadata: { name: row.name } });
    return toView(row);
  });
}

/** A new token: the old URL answers 404 from the commit on, so pages embedding it must be updated. */
export async function regenerate(ctx: TenantCtx, brandId: string, formId: string): Promise<FormView> {
  return withTx(ctx, async (tx) => {
    const current = await requireForm(tx, brandId, formId, true);
    const [row] = (await ofBrand(tx, current.brandId)
      .where('forms.id', current.id)
      .patch({ token: generateToken(), updatedAt: tx.db.fn.now() as unknown as Date })
      .returning('*')) as unknown as Form[];
    await audit.record(tx, { brandId: current.brandId, entityType: 'form', entityId: current.id, event: 'form.token_regenerated' });
    return toView(row!);
  });
}

const TOKEN_SHAPE = /^ft_[0-9A-Za-z]{43}$/;

/** The form a public URL names, whatever its account: by the token alone (the one lookup across tenants). */
export async function findByToken(base: BaseCtx, token: string): Promise<Form | null> {
  if (!TOKEN_SHAPE.test(token)) return null;
  return (await Form.query(base.db).findOne({ token })) ?? null;
}

/**
 * Counts a ticket the form created, in the ticket's transaction; false when the form was disabled,
 * deleted or given a new token since it was found (the submission is then refused).
 */
export async function recordSubmission(ctx: TenantCtx, form: Form): Promise<boolean> {
  const updated = await ofBrand(ctx, form.brandId)
    .where('forms.id', form.id)
    .where('forms.token', form.token)
    .where('forms.enabled', true)
    .patch({ submissionCount: Form.raw('submission_count + 1') as unknown as number, lastSubmissionAt: ctx.db.fn.now() as unknown as Date });
  return updated > 0;
}
