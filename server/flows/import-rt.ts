import { convert as htmlToText } from 'html-to-text';
import type { TenantCtx } from '../core/context.js';
import { HttpError } from '../core/errors.js';
import * as brands from '../domains/brands/service.js';
import { MAX_COMMENT_BODY_LENGTH } from '../domains/comments/schemas.js';
import * as fields from '../domains/fields/service.js';
import type { FieldType } from '../domains/fields/schemas.js';
import * as members from '../domains/members/service.js';
import * as statuses from '../domains/statuses/service.js';
import { MAX_BODY_LENGTH, MAX_TITLE_LENGTH } from '../domains/tickets/schemas.js';
import { SourceFailed, SourceFileTooLarge } from '../integrations/import-http.js';
import type { RtRecord, RtSource, RtUser } from '../integrations/import-rt-source.js';
import { PAGE } from '../integrations/import-rt-source.js';
import { createBrand } from './brands.js';
import { findOrCreateContact, updateContact } from './customers.js';
import { ImportRun, type ImportOptions, type ImportReport, type SourceFile } from './import-run.js';
import type { ImportedComment, ImportedTicket } from './import-writer.js';

/**
 * `ticketd import rt`: copies the queues of a Request Tracker 5 into a ticketd account through
 * RT's REST2 interface (decisions 0123 and 0125). Each queue becomes a brand (matched by slug);
 * its ticket custom fields become field definitions; its tickets come with their requestor (a
 * contact), their owner (the target's member with the same email), their replies (public
 * comments), comments (internal ones), status changes (internal notes) and files, at RT's times.
 *
 * Where the run is lives in import_runs.state: the queues done, and in the current one its phase
 * and the last ticket id written (tickets are read by id, so a new or deleted ticket never moves
 * the cursor). A run killed midway goes on from there.
 */

interface RunState {
  /** Queues (RT ids) whose tickets are all in. */
  done: string[];
  /** The queue being imported, its phase and the last ticket id of it written. */
  queue: string | null;
  phase: number;
  after: number;
}

const PHASES = ['fields', 'tickets'] as const;

const NOT_COPIED = [
  "users (requestors and authors become contacts; privileged users are matched to the target's members by email, never created)",
  'Cc and AdminCc, and requestors after the first (a ticket has one customer)',
  'links between tickets (depends on, refers to, parent and child)',
  'priority, time worked and estimates, and the starts, started and told dates',
  'transactions other than create, reply, comment and status change (owner, subject, queue and custom field changes…)',
  'files kept in Image and Binary custom fields',
  'deleted tickets (reported)',
  'queue settings other than the name (addresses, scrips, templates, rights), articles and assets',
];

/**
 * RT's default lifecycle in ticketd's system statuses; `new` (nothing done yet) and the statuses
 * of other lifecycles have no counterpart and are created as custom statuses of the same name.
 */
const DEFAULT_STATUSES: Record<string, string> = { open: 'open', stalled: 'pending', resolved: 'resolved', rejected: 'closed' };
const SYSTEM_KEYS = ['open', 'pending', 'resolved', 'closed'];
const UNMAPPED = '--map does not name it, the target brand lacks it, and unmapped is skip';
const SYSTEM_USER = 'RT_System';
const NOBODY = 'Nobody';

interface Writer {
  run: ImportRun<RunState>;
  from: RtSource;
  queue: RtRecord;
  brandId: string;
  /** Per queue: statuses, contacts, the custom field plan (read once). */
  cache: Map<string, unknown>;
  people: People;
}

