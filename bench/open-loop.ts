/**
 * Open-loop load for the soak and the capacity bench: requests go out on a timetable whether or
 * not earlier ones were answered, and each latency counts from the request's slot in the
 * timetable, so a server that falls behind shows it instead of slowing the load down (no
 * coordinated omission).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

export type Op = 'create' | 'comment' | 'update' | 'list' | 'search' | 'dashboard';

export interface Sample {
  /** Seconds from the start of the load to the request's slot. */
  at: number;
  op: Op;
  /** The route's shape: the method and the path with ids as :id, without the query. */
  route: string;
  ms: number;
  ok: boolean;
  /** A 304: answered from the caller's cache (SendOptions.cache). */
  notModified: boolean;
  /** Bytes of the answer's body (its content-length; 0 for a 304). */
  bytes: number;
  error?: string;
}

/** What a browser's HTTP cache keeps of one URL: the last ETag, and what the caller read of the body that came with it. */
export interface CachedAnswer {
  etag: string;
  kept: unknown;
}
/** One browser's HTTP cache, by URL. */
export type HttpCache = Map<string, CachedAnswer>;

export interface SendOptions {
  /**
   * A browser's cache to emulate: a GET of a URL it holds goes out with If-None-Match, and a 304
   * answers with what it kept. Answers without an ETag are not kept (then nothing changes).
   */
  cache?: HttpCache;
  /** What the caller needs of the JSON body (also what a cache keeps of it); null: the body is not parsed. Default: all of it. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  read?: ((json: any) => unknown) | null;
}

export interface ClientOptions {
  /** Connections to the server (undici Pool); default 32. */
  connections?: number;
  /** A request unanswered for this long is an error; default 30 s. */
  timeoutMs?: number;
  /** A server that stops answering must not pile up requests without bound: past this many in flight, slots are skipped and counted as errors. Default 256. */
  maxInFlight?: number;
}

/** Calls fire(i, due) `count` times, `everyMs` apart from `t0` (performance.now() time); late slots fire at once. */
export async function timetable(t0: number, everyMs: number, count: number, fire: (i: number, due: number) => void | Promise<void>): Promise<void> {
  for (let i = 0; i < count; i++) {
    const due = t0 + i * everyMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    await fire(i, due);
  }
}

/** The route's shape: ids (`<prefix>_<chars>`) as :id, the query left out. */
export function routeShape(method: string, route: string): string {
  return `${method} ${route.split('?')[0]!.replace(/\/[a-z]+_[A-Za-z0-9]+/g, '/:id')}`;
}

/** Requests to the server, each recorded as a sample of its operation from its slot to its answer; errors counted by kind. */
export class Client {
  samples: Sample[] = [];
  readonly errors = new Map<string, number>();
  /** When the load started (performance.now() time): samples are timed from here. */
  startedAt = 0;
  /** Each request in flight and its slot. */
  private readonly inFlight = new Map<Promise<unknown>, number>();
  private readonly pool: Pool;
  private readonly maxInFlight: number;

  constructor(url: string, options: ClientOptions = {}) {
    const timeout = options.timeoutMs ?? 30_000;
    this.pool = new Pool(url, { connections: options.connections ?? 32, headersTimeout: timeout, bodyTimeout: timeout });
    this.maxInFlight = options.maxInFlight ?? 256;
  }

  start(): number {
    return (this.startedAt = performance.now());
  }

  /**
   * The answer's JSON on 2xx (or what options.read took of it), else undefined (and an error
   * counted). `op` null: setup, not recorded, and a failure throws.
   */
  send(
    op: Op | null,
    due: number,
    method: 'GET' | 'POST' | 'PATCH',
    route: string,
    headers: Record<string, string>,
    body?: unknown,
    options: SendOptions = {},
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
  ): Promise<any> {
    const shape = routeShape(method, route);
    const record = (outcome: { error?: string; notModified?: boolean; bytes?: number }) => {
      const { error } = outcome;
      if (!op) {
        if (error) throw new Error(`setup: ${error}`);
        return;
      }
      this.samples.push({
        at: (due - this.startedAt) / 1000,
        op,
        route: shape,
        ms: performance.now() - due,
        ok: !error,
        notModified: outcome.notModified ?? false,
        bytes: outcome.bytes ?? 0,
        error,
      });
      if (error) this.errors.set(error, (this.errors.get(error) ?? 0) + 1);
    };
    if (this.inFlight.size >= this.maxInFlight) {
      record({ error: `${shape}: skipped, ${this.maxInFlight} requests in flight` });
      return Promise.resolve(undefined);
    }
    const cache = method === 'GET' ? options.cache : undefined;
    const cached = cache?.get(route);
    const request = (async () => {
      let status = 0;
      let json;
      let bytes = 0;
      try {
        const sent = body === undefined ? headers : { ...headers, 'content-type': 'application/json' };
        const res = await this.pool.request({
          method,
          path: route,
          headers: cached ? { ...sent, 'if-none-match': cached.etag } : sent,
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        status = res.statusCode;
        bytes = Number(res.headers['content-length'] ?? 0);
        if (status === 304 && cached) {
          await res.body.dump();
          record({ notModified: true });
          return cached.kept;
        }
        // Unread bodies are drained, not parsed: at thousands of agents the parsing is the load generator's main cost. Errors are always read.
        if (options.read === null && status < 300) await res.body.dump();
        else {
          const raw = await res.body.text();
          json = raw ? JSON.parse(raw) : undefined;
        }
        if (status < 300 && cache) {
          const etag = res.headers.etag;
          const kept = options.read ? options.read(json) : json;
          if (typeof etag === 'string') cache.set(route, { etag, kept });
          else cache.delete(route);
          json = kept;
        } else if (status < 300 && options.read) json = options.read(json);
      } catch (err) {
        record({ error: `${shape}: ${(err as { code?: string }).code ?? (err as Error).message}` });
        return undefined;
      }
      record(status < 300 ? { bytes } : { error: `${shape}: ${status} ${json?.code ?? ''}` });
      return status < 300 ? json : undefined;
    })();
    this.inFlight.set(request, due);
    const done = () => this.inFlight.delete(request);
    request.then(done, done);
    return request;
  }

  /** Waits for the requests in flight (each ends by its timeout at the latest). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.inFlight.keys()]);
  }

  /** Waits until every request whose slot came before `due` (performance.now() time) was answered or failed; later ones may go on. */
  async settledBefore(due: number): Promise<void> {
    const pending = () => [...this.inFlight.values()].some((slot) => slot < due);
    while (pending()) await sleep(50);
  }

  /** Removes and returns the samples of slots before `at` (seconds from the start): a long run keeps only what it has not yet counted. */
  takeSamples(at: number): Sample[] {
    const taken: Sample[] = [];
    const kept: Sample[] = [];
    for (const s of this.samples) (s.at < at ? taken : kept).push(s);
    this.samples = kept;
    return taken;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
