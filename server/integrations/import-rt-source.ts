import { Readable, Transform } from 'node:stream';
import parser from 'stream-json/parser.js';
import type { StagedObject, Storage } from '../core/ports.js';
import { SourceFailed, SourceHttp, type SourceHttpOptions } from './import-http.js';

/**
 * Request Tracker 5, read through its REST2 interface with an auth token: what `ticketd import rt`
 * copies. Records come back as REST2 shows them (RT's column names); lists are read 100 at a
 * time. Ticket searches are TicketSQL, which never shows deleted tickets: those are found through
 * the transactions that deleted them.
 */

/** A REST2 record: `id` as a string (numeric ids and user names alike). */
export type RtRecord = Record<string, unknown> & { id: string };

/** A user as REST2 shows it, the fields the importer reads. */
export interface RtUser {
  id: number;
  name: string;
  email: string | null;
  realName: string | null;
  privileged: boolean;
  lastUpdated: string;
}

/** What one ticket search page asks for: the ticket's own columns and its people and custom fields. */
const TICKET_FIELDS = {
  fields: 'Subject,Status,Created,LastUpdated,Resolved,Due,Owner,Requestor,Creator,Queue,CustomFields',
  'fields[Owner]': 'Name',
  'fields[Requestor]': 'Name',
  'fields[Queue]': 'Name',
};
/** Every part of a ticket's messages but their bytes (REST2 shows a list's Content unencoded). */
const PART_FIELDS = 'TransactionId,ContentType,Filename,Created,ContentLength,Headers';
const TRANSACTION_FIELDS = 'ObjectId,Type,Creator,Created,Field,OldValue,NewValue';

export const PAGE = 100;

export class RtSource {
  readonly http: SourceHttp;
  /** RT's web root (the REST2 base without /REST/2.0): ticket links point there. */
  readonly webUrl: string;

  constructor(url: string, token: string, options: Omit<SourceHttpOptions, 'baseUrl' | 'headers'> = {}) {
    const base = new URL(url);
    const path = base.pathname.replace(/\/+$/, '');
    base.pathname = /\/REST\/2\.0$/i.test(path) ? `${path}/` : `${path}/REST/2.0/`;
    this.webUrl = base.toString().replace(/REST\/2\.0\/$/i, '');
    this.http = new SourceHttp({ ...options, baseUrl: base.toString(), headers: { authorization: `token ${token}` } });
  }

  get origin(): string {
    return new URL(this.webUrl).origin;
  }

  /** Every page of a REST2 list ({ items, page, pages }). */
  async all(path: string, query: Record<string, string | number> = {}): Promise<RtRecord[]> {
    const out: RtRecord[] = [];
    for (let page = 1; ; page++) {
      const answer = await this.list(path, { ...query, page });
      out.push(...answer.items);
      if (answer.items.length < PAGE) return out;
    }
  }

  private async list(path: string, query: Record<string, string | number>): Promise<{ items: RtRecord[] }> {
    const answer = await this.http.json<{ items?: unknown; message?: unknown }>(path, { per_page: PAGE, ...query });
    if (!Array.isArray(answer.items))
      throw new SourceFailed(`Request Tracker listed ${path} in a shape ticketd does not know${answer.message ? `: ${String(answer.message)}` : ''}`, null);
    return { items: answer.items as RtRecord[] };
  }

  /** The queues the token may see (disabled ones too), by id. */
  async queues(): Promise<RtRecord[]> {
    const listed = await this.all('queues/all', { fields: 'Name,Description,Lifecycle,LastUpdated,Disabled' });
    return listed.sort((a, b) => Number(a.id) - Number(b.id));
  }

  /** One record (queue, custom field, ticket…). */
  record(kind: string, id: string | number): Promise<RtRecord> {
    return this.http.json<RtRecord>(`${kind}/${encodeURIComponent(String(id))}`);
  }

  /** A custom field's choices (Select fields), in their order. */
  async customFieldValues(id: string): Promise<string[]> {
    const values = await this.all(`customfield/${encodeURIComponent(id)}/values`, { fields: 'Name,SortOrder' });
    return values.map((v) => String(v.Name ?? '')).filter((v) => v !== '');
  }

  async user(name: string): Promise<RtUser> {
    const u = await this.record('user', name);
    const text = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
    return {
      id: Number(u.id),
      name: String(u.Name ?? name),
      email: text(u.EmailAddress)?.toLowerCase() ?? null,
      realName: text(u.RealName),
      privileged: Number(u.Privileged) === 1,
      lastUpdated: String(u.LastUpdated ?? ''),
    };
  }

  /**
   * One page of a queue's tickets after ticket `afterId`, by id: a cursor that stays right while
   * tickets are added, changed or deleted. `updatedFrom` (RT's own date syntax, read in the token
   * user's time zone) narrows the search; the caller compares the exact times.
   */
  async tickets(queue: string, afterId: number, updatedFrom: string | null): Promise<RtRecord[]> {
    const query = `Queue = ${quote(queue)} AND id > ${afterId}${updatedFrom ? ` AND LastUpdated >= '${updatedFrom}'` : ''}`;
    return (await this.list('tickets', { query, orderby: 'id', order: 'ASC', ...TICKET_FIELDS })).items;
  }

