import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { withTx, type TenantCtx } from '../../core/context.js';
import { isPgError, PG } from '../../core/db.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { validationErrors } from '../../core/validation.js';
import { PATTERNS } from '../../core/schemas.js';
import { ID_PREFIX, newId } from '../../core/ids.js';
import { part } from '../../core/services.js';
import { scopeOf, tenantScope } from '../../core/model.js';
import * as audit from '../../core/audit.js';
import { forgetFound, requireBrand, type Brand, type FieldRule } from '../../core/brand.js';
import { FieldDefinition } from './model.js';
import type { AllFieldsView, CreateFieldInput, EntityType, FieldType, FieldView, PutTicketSchemaInput, ReorderFieldsInput, TicketSchemaView, UpdateFieldInput } from './schemas.js';

/*
 * How field definitions and the brand's ticket schema agree
 * ---------------------------------------------------------
 * A brand has two sources of rules for ticket customFields:
 *  - its hand-written JSON Schema (brands.ticket_schema, GET/PUT /schema), and
 *  - its ticket field definitions (/fields/ticket).
 * Definitions generate a JSON Schema (generatedSchema): one property per definition, typed by
 * the field type (text/url/date -> string, number, boolean, select -> enum of options,
 * multiselect/array -> string[], object -> object), nullable unless the field is required, and
 * the required definitions listed in `required`. Other keys stay allowed (additionalProperties
 * is not restricted), so customFields may carry values no definition describes.
 * The effective schema is both at once: { allOf: [handWritten, generated] }, or whichever exists,
 * or null (then any JSON is accepted). Neither source overrides the other; a definition that
 * contradicts the hand-written schema makes that field impossible to fill, which is the
 * author's to fix. validateCustomFields checks customFields against both and lists every failing
 * field path as `customFields.<path>`. Definitions of customers and companies generate a schema
 * the same way, with no hand-written part (validateFieldValues).
 */

type Ctx = TenantCtx;
type JsonSchema = Record<string, unknown>;

/** `contact` (the dashboard's name) is `customer` here. */
export function canonicalEntity(entityType: string): EntityType {
  return (entityType === 'contact' ? 'customer' : entityType) as EntityType;
}

