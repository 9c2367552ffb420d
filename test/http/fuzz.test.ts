import t from 'tap';
import { servicesOf, testApp } from '../helpers/app.js';
import { sessionToken } from '../helpers/sign-in.js';
import { BOUNDARY, buildWorld, fillPath, INBOUND_SECRET, MULTIPART, pathValues, routeKey } from '../helpers/world.js';

/**
 * Hostile input on every operation of /v1/openapi.json, through inject (no socket): bodies of the
 * wrong shape (wrong types, missing and extra fields, nulls, huge strings, lone UTF-16 surrogates,
 * numbers out of range, 2,500 levels of nesting), path ids that are random, too long or badly
 * percent-encoded, mutated queries, wrong content types, malformed multipart and bad credentials
 * (API keys, session tokens and session cookies).
 * Every answer must be below 500, carry X-Request-Id, and every 4xx must be in the error shape.
 * Each mutation starts from a request that succeeds on a world of real objects (test/helpers/world.ts),
 * so a mutated field reaches the code behind validation. Deterministic: TICKETD_FUZZ_SEED replays a run,
 * TICKETD_FUZZ_ONLY (a regular expression over "METHOD /path") the same requests for some operations.
 */

const SEED = Number(process.env.TICKETD_FUZZ_SEED ?? 16_2026);
const DEPTH = 2500;
/** Mutations kept per operation (TICKETD_FUZZ_BUDGET for a longer run); the /v1/workspaces twin of an operation (same handlers) gets fewer. */
const PER_OPERATION = Number(process.env.TICKETD_FUZZ_BUDGET ?? 36);
const PER_TWIN = Math.ceil(PER_OPERATION / 4);

/** mulberry32: a small seeded generator, so a failing run replays exactly. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}
/** Each operation draws from its own generator (seed and name), so TICKETD_FUZZ_ONLY=<regex> replays one operation as the full run did. */
let rand = random(SEED);
const seedFor = (name: string) => [...name].reduce((h, c) => Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0, SEED ^ 2166136261);
const ONLY = new RegExp(process.env.TICKETD_FUZZ_ONLY ?? '');
const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
function sample<T>(items: T[], n: number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, n);
}
const randomText = (n: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789') => Array.from({ length: n }, () => pick([...alphabet])).join('');

const { app, db } = await testApp(t, {
  TICKETD_SIGNUP_RATE_LIMIT_PER_HOUR: '100000',
  TICKETD_AUTH_RATE_LIMIT_PER_IP_PER_HOUR: '100000',
  TICKETD_AUTH_RATE_LIMIT_PER_EMAIL_PER_HOUR: '100000',
  TICKETD_RATE_LIMIT_PER_API_KEY: '0',
  TICKETD_RATE_LIMIT_PER_IP: '0',
  TICKETD_FORM_RATE_LIMIT_PER_IP_PER_HOUR: '0',
  TICKETD_FORM_RATE_LIMIT_PER_FORM_PER_HOUR: '0',
  TICKETD_INBOUND_SECRET: INBOUND_SECRET,
});
const world = await buildWorld(app, servicesOf(db));
// The public form URL with a real form's token, so mutations reach the code behind the form's lookup.
world.paramsByRoute['POST /v1/forms/{token}'] = { token: world.formToken };
const ownerEmail = ((await world.owner.live('GET', '/v1/accounts/me/members')).body.data as { email: string }[])[0]!.email;
/** Routes that take only a session are called with the owner's; logout spends one per request, so it gets a session each. */
const ownerSession = () => sessionToken(app, servicesOf(db), world.owner.accountId, ownerEmail);
const session = await ownerSession();
const LOGOUT = 'POST /v1/auth/logout';

// ---------------------------------------------------------------------------------------------
// The operations, and their schemas with references resolved.

type Schema = {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  additionalProperties?: boolean | Schema;
};
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema?: Schema;
}
interface Operation {
  method: string;
  path: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema?: Schema }> };
  security?: unknown[];
}