export async function importRt(base: TenantCtx, from: RtSource, options: ImportOptions & { queues?: string[] }): Promise<ImportReport> {
  const source = `rt:${from.origin}`;
  const run = await ImportRun.open<RunState>(base, source, options, { done: [], queue: null, phase: 0, after: 0 }, NOT_COPIED);
  const { state } = run;

  let queues = await from.queues();
  if (options.queues?.length) {
    const missing = options.queues.filter((name) => !queues.some((q) => q.Name === name));
    if (missing.length) throw new SourceFailed(`Request Tracker has no queue ${missing.join(', ')} that the token may see`, null);
    queues = queues.filter((q) => options.queues!.includes(String(q.Name)));
  }
  const people = new People(run, from, await members.list(run.ctx));
  if (options.onTicketTotal && !options.since) {
    let total = 0;
    for (const q of queues) total += await from.ticketCount(String(q.Name));
    options.onTicketTotal(total);
  }

  for (const q of queues) {
    if (state.done.includes(q.id)) continue;
    // The cursor of another queue (a run asked for other queues) says nothing of this one.
    if (state.queue !== q.id) Object.assign(state, { queue: q.id, phase: 0, after: 0 });
    const brandId = await importQueue(run, q);
    if (brandId) {
      const w: Writer = { run, from, queue: q, brandId, cache: new Map(), people };
      for (; state.phase < PHASES.length; state.phase++, state.after = 0) {
        if (PHASES[state.phase] === 'fields') await importFields(w);
        else await importTickets(w);
        await run.save();
      }
    }
    state.done.push(q.id);
    Object.assign(state, { queue: null, phase: 0, after: 0 });
    await run.save();
  }
  await reportDeleted(run, from, new Set(queues.map((q) => q.id)));
  return run.finish();
}

// ---------------------------------------------------------------------------------------------
// Queues, statuses and custom fields.

/** A brand's slug from a queue's name: lower-case letters and digits, words joined by single hyphens. */
export function slugOf(name: string): string {
  const slug = name
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64)
    .replace(/-+$/, '');
  return slug || 'queue';
}

/** A queue: a target brand with the same slug is taken as the same brand (left as it is); else one is created with the queue's name. */
async function importQueue(run: ImportRun<RunState>, q: RtRecord): Promise<string | null> {
  const name = String(q.Name);
  const id = await run.one('brand', q.id, String(q.LastUpdated), {
    create: async (tx) => {
      const same = (await brands.list(tx)).find((b) => b.slug === slugOf(name));
      if (same) return same.id;
      return (await createBrand(tx, { name, slug: slugOf(name) } as never)).id;
    },
    update: async (tx, targetId) => {
      await brands.update(tx, targetId, { name } as never);
    },
  });
  if (!id && run.options.dryRun) return `dry-run:${q.id}`;
  return id;
}

/** A status key from an RT status name: lower-case letters, digits and underscores. */
function statusKeyOf(name: string): string {
  return (
    name
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '')
      .slice(0, 50) || 'status'
  );
}

/** The target brand's status keys (the system ones only for a brand a dry run would create). */
async function targetStatusKeys(w: Writer): Promise<Set<string>> {
  let keys = w.cache.get('statusKeys') as Set<string> | undefined;
  if (!keys) {
    keys = w.brandId.startsWith('dry-run:') ? new Set(SYSTEM_KEYS) : new Set((await statuses.list(w.run.ctx, w.brandId)).map((s) => s.key));
    w.cache.set('statusKeys', keys);
  }
  return keys;
}

/**
 * The target status of an RT status: --map's, else the default lifecycle's system status, else a
 * status of the same name (created as a custom status, unless unmapped is skip). Null with the
 * reason when its tickets cannot be written.
 */
async function statusFor(w: Writer, rtStatus: string): Promise<{ key: string } | { skip: string }> {
  const memo = w.cache.get(`status:${rtStatus}`) as { key: string } | { skip: string } | undefined;
  if (memo) return memo;
  const decided = await decideStatus(w, rtStatus);
  w.cache.set(`status:${rtStatus}`, decided);
  return decided;
}

async function decideStatus(w: Writer, rtStatus: string): Promise<{ key: string } | { skip: string }> {
  const { run } = w;
  const sourceId = `${w.queue.id}/${rtStatus}`;
  const keys = await targetStatusKeys(w);
  const mapped = run.options.map?.statuses?.[rtStatus];
  if (mapped !== undefined) {
    if (!keys.has(mapped)) {
      const reason = `--map names ${mapped}, no status of the target brand`;
      run.count({ kind: 'status', sourceId, outcome: 'skipped', targetId: null, reason });
      return { skip: `its status ${rtStatus}: ${reason}` };
    }
    run.mapped({ kind: 'status', from: rtStatus, to: mapped });
    return { key: mapped };
  }
  const key = DEFAULT_STATUSES[rtStatus] ?? statusKeyOf(rtStatus);
  if (keys.has(key)) return { key };
  if (run.options.map?.unmapped === 'skip') {
    run.count({ kind: 'status', sourceId, outcome: 'skipped', targetId: null, reason: UNMAPPED });
    return { skip: `its status ${rtStatus} is no status of the target brand` };
  }
  const created = await run.one('status', sourceId, rtStatus, {
    create: async (tx) => {
      const same = (await statuses.list(tx, w.brandId)).find((s) => s.key === key);
      if (same) return same.id;
      const name = rtStatus.charAt(0).toUpperCase() + rtStatus.slice(1);
      return (await statuses.create(tx, w.brandId, { key, name: name.slice(0, 100), color: '#64748b' })).id;
    },
    update: async () => {},
  });
  if (!created && !run.options.dryRun) return { skip: `its status ${rtStatus} was refused by the target` };
  keys.add(key);
  return { key };
}

