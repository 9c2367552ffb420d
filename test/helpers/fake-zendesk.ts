import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

/**
 * A Zendesk Support account at the HTTP boundary, written from Zendesk's public API reference:
 * API token basic auth (`{email}/token:{token}`), cursor pagination of lists (`page[size]`,
 * `page[after]`, `meta.has_more`, `meta.after_cursor`, `links.next`), the cursor-based incremental
 * ticket export (`start_time` or `cursor`, `after_cursor`, `end_of_stream`; deleted tickets with
 * status `deleted`), comments with side-loaded users, attachments whose content_url redirects to
 * a file host of another origin, and the rate-limit headers on every answer (`X-Rate-Limit`,
 * `X-Rate-Limit-Remaining`, `ratelimit-limit`, `ratelimit-remaining`, `ratelimit-reset`).
 *
 * Pages are small (lists 5, the export 10) so that a few dozen tickets cross several cursors.
 * A test queues one-off answers in `failures` (a 429 with Retry-After, a 500 of a download).
 */

export type Json = Record<string, unknown> & { id: number };

export interface FakeZendesk {
  /** The base URL (`--base-url`). */
  url: string;
  email: string;
  token: string;
  brands: Json[];
  users: Json[];
  organizations: Json[];
  groups: Json[];
  ticketFields: Json[];
  tickets: Json[];
  /** A ticket's comments, oldest first; attachments carry `bytes` (left out of answers). */
  comments: Map<number, Json[]>;
  ratings: Json[];
  /** One-off answers to the next requests whose path and query match. */
  failures: { match: RegExp; status: number; headers?: Record<string, string>; served?: boolean }[];
  /** The next answer says the account's budget is spent (remaining 0, reset in 1 s). */
  spendBudgetOnce(): void;
  /** Every request: its path and query, and whether it carried a credential. */
  requests: { path: string; authorized: boolean }[];
}

const LIST_PAGE = 5;
const EXPORT_PAGE = 10;
/** An Enterprise account's limit: the file's runs together stay far from it. */
const LIMIT = 2500;

const seconds = (iso: unknown) => Math.floor(Date.parse(String(iso)) / 1000);
const encode = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const decode = <T>(s: string): T => JSON.parse(Buffer.from(s, 'base64url').toString()) as T;

