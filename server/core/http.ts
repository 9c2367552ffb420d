import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Ajv, type ErrorObject } from 'ajv';
import { validationErrors } from './validation.js';
import addFormats from 'ajv-formats';
import { HttpError } from './errors.js';
import { newId, ID_PREFIX } from './ids.js';
import { isPgError, pgErrorCode } from './db.js';

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echo a sane incoming X-Request-Id; otherwise mint one. */
export function requestIdFor(req: { headers: Record<string, string | string[] | undefined> }): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : newId(ID_PREFIX.request);
}

function makeAjv(coerceTypes: boolean): Ajv {
  // Bodies are taken as sent (a string is not a number); query strings and paths are text, so coerce.
  const ajv = new Ajv({ allErrors: true, coerceTypes, useDefaults: true, removeAdditional: false, strict: false });
  addFormats.default(ajv);
  return ajv;
}

/** Two compilers from one schema source: strict for bodies, coercing for query/params/headers. */
export function installValidators(app: FastifyInstance): void {
  const bodyAjv = makeAjv(false);
  const textAjv = makeAjv(true);
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart !== 'body') return textAjv.compile(schema as object);
    const validate = bodyAjv.compile(schema as object);
    const isObject = (schema as { type?: string }).type === 'object';
    // A missing body is an empty object: bodiless POSTs pass, and a missing field is named.
    const check = (data: unknown) => {
      const body = data == null && isObject ? {} : data;
      const ok = validate(body);
      check.errors = validate.errors;
      return ok ? { value: body } : false;
    };
    check.errors = null as typeof validate.errors;
    return check;
  });
}

/** JSON bodies; an empty body with a JSON content type means "no body" (clients send those). */
export function installJsonParser(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if ((body as string).trim() === '') return done(null, undefined);
    parseJson(req, body as string, done);
  });
}

const PART_NAMES: Record<string, string> = { body: 'Request body', querystring: 'Query string', params: 'Path', headers: 'Headers' };

function send(reply: FastifyReply, req: FastifyRequest, statusCode: number, code: string, message: string, errors?: { field: string; message: string }[]) {
  return reply.status(statusCode).send({
    statusCode,
    error: STATUS_CODES[statusCode] ?? 'Error',
    message,
    code,
    requestId: req.id,
    ...(errors ? { errors } : {}),
  });
}

/** Fastify's own client errors, mapped to our codes. */
const FASTIFY_CLIENT_ERRORS: Record<string, [number, string, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'payload_too_large', 'Request body is larger than this server accepts'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'invalid_json', 'Request body is not valid JSON'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'unsupported_media_type', 'Send request bodies as application/json'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'invalid_request', 'Content-Length does not match the body'],
  FST_ERR_CTP_EMPTY_TYPE: [415, 'unsupported_media_type', 'Content-Type header is empty'],
};

/** Connection failures, pool timeouts and PostgreSQL shutting down or starting up. */
function isDatabaseUnavailable(err: { name?: string }): boolean {
  return err.name === 'KnexTimeoutError' || ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', '57P01', '57P03', '08006', '08001'].includes(pgErrorCode(err) ?? '');
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setNotFoundHandler((req, reply) => send(reply, req, 404, 'route_not_found', `No route ${req.method} ${req.url.split('?')[0]}`));
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof HttpError) {
      return send(reply, req, err.statusCode, err.code, err.message, err.errors);
    }
    if (err.validation) {
      const errors = validationErrors(err.validation as ErrorObject[]);
      const part = PART_NAMES[err.validationContext ?? 'body'] ?? 'Request';
      const first = errors[0];
      const message = `${part} is invalid: ${first ? `${first.field} ${first.message}` : 'see errors'}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}`;
      return send(reply, req, 400, 'validation_failed', message, errors);
    }
    const known = err.code ? FASTIFY_CLIENT_ERRORS[err.code] : undefined;
    if (known) return send(reply, req, known[0], known[1], known[2]);
    if (err.statusCode === 429) return send(reply, req, 429, 'rate_limited', err.message || 'Too many requests');
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return send(reply, req, err.statusCode, 'invalid_request', err.message);
    }
    // PostgreSQL cannot store NUL characters in text (22021) or jsonb (22P05): the input is at fault.
    if (isPgError(err, '22021') || isPgError(err, '22P05')) {
      return send(reply, req, 400, 'invalid_request', 'Text must not contain NUL (\\u0000) characters');
    }
    if (isDatabaseUnavailable(err)) {
      req.log.error({ err }, 'database unavailable');
      return send(reply, req, 503, 'service_unavailable', 'The database is unavailable; retry shortly');
    }
    req.log.error({ err }, 'unhandled error');
    return send(reply, req, 500, 'internal_error', `Something went wrong on our side; quote request id ${req.id} when reporting it`);
  });
  app.addHook('onSend', async (req, reply) => {
    reply.header('X-Request-Id', req.id);
  });
}
