import { createHash } from 'node:crypto';
import type objection from 'objection';
import { Type, type TSchema } from 'typebox';
import { badRequest } from './errors.js';
import { Nullable } from './schemas.js';

/**
 * Keyset pagination shared by every cursor list.
 *
 * Rows are ordered by (sort expression, id) and a page continues strictly after the last row of
 * the previous one, so rows inserted or updated meanwhile never make a page skip or repeat one.
 * Sort by creation time with the id itself: ids are time-sortable, and an id compares exactly
 * where a timestamp read into JavaScript would lose its microseconds.
 *
 * The cursor is opaque to clients: base64url JSON of the position and a fingerprint of the list's
 * filters, plus a checksum. A cursor that was altered, or that is reused with other filters or
 * another sort, is a 400. (A forged but well-formed cursor can only move the position within the
 * caller's own scope, which is enforced by the query itself.)
 */

export const PAGE_LIMIT_DEFAULT = 50;
export const PAGE_LIMIT_MAX = 100;

export const PageQuery = {
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: PAGE_LIMIT_MAX, default: PAGE_LIMIT_DEFAULT, description: `Page size, 1-${PAGE_LIMIT_MAX} (default ${PAGE_LIMIT_DEFAULT})` }),
  ),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, description: 'pagination.nextCursor of the previous page' })),
};

export const PaginationOut = Type.Object({
  cursor: Nullable(Type.String({ description: 'Pass as ?cursor= to get the next page (same as nextCursor)' })),
  nextCursor: Nullable(Type.String()),
  hasMore: Type.Boolean(),
});

export const PageOf = <T extends TSchema>(item: T) => Type.Object({ data: Type.Array(item), pagination: PaginationOut });

export interface Page<V> {
  data: V[];
  pagination: { cursor: string | null; nextCursor: string | null; hasMore: boolean };
}

/**
 * A page whose items are JSON texts already (built by PostgreSQL), as the page's JSON text: what
 * serializing the page of parsed items would give, without parsing them.
 */
export function pageJson(page: Page<string>): string {
  return `{"data":[${page.data.join(',')}],"pagination":${JSON.stringify({ cursor: page.pagination.cursor, nextCursor: page.pagination.nextCursor, hasMore: page.pagination.hasMore })}}`;
}

export type SortValue = string | number | null;
/** The last row's sort value and id; a list with a moving frame adds a third part, its anchor. */
export type Position = [SortValue, string] | [SortValue, string, string];

function fingerprint(filters: Record<string, unknown>): string {
  const canonical = JSON.stringify(
    Object.keys(filters)
      .sort()
      .map((k) => [k, filters[k] ?? null]),
  );
  return createHash('sha256').update(canonical).digest('base64url').slice(0, 12);
}

function checksum(payload: string): string {
  return createHash('sha256').update(`ticketd-cursor:${payload}`).digest('base64url').slice(0, 16);
}

export function encodeCursor(position: Position, filters: Record<string, unknown>): string {
  const payload = Buffer.from(JSON.stringify({ p: position, f: fingerprint(filters) })).toString('base64url');
  return `${payload}.${checksum(payload)}`;
}

export const invalidCursor = () =>
  badRequest(
    'The cursor is not valid: pass pagination.nextCursor from the previous page unchanged',
    [{ field: 'cursor', message: 'is not a cursor this list issued' }],
    'invalid_cursor',
  );

export function decodeCursor(cursor: string, filters: Record<string, unknown>): Position {
  const [payload, sum, extra] = cursor.split('.');
  if (!payload || !sum || extra !== undefined || checksum(payload) !== sum) throw invalidCursor();
  let decoded: { p?: unknown; f?: unknown };
  try {
    decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  const p = decoded?.p;
  const validValue = (v: unknown) => v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));
  if (!Array.isArray(p) || (p.length !== 2 && p.length !== 3) || !validValue(p[0]) || typeof p[1] !== 'string') throw invalidCursor();
  if (p.length === 3 && typeof p[2] !== 'string') throw invalidCursor();
  if (decoded.f !== fingerprint(filters)) {
    throw badRequest(
      'This cursor belongs to a list with other filters or another sort order; start again without a cursor',
      [{ field: 'cursor', message: 'was issued for different filters' }],
      'cursor_mismatch',
    );
  }
  return p as Position;
}

export interface KeysetOptions<M extends objection.Model, V> {
  /** SQL expression sorted on, e.g. `lower(contacts.email)`; `contacts.id` for creation order. */
  sort: string;
  /** The id column that breaks ties, e.g. `contacts.id`. */
  id: string;
  order: 'asc' | 'desc';
  limit?: number;
  cursor?: string;
  /** Everything that defines the list (filters and sort); a cursor continues only the same list. */
  filters: Record<string, unknown>;
  /** The value of `sort` for a row, exactly as PostgreSQL compares it. */
  valueOf: (row: M) => SortValue;
  toView: (row: M) => V;
  /** How the page's query runs: by default as objection runs it, into models. */
  rowsOf?: (query: objection.QueryBuilder<M, M[]>) => Promise<M[]>;
}

/**
 * One page of `query`. The sort expression must never be NULL (a row comparison with NULL matches
 * nothing): wrap nullable columns, e.g. `coalesce(lower(contacts.name), '')`.
 */
export async function keysetPage<M extends objection.Model & { id: string }, V>(query: objection.QueryBuilder<M, M[]>, options: KeysetOptions<M, V>): Promise<Page<V>> {
  const limit = options.limit ?? PAGE_LIMIT_DEFAULT;
  const direction = options.order === 'asc' ? 'asc' : 'desc';
  const comparator = direction === 'asc' ? '>' : '<';
  if (options.cursor) {
    const [value, id] = decodeCursor(options.cursor, options.filters);
    query.whereRaw(`(${options.sort}, ${options.id}) ${comparator} (?, ?)`, [value, id]);
  }
  // A prepared page names its limit in the text, so that a generic plan (made once, see db.ts
  // prepared) knows how few rows it reads; the limit is a checked integer.
  const ordered = query.orderByRaw(`${options.sort} ${direction}, ${options.id} ${direction}`);
  // objection's typings omit knex's second argument, which it passes on.
  (ordered as unknown as { limit(n: number, o: { skipBinding: boolean }): void }).limit(limit + 1, { skipBinding: Boolean(options.rowsOf) });
  const rows = options.rowsOf ? await options.rowsOf(ordered) : await ordered;
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = hasMore && last ? encodeCursor([options.valueOf(last), last.id], options.filters) : null;
  return { data: page.map(options.toView), pagination: { cursor: nextCursor, nextCursor, hasMore } };
}
