import { tenantCtx, withTx, type BaseCtx } from '../core/context.js';
import { badRequest, forbidden, HttpError } from '../core/errors.js';
import { normalizeOrigin } from '../core/origins.js';
import { infected } from '../core/scanning.js';
import { isEmail, normalizeEmail } from '../core/text.js';
import * as attachments from '../domains/attachments/service.js';
import type { Form } from '../domains/forms/model.js';
import { CUSTOM_FIELD_TARGET, MAX_SUBMITTED_VALUE_LENGTH } from '../domains/forms/schemas.js';
import * as forms from '../domains/forms/service.js';
import { MAX_TITLE_LENGTH } from '../domains/tickets/schemas.js';
import { createTicket } from './ticket-create.js';

/**
 * A submission to a public web form (`POST /v1/forms/{token}`) becomes a ticket with source `web`,
 * through ticket create (its audit entry, webhooks and counts as for any other create), in one
 * transaction with the form's submission count and any attached files. The route decides the
 * order of the checks and the rate limits; this file holds each step:
 * 1. the form, by its token: unknown, or disabled, is 404 (a disabled form is as good as gone);
 * 2. the page's origin, when the form lists allowed origins: else 403 origin_not_allowed;
 * 3. the honeypot: filled, the submission is answered as accepted and nothing is created;
 * 4. the fields, through the form's mapping: email, subject and message required (400);
 * 5. the ticket; a blocked sender's is created as spam, as ticket create does for any blocked address.
 */

/** The fields of a submission as parsed: JSON values, or text (arrays when a field repeats). */
export type SubmittedFields = Record<string, unknown>;

/** Where the submission came from, as the request tells. */
export interface SubmissionMeta {
  /** The page's origin: the Origin header, else the Referer's origin; null when neither says. */
  origin: string | null;
  /** The page's URL (Referer), for the ticket's sourceData. */
  pageUrl: string | null;
}

/** What a submission needs beyond the database: where its files go. */
export interface FormDeps {
  attachments: attachments.AttachmentDeps;
}

/** A file a submission carries. */
export type SubmittedFile = attachments.FileContent;

export type SubmitOutcome = { created: true; ticketNumber: number; ticketId: string } | { created: false; reason: 'honeypot' };

export async function requireForm(base: BaseCtx, token: string): Promise<Form> {
  const form = await forms.findByToken(base, token);
  if (!form || !form.enabled) throw new HttpError(404, 'form_not_found', 'No form takes submissions at this URL: the token is unknown, was regenerated, or the form is disabled');
  return form;
}

/** The page origin a request names: its Origin header, else its Referer's origin. */
export function originOf(originHeader: string | undefined, referer: string | undefined): string | null {
  if (originHeader && originHeader !== 'null') return normalizeOrigin(originHeader);
  if (!referer) return null;
  try {
    const url = new URL(referer);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : null;
  } catch {
    return null;
  }
}

export function checkOrigin(form: Form, origin: string | null): void {
  if (!form.allowedOrigins.length) return;
  if (origin && form.allowedOrigins.includes(origin)) return;
  throw forbidden(
    origin
      ? `This form takes submissions only from its allowed origins; ${origin} is not one`
      : 'This form takes submissions only from its allowed origins, and the request names no origin (Origin or Referer)',
    'origin_not_allowed',
  );
}

const own = (fields: SubmittedFields, name: string) => (Object.prototype.hasOwnProperty.call(fields, name) ? fields[name] : undefined);

const isFilled = (value: unknown): boolean =>
  Array.isArray(value) ? value.some(isFilled) : value !== undefined && value !== null && value !== false && String(value).trim() !== '';

/** A filled honeypot: what a bot does and a person, who never sees the field, does not. */
export function isHoneypotFilled(form: Form, fields: SubmittedFields): boolean {
  return form.honeypotField !== null && isFilled(own(fields, form.honeypotField));
}

interface Mapped {
  email: string;
  name: string | null;
  subject: string;
  message: string;
  customFields: Record<string, unknown>;
}

const LIMITS: Record<string, number> = { email: 320, name: 200, subject: MAX_TITLE_LENGTH, message: MAX_SUBMITTED_VALUE_LENGTH };

