import { Type, type Static } from 'typebox';
import { BrandParams, Nullable, Timestamp } from '../../core/schemas.js';

/** What a submitted field may fill: the four standard fields, or a key of the ticket's customFields. */
export const STANDARD_TARGETS = ['email', 'name', 'subject', 'message'] as const;
export type StandardTarget = (typeof STANDARD_TARGETS)[number];
export const CUSTOM_FIELD_TARGET = /^customFields\.([A-Za-z0-9_]{1,100})$/;

export const MAX_FORM_FIELDS = 50;
export const MAX_ALLOWED_ORIGINS = 50;
/** A form's own text (name, thank-you message). */
export const MAX_FORM_NAME_LENGTH = 200;
export const MAX_THANK_YOU_LENGTH = 2000;
/** A submitted value (the message may be long; every other field is short in practice). */
export const MAX_SUBMITTED_VALUE_LENGTH = 100_000;
/** JSON and urlencoded submissions (the route's body limit): a long message and its fields. */
export const MAX_SUBMISSION_BYTES = 256 * 1024;

const FieldName = Type.String({
  minLength: 1,
  maxLength: 100,
  pattern: '^[\\x21-\\x7e]+$',
  description: 'A field name as the HTML form sends it (printable ASCII, no spaces)',
});
const Target = Type.String({
  pattern: '^(email|name|subject|message|customFields\\.[A-Za-z0-9_]{1,100})$',
  description: '`email`, `name`, `subject`, `message`, or `customFields.<key>`',
});
const FieldMapping = Type.Record(Type.String(), Target, {
  maxProperties: MAX_FORM_FIELDS,
  description:
    'Submitted field name → what it fills. The standard names (email, name, subject, message) always fill themselves unless mapped elsewhere; other fields are ignored unless mapped. null: the standard names only',
});
const Url = Type.String({ maxLength: 2048, description: 'Absolute http(s) URL; empty or null: none' });
const AllowedOrigins = Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), {
  maxItems: MAX_ALLOWED_ORIGINS,
  description: 'Page origins (`https://www.example.com`) submissions are taken from; empty: any. Others get 403 origin_not_allowed',
});

const formFields = {
  id: Type.String(),
  object: Type.Literal('form'),
  brandId: Type.String(),
  name: Type.String(),
  token: Type.String({ description: 'The last segment of the public URL POST /v1/forms/{token}; it appears in the embed code' }),
  successUrl: Nullable(Type.String({ description: 'Where a browser form post is redirected (303) after a submission' })),
  errorUrl: Nullable(Type.String({ description: 'Where a browser form post is redirected (303) when its submission is refused, with ?error=<code>' })),
  thankYouMessage: Nullable(Type.String()),
  fieldMapping: Nullable(Type.Record(Type.String(), Type.String())),
  enabled: Type.Boolean({ description: 'A disabled form takes no submissions (404, like an unknown token)' }),
  honeypotField: Nullable(Type.String({ description: 'A field people never fill (hidden in the page): a submission that fills it is answered as accepted and creates nothing' })),
  allowedOrigins: Type.Array(Type.String()),
  submissionCount: Type.Integer({ description: 'Tickets this form created' }),
  lastSubmissionAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
};
export const FormOut = Type.Object(formFields);

export const FormParams = Type.Object({
  ...BrandParams.properties,
  formId: Type.String({ minLength: 1, maxLength: 64, description: 'Form id (`form_…`)' }),
});

const settings = {
  successUrl: Type.Optional(Nullable(Url)),
  errorUrl: Type.Optional(Nullable(Url)),
  thankYouMessage: Type.Optional(Nullable(Type.String({ maxLength: MAX_THANK_YOU_LENGTH }))),
  fieldMapping: Type.Optional(Nullable(FieldMapping)),
  enabled: Type.Optional(Type.Boolean()),
  honeypotField: Type.Optional(Nullable(FieldName)),
  allowedOrigins: Type.Optional(AllowedOrigins),
};
const Name = Type.String({ minLength: 1, maxLength: MAX_FORM_NAME_LENGTH, pattern: '\\S', description: 'Stored trimmed' });

export const CreateFormBody = Type.Object({ name: Name, ...settings }, { additionalProperties: false });
export const UpdateFormBody = Type.Object({ name: Type.Optional(Name), ...settings }, { additionalProperties: false });

/** The public submission: the standard fields, and any others the form maps. */
const SubmittedValue = Type.Union([
  Type.String({ maxLength: MAX_SUBMITTED_VALUE_LENGTH }),
  Type.Number(),
  Type.Boolean(),
  Type.Array(Type.String({ maxLength: MAX_SUBMITTED_VALUE_LENGTH }), { maxItems: MAX_FORM_FIELDS }),
]);
export const SubmissionBody = Type.Object(
  {
    email: Type.Optional(Type.String({ maxLength: 320, description: "The sender's email address (required, unless the form maps another field to email)" })),
    name: Type.Optional(Type.String({ maxLength: 200, description: "The sender's name" })),
    subject: Type.Optional(Type.String({ maxLength: 500, description: 'The ticket title (required)' })),
    message: Type.Optional(Type.String({ maxLength: MAX_SUBMITTED_VALUE_LENGTH, description: 'The ticket body (required)' })),
  },
  {
    additionalProperties: SubmittedValue,
    maxProperties: MAX_FORM_FIELDS * 2,
    description:
      'application/json, application/x-www-form-urlencoded or multipart/form-data (text fields only). The fields the form maps; a repeated field (urlencoded, multipart) is an array',
  },
);

export const TokenParams = Type.Object({
  token: Type.String({ minLength: 1, maxLength: 128, description: "The form's token" }),
});

export const SubmissionOut = Type.Object({
  success: Type.Literal(true),
  ticket: Type.Optional(Type.Object({ ticketNumber: Type.Integer() })),
  message: Nullable(Type.String({ description: "The form's thank-you message" })),
});

export type FormView = Static<typeof FormOut>;
export type CreateFormInput = Static<typeof CreateFormBody>;
export type UpdateFormInput = Static<typeof UpdateFormBody>;
export type SubmissionInput = Static<typeof SubmissionBody>;
export type SubmissionView = Static<typeof SubmissionOut>;