  /** How many tickets the queue has (not deleted): a progress bar's total. */
  async ticketCount(queue: string): Promise<number> {
    const answer = await this.http.json<{ total?: unknown }>('tickets', { query: `Queue = ${quote(queue)}`, per_page: 1, fields: 'id' });
    return typeof answer.total === 'number' ? answer.total : 0;
  }

  /** A ticket's transactions, oldest first, those of the tickets merged into it included. */
  history(ticketId: string): Promise<RtRecord[]> {
    return this.all(`ticket/${encodeURIComponent(ticketId)}/history`, { fields: TRANSACTION_FIELDS, orderby: 'id', order: 'ASC' });
  }

  /**
   * The transactions of several tickets at once (a page's), oldest first: each carries its
   * ticket's id in ObjectId. Those of tickets merged into them are not among them (history has them).
   */
  async transactionsOf(ticketIds: readonly string[]): Promise<RtRecord[]> {
    const out: RtRecord[] = [];
    for (const ids of chunks(ticketIds))
      out.push(
        ...(await this.all('transactions', {
          query: JSON.stringify([{ field: 'ObjectType', value: 'RT::Ticket' }, inList('ObjectId', ids)]),
          fields: TRANSACTION_FIELDS,
          orderby: 'id',
          order: 'ASC',
        })),
      );
    return out;
  }

  /** Every MIME part of these transactions' messages, without their bytes, in order. */
  async partsOf(transactionIds: readonly string[]): Promise<RtRecord[]> {
    const out: RtRecord[] = [];
    for (const ids of chunks(transactionIds))
      out.push(...(await this.all('attachments', { query: JSON.stringify([inList('TransactionId', ids)]), fields: PART_FIELDS, orderby: 'id', order: 'ASC' })));
    return out;
  }

  /** The text parts without a file name of these transactions (the messages' bodies), with their text. */
  async bodiesOf(transactionIds: readonly string[]): Promise<RtRecord[]> {
    const out: RtRecord[] = [];
    for (const ids of chunks(transactionIds)) {
      const query = JSON.stringify([
        inList('TransactionId', ids),
        { field: 'ContentType', operator: 'LIKE', value: 'text/' },
        { field: 'Filename', operator: 'IS', value: 'NULL' },
      ]);
      out.push(...(await this.all('attachments', { query, fields: 'TransactionId,ContentType,Content', orderby: 'id', order: 'ASC' })));
    }
    return out;
  }

  /** The tickets whose status was set to deleted (at or after `since`), by id. */
  async deletedTicketIds(since: string | null): Promise<string[]> {
    const query = JSON.stringify([
      { field: 'ObjectType', value: 'RT::Ticket' },
      { field: 'Field', value: 'Status' },
      { field: 'NewValue', value: 'deleted' },
      ...(since ? [{ field: 'Created', operator: '>=', value: since.replace('T', ' ').replace(/(\.\d+)?Z$/, '') }] : []),
    ]);
    const txns = await this.all('transactions', { query, fields: 'ObjectId', orderby: 'id', order: 'ASC' });
    return [...new Set(txns.map((t) => String(t.ObjectId)))];
  }

  /**
   * A part's bytes, staged: REST2 gives them base64 inside the attachment's JSON, which is parsed
   * as it streams, so a file is never held in memory.
   */
  stageAttachment(attachmentId: string, storage: Storage, maxBytes: number): Promise<StagedObject> {
    return this.http.stage(`attachment/${encodeURIComponent(attachmentId)}`, storage, maxBytes, contentOf);
  }
}

/** Ids asked for by 100 at a time: the query travels in the URL. */
function chunks(ids: readonly string[]): string[][] {
  const out: string[][] = [];
  for (let i = 0; i < ids.length; i += PAGE) out.push(ids.slice(i, i + PAGE));
  return out;
}

const inList = (field: string, ids: readonly string[]) => ({ field, operator: 'IN', value: ids.map(Number) });

/** A TicketSQL string literal. */
function quote(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** The bytes of the top-level "Content" string of a JSON document whose value is base64. */
function contentOf(body: Readable): Readable {
  const tokens = parser.asStream({ packKeys: true, streamKeys: false, packStrings: false, streamStrings: true });
  let depth = 0;
  let key: string | null = null;
  let inContent = false;
  let carry = '';
  const decode = new Transform({
    readableObjectMode: false,
    writableObjectMode: true,
    transform(token: { name: string; value?: string }, _enc, done) {
      if (token.name === 'startObject' || token.name === 'startArray') depth++;
      else if (token.name === 'endObject' || token.name === 'endArray') depth--;
      else if (token.name === 'keyValue') key = depth === 1 ? String(token.value) : null;
      else if (token.name === 'startString') inContent = depth === 1 && key === 'Content';
      else if (token.name === 'endString') inContent = false;
      else if (token.name === 'stringChunk' && inContent) {
        // Base64 decodes by whole quads: what does not fill one waits for the next chunk.
        const text = carry + String(token.value).replace(/[^A-Za-z0-9+/=]/g, '');
        const whole = text.length - (text.length % 4);
        carry = text.slice(whole);
        if (whole) this.push(Buffer.from(text.slice(0, whole), 'base64'));
      }
      done();
    },
    flush(done) {
      if (carry) this.push(Buffer.from(carry, 'base64'));
      done();
    },
  });
  for (const stage of [body, tokens]) stage.on('error', (err) => decode.destroy(err));
  body.pipe(tokens).pipe(decode);
  return decode;
}
