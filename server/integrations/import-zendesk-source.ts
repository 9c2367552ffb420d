import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, interceptors, type Dispatcher } from 'undici';
import type { StagedObject, Storage } from '../core/ports.js';
import { SourceFailed, SourceHttp, type SourceHttpOptions, type SourcePacer } from './import-http.js';

/**
 * A Zendesk Support account read through its public REST API (decision 0124), with an API token
 * (basic auth `{email}/token:{token}`). Lists use cursor pagination (`page[size]`, `meta.has_more`,
 * `meta.after_cursor`); tickets come from the cursor-based incremental export
 * (`/api/v2/incremental/tickets/cursor.json`, `after_cursor`, `end_of_stream`). Requests are
 * paced to a per-minute budget of our own and to the account's (`ratelimit-remaining` /
 * `X-Rate-Limit-Remaining`), besides SourceHttp's handling of 429 and transient failures.
 */

/** An object as Zendesk's API shows it (snake_case JSON). */
export type ZendeskObject = Record<string, unknown> & { id: number };

export interface ZendeskPage {
  items: ZendeskObject[];
  /** The cursor of the next page; null on the last. */
  next: string | null;
}

/** Zendesk's published limit of the incremental export endpoints, whatever the account's plan. */
export const EXPORT_REQUESTS_PER_MINUTE = 10;
/** The share of the account's budget left to the help desk still in use (its agents' apps, its integrations). */
const RESERVE = 0.1;
const PAGE_SIZE = 100;
const MINUTE = 60_000;

export interface ZendeskSourceOptions extends Pick<SourceHttpOptions, 'onRetry' | 'timeoutMs' | 'baseDelayMs' | 'maxDelayMs' | 'attempts'> {
  /** `https://{subdomain}.zendesk.com`, or another base URL (a proxy; tests). */
  baseUrl: string;
  email: string;
  token: string;
  /** Our own budget, under the account's: at most this many requests in any minute. */
  requestsPerMinute: number;
}

export class ZendeskSource {
  readonly http: SourceHttp;
  private readonly agent: Dispatcher;

  constructor(readonly options: ZendeskSourceOptions) {
    // An attachment's content_url answers with a redirect to its file host; undici drops the
    // credential when the redirect leaves the origin.
    this.agent = new Agent().compose(interceptors.redirect({ maxRedirections: 3 }));
    this.http = new SourceHttp({
      ...options,
      baseUrl: options.baseUrl.replace(/\/+$/, '') + '/',
      headers: { authorization: `Basic ${Buffer.from(`${options.email}/token:${options.token}`).toString('base64')}` },
      dispatcher: this.agent,
      pacer: new ZendeskPacer(options.requestsPerMinute, options.onRetry),
    });
  }

  close(): Promise<void> {
    return this.agent.close();
  }

  /** One page of a cursor-paginated list: `key` names its array (`users`, `organizations`, …). */
  async page(path: string, key: string, cursor: string | null, query: Record<string, string | number | undefined> = {}): Promise<ZendeskPage> {
    const answer = await this.http.json<Record<string, unknown> & { meta?: { has_more?: unknown; after_cursor?: unknown } }>(path, {
      ...query,
      'page[size]': PAGE_SIZE,
      'page[after]': cursor ?? undefined,
    });
    const items = answer[key];
    if (!Array.isArray(items)) throw new SourceFailed(`Zendesk listed ${path} in a shape ticketd does not know (no ${key})`, null);
    const next = answer.meta?.has_more === true && typeof answer.meta.after_cursor === 'string' ? answer.meta.after_cursor : null;
    return { items: items as ZendeskObject[], next };
  }

  /** Every item of a short list (brands, groups, ticket fields, the agents). */
  async all(path: string, key: string, query: Record<string, string | number | undefined> = {}): Promise<ZendeskObject[]> {
    const out: ZendeskObject[] = [];
    for (let cursor: string | null = null; ; ) {
      const page = await this.page(path, key, cursor, query);
      out.push(...page.items);
      if (!page.next) return out;
      cursor = page.next;
    }
  }

  /**
   * One page of the incremental ticket export: from `startTime` (Unix seconds) on a first call,
   * else from the cursor. Deleted tickets come with status `deleted`. `next` is null at the end
   * of the stream.
   */
  async tickets(startTime: number, cursor: string | null): Promise<ZendeskPage> {
    const answer = await this.http.json<{ tickets?: unknown; after_cursor?: unknown; end_of_stream?: unknown }>(
      'api/v2/incremental/tickets/cursor.json',
      cursor ? { cursor, per_page: PAGE_SIZE } : { start_time: startTime, per_page: PAGE_SIZE },
    );
    if (!Array.isArray(answer.tickets)) throw new SourceFailed('Zendesk exported tickets in a shape ticketd does not know (no tickets)', null);
    const next = answer.end_of_stream !== true && typeof answer.after_cursor === 'string' ? answer.after_cursor : null;
    return { items: answer.tickets as ZendeskObject[], next };
  }

