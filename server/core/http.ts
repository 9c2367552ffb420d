import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { Ajv, type ErrorObject, type KeywordDefinition } from 'ajv';
import type { DataValidationCxt } from 'ajv/dist/types/index.js';
import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import { validationErrors } from './validation.js';
import addFormats from 'ajv-formats';
import { badRequest, HttpError } from './errors.js';
import { jsonTextProblem, MAX_JSON_DEPTH } from './json-text.js';
import { newId, ID_PREFIX } from './ids.js';
import { isPgError, pgErrorCode } from './db.js';
import { authKindsOf, type AuthDeclaration, type AuthKind, type Permission } from './auth.js';

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echo a sane incoming X-Request-Id; otherwise mint one. */
export function requestIdFor(req: { headers: Record<string, string | string[] | undefined> }): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : newId(ID_PREFIX.request);
}

/** `maxJsonBytes: n`: the value, serialized as JSON, takes at most n bytes (free-form values, core/schemas.ts). */
const maxJsonBytesKeyword: KeywordDefinition = {
  keyword: 'maxJsonBytes',
  schemaType: 'number',
  errors: true,
  validate: function check(max: number, data: unknown) {
    const ok = data === undefined || Buffer.byteLength(JSON.stringify(data)) <= max;
    (check as { errors?: Partial<ErrorObject>[] }).errors = ok ? [] : [{ keyword: 'maxJsonBytes', message: `must be at most ${max} bytes as JSON`, params: { limit: max } }];
    return ok;
  },
};

function makeAjv(coerceTypes: boolean): Ajv {
  // Bodies are taken as sent (a string is not a number); query strings and paths are text, so coerce.
  const ajv = new Ajv({ allErrors: true, coerceTypes, useDefaults: true, removeAdditional: false, strict: false });
  addFormats.default(ajv);
  ajv.addKeyword(maxJsonBytesKeyword);
  return ajv;
}

/**
 * Route schemas compiled on a route's first use rather than at start-up. Compiling every route's
 * validators and serializers (about 300 routes, each GET twice with its HEAD) took about 1.5 s of
 * CPU per app built: most of the start-up of `ticketd start` and of every test file, for routes a
 * process may never serve. A first request pays its route's few milliseconds once.
 * `compileAll` compiles everything now, so a test can prove that every schema compiles.
 */
export class LazySchemas {
  private readonly pending = new Set<() => void>();

  /** A function that compiles on its first call, then forwards; `compile` is not run before. */
  defer<F extends (...args: never[]) => unknown>(compile: () => F): { get: () => F } {
    let compiled: F | undefined;
    const get = () => {
      if (!compiled) {
        compiled = compile();
        this.pending.delete(get);
      }
      return compiled;
    };
    this.pending.add(get);
    return { get };
  }

  compileAll(): void {
    for (const get of [...this.pending]) get();
  }

  /** Fastify's `schemaController.compilersFactory.buildSerializer`: its default compiler, deferred. */
  serializerFactory(): SerializerFactory {
    const eager = SerializerSelector();
    return (externalSchemas, options) => {
      const compile = eager(externalSchemas, options);
      return (route) => {
        const serializer = this.defer(() => compile(route));
        return (data: unknown) => serializer.get()(data);
      };
    };
  }
}

/**
 * Sends JSON text made elsewhere (a page built by PostgreSQL) as it is: a string with a JSON
 * content type skips the route's serializer. The route's response schema still documents it.
 */
export function sendJsonText(reply: FastifyReply, text: string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(text);
}

/** Two compilers from one schema source: strict for bodies, coercing for query/params/headers. */
export function installValidators(app: FastifyInstance, lazy: LazySchemas): void {
  const bodyAjv = makeAjv(false);
  const textAjv = makeAjv(true);
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart !== 'body') {
      const validate = lazy.defer(() => textAjv.compile(schema as object));
      // Fastify passes the parent object to a validator that has `schemaEnv` (an ajv function's
      // mark), so coercion can replace a root value: forwarded as ajv's own function would get it.
      const check = (data: unknown, parent?: DataValidationCxt) => {
        const fn = validate.get();
        const ok = fn(data, parent);
        check.errors = fn.errors;
        return ok;
      };
      check.errors = null as ErrorObject[] | null | undefined;
      check.schemaEnv = true;
      return check;
    }
    const validate = lazy.defer(() => bodyAjv.compile(schema as object));
    const isObject = (schema as { type?: string }).type === 'object';
    // A missing body is an empty object: bodiless POSTs pass, and a missing field is named.
    const check = (data: unknown) => {
      const body = data == null && isObject ? {} : data;
      const fn = validate.get();
      const ok = fn(body);
      check.errors = fn.errors;
      return ok ? { value: body } : false;
    };
    check.errors = null as ErrorObject[] | null | undefined;
    return check;
  });
  app.decorate('compileAllSchemas', () => lazy.compileAll());
}

/**
 * JSON bodies; an empty body with a JSON content type means "no body" (clients send those). Text
 * nested too deep or carrying a lone surrogate is refused before it is parsed (core/json-text.ts).
 */
export function installJsonParser(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, undefined);
    const problem = jsonTextProblem(text);
    if (problem?.kind === 'too_deep') return done(badRequest(`Request body is nested deeper than ${MAX_JSON_DEPTH} levels`, undefined, 'json_too_deep'), undefined);
    if (problem?.kind === 'lone_surrogate') {
      return done(
        badRequest(`Request body has a lone UTF-16 surrogate escape at character ${problem.offset}: text must be valid Unicode`, undefined, 'invalid_unicode'),
        undefined,
      );
    }
    parseJson(req, text, done);
  });
}