export function toView(row: FieldDefinition): FieldView {
  return {
    id: row.id,
    object: 'field_definition',
    brandId: row.brandId,
    entityType: row.entityType,
    key: row.key,
    label: row.label,
    type: row.type as FieldType,
    required: row.required,
    defaultValue: row.defaultValue ?? null,
    description: row.description,
    placeholder: row.placeholder,
    options: row.options,
    visible: row.visible,
    showOnCreate: row.showOnCreate,
    showInTable: row.showInTable,
    showInDetail: row.showInDetail,
    sortOrder: row.sortOrder,
    source: row.source,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

// ---------------------------------------------------------------------------------------------
// Field type -> JSON Schema

const ISO_DATE = '^\\d{4}-\\d{2}-\\d{2}([Tt ]\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?([Zz]|[+-]\\d{2}:?\\d{2})?)?$';

/** The JSON Schema of one non-null value of a field. */
export function valueSchema(def: { type: string; options?: string[] | null }): JsonSchema {
  switch (def.type as FieldType) {
    case 'text':
      return { type: 'string' };
    case 'url':
      return { type: 'string', pattern: PATTERNS.httpUrl };
    case 'date':
      return { type: 'string', pattern: ISO_DATE };
    case 'number':
      return { type: 'number' };
    case 'boolean':
      return { type: 'boolean' };
    case 'select':
      return { type: 'string', enum: [...(def.options ?? [])] };
    case 'multiselect':
      return { type: 'array', items: { type: 'string', enum: [...(def.options ?? [])] }, uniqueItems: true };
    case 'array':
      return { type: 'array', items: { type: 'string' } };
    case 'object':
      return { type: 'object' };
  }
}

/** The schema the definitions of one entity type generate; null when there are none. */
export function generatedSchema(defs: readonly FieldRule[]): JsonSchema | null {
  if (defs.length === 0) return null;
  const properties: Record<string, JsonSchema> = {};
  for (const d of defs) properties[d.key] = d.required ? valueSchema(d) : { anyOf: [valueSchema(d), { type: 'null' }] };
  const required = defs.filter((d) => d.required).map((d) => d.key);
  return { type: 'object', properties, ...(required.length ? { required } : {}) };
}

function effectiveOf(hand: JsonSchema | null, generated: JsonSchema | null): JsonSchema | null {
  if (hand && generated) return { allOf: [hand, generated] };
  return hand ?? generated;
}

// Compiled validators by schema text, per process. One Ajv per schema: a schema's $id must not
// stay registered for another tenant. Bounded, oldest dropped first.
const validators = part('fields.validators', () => new Map<string, ValidateFunction>());
function validatorFor(ctx: Ctx, schema: JsonSchema): ValidateFunction {
  const compiled = ctx.services.get(validators);
  const text = JSON.stringify(schema);
  let fn = compiled.get(text);
  if (!fn) {
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats.default(ajv);
    fn = ajv.compile(schema);
    if (compiled.size >= 500) compiled.delete(compiled.keys().next().value!);
    compiled.set(text, fn);
  }
  return fn;
}

function errorsAgainst(ctx: Ctx, schema: JsonSchema, value: unknown, prefix: string): { field: string; message: string }[] {
  const validate = validatorFor(ctx, schema);
  if (validate(value)) return [];
  return validationErrors(validate.errors as ErrorObject[]).map((e) => ({
    field: e.field === '(body)' ? prefix : `${prefix}.${e.field}`,
    message: e.message,
  }));
}

// ---------------------------------------------------------------------------------------------
// Definitions

function ofBrand(ctx: Ctx, brandId: string, entityType: EntityType) {
  return FieldDefinition.scoped(ctx).where('brandId', brandId).where('entityType', entityType);
}

async function ordered(ctx: Ctx, brandId: string, entityType: EntityType): Promise<FieldDefinition[]> {
  return ofBrand(ctx, brandId, entityType).orderBy([
    { column: 'sortOrder', order: 'asc' },
    { column: 'id', order: 'asc' },
  ]);
}

/** What a PATCH may change, in the order the audit entry lists it. */
const EDITABLE = [
  'label',
  'type',
  'required',
  'defaultValue',
  'description',
  'placeholder',
  'options',
  'visible',
  'showOnCreate',
  'showInTable',
  'showInDetail',
  'sortOrder',
  'source',
] as const;

/**
 * brands.field_rules (what validating a value needs of the brand's definitions, per entity type in
 * display order; migration 1700), rewritten by every change of the definitions in its transaction.
 * The brand row is locked first and the rules read by the next statement, which takes a fresh
 * snapshot: concurrent changes in one brand serialize, and the later one sees the earlier's rows.
 * FOR NO KEY UPDATE does not conflict with the key share a definition's foreign key holds on it.
 */
async function refreshFieldRules(tx: TenantCtx, brandId: string): Promise<void> {
  await tx.db.raw('select 1 from brands b where ? and b.id = ? for no key update', [tenantScope(tx, 'b'), brandId]);
  await tx.db.raw(
    `update brands b set field_rules = (
        select coalesce(jsonb_object_agg(entity_type, rules), '{}') from (
          select fd.entity_type, jsonb_agg(jsonb_build_object('key', fd.key, 'type', fd.type, 'options', fd.options, 'required', fd.required) order by fd.sort_order, fd.id) as rules
          from field_definitions fd where ? and fd.brand_id = ?
          group by fd.entity_type) per_entity)
      where ? and b.id = ?`,
    [tenantScope(tx, 'fd'), brandId, tenantScope(tx, 'b'), brandId],
  );
}

/** `lock`: for update, so the audit entry's `from` values are what the change replaced. */
async function requireField(ctx: Ctx, brandId: string, entityType: EntityType, key: string, lock = false): Promise<FieldDefinition> {
  const query = ofBrand(ctx, brandId, entityType).where('key', key).first();
  const row = await (lock ? query.forUpdate() : query);
  if (!row) throw notFound('Field definition');
  return row;
}

const keyTaken = (entityType: string, key: string) => conflict(`A ${entityType} field with key "${key}" already exists in this brand`, 'field_key_taken');

/** Options belong to select and multiselect (required there); the default must be a valid value. */
function assertConsistent(ctx: Ctx, def: { type: string; options: string[] | null; defaultValue: unknown }): void {
  const errors: { field: string; message: string }[] = [];
  const choice = def.type === 'select' || def.type === 'multiselect';
  if (choice && !def.options?.length) errors.push({ field: 'options', message: `is required for ${def.type} fields (at least one option)` });
  if (!choice && def.options?.length) errors.push({ field: 'options', message: 'only select and multiselect fields have options' });
  if (!errors.length && def.defaultValue !== null && def.defaultValue !== undefined) {
    errors.push(...errorsAgainst(ctx, valueSchema(def), def.defaultValue, 'defaultValue'));
  }
  if (errors.length) throw badRequest(`Field definition is invalid: ${errors[0]!.field} ${errors[0]!.message}`, errors, 'validation_failed');
}

export async function listAll(ctx: Ctx, brandId: string): Promise<AllFieldsView> {
  const brand = await requireBrand(ctx, brandId);
  const rows = await FieldDefinition.scoped(ctx)
    .where('brandId', brand.id)
    .orderBy([
      { column: 'sortOrder', order: 'asc' },
      { column: 'id', order: 'asc' },
    ]);
  const of = (e: EntityType) => rows.filter((r) => r.entityType === e).map(toView);
  const customer = of('customer');
  return { ticket: of('ticket'), customer, contact: customer, company: of('company') };
}

export async function list(ctx: Ctx, brandId: string, entityType: string): Promise<FieldView[]> {
  const brand = await requireBrand(ctx, brandId);
  return (await ordered(ctx, brand.id, canonicalEntity(entityType))).map(toView);
}

export async function create(ctx: Ctx, brandId: string, entityType: string, input: CreateFieldInput): Promise<FieldView> {
  const entity = canonicalEntity(entityType);
  const options = input.options ?? null;
  assertConsistent(ctx, { type: input.type, options, defaultValue: input.defaultValue });
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    forgetFound(tx, brand.id); // the change below rewrites its fieldRules (refreshFieldRules)
    const last = (await ofBrand(tx, brand.id, entity).max('sortOrder as m').first()) as unknown as { m: number | null };
    const now = new Date(ctx.services.now());
    try {
      const row = await tx.db.transaction(async (trx) =>
        FieldDefinition.query(trx)
          .insert({
            id: newId(ID_PREFIX.field),
            ...scopeOf(tx),
            brandId: brand.id,
            entityType: entity,
            key: input.key,
            label: input.label,
            type: input.type,
            required: input.required ?? false,
            defaultValue: input.defaultValue ?? null,
            description: input.description ?? null,
            placeholder: input.placeholder ?? null,
            options: options?.length ? options : null,
            visible: input.visible ?? true,
            showOnCreate: input.showOnCreate ?? true,
            showInTable: input.showInTable ?? true,
            showInDetail: input.showInDetail ?? true,
            sortOrder: input.sortOrder ?? (last.m === null ? 0 : last.m + 1),
            source: input.source ?? null,
            createdAt: now,
            updatedAt: now,
          })
          .returning('*'),
      );
      await refreshFieldRules(tx, brand.id);
      await audit.record(tx, { brandId: brand.id, entityType: 'field', entityId: row.id, event: 'field.created', metadata: { appliesTo: entity, key: row.key, label: row.label } });
      return toView(row);
    } catch (err) {
      if (isPgError(err, PG.uniqueViolation, 'field_definitions_key_unique')) throw keyTaken(entity, input.key);
      throw err;
    }
  });
}

