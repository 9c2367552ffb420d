import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { stringify } from 'csv-stringify/sync';
import { Type } from 'typebox';
import type { TenantCtx } from '../core/context.js';
import { visibleBrandId } from '../core/brand.js';
import { badRequest } from '../core/errors.js';
import { onReplica } from '../core/read-replica.js';
import { validationErrors } from '../core/validation.js';
import * as comments from '../domains/comments/service.js';
import * as tickets from '../domains/tickets/service.js';
import type { WatcherView } from '../domains/watchers/schemas.js';
import { watchersOfTickets } from './ticket-watchers.js';
import { TicketExportQuery, type TicketView } from '../domains/tickets/schemas.js';

/**
 * A brand's tickets as one document (decision 0122): every ticket the list with the same filters
 * holds, read page by page in id order, as NDJSON (one ticket's JSON a line, as the list shows
 * it, with its comments when asked, their JSON built by PostgreSQL too) or CSV (the ticket's flat fields under a fixed header).
 * Pages are read only as the consumer takes the text (an HTTP reply or a file), so memory holds
 * a few pages whatever the brand's size; no transaction spans the export.
 */

export const EXPORT_FORMATS = ['ndjson', 'csv'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** Tickets a statement: enough that a statement's fixed cost is small per ticket (a page takes about 20 ms), its rows under a megabyte. */
export const EXPORT_PAGE_SIZE = 500;
/** With comments: a page's rows carry its tickets' comments' JSON too (about 2.3 times the text), so fewer tickets a statement. */
export const EXPORT_PAGE_SIZE_WITH_COMMENTS = 250;
/**
 * CSV: its text is made from each ticket's objects, many times the allocation of passing JSON
 * through, so the young generation is collected often; pages of 500 waiting to be written outlived
 * two collections and went to the old generation (84-147 MiB of growth over 300,000 tickets).
 */
export const EXPORT_PAGE_SIZE_CSV = 250;
/** Pages read (each on its own connection) while one is written out. */
const PAGES_AHEAD = 2;
/** Pages whose ends one statement of ids finds. */
const PAGES_A_LOOKUP = 8;
/** Tickets a piece of text: about 75 kB of NDJSON, 40 kB of CSV. */
const EXPORT_CHUNK_TICKETS = 50;
/** With comments, as much text: about 75 kB (pieces of 50 grew the RSS by 91 MiB over 1M tickets, of 20 by 38). */
const EXPORT_CHUNK_TICKETS_WITH_COMMENTS = 20;

export interface ExportOptions {
  format: ExportFormat;
  /** NDJSON only: each ticket with `comments`, its live comments oldest first. */
  comments: boolean;
  /** How the comments are listed: every comment (the dashboard's reading) or threads (the SDK's); see comments.list. */
  commentShape: 'flat' | 'threads';
  /** NDJSON only: each ticket with `watchers`, as the watcher list gives them. */
  watchers?: boolean;
  /** Only the tickets after this id (the export's order): a cut export taken up again. */
  after?: string | null;
  pageSize?: number;
}

export interface TicketExport {
  filename: string;
  contentType: string;
  /** The document's UTF-8 text, a piece at a time, read as it is taken. */
  chunks: AsyncGenerator<Buffer, void, undefined>;
  /** Tickets written so far (all of them once chunks has ended). */
  readonly written: number;
}

/** The CSV's columns: the ticket's own fields, its related records by name, the free-form ones as JSON. */
const CSV_COLUMNS: readonly [string, (t: TicketView) => unknown][] = [
  ['id', (t) => t.id],
  ['ticketNumber', (t) => t.ticketNumber],
  ['title', (t) => t.title],
  ['body', (t) => t.body],
  ['status', (t) => t.status],
  ['statusName', (t) => t.statusRef?.name],
  ['priority', (t) => t.priority],
  ['assigneeId', (t) => t.assigneeId],
  ['createdBy', (t) => t.createdBy],
  ['customerId', (t) => t.customerId],
  ['customerEmail', (t) => t.customer?.email],
  ['customerName', (t) => t.customer?.name],
  ['companyId', (t) => t.customer?.companyId],
  ['companyName', (t) => t.customer?.company?.name],
  ['categoryId', (t) => t.categoryId],
  ['categoryName', (t) => t.category?.name],
  ['tagIds', (t) => t.tags.map((g) => g.id).join(',')],
  ['tags', (t) => t.tags.map((g) => g.name).join(', ')],
  ['source', (t) => t.source],
  ['sourceId', (t) => t.sourceId],
  ['commentCount', (t) => t.commentCount],
  ['attachmentCount', (t) => t.attachmentCount],
  ['isSpam', (t) => t.isSpam],
  ['closeReason', (t) => t.closeReason],
  ['dueAt', (t) => t.dueAt],
  ['createdAt', (t) => t.createdAt],
  ['updatedAt', (t) => t.updatedAt],
  ['mergedIntoId', (t) => t.mergedIntoId],
  ['customFields', (t) => (t.customFields == null ? null : JSON.stringify(t.customFields))],
  ['links', (t) => JSON.stringify(t.links)],
  ['metadata', (t) => JSON.stringify(t.metadata)],
];
export const CSV_HEADER = CSV_COLUMNS.map(([name]) => name);

/**
 * RFC 4180 with a header; booleans as true/false; a cell a spreadsheet would run as a formula
 * (starting with = + - @, a tab or a carriage return) gets a leading `'`, as OWASP advises for
 * exports a person opens: ticket titles and bodies are written by customers.
 */
const CSV_OPTIONS = { escape_formulas: true, cast: { boolean: (v: boolean) => (v ? 'true' : 'false') } } as const;

const csvRows = (views: readonly TicketView[]) =>
  stringify(
    views.map((t) => CSV_COLUMNS.map(([, value]) => value(t) ?? null)),
    CSV_OPTIONS,
  );

/** A ticket's JSON text with one more field last (its value as JSON text). */
const withField = (json: string, name: string, value: string) => `${json.slice(0, -1)},"${name}":${value}}`;

/**
 * Texts as UTF-8 lines, written straight into one buffer: no string of the whole piece is made
 * (50 tickets with one character beyond Latin-1 make a string of 150 kB, which V8 puts in its
 * large-object space, freed only by a full collection).
 */
function linesOf(texts: readonly string[]): Buffer {
  let size = texts.length;
  for (const text of texts) size += Buffer.byteLength(text);
  const bytes = Buffer.allocUnsafe(size);
  let at = 0;
  for (const text of texts) {
    at += bytes.write(text, at);
    bytes[at++] = 0x0a;
  }
  return bytes;
}

const ExportFilters = Type.Omit(TicketExportQuery, ['format', 'comments', 'watchers', 'after'], { additionalProperties: false });

/**
 * Filters given as text (the CLI's flags), checked and converted as the route's query is: the
 * filters, or what is wrong with them.
 */
export function exportFilters(query: Record<string, unknown>): { filters: tickets.TicketFilterInput } | { problems: string[] } {
  const ajv = new Ajv({ allErrors: true, coerceTypes: true, strict: false });
  addFormats.default(ajv);
  const validate = ajv.compile(ExportFilters);
  const filters = { ...query };
  if (validate(filters)) return { filters: filters as tickets.TicketFilterInput };
  return { problems: validationErrors(validate.errors ?? []).map((e) => `${e.field} ${e.message}`) };
}

/**
 * The export of the brand's tickets matching `filters` (the list's, spam and deleted tickets left
 * out as there). The brand and the filters are checked here, before any text: a caller outside
 * the brand gets 404, bad filters 400, while a status can still say so. What fails later (the
 * database gone mid-export) ends the text early: the HTTP route then cuts the response short.
 */
export async function exportTickets(ctx: TenantCtx, brandId: string, filters: tickets.TicketFilterInput, options: ExportOptions): Promise<TicketExport> {
  const id = await visibleBrandId(ctx, brandId);
  tickets.checkListFilters(filters);
  if (options.format === 'csv' && options.watchers) {
    throw badRequest('Watchers are exported in NDJSON only (format=ndjson)', [{ field: 'watchers', message: 'needs format=ndjson' }], 'watchers_need_ndjson');
  }
  if (options.format === 'csv' && options.comments) {
    throw badRequest(
      'Comments are exported in NDJSON only (format=ndjson); a CSV has commentCount',
      [{ field: 'comments', message: 'needs format=ndjson' }],
      'comments_need_ndjson',
    );
  }
  const pageSize = options.pageSize ?? (options.comments ? EXPORT_PAGE_SIZE_WITH_COMMENTS : options.format === 'csv' ? EXPORT_PAGE_SIZE_CSV : EXPORT_PAGE_SIZE);
  const day = new Date(ctx.services.now()).toISOString().slice(0, 10);
  let written = 0;

  // Each statement on its own (the replica when there is one): no snapshot held over the export.
  interface Page {
    rows: { id: string; viewJson: string }[];
    byTicket: Map<string, string> | null;
    watchersOf: Map<string, WatcherView[]> | null;
  }
  const read = (after: string | null, through: string): Promise<Page> =>
    onReplica(ctx, async (c) => {
      const rows = await tickets.exportPage(c, id, filters, after, through);
      const ids = rows.map((r) => r.id);
      const byTicket = options.comments && rows.length ? await comments.listJsonOfTickets(c, id, ids, options.commentShape) : null;
      const watchersOf = options.watchers && rows.length ? await watchersOfTickets(c, id, ids) : null;
      return { rows, byTicket, watchersOf };
    });

  /**
   * The pages in order, PAGES_AHEAD of them read while one is written out: a page costs
   * PostgreSQL about 20 ms, and one backend reading a page at a time held the export under 20,000
   * tickets a second. A page is the tickets up to an id read ahead
   * from the index (exportIds, for several pages in one statement), so it needs no page before it.
   */
  async function* pages(): AsyncGenerator<Page, void, undefined> {
    const reading: Promise<Page>[] = [];
    let after: string | null = options.after ?? null;
    let ends: string[] = [];
    let more = true;
    for (;;) {
      while (reading.length <= PAGES_AHEAD && (ends.length || more)) {
        if (!ends.length) {
          const ids: string[] = await onReplica(ctx, (c) => tickets.exportIds(c, id, filters, after, pageSize * PAGES_A_LOOKUP));
          more = ids.length === pageSize * PAGES_A_LOOKUP;
          ends = ids.filter((_, i) => (i + 1) % pageSize === 0 || i === ids.length - 1);
          if (!ends.length) break;
        }
        const through = ends.shift()!;
        const page = read(after, through);
        // Failed while an earlier page is awaited: no unhandled rejection (awaiting it still throws).
        page.catch(() => undefined);
        reading.push(page);
        after = through;
      }
      const page = reading.shift();
      if (!page) return;
      yield await page;
    }
  }

  async function* chunks(): AsyncGenerator<Buffer, void, undefined> {
    if (options.format === 'csv') yield Buffer.from(stringify([CSV_HEADER]));
    for await (const { rows, byTicket, watchersOf } of pages()) {
      // In pieces of a few tens of kB, not a page at once: a text of megabytes (and the buffer
      // made of it) lands in memory that the process keeps long after it is freed.
      const piece = byTicket ? EXPORT_CHUNK_TICKETS_WITH_COMMENTS : EXPORT_CHUNK_TICKETS;
      for (let from = 0; from < rows.length; from += piece) {
        const some = rows.slice(from, from + piece);
        const text =
          options.format === 'csv'
            ? Buffer.from(csvRows(some.map((r) => JSON.parse(r.viewJson) as TicketView)))
            : linesOf(
                some.map((r) => {
                  const json = byTicket ? withField(r.viewJson, 'comments', byTicket.get(r.id) ?? '[]') : r.viewJson;
                  return watchersOf ? withField(json, 'watchers', JSON.stringify(watchersOf.get(r.id) ?? [])) : json;
                }),
              );
        written += some.length;
        yield text;
      }
    }
  }

  return {
    filename: `tickets-${id}-${day}.${options.format}`,
    contentType: options.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
    chunks: chunks(),
    get written() {
      return written;
    },
  };
}