const PART_NAMES: Record<string, string> = { body: 'Request body', querystring: 'Query string', params: 'Path', headers: 'Headers' };

/** Seconds a client should wait before retrying a 503 (the database is restarting, or this process is stopping). */
export const RETRY_AFTER_SECONDS = 2;

type FieldErrors = { field: string; message: string }[];

function errorBody(requestId: string, statusCode: number, code: string, message: string, errors?: FieldErrors, details?: Readonly<Record<string, unknown>>) {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', message, code, requestId, ...(errors ? { errors } : {}), ...details };
}

function send(reply: FastifyReply, req: FastifyRequest, statusCode: number, code: string, message: string, errors?: FieldErrors, details?: Readonly<Record<string, unknown>>) {
  if (statusCode === 503) reply.header('Retry-After', String(RETRY_AFTER_SECONDS));
  return reply.status(statusCode).send(errorBody(req.id, statusCode, code, message, errors, details));
}

/** Fastify's own client errors, mapped to our codes. */
const FASTIFY_CLIENT_ERRORS: Record<string, [number, string, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'payload_too_large', 'Request body is larger than this server accepts'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'invalid_json', 'Request body is not valid JSON'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'unsupported_media_type', 'Send request bodies as application/json'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'invalid_request', 'Content-Length does not match the body'],
  FST_ERR_CTP_EMPTY_TYPE: [415, 'unsupported_media_type', 'Content-Type header is empty'],
};

/** PostgreSQL error classes that mean "not now", not "not this": connection exceptions, shutdown, too many connections. */
const UNAVAILABLE_CODES: readonly string[] = ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', '57P01', '57P02', '57P03', '53300', '53400'];

/**
 * The database could not be reached or went away, at any point of a request: connecting, a pool
 * timeout, mid-statement, or at COMMIT/ROLLBACK (where node-postgres reports a lost connection with
 * a message and no code).
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { name?: string; message?: string; nativeError?: { message?: string } } | null;
  if (!e) return false;
  if (e.name === 'KnexTimeoutError') return true;
  const code = pgErrorCode(e) ?? '';
  if (UNAVAILABLE_CODES.includes(code) || code.startsWith('08')) return true;
  const message = e.nativeError?.message ?? e.message ?? '';
  return /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|Connection ended/i.test(message);
}

/** Errors of a malformed multipart body (busboy's own carry no status). */
function isMalformedMultipart(err: { message?: string }): boolean {
  return /^(Multipart: Boundary not found|Unexpected end of (form|multipart data)|Malformed part header|Malformed urlencoded form)/.test(err.message ?? '');
}

/**
 * The router's own errors (a path segment over the length limit, bad percent-encoding) and the
 * HTTP server's (a request that timed out, headers too large, unparsable HTTP) in the error shape.
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  reply.header('X-Request-Id', req.id);
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return send(reply, req, 414, 'uri_too_long', 'A path segment of this URL is longer than this server accepts');
  if (err.code === 'FST_ERR_BAD_URL') return send(reply, req, 400, 'invalid_url', 'The URL path is not valid: it has malformed percent-encoding');
  return send(reply, req, 400, 'invalid_request', 'The request could not be routed');
}

const CLIENT_ERROR_STATUS: Record<string, [number, string, string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request_timeout', 'The request was not received in time'],
  HPE_HEADER_OVERFLOW: [431, 'headers_too_large', 'The request headers are larger than this server accepts'],
};

/** Replaces Fastify's clientErrorHandler: the raw socket gets the error shape and a request id too. */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: import('node:net').Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [statusCode, code, message] = CLIENT_ERROR_STATUS[err.code ?? ''] ?? [400, 'invalid_request', 'The request is not valid HTTP'];
  const requestId = newId(ID_PREFIX.request);
  const body = JSON.stringify(errorBody(requestId, statusCode, code, message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setNotFoundHandler((req, reply) => send(reply, req, 404, 'route_not_found', `No route ${req.method} ${req.url.split('?')[0]}`));
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof HttpError) {
      return send(reply, req, err.statusCode, err.code, err.message, err.errors, err.details);
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
    if (isMalformedMultipart(err)) return send(reply, req, 400, 'invalid_multipart', `The multipart body is malformed: ${err.message}`);
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

/** A route as registered: its method, URL pattern (`:name` parameters), the auth kinds it declares (none declared: empty) and its permission. */
export interface RegisteredRoute {
  method: string;
  url: string;
  auth: readonly AuthKind[];
  permission: Permission | null;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route of the app, in registration order, for whatever must walk them all. */
    routeCatalog: readonly RegisteredRoute[];
    /** Compiles every route schema not compiled yet (see LazySchemas). */
    compileAllSchemas: () => void;
  }
}

/** Records every route registered after this call, plugins' included (call it first). */
export function installRouteCatalog(app: FastifyInstance): void {
  const routes: RegisteredRoute[] = [];
  app.decorate('routeCatalog', routes);
  app.addHook('onRoute', (route: RouteOptions) => {
    const config = route.config as { auth?: AuthDeclaration; permission?: Permission } | undefined;
    const auth = authKindsOf(config?.auth);
    for (const method of [route.method].flat()) routes.push({ method, url: route.url, auth, permission: config?.permission ?? null });
  });
}