/** A field key from a custom field's name: a letter, then letters, digits and underscores. */
function fieldKeyOf(name: string): string {
  const key = name
    .normalize('NFKD')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toLowerCase();
  return (/^[a-z]/.test(key) ? key : `cf_${key}`).slice(0, 50).replace(/_+$/, '');
}

/** How a custom field of the queue is copied: its field definition, or why not. */
interface FieldPlan {
  cf: RtRecord;
  key: string;
  type: FieldType;
  /** Values as a list (RT lets it hold several). */
  many: boolean;
  options: string[] | null;
  /** Set when the field is not copied (nor its values). */
  skip?: string;
  /** --map names it: no definition is written, values go under the target's key. */
  mapped?: boolean;
}

/** The queue's ticket custom fields (global ones included), each with how it is copied; read once per queue. */
async function fieldPlans(w: Writer): Promise<FieldPlan[]> {
  const cached = w.cache.get('fields') as FieldPlan[] | undefined;
  if (cached) return cached;
  const queue = await w.from.record('queue', w.queue.id);
  const plans: FieldPlan[] = [];
  const map = w.run.options.map;
  for (const ref of Array.isArray(queue.TicketCustomFields) ? (queue.TicketCustomFields as RtRecord[]) : []) {
    const cf = await w.from.record('customfield', ref.id);
    const name = String(cf.Name);
    const rtType = String(cf.Type);
    const many = Number(cf.MaxValues) !== 1;
    let type: FieldType = many ? 'array' : 'text';
    let options: string[] | null = null;
    if (rtType === 'Select') {
      type = many ? 'multiselect' : 'select';
      options = await w.from.customFieldValues(cf.id);
    } else if (!many && (rtType === 'Date' || rtType === 'DateTime')) type = 'date';
    const plan: FieldPlan = { cf, key: map?.fields?.[`ticket.${name}`] ?? fieldKeyOf(name), type, many, options, mapped: map?.fields?.[`ticket.${name}`] !== undefined };
    if (rtType === 'Image' || rtType === 'Binary') plan.skip = 'files kept in custom fields are not copied';
    else if (!plan.mapped && map?.unmapped === 'skip' && !(await targetFieldKeys(w)).has(plan.key)) plan.skip = UNMAPPED;
    plans.push(plan);
  }
  w.cache.set('fields', plans);
  return plans;
}

async function targetFieldKeys(w: Writer): Promise<Set<string>> {
  if (w.brandId.startsWith('dry-run:')) return new Set();
  let keys = w.cache.get('fieldKeys') as Set<string> | undefined;
  if (!keys) w.cache.set('fieldKeys', (keys = new Set((await fields.list(w.run.ctx, w.brandId, 'ticket')).map((f) => f.key))));
  return keys;
}