export async function update(ctx: Ctx, brandId: string, entityType: string, key: string, input: UpdateFieldInput): Promise<FieldView> {
  const entity = canonicalEntity(entityType);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    forgetFound(tx, brand.id); // the change below rewrites its fieldRules (refreshFieldRules)
    const field = await requireField(tx, brand.id, entity, key, true);
    const type = input.type ?? field.type;
    const choice = type === 'select' || type === 'multiselect';
    // Leaving select for another type drops the options the caller did not restate.
    let options = input.options !== undefined ? input.options : field.options;
    if (!choice && input.options === undefined) options = null;
    const defaultValue = input.defaultValue !== undefined ? input.defaultValue : field.defaultValue;
    assertConsistent(ctx, { type, options, defaultValue });
    const patch = { ...input, options: options?.length ? options : null, defaultValue: defaultValue ?? null, updatedAt: new Date(ctx.services.now()) };
    const after = toView((await FieldDefinition.scoped(tx).findById(field.id).patch(patch).returning('*').first())!);
    await refreshFieldRules(tx, brand.id);
    const changes = audit.changesBetween(toView(field), after, EDITABLE);
    if (changes.length)
      await audit.record(tx, {
        brandId: brand.id,
        entityType: 'field',
        entityId: field.id,
        event: 'field.updated',
        changes,
        metadata: { appliesTo: entity, key: after.key, label: after.label },
      });
    return after;
  });
}