const doc = JSON.parse((await app.inject({ method: 'GET', url: '/v1/openapi.json' })).body) as {
  paths: Record<string, Record<string, Omit<Operation, 'method' | 'path'>>>;
  components?: { schemas?: Record<string, Schema> };
};
function resolve(schema: Schema | undefined, seen = 0): Schema {
  if (!schema) return {};
  if (schema.$ref && seen < 20) return resolve(doc.components?.schemas?.[schema.$ref.replace(/^#\/components\/schemas\//, '').replace(/#$/, '')], seen + 1);
  return schema;
}
/** The variants of a schema (a union's members, or itself). */
const variants = (s: Schema): Schema[] => (s.anyOf ?? s.oneOf ?? [s]).map((v) => resolve(v));
const typesOf = (s: Schema): string[] => variants(s).flatMap((v) => (v.type === undefined ? (v.const !== undefined ? [typeof v.const] : ['any']) : [v.type].flat()));
/** JSON a client may shape freely (metadata, settings, custom fields): objects without declared properties, or anything. */
const freeForm = (s: Schema) => variants(s).some((v) => (v.type === undefined && !v.enum && v.const === undefined) || (v.type === 'object' && !v.properties));
const takesText = (s: Schema) => variants(s).some((v) => (v.type === 'string' && !v.enum && !v.format) || freeForm(v));

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const operations: Operation[] = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops)
    .filter(([m]) => METHODS.includes(m))
    .map(([m, op]) => ({ ...op, method: m.toUpperCase(), path })),
);
/** Destructive operations last (the brand itself at the very end), so the world stays whole while the rest is fuzzed. */
const rank = (op: Operation) => (op.method !== 'DELETE' ? 0 : /^\/v1\/(brands|workspaces)\/\{brandId\}$/.test(op.path) ? 2 : 1);
operations.sort((a, b) => rank(a) - rank(b));

// ---------------------------------------------------------------------------------------------
// Mutations.

interface Attempt {
  label: string;
  url: string;
  /** Built when sent: most drawn attempts are never sent, and some bodies are large. */
  payload?: string | Buffer | (() => string);
  headers: Record<string, string>;
}

/** Raw JSON with `value` spliced in at `field` of `base` (so nesting deeper than JSON.stringify likes, and raw escapes, go through). */
function withField(base: Record<string, unknown>, field: string, rawValue: string): string {
  return JSON.stringify({ ...base, [field]: '__fuzz_value__' }).replace('"__fuzz_value__"', () => rawValue);
}
const deepObject = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
const deepArray = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;
const LONE_SURROGATES = ['"x\\ud800y"', '"\\udc00"', '"a\\ud83d"'];

function wrongTypeFor(s: Schema): string {
  const types = typesOf(s);
  if (types.includes('string')) return pick(['12345', 'true', '{"a":1}']);
  if (types.includes('integer') || types.includes('number')) return pick(['"12"', '"abc"', 'false']);
  if (types.includes('boolean')) return pick(['"yes"', '1', '[]']);
  if (types.includes('array')) return pick(['{"0":1}', '"a,b"', '1']);
  if (types.includes('object')) return pick(['[{"a":1}]', '"object"', '7']);
  return '"unexpected"';
}
function outOfRangeFor(s: Schema): () => string {
  const types = typesOf(s);
  if (types.includes('integer') || types.includes('number')) {
    const n = pick(['1e308', '-1e308', '9223372036854775808', '-1', '0.5', '1e-320']);
    return () => n;
  }
  if (types.includes('array')) return () => JSON.stringify(Array.from({ length: 2000 }, (_, i) => `item-${i}`));
  return () => JSON.stringify('x'.repeat(300_000));
}

/** [label, the raw body] pairs; the body is built when sent, every random choice is made now. */
function bodyMutations(schema: Schema, base: Record<string, unknown>): [string, () => string][] {
  const at = (field: string, raw: string) => () => withField(base, field, raw);
  const out: [string, () => string][] = (
    [
      ['empty object', '{}'],
      ['an array for the object', JSON.stringify([base])],
      ['a string for the object', '"x"'],
      ['null for the object', 'null'],
      ['a number for the object', '-1'],
      ['invalid JSON', '{"a":'],
      ['an extra field', JSON.stringify({ ...base, zzUnknownField: 1 })],
      ['a lone surrogate in a key', JSON.stringify({ ...base, zzSurrogateKey: 1 }).replace('"zzSurrogateKey"', '"\\ud800"')],
      ['__proto__ keys', `{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}${Object.keys(base).length ? `,${JSON.stringify(base).slice(1)}` : '}'}`],
    ] as [string, string][]
  ).map(([label, body]): [string, () => string] => [label, () => body]);
  out.push(['the body nested deep', () => deepObject(DEPTH)]);
  for (const field of schema.required ?? []) {
    const { [field]: _omitted, ...rest } = base;
    out.push([`missing required ${field}`, () => JSON.stringify(rest)]);
  }
  for (const [field, raw] of Object.entries(schema.properties ?? {})) {
    const s = resolve(raw);
    if (takesText(s)) out.push([`lone surrogate in ${field}`, at(field, pick(LONE_SURROGATES))]);
    if (freeForm(s)) {
      out.push([`${DEPTH} levels of objects in ${field}`, () => withField(base, field, deepObject(DEPTH))]);
      out.push([`${DEPTH} levels of arrays in ${field}`, () => withField(base, field, deepArray(DEPTH))]);
      out.push([`a lone surrogate inside ${field}`, at(field, `{"k":${pick(LONE_SURROGATES)},"\\ud800":1}`)]);
    }
    if (variants(s).some((v) => v.type === 'array')) out.push([`a lone surrogate in an item of ${field}`, at(field, `[${pick(LONE_SURROGATES)}]`)]);
    const outOfRange = outOfRangeFor(s);
    const others: [string, () => string][] = [
      [`wrong type for ${field}`, at(field, wrongTypeFor(s))],
      [`null for ${field}`, at(field, 'null')],
      [`out of range for ${field}`, () => withField(base, field, outOfRange())],
      [`a huge string for ${field}`, () => withField(base, field, JSON.stringify('é'.repeat(150_000)))],
      [`NUL in ${field}`, at(field, '"a\\u0000b"')],
    ];
    out.push(...sample(others, 2));
  }
  return out;
}

const multipartOf = (boundary = BOUNDARY): Record<string, string> => ({ 'content-type': `multipart/form-data; boundary=${boundary}` });
const filePart = (name = 'file', filename = 'a.txt', type = 'text/plain', content = 'abc') =>
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n${content}\r\n`;

function multipartMutations(): [string, string | Buffer, Record<string, string>][] {
  const whole = MULTIPART.body as string;
  return [
    ['multipart without a boundary', whole, { 'content-type': 'multipart/form-data' }],
    ['multipart cut short', whole.slice(0, whole.length - 25), multipartOf()],
    ['multipart cut inside the headers', whole.slice(0, 30), multipartOf()],
    ['multipart with another boundary', whole, multipartOf('not-the-boundary')],
    ['multipart with no parts', `--${BOUNDARY}--\r\n`, multipartOf()],
    ['multipart with the file in another field', `${filePart('upload')}--${BOUNDARY}--\r\n`, multipartOf()],
    ['multipart with two files', `${filePart()}${filePart()}--${BOUNDARY}--\r\n`, multipartOf()],
    ['multipart with a field and no file', `--${BOUNDARY}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n--${BOUNDARY}--\r\n`, multipartOf()],
    [
      'multipart with a filename of invalid UTF-8 and NUL',
      Buffer.concat([
        Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a`),
        Buffer.from([0xed, 0xa0, 0x80, 0x00]),
        Buffer.from(`.txt"\r\n\r\nabc\r\n--${BOUNDARY}--\r\n`),
      ]),
      multipartOf(),
    ],
    ['multipart with a garbage part header', `--${BOUNDARY}\r\nContent-Disposition: \u0001\u0002;;;=\r\n\r\nabc\r\n--${BOUNDARY}--\r\n`, multipartOf()],
    ['multipart with a huge filename', `${filePart('file', 'f'.repeat(20_000))}--${BOUNDARY}--\r\n`, multipartOf()],
    ['JSON where multipart is expected', '{"file":"abc"}', { 'content-type': 'application/json' }],
  ];
}