/** The ticket's parts from the submitted fields, through the form's mapping; every problem is named at once (400). */
export function mapFields(form: Form, fields: SubmittedFields): Mapped {
  const problems: { field: string; message: string }[] = [];
  const standard: Record<string, { field: string; text: string }> = {};
  const customFields: Record<string, unknown> = {};
  for (const [field, target] of forms.effectiveMapping(form.fieldMapping)) {
    const value = own(fields, field);
    if (!isFilled(value)) continue;
    const custom = CUSTOM_FIELD_TARGET.exec(target);
    if (custom) {
      customFields[custom[1]!] = value;
      continue;
    }
    if (typeof value !== 'string' && typeof value !== 'number') {
      problems.push({ field, message: 'must be one text value' });
      continue;
    }
    const text = String(value).trim();
    if (text.length > LIMITS[target]!) problems.push({ field, message: `must be at most ${LIMITS[target]} characters` });
    standard[target] = { field, text };
  }
  const fieldOf = (target: string) => [...forms.effectiveMapping(form.fieldMapping)].find(([, t]) => t === target)?.[0] ?? target;
  for (const target of ['email', 'subject', 'message']) {
    if (!standard[target]) problems.push({ field: fieldOf(target), message: 'is required' });
  }
  const email = standard.email ? normalizeEmail(standard.email.text) : '';
  if (standard.email && !isEmail(email)) problems.push({ field: standard.email.field, message: 'is not an email address' });
  if (problems.length) {
    const first = problems[0]!;
    throw badRequest(
      `The submission is incomplete or invalid: ${first.field} ${first.message}${problems.length > 1 ? ` (and ${problems.length - 1} more)` : ''}`,
      problems,
      'invalid_submission',
    );
  }
  return {
    email,
    name: standard.name?.text || null,
    subject: standard.subject!.text.replace(/\s+/g, ' '),
    message: standard.message!.text,
    customFields,
  };
}

// A valid value of the create input; typebox types that mapped literal union as undefined.
const SOURCE_WEB = 'web' as never;

/**
 * The ticket, its files and the form's count, in one transaction. Files are staged (written and
 * hashed) before it, so the brand row lock of the ticket's statement is not held while they are
 * written; a rollback removes what was stored.
 */
export async function submit(
  base: BaseCtx,
  { attachments: deps }: FormDeps,
  form: Form,
  fields: SubmittedFields,
  files: readonly SubmittedFile[],
  meta: SubmissionMeta,
): Promise<SubmitOutcome> {
  if (isHoneypotFilled(form, fields)) return { created: false, reason: 'honeypot' };
  const mapped = mapFields(form, fields);
  const sender = mapped.name ? `${mapped.name} <${mapped.email}>` : mapped.email;
  const ctx = tenantCtx({ ...base, actor: { type: 'customer', id: null, name: sender, source: 'web' } }, form.accountId, form.livemode);
  const stored: string[] = [];
  // Before the transaction (network I/O): an infected file refuses the submission, as an upload is refused.
  const scanned = await attachments.scanFiles(base.services, files);
  if (scanned.infected.length) throw infected(scanned.infected[0]!.signature);
  const staged = await attachments.stageFiles(deps, scanned.kept);
  try {
    return await withTx(ctx, async (tx) => {
      if (!(await forms.recordSubmission(tx, form))) throw new HttpError(404, 'form_not_found', 'This form was disabled, deleted or given a new token meanwhile');
      const { ticket } = await createTicket(tx, form.brandId, {
        title: mapped.subject,
        body: mapped.message,
        customerEmail: mapped.email,
        customerName: mapped.name,
        source: SOURCE_WEB,
        sourceId: form.id,
        sourceData: { formId: form.id, formName: form.name, origin: meta.origin, pageUrl: meta.pageUrl },
        ...(Object.keys(mapped.customFields).length ? { customFields: mapped.customFields } : {}),
      });
      for (const file of staged) stored.push((await attachments.addStagedFile(tx, form.brandId, ticket.id, null, file, mapped.email)).id);
      return { created: true as const, ticketNumber: ticket.ticketNumber, ticketId: ticket.id };
    });
  } catch (err) {
    await attachments.discardFiles(deps, stored);
    throw err;
  } finally {
    await attachments.discardStaged(staged);
  }
}