/** Returns the deleted definition. Values already stored in customFields stay as they are. */
export async function remove(ctx: Ctx, brandId: string, entityType: string, key: string): Promise<FieldView> {
  const entity = canonicalEntity(entityType);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    forgetFound(tx, brand.id); // the change below rewrites its fieldRules (refreshFieldRules)
    const field = await requireField(tx, brand.id, entity, key);
    await ofBrand(tx, brand.id, entity).where('id', field.id).delete();
    await refreshFieldRules(tx, brand.id);
    await audit.record(tx, {
      brandId: brand.id,
      entityType: 'field',
      entityId: field.id,
      event: 'field.deleted',
      metadata: { appliesTo: entity, key: field.key, label: field.label },
    });
    return toView(field);
  });
}

/** keys must name every field of the entity type exactly once; anything else is 400 and changes nothing. */
export async function reorder(ctx: Ctx, brandId: string, entityType: string, input: ReorderFieldsInput): Promise<FieldView[]> {
  const entity = canonicalEntity(entityType);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    forgetFound(tx, brand.id); // the change below rewrites its fieldRules (refreshFieldRules)
    const rows = await ofBrand(tx, brand.id, entity).forUpdate();
    const byKey = new Map(rows.map((r) => [r.key, r]));
    const seen = new Set<string>();
    const errors: { field: string; message: string }[] = [];
    input.keys.forEach((k, i) => {
      if (!byKey.has(k)) errors.push({ field: `keys.${i}`, message: `"${k}" is not a ${entity} field of this brand` });
      else if (seen.has(k)) errors.push({ field: `keys.${i}`, message: `"${k}" is listed more than once` });
      seen.add(k);
    });
    for (const r of rows) if (!seen.has(r.key)) errors.push({ field: 'keys', message: `"${r.key}" is missing` });
    if (errors.length) throw badRequest(`keys must list every ${entity} field of the brand exactly once`, errors, 'invalid_reorder');
    const now = new Date(ctx.services.now());
    for (const [i, k] of input.keys.entries()) {
      await ofBrand(tx, brand.id, entity).findById(byKey.get(k)!.id).patch({ sortOrder: i, updatedAt: now });
    }
    await refreshFieldRules(tx, brand.id);
    // By key, which is how the caller names fields here.
    const keyOf = new Map(rows.map((r) => [r.id, r.key]));
    await audit.recordReorder(
      tx,
      brand.id,
      'field',
      audit.displayOrder(rows).map((id) => keyOf.get(id)!),
      input.keys,
      { appliesTo: entity },
    );
    return (await ordered(tx, brand.id, entity)).map(toView);
  });
}

