import type { StagedObject, Storage } from '../core/ports.js';
import { SourceCut, SourceFailed, SourceHttp, type SourceHttpOptions } from './import-http.js';

/**
 * A source that speaks ticketd's interface (the hosted product, or another ticketd), read through
 * its public API with an API key: what `ticketd import dispatch` copies. Objects come back as the
 * API shows them (camelCase JSON); the importer picks the fields it writes.
 */

/** A JSON object as the source's API shows it. */
export type SourceObject = Record<string, unknown> & { id: string };

/** A ticket of the source; with its comments (flattened, as comments() gives them) and watchers when it was exported with them. */
export interface SourceTicket {
  ticket: SourceObject;
  comments?: SourceObject[];
  watchers?: SourceObject[];
}

/** A page of a cursor-paged list. */
export interface SourcePage {
  items: SourceObject[];
  nextCursor: string | null;
}

/** The source answered the export's first request 404 or 400: it has none (the hosted product), or not this one (an older ticketd). */
export class ExportUnavailable extends Error {
  constructor(answer: string) {
    super(`the source has no ticket export (${answer})`);
    this.name = 'ExportUnavailable';
  }
}

const list = (v: unknown): SourceObject[] => (Array.isArray(v) ? (v as SourceObject[]) : []);

/** Comments as threads (an API key's reading: each top comment with its `replies`), flattened: each reply after the comment it answers. */
function flattenThreads(top: readonly SourceObject[]): SourceObject[] {
  return top.flatMap((c) => [c, ...((Array.isArray(c.replies) ? c.replies : []) as SourceObject[])]);
}

export class DispatchSource {
  readonly http: SourceHttp;

  constructor(
    readonly url: string,
    apiKey: string,
    options: Omit<SourceHttpOptions, 'baseUrl' | 'headers'> = {},
  ) {
    this.http = new SourceHttp({ ...options, baseUrl: url.replace(/\/+$/, '') + '/', headers: { authorization: `Bearer ${apiKey}` } });
  }

  /** The source's account: its id names the source in the mapping table. */
  async account(): Promise<{ id: string; livemode: boolean }> {
    const me = await this.http.json<{ id?: unknown; livemode?: unknown }>('v1/accounts/me');
    if (typeof me.id !== 'string') throw new SourceFailed('the source did not say which account the API key is of (GET /v1/accounts/me)', null);
    return { id: me.id, livemode: me.livemode !== false };
  }

  /** A bare-array list (brands, statuses, categories, tags, comments, attachments, watchers, webhooks). */
  async all(path: string): Promise<SourceObject[]> {
    const answer = await this.http.json<unknown>(path);
    if (Array.isArray(answer)) return answer as SourceObject[];
    const data = (answer as { data?: unknown }).data;
    if (Array.isArray(data)) return data as SourceObject[];
    throw new SourceFailed(`the source listed ${path} in a shape ticketd does not know`, null);
  }

  /** One page of a cursor-paged list ({ data, pagination: { nextCursor, hasMore } }). */
  async page(path: string, query: Record<string, string | number | boolean | undefined>, cursor: string | null): Promise<SourcePage> {
    const answer = await this.http.json<{ data?: unknown; pagination?: { nextCursor?: unknown; hasMore?: unknown } }>(path, { ...query, cursor: cursor ?? undefined });
    if (!Array.isArray(answer.data)) throw new SourceFailed(`the source listed ${path} in a shape ticketd does not know`, null);
    const next = answer.pagination?.hasMore && typeof answer.pagination.nextCursor === 'string' ? answer.pagination.nextCursor : null;
    return { items: answer.data as SourceObject[], nextCursor: next };
  }

  brands(): Promise<SourceObject[]> {
    return this.all('v1/brands');
  }