/** The queue's ticket custom fields as field definitions of its brand: matched by key, created otherwise. */
async function importFields(w: Writer): Promise<void> {
  for (const p of await fieldPlans(w)) {
    const sourceId = `${w.queue.id}/${p.cf.id}`;
    if (p.skip) {
      w.run.count({ kind: 'field', sourceId, outcome: 'skipped', targetId: null, reason: p.skip });
      continue;
    }
    if (p.mapped) {
      w.run.mapped({ kind: 'field', from: `ticket.${String(p.cf.Name)}`, to: `ticket.${p.key}` });
      continue;
    }
    const input = {
      label: String(p.cf.Name).slice(0, 200),
      type: p.type,
      description: typeof p.cf.Description === 'string' && p.cf.Description ? p.cf.Description.slice(0, 1000) : null,
      ...(p.options ? { options: p.options } : {}),
    };
    const version = `${String(p.cf.LastUpdated)}/${p.type}/${(p.options ?? []).join('\u0000')}`;
    await w.run.one('field', sourceId, version, {
      create: async (tx) => {
        const same = (await fields.list(tx, w.brandId, 'ticket')).find((f) => f.key === p.key);
        if (same) {
          await fields.update(tx, w.brandId, 'ticket', same.key, input as never);
          return same.id;
        }
        return (await fields.create(tx, w.brandId, 'ticket', { key: p.key, ...input } as never)).id;
      },
      update: async (tx, id) => {
        const same = (await fields.list(tx, w.brandId, 'ticket')).find((f) => f.id === id);
        if (!same) throw new HttpError(404, 'not_found', 'Field not found');
        await fields.update(tx, w.brandId, 'ticket', same.key, input as never);
      },
    });
  }
}

/** A ticket's custom field values, under the target's keys (fields not copied left out). */
async function customFieldsOf(w: Writer, t: RtRecord): Promise<Record<string, unknown> | null> {
  const plans = new Map((await fieldPlans(w)).map((p) => [p.cf.id, p]));
  const out: Record<string, unknown> = {};
  for (const v of Array.isArray(t.CustomFields) ? (t.CustomFields as { id: string; values?: unknown[] }[]) : []) {
    const plan = plans.get(String(v.id));
    const values = (v.values ?? []).filter((x): x is string => typeof x === 'string' && x !== '');
    if (!plan || plan.skip || !values.length) continue;
    out[plan.key] = plan.many ? values : values[0];
  }
  return Object.keys(out).length ? out : null;
}

// ---------------------------------------------------------------------------------------------
// People.

/**
 * RT's users as the import needs them: read once per run; a privileged one is the target's member
 * with the same email (never created), anyone else a contact of the brand (matched by email).
 */
class People {
  private readonly users = new Map<string, Promise<RtUser>>();
  private readonly memberByEmail: Map<string, string>;
  private readonly noted = new Set<string>();

  constructor(
    private readonly run: ImportRun<RunState>,
    private readonly from: RtSource,
    targetMembers: readonly { id: string; email: string }[],
  ) {
    this.memberByEmail = new Map(targetMembers.map((m) => [m.email.toLowerCase(), m.id]));
  }

  user(name: string): Promise<RtUser> {
    let u = this.users.get(name);
    if (!u) this.users.set(name, (u = this.from.user(name)));
    return u;
  }

  /** The target member of a privileged user, else null (noted once). */
  member(u: RtUser, what: string): string | null {
    const id = u.email ? (this.memberByEmail.get(u.email) ?? null) : null;
    if (!id && !this.noted.has(u.name)) {
      this.noted.add(u.name);
      this.run.options.onNote?.(`RT user ${u.name}${u.email ? ` (${u.email})` : ''} is no member of the target (matched by email): ${what}`);
    }
    return id;
  }

  /** The brand's contact of a user with an email (its name kept up to date), else null. */
  async contact(w: Writer, u: RtUser): Promise<string | null> {
    if (!u.email) return null;
    const key = `contact:${u.id}`;
    if (w.cache.has(key)) return w.cache.get(key) as string | null;
    const email = u.email;
    const id = await w.run.one('contact', `${w.queue.id}/${u.id}`, u.lastUpdated, {
      create: async (tx) => {
        const found = await findOrCreateContact(tx, w.brandId, email, u.realName);
        if (u.realName) await updateContact(tx, w.brandId, found.id, { name: u.realName } as never);
        return found.id;
      },
      update: async (tx, contactId) => {
        await updateContact(tx, w.brandId, contactId, { name: u.realName } as never);
      },
    });
    w.cache.set(key, id);
    return id;
  }

  /** A transaction's author as a comment names it. */
  async author(w: Writer, name: string): Promise<Pick<ImportedComment, 'authorId' | 'authorName' | 'authorType'>> {
    const u = await this.user(name);
    if (u.name === SYSTEM_USER) return { authorId: null, authorName: u.realName ?? u.name, authorType: 'SYSTEM' };
    const authorName = u.realName ?? u.email ?? u.name;
    if (u.privileged) return { authorId: this.member(u, 'their comments keep their name, with no member'), authorName, authorType: 'AGENT' };
    return { authorId: await this.contact(w, u), authorName, authorType: 'CUSTOMER' };
  }
}