/** Field definitions of a brand, every entity type, for the brand delete preview. */
export async function count(ctx: Ctx, brandId: string): Promise<number> {
  const result = (await FieldDefinition.scoped(ctx).where('brandId', brandId).count({ n: '*' }).first()) as unknown as { n: string };
  return Number(result.n);
}

// ---------------------------------------------------------------------------------------------
// Ticket schema and validation

/** Whether the brand's ticket custom fields are checked against a schema (its own, or its field definitions' rules). */
export const hasTicketSchema = (brand: Pick<Brand, 'ticketSchema' | 'fieldRules'>): boolean => brand.ticketSchema !== null || (brand.fieldRules.ticket ?? []).length > 0;

async function schemasOf(ctx: Ctx, brandId: string, entityType: EntityType) {
  const brand = await requireBrand(ctx, brandId);
  const hand = entityType === 'ticket' ? brand.ticketSchema : null;
  // The brand row carries its definitions' rules (refreshFieldRules keeps them): no second read.
  const generated = generatedSchema(brand.fieldRules[entityType] ?? []);
  return { brand, hand, generated };
}

export async function getTicketSchema(ctx: Ctx, brandId: string): Promise<TicketSchemaView> {
  const { brand, hand, generated } = await schemasOf(ctx, brandId, 'ticket');
  return { brandId: brand.id, schema: hand, ticketSchema: hand, generatedSchema: generated, effectiveSchema: effectiveOf(hand, generated) };
}

/**
 * The schema a PUT /schema body names: { schema: <JSON Schema | null> } (or { ticketSchema: … }) or
 * a bare JSON Schema; null clears. Setting it is the brand's (flows/ticket-schema.ts).
 */
export function ticketSchemaOfBody(body: PutTicketSchemaInput): JsonSchema | null {
  let schema: unknown = body;
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw badRequest('Send { "schema": <JSON Schema> }, { "schema": null } to clear, or a bare JSON Schema', [{ field: '(body)', message: 'must be an object' }]);
  }
  {
    const keys = Object.keys(body);
    if (keys.length === 1 && (keys[0] === 'schema' || keys[0] === 'ticketSchema')) schema = (body as Record<string, unknown>)[keys[0]];
  }
  if (schema !== null && (typeof schema !== 'object' || Array.isArray(schema))) {
    throw badRequest('The ticket schema must be a JSON Schema object, or null to clear it', [{ field: 'schema', message: 'must be an object or null' }], 'invalid_ticket_schema');
  }
  return schema as JsonSchema | null;
}

/**
 * Checks values against the effective schema of an entity type of the brand; throws 400
 * invalid_custom_fields listing every failing path as `<prefix>.<path>`. Missing values count
 * as {} (so required fields are reported). No schema and no definitions: anything goes.
 */
export async function validateFieldValues(ctx: Ctx, brandId: string, entityType: string, values: unknown, prefix = 'customFields'): Promise<void> {
  const { hand, generated } = await schemasOf(ctx, brandId, canonicalEntity(entityType));
  const value = values ?? {};
  const errors = [...(hand ? errorsAgainst(ctx, hand, value, prefix) : []), ...(generated ? errorsAgainst(ctx, generated, value, prefix) : [])];
  const seen = new Set<string>();
  const unique = errors.filter((e) => !seen.has(e.field) && seen.add(e.field));
  if (unique.length) {
    throw badRequest(`${prefix} does not match the brand's schema: ${unique.map((e) => `${e.field} ${e.message}`).join('; ')}`, unique, 'invalid_custom_fields');
  }
}

/** Ticket customFields against the brand's effective ticket schema. */
export async function validateCustomFields(ctx: Ctx, brandId: string, customFields: unknown): Promise<void> {
  return validateFieldValues(ctx, brandId, 'ticket', customFields, 'customFields');
}
