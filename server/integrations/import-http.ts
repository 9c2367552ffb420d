import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Dispatcher } from 'undici';
import type { StagedObject, Storage } from '../core/ports.js';
import { parseRetryAfter } from '../core/retry-after.js';

/**
 * How an importer reads a source over HTTP (decision 0123): JSON pages and files, with the
 * source's rate limit honoured (429 and its Retry-After, in seconds or as an HTTP date) and
 * transient failures (a 5xx, a connection refused or cut, a timeout) tried again after a capped
 * exponential backoff with jitter. Anything else the source refuses (401, 403, 404, …) is a
 * SourceRefused at once. Files are streamed into the storage's staging under the upload limit,
 * never held in memory.
 */

/** The source refused a request, or kept failing it: the import stops (its cursor kept) and says why. */
export class SourceFailed extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
    this.name = 'SourceFailed';
  }
}

/** A streamed answer cut after it began: the caller takes it up from what it was given (SourceHttp.pause between tries). */
export class SourceCut extends Error {
  constructor(url: string, cause: unknown) {
    super(`the source's answer to GET ${new URL(url).pathname} was cut: ${(cause as Error).message}`);
    this.name = 'SourceCut';
  }
}

/** A file over the byte limit: skipped and reported, never stored. */
export class SourceFileTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`larger than the upload limit (${limit} bytes)`);
    this.name = 'SourceFileTooLarge';
  }
}

export interface SourceHttpOptions {
  /** The source's base URL; paths are resolved against it. */
  baseUrl: string;
  /** Sent with every request to the source's origin (its credential). */
  headers: Record<string, string>;
  timeoutMs?: number;
  /** Tries of one request in all, transient failures and rate limits included. */
  attempts?: number;
  /** The first backoff (doubled each try, capped at maxDelayMs, ±20% jitter). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Told before each wait: the CLI reports it. */
  onRetry?: (info: { url: string; reason: string; waitMs: number; attempt: number }) => void;
  /** The connection pool (tests give their own; else undici's global one). */
  dispatcher?: Dispatcher;
  /** A source's own request budget: awaited before each try, told of each answer's headers. */
  pacer?: SourcePacer;
}

/** Keeps an importer within a source's published request budget (beyond waiting out a 429). */
export interface SourcePacer {
  before(url: string): Promise<void>;
  after(url: string, headers: Record<string, string | string[] | undefined>): void;
}

const DEFAULTS = { timeoutMs: 30_000, attempts: 8, baseDelayMs: 250, maxDelayMs: 60_000 };

/** The wait before try `attempt + 1` (attempt is 1-based) after a transient failure. */
export function backoffMs(attempt: number, base: number, max: number, random: number): number {
  return Math.round(Math.min(base * 2 ** (attempt - 1), max) * (0.8 + 0.4 * random));
}

export class SourceHttp {
  private readonly o: Required<Omit<SourceHttpOptions, 'onRetry' | 'dispatcher' | 'pacer'>> & Pick<SourceHttpOptions, 'onRetry' | 'dispatcher' | 'pacer'>;
  private readonly origin: string;

  constructor(options: SourceHttpOptions) {
    this.o = { ...DEFAULTS, ...options };
    this.origin = new URL(options.baseUrl).origin;
  }

  private urlOf(path: string, query?: Record<string, string | number | boolean | undefined>): string {
    const url = new URL(path, this.o.baseUrl.endsWith('/') ? this.o.baseUrl : `${this.o.baseUrl}/`);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    return url.toString();
  }