// ---------------------------------------------------------------------------------------------
// Tickets.

/** RT's date syntax for a TicketSQL bound a day before `iso`: RT reads it in the token user's zone, whichever that is. */
function updatedFromOf(iso: string): string {
  return new Date(Date.parse(iso) - 86_400_000)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, '');
}

/**
 * The queue's tickets a page at a time. A page's tickets to write are read together: their
 * transactions in one request, their messages' parts and bodies in one each (a few requests a
 * page, not a few a ticket: RT answers slowly). Each ticket then commits on its own, and the
 * cursor moves past it.
 */
async function importTickets(w: Writer): Promise<void> {
  const { run } = w;
  const since = run.options.since;
  for (;;) {
    const page = await w.from.tickets(String(w.queue.Name), run.state.after, since ? updatedFromOf(since) : null);
    const todo: Todo[] = [];
    for (const t of page) {
      if (since && Date.parse(String(t.LastUpdated)) < Date.parse(since)) continue;
      const status = await statusFor(w, String(t.Status));
      if ('skip' in status) {
        run.count({ kind: 'ticket', sourceId: t.id, outcome: 'skipped', targetId: null, reason: status.skip });
        continue;
      }
      const known = await run.ticketToWrite(t.id, String(t.LastUpdated));
      if (known.write) todo.push({ t, status: status.key, known: known.known });
    }
    const read = await readTickets(w, todo);
    for (const t of page) {
      const one = todo.find((x) => x.t.id === t.id);
      if (one) {
        await writeRtTicket(w, one, read);
        // Saved after each ticket written: a resumed run reads none of them again.
        run.state.after = Number(t.id);
        await run.save();
      }
    }
    if (page.length < PAGE) return;
    run.state.after = Number(page[page.length - 1]!.id);
    await run.save();
  }
}

/** A ticket of the page to write, with its target status and what the import made of it before. */
interface Todo {
  t: RtRecord;
  status: string;
  known: Parameters<ImportRun<RunState>['writeTicket']>[1];
}

/** What the page's tickets to write are made of: their transactions, their messages' parts and texts. */
interface PageRead {
  history: Map<string, RtRecord[]>;
  parts: Map<string, RtRecord[]>;
  text: Map<string, string>;
}

const MERGED_INTO = (txn: RtRecord, ticketId: string) => txn.Type === 'AddLink' && txn.Field === 'MergedInto' && String(txn.NewValue).endsWith(`/ticket/${ticketId}`);

async function readTickets(w: Writer, todo: readonly Todo[]): Promise<PageRead> {
  const read: PageRead = { history: new Map(), parts: new Map(), text: new Map() };
  if (!todo.length) return read;
  for (const txn of await w.from.transactionsOf(todo.map((x) => x.t.id))) push(read.history, String(txn.ObjectId), txn);
  for (const { t } of todo) {
    const own = read.history.get(t.id) ?? [];
    // A ticket others were merged into: its history holds theirs too.
    if (own.some((txn) => MERGED_INTO(txn, t.id))) read.history.set(t.id, await w.from.history(t.id));
  }
  const messages = [...read.history.values()].flat().filter((txn) => isMessage(txn));
  const ids = messages.map((txn) => txn.id);
  const [parts, bodies] = await Promise.all([w.from.partsOf(ids), w.from.bodiesOf(ids)]);
  for (const p of parts) push(read.parts, String(p.TransactionId), p);
  // A message's text: its first plain-text part, else its first HTML part as text.
  for (const html of [false, true])
    for (const b of bodies) {
      const txn = String(b.TransactionId);
      if (read.text.has(txn) || String(b.ContentType).toLowerCase() !== (html ? 'text/html' : 'text/plain')) continue;
      const content = String(b.Content ?? '');
      read.text.set(txn, html ? htmlToText(content, { wordwrap: false }) : content);
    }
  // The people of the page, read a few at a time.
  const names = new Set<string>();
  for (const { t } of todo) {
    for (const r of [t.Owner, ...(Array.isArray(t.Requestor) ? t.Requestor.slice(0, 1) : [])]) names.add(refOf(r) ?? NOBODY);
    for (const txn of read.history.get(t.id) ?? []) if (isMessage(txn) || isStatusChange(txn)) names.add(refOf(txn.Creator) ?? SYSTEM_USER);
  }
  names.delete(NOBODY);
  const list = [...names];
  for (let i = 0; i < list.length; i += 4) await Promise.all(list.slice(i, i + 4).map((n) => w.people.user(n)));
  return read;
}