  /** About how many tickets the account has (a progress bar's total), when Zendesk says. */
  async ticketCount(): Promise<number | null> {
    const answer = await this.http.json<{ count?: { value?: unknown } }>('api/v2/tickets/count.json');
    return typeof answer.count?.value === 'number' ? answer.count.value : null;
  }

  /** A ticket's comments, oldest first, with their authors (side-loaded users). */
  async comments(ticketId: number): Promise<{ comments: ZendeskObject[]; users: ZendeskObject[] }> {
    const comments: ZendeskObject[] = [];
    const users: ZendeskObject[] = [];
    for (let cursor: string | null = null; ; ) {
      const answer: { comments?: unknown; users?: unknown; meta?: { has_more?: unknown; after_cursor?: unknown } } = await this.http.json(
        `api/v2/tickets/${ticketId}/comments.json`,
        { include: 'users', 'page[size]': PAGE_SIZE, 'page[after]': cursor ?? undefined },
      );
      if (!Array.isArray(answer.comments)) throw new SourceFailed(`Zendesk listed the comments of ticket ${ticketId} in a shape ticketd does not know`, null);
      comments.push(...(answer.comments as ZendeskObject[]));
      if (Array.isArray(answer.users)) users.push(...(answer.users as ZendeskObject[]));
      if (!(answer.meta?.has_more === true && typeof answer.meta.after_cursor === 'string')) return { comments, users };
      cursor = answer.meta.after_cursor;
    }
  }

  /** One user, by id (a requester met after the users were read). */
  async user(id: number): Promise<ZendeskObject | null> {
    try {
      return (await this.http.json<{ user: ZendeskObject }>(`api/v2/users/${id}.json`)).user;
    } catch (err) {
      if (err instanceof SourceFailed && err.status === 404) return null;
      throw err;
    }
  }

  /** An attachment's bytes (its content_url), staged. */
  stage(contentUrl: string, storage: Storage, maxBytes: number): Promise<StagedObject> {
    return this.http.stage(contentUrl, storage, maxBytes);
  }
}

/**
 * At most `perMinute` requests in any minute (the incremental export at most its own 10), and a
 * pause until the account's budget resets when what it has left falls to its reserve: Zendesk's
 * limit is the whole account's, and the help desk is still in use while the import runs.
 */
export class ZendeskPacer implements SourcePacer {
  private readonly sent = new Map<string, number[]>();
  private pausedUntil = 0;

  constructor(
    private readonly perMinute: number,
    private readonly onWait?: (info: { url: string; reason: string; waitMs: number; attempt: number }) => void,
    /** The clock and the wait (real ones but in tests: the window is a minute). */
    private readonly clock: { now(): number; sleep(ms: number): Promise<unknown> } = { now: Date.now, sleep },
  ) {}

  async before(url: string): Promise<void> {
    const exporting = new URL(url).pathname.includes('/api/v2/incremental/');
    const bucket = exporting ? 'export' : 'api';
    const limit = exporting ? Math.min(EXPORT_REQUESTS_PER_MINUTE, this.perMinute) : this.perMinute;
    const sent = this.sent.get(bucket) ?? [];
    this.sent.set(bucket, sent);
    for (;;) {
      const now = this.clock.now();
      while (sent.length && sent[0]! <= now - MINUTE) sent.shift();
      const paused = this.pausedUntil - now;
      const full = sent.length >= limit ? sent[0]! + MINUTE - now : 0;
      const waitMs = Math.max(paused, full);
      if (waitMs <= 0) {
        sent.push(now);
        return;
      }
      const reason = paused >= full ? 'asked to slow down (its rate limit is nearly spent)' : `reached ${limit} requests this minute${exporting ? ' (the export endpoint)' : ''}`;
      this.onWait?.({ url, reason, waitMs, attempt: 0 });
      await this.clock.sleep(waitMs);
    }
  }

  after(_url: string, headers: Record<string, string | string[] | undefined>): void {
    const num = (name: string) => {
      const v = headers[name];
      const n = Number(Array.isArray(v) ? v[0] : v);
      return v === undefined || Number.isNaN(n) ? null : n;
    };
    const remaining = num('ratelimit-remaining') ?? num('x-rate-limit-remaining');
    if (remaining === null) return;
    const limit = num('ratelimit-limit') ?? num('x-rate-limit');
    if (remaining > (limit === null ? 0 : Math.floor(limit * RESERVE))) return;
    const resetSeconds = num('ratelimit-reset') ?? 60;
    this.pausedUntil = Math.max(this.pausedUntil, this.clock.now() + resetSeconds * 1000);
  }
}