  /**
   * One request, tried again while the failure is transient; `use` reads the 2xx answer (its body
   * must be consumed or dumped). The credential goes only to the source's own origin: a signed
   * download link elsewhere (a bucket) gets none.
   */
  private async send<T>(url: string, use: (res: Dispatcher.ResponseData) => Promise<T>): Promise<T> {
    const headers = new URL(url).origin === this.origin ? this.o.headers : {};
    for (let attempt = 1; ; attempt++) {
      let reason: string;
      let wait: number | null = null;
      try {
        await this.o.pacer?.before(url);
        const res = await request(url, {
          method: 'GET',
          headers: { accept: 'application/json', ...headers },
          headersTimeout: this.o.timeoutMs,
          bodyTimeout: this.o.timeoutMs,
          dispatcher: this.o.dispatcher,
        });
        this.o.pacer?.after(url, res.headers);
        if (res.statusCode >= 200 && res.statusCode < 300) return await use(res);
        const text = (await res.body.text().catch(() => '')).slice(0, 300);
        if (res.statusCode === 429) {
          reason = 'rate limited (429)';
          wait = parseRetryAfter(res.headers['retry-after'], Date.now());
        } else if (res.statusCode >= 500) reason = `answered ${res.statusCode}`;
        else throw new SourceFailed(`the source answered ${res.statusCode} to GET ${new URL(url).pathname}${text ? `: ${text}` : ''}`, res.statusCode);
      } catch (err) {
        if (err instanceof SourceFailed || err instanceof SourceFileTooLarge) throw err;
        reason = (err as Error).message;
      }
      await this.pause(url, reason, attempt, wait);
    }
  }

  /**
   * The wait after failed try `attempt` of `url` (`waitMs` when the source said how long, else
   * the backoff); past the tries allowed, SourceFailed.
   */
  async pause(url: string, reason: string, attempt: number, waitMs: number | null = null): Promise<void> {
    if (attempt >= this.o.attempts) throw new SourceFailed(`the source failed GET ${new URL(url).pathname} ${attempt} times (last: ${reason})`, null);
    const wait = Math.min(waitMs ?? backoffMs(attempt, this.o.baseDelayMs, this.o.maxDelayMs, Math.random()), this.o.maxDelayMs);
    this.o.onRetry?.({ url, reason, waitMs: wait, attempt });
    await sleep(wait);
  }

  async json<T>(path: string, query?: Record<string, string | number | boolean | undefined>): Promise<T> {
    return this.send(this.urlOf(path, query), async (res) => (await res.body.json()) as T);
  }

  /**
   * An NDJSON answer's objects, a line at a time, read only as fast as they are taken (flat
   * memory over any length). The request is tried again as every other until its answer begins;
   * a failure after that is a SourceCut, for the caller to ask again from where it got to.
   */
  async *lines(path: string, query?: Record<string, string | number | boolean | undefined>): AsyncGenerator<Record<string, unknown>, void, undefined> {
    const url = this.urlOf(path, query);
    const body = await this.send(url, async (res) => res.body);
    // A character's bytes may come in two pieces.
    const decoder = new StringDecoder('utf8');
    let rest = '';
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        const parts = (rest + decoder.write(chunk)).split('\n');
        rest = parts.pop()!;
        for (const line of parts) if (line) yield JSON.parse(line) as Record<string, unknown>;
      }
    } catch (err) {
      if (err instanceof SyntaxError) throw new SourceFailed(`the source's answer to GET ${new URL(url).pathname} is no NDJSON: ${err.message}`, null);
      throw new SourceCut(url, err);
    } finally {
      body.destroy();
    }
    if (rest + decoder.end()) throw new SourceCut(url, new Error('it ended within a line'));
  }

  /**
   * A file streamed into staging, hashed and held to `maxBytes` on the way (as an upload is):
   * SourceFileTooLarge past it, nothing kept. A transfer cut midway is tried again whole.
   * `decode` takes the file's bytes out of an answer that wraps them (a JSON document carrying
   * them in base64): the answer's own length then says nothing of the file's.
   */
  async stage(url: string, storage: Storage, maxBytes: number, decode?: (body: Readable) => Readable): Promise<StagedObject> {
    return this.send(this.urlOf(url), async (res) => {
      const declared = Number(res.headers['content-length']);
      if (!decode && Number.isFinite(declared) && declared > maxBytes) {
        res.body.destroy();
        throw new SourceFileTooLarge(maxBytes);
      }
      try {
        return await storage.stage(decode ? decode(res.body) : res.body, maxBytes);
      } catch (err) {
        res.body.destroy();
        if ((err as Error).name === 'ByteLimitExceeded') throw new SourceFileTooLarge(maxBytes);
        throw err;
      }
    });
  }
}