const PERCENT_GARBAGE = ['%', '%zz', '%E0%A4%A', '%ED%A0%80', '%C0%AF', '%00', '..%2F..%2Fetc', '%F0%9F%98%80', '%25%', 'a%20b'];
const QUERY_GARBAGE = ['%zz', '%ED%A0%80', '%', '%00', `${'x'.repeat(10_000)}`, '-1', '1e309', '99999999999999999999', 'null', '[]'];
const BAD_CREDENTIALS = [
  (): string | null => null,
  () => 'Bearer',
  () => `Bearer sk_live_${'A'.repeat(43)}`,
  () => `Bearer ${world.revokedKey}`,
  () => 'Basic dXNlcjpwYXNz',
  () => `Bearer ${'x'.repeat(5000)}`,
  () => `Bearer sk_live_${randomText(43)} trailing`,
  () => `Bearer ts_${randomText(43)}`,
  () => `Bearer ml_${'0'.repeat(43)}`,
  () => `Bearer ${session}x`,
  () => `Bearer pt_${randomText(43)}`,
  () => `Bearer ${world.portalToken}`,
];

function attemptsFor(op: Operation): Attempt[] {
  const key = routeKey(op.method, op.path);
  const values = pathValues(world, key, op.path);
  const url = fillPath(op.path, values);
  const request = world.requests[key] ?? null;
  const security = (op.security ?? []) as Record<string, unknown>[];
  const secured = security.length > 0;
  const takesKey = security.some((s) => 'apiKey' in s);
  const takesPortalToken = security.some((s) => 'portalToken' in s);
  const credential: Record<string, string> = secured ? { authorization: `Bearer ${takesKey ? world.owner.liveKey : takesPortalToken ? world.portalToken : session}` } : {};
  const baseHeaders: Record<string, string> = { ...credential, ...request?.headers };
  const query = world.queries[key] ?? '';
  const content = op.requestBody?.content ?? {};
  const jsonSchema = content['application/json'] ? resolve(content['application/json'].schema) : null;
  const basePayload = request?.body === undefined ? undefined : typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
  const jsonHeaders = { ...baseHeaders, 'content-type': 'application/json' };
  const out: Attempt[] = [];
  const add = (label: string, u: string, payload: Attempt['payload'], headers: Record<string, string>) => out.push({ label, url: u, payload, headers });

  // Path ids.
  for (const p of (op.parameters ?? []).filter((x) => x.in === 'path')) {
    const real = values[p.name] ?? '';
    const prefix = /^[a-z]+_/.exec(real)?.[0] ?? '';
    const swap = (v: string) => fillPath(op.path, { ...values, [p.name]: v }) + query;
    add(`random ${p.name}`, swap(`${prefix}${randomText(26)}`), basePayload, baseHeaders);
    add(`over-long ${p.name}`, swap('a'.repeat(600)), basePayload, baseHeaders);
    add(`long ${p.name}`, swap(`${prefix}${'7'.repeat(480)}`), basePayload, baseHeaders);
    add(`percent garbage in ${p.name}`, swap(pick(PERCENT_GARBAGE)), basePayload, baseHeaders);
    add(`invalid UTF-8 in ${p.name}`, swap(`${real}%ED%A0%80`), basePayload, baseHeaders);
  }

  // Queries.
  const queryParams = (op.parameters ?? []).filter((x) => x.in === 'query');
  const sep = query ? '&' : '?';
  for (const q of sample(queryParams, 6)) {
    const s = resolve(q.schema);
    const wrong = typesOf(s).some((x) => x === 'integer' || x === 'number') ? 'abc' : typesOf(s).includes('boolean') ? 'maybe' : pick(QUERY_GARBAGE);
    add(`query ${q.name}=${wrong.slice(0, 20)}`, `${url}${query}${sep}${q.name}=${wrong}`, basePayload, baseHeaders);
    add(`query ${q.name} twice`, `${url}${query}${sep}${q.name}=a&${q.name}=b`, basePayload, baseHeaders);
    add(`query ${q.name} garbage`, `${url}${query}${sep}${q.name}=${pick(QUERY_GARBAGE)}`, basePayload, baseHeaders);
  }
  add('unknown and prototype query keys', `${url}${query}${sep}zz=1&__proto__=x&constructor[prototype][x]=1`, basePayload, baseHeaders);
  add('a query of percent garbage', `${url}?${pick(PERCENT_GARBAGE)}=${pick(PERCENT_GARBAGE)}`, basePayload, baseHeaders);

  // Bodies.
  const target = `${url}${query}`;
  if (jsonSchema) {
    const base = request?.body && typeof request.body === 'object' && !Array.isArray(request.body) ? (request.body as Record<string, unknown>) : {};
    for (const [label, payload] of bodyMutations(jsonSchema, base)) add(label, target, payload, jsonHeaders);
  }
  if (content['multipart/form-data']) for (const [label, payload, headers] of multipartMutations()) add(label, target, payload, { ...baseHeaders, ...headers });
  if (key === 'PUT /v1/uploads/{token}') {
    add('fewer bytes than declared', target, 'a', baseHeaders);
    add('more bytes than declared', target, 'abcdef', baseHeaders);
    add('no bytes', target, undefined, baseHeaders);
  }
  if (key === 'POST /v1/inbound/email') {
    const mail = baseHeaders;
    add('a message of garbage', target, Buffer.from(randomText(500, '\u0000\u0001abc:\r\n\u00ff')), mail);
    add('a message of invalid UTF-8', target, Buffer.from([0xed, 0xa0, 0x80, 0x0d, 0x0a, 0xff, 0xfe]), mail);
    add('a message with no body', target, 'Subject: hi\r\n', mail);
    add(
      'a message with a lone surrogate in its subject',
      target,
      `To: ${world.params.brandId}@inbound.ticketd.localhost\r\nFrom: a@example.com\r\nSubject: =?UTF-8?B?7aCA?=\r\n\r\nhi`,
      mail,
    );
    add('a message to nobody', target, 'From: a@example.com\r\nTo: nobody@example.com\r\n\r\nhi', mail);
    add('the wrong inbound secret', target, basePayload, { ...mail, authorization: 'Bearer nope' });
  }

  // Content types.
  if (op.method !== 'GET') {
    const text = basePayload ?? '{}';
    add('text/plain', target, text, { ...baseHeaders, 'content-type': 'text/plain' });
    add('a form', target, 'a=1&b=2', { ...baseHeaders, 'content-type': 'application/x-www-form-urlencoded' });
    add('multipart without a boundary', target, text, { ...baseHeaders, 'content-type': 'multipart/form-data' });
    add('multipart cut short', target, `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nab`, { ...baseHeaders, ...multipartOf() });
    add('a content type of garbage', target, text, { ...baseHeaders, 'content-type': 'garbage/;;==; charset' });
    add('JSON in UTF-16', target, text, { ...baseHeaders, 'content-type': 'application/json; charset=utf-16' });
  }

  // Credentials.
  if (secured) {
    for (const bad of sample(BAD_CREDENTIALS, 3)) {
      const value = bad();
      const { authorization: _, ...rest } = baseHeaders;
      add(`credential ${value === null ? 'none' : JSON.stringify(value.slice(0, 24))}`, target, basePayload, value === null ? rest : { ...rest, authorization: value });
    }
    if (security.some((s) => 'sessionCookie' in s)) {
      const { authorization: _, ...rest } = baseHeaders;
      add('a session cookie of garbage', target, basePayload, { ...rest, cookie: `ticketd_session=${pick(PERCENT_GARBAGE)}; ticketd_session=` });
      add('a revoked-looking session cookie', target, basePayload, { ...rest, cookie: `a=b; ticketd_session=ts_${randomText(43)}`, origin: 'https://evil.example' });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The run.

interface Failure {
  operation: string;
  attempt: string;
  problem: string;
}
const failures: Failure[] = [];
let sent = 0;
const started = Date.now();

function problemsOf(status: number, headers: Record<string, unknown>, text: string): string[] {
  const problems: string[] = [];
  if (status >= 500) problems.push(`${status}`);
  const requestId = headers['x-request-id'];
  if (!requestId) problems.push('no X-Request-Id');
  if (status >= 400 && status < 500) {
    let body: Record<string, unknown> | null = null;
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      /* not JSON */
    }
    if (!body || body.statusCode !== status || typeof body.error !== 'string' || typeof body.message !== 'string' || typeof body.code !== 'string') {
      problems.push(`${status} outside the error shape`);
    } else if (body.requestId !== requestId) problems.push(`${status} without its request id`);
  }
  return problems;
}

for (const op of operations.filter((o) => ONLY.test(`${o.method} ${o.path}`))) {
  const name = `${op.method} ${op.path}`;
  const twin = op.path.startsWith('/v1/workspaces');
  rand = random(seedFor(name));
  const attempts = sample(attemptsFor(op), twin ? PER_TWIN : PER_OPERATION);
  t.test(name, async (t) => {
    const mine: Failure[] = [];
    for (const a of attempts) {
      if (name === LOGOUT && a.headers.authorization === `Bearer ${session}`) a.headers = { ...a.headers, authorization: `Bearer ${await ownerSession()}` };
      const payload = typeof a.payload === 'function' ? a.payload() : a.payload;
      const res = await app.inject({ method: op.method as 'GET', url: a.url, headers: a.headers, ...(payload === undefined ? {} : { payload }) });
      sent++;
      for (const problem of problemsOf(res.statusCode, res.headers, res.body)) {
        let detail = res.body.slice(0, 160);
        try {
          const body = JSON.parse(res.body) as { code?: string; message?: string };
          detail = `${body.code ?? ''} ${String(body.message ?? '').slice(0, 120)}`;
        } catch {
          /* not JSON */
        }
        mine.push({ operation: name, attempt: a.label, problem: `${problem}: ${detail}` });
      }
    }
    failures.push(...mine);
    t.same(
      mine.map((f) => `${f.attempt} → ${f.problem}`),
      [],
      `${attempts.length} hostile requests: no 5xx, X-Request-Id on each, every 4xx in the error shape`,
    );
  });
}

t.test('figures', async (t) => {
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  t.comment(`fuzz: seed ${SEED}, ${operations.length} operations, ${sent} requests, ${seconds} s, ${failures.length} failures`);
  const byKind = new Map<string, number>();
  for (const f of failures) {
    const kind = `${f.attempt.replace(/ (for|in|of) .*$/, '')} → ${f.problem.split(':')[0]}`;
    byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
  }
  for (const [kind, n] of [...byKind].sort((a, b) => b[1] - a[1])) t.comment(`  ${n} × ${kind}`);
  t.ok(operations.length > 150, `${operations.length} operations walked`);
  const signIn = ['POST /v1/auth/check-email', 'POST /v1/auth/signup', 'POST /v1/auth/magic-link', 'POST /v1/auth/verify', 'GET /v1/auth/session', LOGOUT];
  t.same(
    signIn.filter((name) => !operations.some((o) => `${o.method} ${o.path}` === name)),
    [],
    'the sign-in routes are among them',
  );
});
