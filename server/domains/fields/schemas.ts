import { Type, type Static } from 'typebox';
import { FreeJson, FreeObject, Nullable, Timestamp } from '../../core/schemas.js';

export const FIELD_TYPES = ['text', 'number', 'boolean', 'date', 'select', 'multiselect', 'url', 'array', 'object'] as const;
export type FieldType = (typeof FIELD_TYPES)[number];
export const ENTITY_TYPES = ['ticket', 'customer', 'company'] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];

export const FIELD_KEY_PATTERN = '^[a-zA-Z][a-zA-Z0-9_]{0,49}$';
const FieldKey = Type.String({
  pattern: FIELD_KEY_PATTERN,
  description: 'A letter, then letters, digits or underscores (at most 50); unique per brand and entity type. Values live in customFields[key].',
});
const FieldTypeSchema = Type.Unsafe<FieldType>({ type: 'string', enum: [...FIELD_TYPES] });
const Options = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
  maxItems: 500,
  uniqueItems: true,
  description: 'Choices of a select or multiselect field (required for those, refused for other types)',
});

const brandId = Type.String({ minLength: 1, maxLength: 64, description: 'Brand id (`br_…`; `ws_…` is accepted too)' });
const entityType = Type.Union(
  [...ENTITY_TYPES, 'contact'].map((v) => Type.Literal(v)),
  { description: '`contact` is an alias of `customer`' },
);
export const EntityParams = Type.Object({ brandId, entityType });
export const FieldParams = Type.Object({ brandId, entityType, key: Type.String({ minLength: 1, maxLength: 50 }) });

export const FieldOut = Type.Object({
  id: Type.String(),
  object: Type.Literal('field_definition'),
  brandId: Type.String(),
  entityType: Type.String(),
  key: Type.String(),
  label: Type.String(),
  type: FieldTypeSchema,
  required: Type.Boolean(),
  defaultValue: Type.Unknown(),
  description: Nullable(Type.String()),
  placeholder: Nullable(Type.String()),
  options: Nullable(Type.Array(Type.String())),
  visible: Type.Boolean(),
  showOnCreate: Type.Boolean(),
  showInTable: Type.Boolean(),
  showInDetail: Type.Boolean(),
  sortOrder: Type.Integer(),
  source: Nullable(Type.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const AllFieldsOut = Type.Object({
  ticket: Type.Array(FieldOut),
  customer: Type.Array(FieldOut),
  contact: Type.Array(FieldOut, { description: 'The customer fields again, under the name the dashboard reads' }),
  company: Type.Array(FieldOut),
});

const editable = {
  label: Type.String({ minLength: 1, maxLength: 200 }),
  type: FieldTypeSchema,
  required: Type.Boolean(),
  defaultValue: FreeJson({ description: 'Must itself be a valid value of the field; null for none' }),
  description: Nullable(Type.String({ maxLength: 1000 })),
  placeholder: Nullable(Type.String({ maxLength: 200 })),
  options: Nullable(Options),
  visible: Type.Boolean(),
  showOnCreate: Type.Boolean(),
  showInTable: Type.Boolean(),
  showInDetail: Type.Boolean(),
  sortOrder: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
  source: Nullable(Type.String({ maxLength: 100 })),
};

/** Every editable property, optional: what an update may send, and the base of a create. */
const optionalEditable = Type.Partial(Type.Object(editable)).properties;

export const CreateFieldBody = Type.Object({ key: FieldKey, ...optionalEditable, label: editable.label, type: editable.type }, { additionalProperties: false });

export const UpdateFieldBody = Type.Object(optionalEditable, { additionalProperties: false, minProperties: 1 });

export const ReorderFieldsBody = Type.Object(
  {
    keys: Type.Array(Type.String({ minLength: 1, maxLength: 50 }), { minItems: 1, maxItems: 500, description: 'Every field key of the entity type, once each, in the new order' }),
  },
  { additionalProperties: false },
);

const JsonSchemaObject = FreeObject({ description: 'A JSON Schema' });

export const TicketSchemaOut = Type.Object(
  {
    brandId: Type.String(),
    schema: Nullable(JsonSchemaObject),
    ticketSchema: Nullable(JsonSchemaObject),
    generatedSchema: Nullable(JsonSchemaObject),
    effectiveSchema: Nullable(JsonSchemaObject),
  },
  {
    description:
      'schema (= ticketSchema) is the hand-written schema; generatedSchema comes from the ticket field definitions; effectiveSchema is what ticket customFields are checked against (null: anything is accepted)',
  },
);

/**
 * Either { schema: <JSON Schema or null> } ({ ticketSchema: … } too) or the bare JSON Schema.
 * null inside the wrapper clears. A bare JSON null is refused: it cannot be told apart from a
 * missing body, and a forgotten body must not wipe the schema.
 */
export const PutTicketSchemaBody = Type.Union(
  [
    Type.Object({ schema: Nullable(JsonSchemaObject) }, { additionalProperties: false }),
    Type.Object({ ticketSchema: Nullable(JsonSchemaObject) }, { additionalProperties: false }),
    JsonSchemaObject,
  ],
  { description: '{ "schema": <JSON Schema> }, { "schema": null } to clear, or a bare JSON Schema' },
);

export type FieldView = Static<typeof FieldOut>;
export type AllFieldsView = Static<typeof AllFieldsOut>;
export type CreateFieldInput = Static<typeof CreateFieldBody>;
export type UpdateFieldInput = Static<typeof UpdateFieldBody>;
export type ReorderFieldsInput = Static<typeof ReorderFieldsBody>;
export type TicketSchemaView = Static<typeof TicketSchemaOut>;
export type PutTicketSchemaInput = Static<typeof PutTicketSchemaBody>;