function push<V>(map: Map<string, V[]>, key: string, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

const refOf = (v: unknown): string | null => (v && typeof v === 'object' && 'id' in v ? String((v as { id: unknown }).id) : null);
const clip = (text: string, max: number) => (text.length > max ? text.slice(0, max) : text);

/** A MIME part's headers, by lower-case name (the first of each). */
function headersOf(part: RtRecord): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of String(part.Headers ?? '').split('\n')) {
    const at = line.indexOf(':');
    if (at > 0 && !out.has(line.slice(0, at).toLowerCase())) out.set(line.slice(0, at).toLowerCase(), line.slice(at + 1).trim());
  }
  return out;
}

/** Where a message came in, from RT's X-RT-Interface header. */
function sourceOfInterface(value: string | undefined): string {
  if (value === 'Email') return 'email';
  if (value === 'Web' || value === 'Mobile') return 'web';
  return 'api';
}

const MESSAGES: readonly string[] = ['Create', 'Correspond', 'Comment'];
const isMessage = (txn: RtRecord) => MESSAGES.includes(String(txn.Type));
const isStatusChange = (txn: RtRecord) => txn.Type === 'Status' || (txn.Type === 'Set' && txn.Field === 'Status');

/** A part copied as a file: one with a file name that is not an image embedded in an HTML body (inline, with a Content-ID). */
function isFile(part: RtRecord, headers: Map<string, string>): boolean {
  if (!part.Filename) return false;
  return !(headers.has('content-id') && /^inline\b/i.test(headers.get('content-disposition') ?? 'inline'));
}