export async function startFakeZendesk(t: Test, options: { email?: string; token?: string } = {}): Promise<FakeZendesk> {
  let url = '';
  let fileHost = '';
  let spend = false;
  let window = { start: Date.now(), used: 0 };
  const z: FakeZendesk = {
    url: '',
    email: options.email ?? 'admin@acme.example',
    token: options.token ?? 'zd-token-0123456789',
    brands: [],
    users: [],
    organizations: [],
    groups: [],
    ticketFields: [],
    tickets: [],
    comments: new Map(),
    ratings: [],
    failures: [],
    spendBudgetOnce: () => void (spend = true),
    requests: [],
  };

  /** Without the bytes a test keeps on an attachment. */
  const shown = (c: Json) => ({ ...c, attachments: ((c.attachments as Json[] | undefined) ?? []).map(({ bytes: _bytes, ...a }) => a) });

  function listPage(req: URL, key: string, items: Json[]) {
    const size = Math.min(Number(req.searchParams.get('page[size]') ?? 100), LIST_PAGE);
    const after = req.searchParams.get('page[after]');
    const start = after ? decode<number>(after) : 0;
    const page = items.slice(start, start + size);
    const more = start + size < items.length;
    const cursor = more ? encode(start + size) : null;
    const next = more ? new URL(req.toString()) : null;
    next?.searchParams.set('page[after]', cursor!);
    return { [key]: page, meta: { has_more: more, after_cursor: cursor, before_cursor: null }, links: { next: next?.toString() ?? null, prev: null } };
  }

  function exportPage(req: URL) {
    const cursor = req.searchParams.get('cursor');
    const size = Math.min(Number(req.searchParams.get('per_page') ?? 1000), EXPORT_PAGE);
    const sorted = [...z.tickets].sort((a, b) => seconds(a.updated_at) - seconds(b.updated_at) || a.id - b.id);
    let rest: Json[];
    if (cursor) {
      const at = decode<{ u: number; id: number }>(cursor);
      rest = sorted.filter((x) => seconds(x.updated_at) > at.u || (seconds(x.updated_at) === at.u && x.id > at.id));
    } else {
      const start = Number(req.searchParams.get('start_time'));
      rest = sorted.filter((x) => seconds(x.updated_at) >= start);
    }
    const page = rest.slice(0, size);
    const last = page[page.length - 1];
    const after = last ? encode({ u: seconds(last.updated_at), id: last.id }) : (cursor ?? encode({ u: Number(req.searchParams.get('start_time')), id: 0 }));
    return {
      tickets: page,
      after_cursor: after,
      after_url: `${url}/api/v2/incremental/tickets/cursor.json?cursor=${after}`,
      before_cursor: null,
      before_url: null,
      end_of_stream: rest.length <= size,
    };
  }

  function answer(req: URL): { status: number; body: unknown; headers?: Record<string, string> } {
    const p = req.pathname;
    const q = req.searchParams;
    let m: RegExpMatchArray | null;
    if (p === '/api/v2/brands.json') return { status: 200, body: listPage(req, 'brands', z.brands) };
    if (p === '/api/v2/groups.json') return { status: 200, body: listPage(req, 'groups', z.groups) };
    if (p === '/api/v2/ticket_fields.json') return { status: 200, body: listPage(req, 'ticket_fields', z.ticketFields) };
    if (p === '/api/v2/organizations.json') return { status: 200, body: listPage(req, 'organizations', z.organizations) };
    if (p === '/api/v2/users.json') return { status: 200, body: listPage(req, 'users', q.get('role') ? z.users.filter((u) => u.role === q.get('role')) : z.users) };
    if ((m = p.match(/^\/api\/v2\/users\/(\d+)\.json$/))) {
      const user = z.users.find((u) => u.id === Number(m![1]));
      return user ? { status: 200, body: { user } } : { status: 404, body: { error: 'RecordNotFound', description: 'Not found' } };
    }
    if (p === '/api/v2/tickets/count.json')
      return { status: 200, body: { count: { value: z.tickets.filter((x) => x.status !== 'deleted').length, refreshed_at: new Date().toISOString() } } };
    if (p === '/api/v2/incremental/tickets/cursor.json') return { status: 200, body: exportPage(req) };
    if ((m = p.match(/^\/api\/v2\/tickets\/(\d+)\/comments\.json$/))) {
      const id = Number(m[1]);
      if (!z.tickets.some((x) => x.id === id && x.status !== 'deleted')) return { status: 404, body: { error: 'RecordNotFound', description: 'Not found' } };
      const body = listPage(req, 'comments', (z.comments.get(id) ?? []).map(shown));
      if (q.get('include') === 'users') {
        const authors = new Set((body.comments as Json[]).map((c) => c.author_id));
        Object.assign(body, { users: z.users.filter((u) => authors.has(u.id)) });
      }
      return { status: 200, body };
    }
    if (p === '/api/v2/satisfaction_ratings.json') {
      const score = q.get('score');
      const start = q.get('start_time') ? Number(q.get('start_time')) : 0;
      const ratings = z.ratings.filter((r) => (score !== 'received' || r.score === 'good' || r.score === 'bad') && seconds(r.created_at) >= start);
      return { status: 200, body: listPage(req, 'satisfaction_ratings', ratings) };
    }
    if ((m = p.match(/^\/attachments\/token\/([^/]+)\/$/))) return { status: 302, body: '', headers: { location: `${fileHost}/files/${m[1]}` } };
    return { status: 404, body: { error: 'InvalidEndpoint', description: 'Not found' } };
  }

  const handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const at = new URL(req.url!, url);
    const authorized = req.headers.authorization === `Basic ${Buffer.from(`${z.email}/token:${z.token}`).toString('base64')}`;
    z.requests.push({ path: `${at.pathname}${at.search}`, authorized: Boolean(req.headers.authorization) });
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      if (Date.now() - window.start >= 60_000) window = { start: Date.now(), used: 0 };
      window.used++;
      const remaining = spend ? 0 : Math.max(0, LIMIT - window.used);
      const reset = spend ? 1 : Math.ceil((window.start + 60_000 - Date.now()) / 1000);
      spend = false;
      const isBytes = Buffer.isBuffer(body);
      res.writeHead(status, {
        'content-type': isBytes ? 'application/octet-stream' : 'application/json; charset=utf-8',
        'x-rate-limit': String(LIMIT),
        'x-rate-limit-remaining': String(remaining),
        'ratelimit-limit': String(LIMIT),
        'ratelimit-remaining': String(remaining),
        'ratelimit-reset': String(reset),
        ...headers,
      });
      res.end(isBytes ? body : status === 302 ? '' : JSON.stringify(body));
    };
    const failure = z.failures.find((f) => !f.served && f.match.test(`${at.pathname}${at.search}`));
    if (failure) {
      failure.served = true;
      send(failure.status, { error: failure.status === 429 ? 'TooManyRequests' : 'ServerError', description: 'try again' }, failure.headers);
      return;
    }
    // The file host: a signed link, no credential wanted.
    const file = at.pathname.match(/^\/files\/([^/]+)$/);
    if (file) {
      const a = [...z.comments.values()]
        .flat()
        .flatMap((c) => (c.attachments as Json[] | undefined) ?? [])
        .find((x) => String(x.token) === file[1]);
      if (!a) send(404, { error: 'RecordNotFound' });
      else send(200, a.bytes as Buffer);
      return;
    }
    if (!authorized) {
      send(401, { error: "Couldn't authenticate you" });
      return;
    }
    const { status, body, headers } = answer(at);
    send(status, body, headers);
  };
  const listen = async () => {
    const server = http.createServer(handle);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
  url = await listen();
  // The file host is another origin: the credential must not follow a redirect there.
  fileHost = await listen();
  z.url = url;
  return z;
}

/** An attachment as Zendesk shows it on a comment, with its bytes kept for the fake's file host. */
export function attachment(z: FakeZendesk, id: number, fileName: string, contentType: string, bytes: Buffer): Json {
  const token = `tok${id}`;
  return {
    id,
    file_name: fileName,
    content_url: `${z.url}/attachments/token/${token}/?name=${encodeURIComponent(fileName)}`,
    mapped_content_url: `${z.url}/attachments/token/${token}/?name=${encodeURIComponent(fileName)}`,
    content_type: contentType,
    size: bytes.length,
    inline: false,
    deleted: false,
    malware_scan_result: 'malware_not_found',
    token,
    bytes,
  };
}