  /** The brand's custom field definitions, of every entity type (`contact` repeats `customer`: left out). */
  async fields(brandId: string): Promise<(SourceObject & { entityType: string })[]> {
    const all = await this.http.json<Record<string, unknown>>(`v1/brands/${encodeURIComponent(brandId)}/fields`);
    const out: (SourceObject & { entityType: string })[] = [];
    for (const [entityType, list] of Object.entries(all)) {
      if (entityType === 'contact' || !Array.isArray(list)) continue;
      for (const f of list as SourceObject[]) out.push({ ...f, entityType: typeof f.entityType === 'string' ? f.entityType : entityType });
    }
    return out;
  }

  /** About how many tickets the brand has (its statuses' counts): a progress bar's total. */
  async ticketCount(brandId: string): Promise<number> {
    const stats = await this.all(`v1/brands/${encodeURIComponent(brandId)}/statuses/stats`);
    return stats.reduce((sum, s) => sum + (typeof s.ticketCount === 'number' ? s.ticketCount : 0), 0);
  }

  /** A ticket's comments, oldest first, each reply after the comment it answers. */
  async comments(brandId: string, ticketId: string): Promise<SourceObject[]> {
    return flattenThreads(await this.all(`v1/brands/${encodeURIComponent(brandId)}/tickets/${encodeURIComponent(ticketId)}/comments`));
  }

  /**
   * The brand's tickets matching `query` (the list's filters), each with its comments and
   * watchers, from the ticket after `after` on, in pages of `size`: through the export of a
   * ticketd source (one request, where paging the list takes one for each page and two for each
   * ticket). A cut export is asked for again after the last page taken,
   * within the tries allowed. A source without the export (the hosted product, or an older
   * ticketd: 404 or 400 to it) throws ExportUnavailable: page the list then.
   */
  async *exportedTickets(brandId: string, query: Record<string, string | boolean>, after: string | null, size: number): AsyncGenerator<SourceTicket[], void, undefined> {
    const path = `v1/brands/${encodeURIComponent(brandId)}/tickets/export`;
    let page: SourceTicket[] = [];
    let lines = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        // Progress sets the tries back to 1: a long export may be cut more often than the tries allowed.
        for await (const line of this.http.lines(path, { ...query, format: 'ndjson', comments: true, watchers: true, after: after ?? undefined })) {
          lines++;
          const { comments, watchers, ...ticket } = line as SourceObject;
          page.push({ ticket: ticket as SourceObject, comments: flattenThreads(list(comments)), watchers: list(watchers) });
          if (page.length < size) continue;
          yield page;
          after = page.at(-1)!.ticket.id;
          page = [];
          attempt = 1;
        }
        if (page.length) yield page;
        return;
      } catch (err) {
        if (err instanceof SourceFailed && (err.status === 404 || err.status === 400) && !lines) throw new ExportUnavailable(err.message);
        if (!(err instanceof SourceCut)) throw err;
        // What was read of the page not yet given is read again.
        page = [];
        await this.http.pause(`${this.url.replace(/\/+$/, '')}/${path}`, err.message, attempt);
      }
    }
  }

  attachments(brandId: string, ticketId: string): Promise<SourceObject[]> {
    return this.all(`v1/brands/${encodeURIComponent(brandId)}/tickets/${encodeURIComponent(ticketId)}/attachments`);
  }

  /** An attachment's bytes, staged: through its fresh download link. */
  async stageAttachment(brandId: string, ticketId: string, attachmentId: string, storage: Storage, maxBytes: number): Promise<StagedObject> {
    const one = await this.http.json<{ downloadUrl?: unknown }>(
      `v1/brands/${encodeURIComponent(brandId)}/tickets/${encodeURIComponent(ticketId)}/attachments/${encodeURIComponent(attachmentId)}`,
    );
    if (typeof one.downloadUrl !== 'string') throw new SourceFailed(`the source gave no download link for attachment ${attachmentId}`, null);
    return this.http.stage(one.downloadUrl, storage, maxBytes);
  }

  watchers(brandId: string, ticketId: string): Promise<SourceObject[]> {
    return this.all(`v1/brands/${encodeURIComponent(brandId)}/tickets/${encodeURIComponent(ticketId)}/watchers`);
  }
}