/** A ticket with its messages, status changes and files. */
async function writeRtTicket(w: Writer, { t, status, known }: Todo, read: PageRead): Promise<void> {
  const { run, people } = w;
  const version = String(t.LastUpdated);
  const history = read.history.get(t.id) ?? [];
  const messageTypes = new Map(history.filter((x) => isMessage(x)).map((x) => [x.id, String(x.Type)]));
  const parts = [...messageTypes.keys()].flatMap((txn) => read.parts.get(txn) ?? []);
  const partHeaders = new Map(parts.map((p) => [p.id, headersOf(p)]));
  const interfaceOf = new Map<string, string>();
  for (const p of parts) {
    const value = partHeaders.get(p.id)!.get('x-rt-interface');
    if (value && !interfaceOf.has(String(p.TransactionId))) interfaceOf.set(String(p.TransactionId), value);
  }
  const fileParts = parts.filter((p) => isFile(p, partHeaders.get(p.id)!));
  const withFiles = new Set(fileParts.map((p) => String(p.TransactionId)));

  const create = history.find((x) => x.Type === 'Create');
  const comments: ImportedComment[] = [];
  for (const txn of history) {
    const creator = refOf(txn.Creator) ?? SYSTEM_USER;
    const at = String(txn.Created);
    const base = { ref: txn.id, version: at, parentRef: null, links: [], metadata: {}, sourceId: null, cc: [], createdAt: at, updatedAt: at };
    if (txn.Type === 'Correspond' || txn.Type === 'Comment') {
      const text = (read.text.get(txn.id) ?? '').trim();
      comments.push({
        ...base,
        body: clip(text || (withFiles.has(txn.id) ? '(attachments only)' : '(empty message)'), MAX_COMMENT_BODY_LENGTH),
        ...(await people.author(w, creator)),
        isInternal: txn.Type === 'Comment',
        source: sourceOfInterface(interfaceOf.get(txn.id)),
        sourceData: { rt: { transaction: Number(txn.id), type: txn.Type } },
      });
    } else if (isStatusChange(txn)) {
      // Kept as internal notes: who moved the ticket, and when (decision 0125).
      comments.push({
        ...base,
        body: `Status changed from ${String(txn.OldValue) || '(none)'} to ${String(txn.NewValue)}`,
        ...(await people.author(w, creator)),
        isInternal: true,
        source: 'api',
        sourceData: { rt: { transaction: Number(txn.id), type: 'Status', from: txn.OldValue, to: txn.NewValue } },
      });
    }
  }

  const requestor = Array.isArray(t.Requestor) ? refOf(t.Requestor[0]) : null;
  const customerId = requestor ? await people.contact(w, await people.user(requestor)) : null;
  const owner = refOf(t.Owner);
  const assigneeId = owner && owner !== NOBODY ? await memberOf(w, owner, `ticket ${t.id} is left unassigned`) : null;
  const creator = create ? refOf(create.Creator) : null;
  const createdBy = creator && creator !== SYSTEM_USER ? await memberOf(w, creator, 'the tickets they made name no member') : null;
  const due = typeof t.Due === 'string' && !t.Due.startsWith('1970-') ? t.Due : null;
  const body = create ? (read.text.get(create.id) ?? '').trim() : '';

  const ticket: ImportedTicket = {
    brandId: w.brandId,
    ticketNumber: Number(t.id),
    keepNumber: run.options.keepNumbers,
    title: clip(String(t.Subject ?? '').trim() || '(no subject)', MAX_TITLE_LENGTH),
    body: body ? clip(body, MAX_BODY_LENGTH) : null,
    status,
    priority: null,
    assigneeId,
    createdBy,
    customerId,
    categoryId: null,
    tagIds: [],
    links: [],
    customFields: await customFieldsOf(w, t),
    metadata: {},
    source: sourceOfInterface(create ? interfaceOf.get(create.id) : undefined),
    sourceId: null,
    sourceData: { rt: { id: Number(t.id), queue: String(w.queue.Name), url: `${w.from.webUrl}Ticket/Display.html?id=${t.id}` } },
    isSpam: false,
    legalHold: false,
    closeReason: null,
    dueAt: due,
    createdAt: String(t.Created),
    updatedAt: version,
  };

  const files: SourceFile[] = [];
  for (const p of fileParts) {
    const txn = String(p.TransactionId);
    const uploaderName = refOf(history.find((x) => x.id === txn)?.Creator);
    const uploader = uploaderName && uploaderName !== SYSTEM_USER ? await people.user(uploaderName) : null;
    const declared = Number(p.ContentLength);
    files.push({
      ref: p.id,
      commentRef: messageTypes.get(txn) === 'Create' ? null : txn,
      filename: String(p.Filename),
      contentType: String(p.ContentType || 'application/octet-stream')
        .split(';')[0]!
        .trim(),
      uploadedBy: uploader?.privileged ? people.member(uploader, 'their comments keep their name, with no member') : null,
      metadata: {},
      createdAt: String(p.Created),
      updatedAt: String(p.Created),
      sha256: null,
      unavailable: Number.isFinite(declared) && declared > run.options.maxBytes ? new SourceFileTooLarge(run.options.maxBytes).message : undefined,
      stage: (storage, maxBytes) => w.from.stageAttachment(p.id, storage, maxBytes),
    });
  }
  await run.writeTicket({ sourceId: t.id, version }, known, ticket, comments, files);
}

/** The target member of a privileged RT user (by name), else null (noted once). */
async function memberOf(w: Writer, name: string, what: string): Promise<string | null> {
  const u = await w.people.user(name);
  return u.privileged ? w.people.member(u, what) : null;
}

/**
 * Deleted tickets are not copied: RT's searches never show them, so they are found through the
 * transactions that deleted them, and each one of the queues imported is reported.
 */
async function reportDeleted(run: ImportRun<RunState>, from: RtSource, queueIds: ReadonlySet<string>): Promise<void> {
  for (const id of await from.deletedTicketIds(run.options.since)) {
    let t: RtRecord;
    try {
      t = await from.record('ticket', id);
    } catch (err) {
      if (err instanceof SourceFailed && err.status === 404) continue; // shredded since
      throw err;
    }
    if (t.Status !== 'deleted' || !queueIds.has(refOf(t.Queue) ?? '')) continue;
    const known = (await run.mappings('ticket', [id])).get(id);
    const reason = `deleted in Request Tracker${known ? '; the copy imported before stays in the target' : ''}`;
    run.count({ kind: 'ticket', sourceId: id, outcome: 'skipped', targetId: known?.targetId ?? null, reason });
  }
}
