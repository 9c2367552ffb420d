import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formbody from '@fastify/formbody';
import multipart from '@fastify/multipart';
import { Type } from 'typebox';
import { HttpError } from '../core/errors.js';
import { addressSubject, enforceRateLimits, formPolicies, rateLimiterOf, type Policy, type Subject } from '../core/rate-limit.js';
import { checkOrigin, originOf, requireForm, submit, type FormDeps, type SubmittedFields, type SubmittedFile } from '../flows/form-submit.js';
import { MAX_FORM_FIELDS, MAX_SUBMISSION_BYTES, SubmissionBody, SubmissionOut, TokenParams } from '../domains/forms/schemas.js';

export interface FormSubmitOptions {
  deps: FormDeps;
}

/** Files a submission may carry, and the size of each (at most the server's attachment limit). */
const MAX_FILES = 5;
const MAX_FILE_BYTES = 10 * 1024 * 1024;

const CONTENT_TYPES = ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'];

/** The form a submission goes to, as the flow finds it. */
type FoundForm = Awaited<ReturnType<typeof requireForm>>;

/** A browser's own form post (urlencoded or multipart) that does not ask for JSON: answered with redirects when the form has URLs for them. */
function isPagePost(req: FastifyRequest): boolean {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  return (type === 'application/x-www-form-urlencoded' || type === 'multipart/form-data') && !/application\/json/i.test(req.headers.accept ?? '');
}

function withQuery(url: string, name: string, value: string): string {
  const u = new URL(url);
  u.searchParams.set(name, value);
  return u.toString();
}

/** Text fields and files of a multipart submission; a file input left empty sends a part without a name and bytes, which is skipped. */
async function readMultipart(req: FastifyRequest): Promise<{ fields: SubmittedFields; files: SubmittedFile[] }> {
  const fields: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  const files: SubmittedFile[] = [];
  let textBytes = 0;
  for await (const part of req.parts()) {
    if (part.type === 'file') {
      const content = await part.toBuffer();
      if (part.file.truncated) throw new HttpError(413, 'file_too_large', `A file is larger than a form accepts (${MAX_FILE_BYTES} bytes)`);
      if (!part.filename && content.length === 0) continue;
      files.push({ filename: part.filename || 'attachment', contentType: part.mimetype || 'application/octet-stream', content });
      continue;
    }
    if (part.valueTruncated) throw new HttpError(413, 'field_too_large', `The field ${part.fieldname} is longer than a form accepts`);
    const value = String(part.value ?? '');
    // The text of all fields together is bounded as a JSON or urlencoded body is.
    textBytes += Buffer.byteLength(part.fieldname) + Buffer.byteLength(value);
    if (textBytes > MAX_SUBMISSION_BYTES) throw new HttpError(413, 'payload_too_large', `The fields of a submission take at most ${MAX_SUBMISSION_BYTES} bytes`);
    const before = fields[part.fieldname];
    fields[part.fieldname] = before === undefined ? value : [...(Array.isArray(before) ? before : [before]), value];
  }
  return { fields, files };
}

/**
 * `POST /v1/forms/{token}`: a public web form's submission, without credentials. The parser first
 * refuses a body over its size (413) or of another type (415); urlencoded and multipart are parsed
 * in this scope only. Then, in order: the form (404) and its allowed origins (403), the address's
 * form budget counted either way (unknown tokens too); the address's and the form's budgets (429,
 * with Retry-After); the body's schema and a multipart body's parts (400, 413); the honeypot; the
 * fields (400).
 */
export async function formSubmitRoutes(app: FastifyInstance, { deps }: FormSubmitOptions): Promise<void> {
  await app.register(formbody, { bodyLimit: MAX_SUBMISSION_BYTES });
  await app.register(multipart, {
    limits: {
      fileSize: Math.min(MAX_FILE_BYTES, deps.attachments.maxBytes),
      files: MAX_FILES,
      fields: MAX_FORM_FIELDS * 2,
      fieldSize: MAX_SUBMISSION_BYTES,
      parts: MAX_FORM_FIELDS * 2 + MAX_FILES,
    },
  });
  // Anything else, text/plain too (an HTML form may send it), is refused here, in this scope only.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('*', (_req, _payload, done) => done(new HttpError(415, 'unsupported_media_type', `Send a form submission as ${CONTENT_TYPES.join(', ')}`), undefined));

  app.post<{ Params: { token: string }; Body: SubmittedFields | undefined }>(
    '/v1/forms/:token',
    {
      // Its own budgets below, on top of the address's general one.
      config: { auth: 'none', permission: 'forms:submit' },
      bodyLimit: MAX_SUBMISSION_BYTES,
      // A body that fails its schema is refused after the form and the budgets, like any other bad submission.
      attachValidation: true,
      schema: {
        tags: ['Web forms'],
        summary:
          "Submit a web form (no credentials; the form's token is the URL): a ticket with source web. JSON answer ({ success, ticket: { ticketNumber }, message }), or a 303 to the form's successUrl for a browser form post",
        consumes: CONTENT_TYPES,
        params: TokenParams,
        body: SubmissionBody,
        response: { 200: SubmissionOut, 303: Type.Null({ description: "To the form's successUrl (a browser form post), or to its errorUrl with ?error=<code>" }) },
      },
    },
    async (req, reply) => {
      const { services } = req.baseCtx;
      const limiter = rateLimiterOf(services);
      const policies = formPolicies(services.config);
      const address: [Policy, Subject] = [policies.ip, addressSubject(req.ip)];
      const origin = originOf(req.headers.origin, req.headers.referer);
      let form: FoundForm;
      try {
        form = await requireForm(req.baseCtx, req.params.token);
        checkOrigin(form, origin);
      } catch (err) {
        enforceRateLimits(reply, limiter, [address]);
        throw err;
      }
      try {
        enforceRateLimits(reply, limiter, [address, [policies.form, `form:${form.id}`]]);
        if (req.validationError) throw req.validationError;
        const { fields, files } = req.isMultipart() ? await readMultipart(req) : { fields: req.body ?? {}, files: [] };
        const referer = typeof req.headers.referer === 'string' ? req.headers.referer.slice(0, 2048) : null;
        const outcome = await submit(req.baseCtx, deps, form, fields, files, { origin, pageUrl: referer });
        if (!outcome.created) req.log.info({ formId: form.id, reason: outcome.reason }, 'form submission dropped');
        if (isPagePost(req) && form.successUrl) return reply.redirect(form.successUrl, 303);
        return { success: true as const, ...(outcome.created ? { ticket: { ticketNumber: outcome.ticketNumber } } : {}), message: form.thankYouMessage };
      } catch (err) {
        return answerRefusal(req, reply, form, err);
      }
    },
  );
}

/** A refused submission of a browser form post goes back to the form's errorUrl when it has one; otherwise the error shape. */
function answerRefusal(req: FastifyRequest, reply: FastifyReply, form: FoundForm, err: unknown): FastifyReply {
  const code = err instanceof HttpError && err.statusCode < 500 ? err.code : err === req.validationError ? 'validation_failed' : null;
  if (code && form.errorUrl && isPagePost(req)) return reply.redirect(withQuery(form.errorUrl, 'error', code), 303);
  throw err;
}
