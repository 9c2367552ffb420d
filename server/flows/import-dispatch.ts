import { createHash } from 'node:crypto';
import type { TenantCtx } from '../core/context.js';
import { HttpError } from '../core/errors.js';
import { scanFile } from '../core/scanning.js';
import { newId, ID_PREFIX } from '../core/ids.js';
import { tenantScope } from '../core/model.js';
import * as brands from '../domains/brands/service.js';
import * as categories from '../domains/categories/service.js';
import * as fields from '../domains/fields/service.js';
import * as members from '../domains/members/service.js';
import * as statuses from '../domains/statuses/service.js';
import * as tags from '../domains/tags/service.js';
import * as webhooks from '../domains/webhooks/service.js';
import { CreateBrandBody, UpdateBrandBody } from '../domains/brands/schemas.js';
import { CreateStatusBody } from '../domains/statuses/schemas.js';
import { CreateCategoryBody } from '../domains/categories/schemas.js';
import { CreateFieldBody, UpdateFieldBody } from '../domains/fields/schemas.js';
import { CreateContactBody } from '../domains/contacts/schemas.js';
import { CreateCompanyBody } from '../domains/companies/schemas.js';
import * as companies from '../domains/companies/service.js';
import type { DispatchSource, SourceObject } from '../integrations/import-dispatch-source.js';
import { SourceFileTooLarge } from '../integrations/import-http.js';
import { createBrand } from './brands.js';
import { createCompany, findOrCreateContact, updateCompany, updateContact } from './customers.js';
import * as watchers from './ticket-watchers.js';
import {
  importCtx,
  importObject,
  mappingsOf,
  allMappings,
  nextNumberAtLeast,
  setMergedInto,
  writeTicket,
  type ImportedAttachment,
  type ImportedComment,
  type ImportedTicket,
  type Outcome,
  ticketExists,
} from './import-writer.js';

/**
 * `ticketd import dispatch`: copies an account of a server that speaks ticketd's interface into a
 * ticketd account, through the source's public API (decision 0123). Brands first, then for each
 * brand its statuses, fields, categories, tags, companies, contacts, tickets (with their
 * comments, attachments and watchers; spam ones too) and webhooks (created disabled: their
 * secrets cannot be read).
 *
 * Where the run is lives in import_runs.state, saved after each page: a run that was killed goes
 * on from there when started again (what it wrote of that page is found in the mappings and left
 * alone). The source is never called inside a transaction; each object commits on its own with
 * its mapping (a ticket with its comments and attachments).
 */

export interface DispatchImportOptions {
  /** A ticket keeps the source's number when it is free in the brand. */
  keepNumbers: boolean;
  /** Read and count; write nothing. */
  dryRun: boolean;
  /** Only tickets updated at or after this instant (a final delta before the switch-over). */
  since: string | null;
  /** The upload limit: larger files are skipped and reported. */
  maxBytes: number;
  /** The user's map (--map FILE): source keys taken as keys the target has, instead of being created. */
  map?: ImportMap;
  /** Told of every object (the CLI prints them with --json, and moves its bar). */
  onObject?: (event: ObjectEvent) => void;
  /** Told of notes (an assignee no member of the target, …). */
  onNote?: (note: string) => void;
  /** Told, before the tickets, about how many the source has (for a progress bar; a full run only). */
  onTicketTotal?: (total: number) => void;
}

export interface ObjectEvent {
  kind: string;
  sourceId: string;
  outcome: Outcome | 'skipped';
  targetId: string | null;
  reason?: string;
  /** Tickets: the number in the source and in the target, when they differ. */
  renumbered?: { from: number; to: number };
}

/**
 * `--map FILE`: statuses by key, field definitions by `<entityType>.<key>` (ticket, customer,
 * company), each to a key of the target brand's. A mapped status is not created and the tickets
 * in it take the target's; a mapped ticket field is not created and tickets' customFields carry
 * its value under the target's key. Anything not named is created.
 */
export interface ImportMap {
  statuses?: Record<string, string>;
  fields?: Record<string, string>;
}

export type KindCounts = Record<string, { created: number; updated: number; unchanged: number; skipped: number }>;

export interface ImportReport {
  runId: string | null;
  source: string;
  resumed: boolean;
  dryRun: boolean;
  counts: KindCounts;
  skipped: { kind: string; sourceId: string; reason: string }[];
  renumbered: { sourceId: string; from: number; to: number }[];
  /** What --map mapped instead of creating (once per brand). */
  mapped: { kind: 'status' | 'field'; from: string; to: string }[];
  notes: string[];
  /** Kinds the dispatch source has that this importer does not copy yet. */
  notCopied: string[];
}

/** Where a run is: the brand (by index in the source's list), the phase within it, and the page's cursor. */
interface RunState {
  brand: number;
  phase: number;
  cursor: string | null;
  /** The brand's tickets merged in the source (source ids), merged here once its tickets are in. */
  merges?: { ticket: string; into: string }[];
}

const PHASES = ['statuses', 'fields', 'categories', 'tags', 'companies', 'contacts', 'tickets', 'spam', 'merges', 'numbers', 'webhooks'] as const;
type Phase = (typeof PHASES)[number];

/** At most this many skips and renumberings are listed one by one in the report (all are counted). */
const LISTED = 1000;

const NOT_COPIED = [
  "members (matched by email to the target's: assignees, comment authors, watchers)",
  'blocked sources',
  'rules, macros and views',
  'forms and recurring tickets',
  'mail domains and mailboxes',
  'deleted tickets (the API does not show them)',
  "brands' retention policies (set one on the target deliberately)",
];

/** The properties of a TypeBox object schema present on `from`: what the source shows that an input takes. */
function pick(from: Record<string, unknown>, schema: { properties: Record<string, unknown> }, leave: readonly string[] = []): Record<string, unknown> {
  return Object.fromEntries(
    Object.keys(schema.properties)
      .filter((k) => k in from && from[k] !== undefined && !leave.includes(k))
      .map((k) => [k, from[k]]),
  );
}

/** The version a second run compares: the object's updatedAt, else a digest of what the source showed. */
function versionOf(o: Record<string, unknown>): string {
  if (typeof o.updatedAt === 'string') return o.updatedAt;
  return createHash('sha256').update(JSON.stringify(o)).digest('hex').slice(0, 32);
}

/** A ticket's custom fields with the keys --map maps (`ticket.<key>`) renamed. */
function renamedFields(values: unknown, map: Record<string, string> | undefined): unknown {
  if (!map || !values || typeof values !== 'object' || Array.isArray(values)) return values;
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [map[`ticket.${k}`] ?? k, v]));
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const obj = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

export async function importDispatch(base: TenantCtx, from: DispatchSource, options: DispatchImportOptions): Promise<ImportReport> {
  const ctx = importCtx(base);
  const account = await from.account();
  const source = `dispatch:${new URL(from.url).origin}/${account.id}${account.livemode ? '' : '/test'}`;
  const report: ImportReport = {
    runId: null,
    source,
    resumed: false,
    dryRun: options.dryRun,
    counts: {},
    skipped: [],
    renumbered: [],
    mapped: [],
    notes: [],
    notCopied: NOT_COPIED,
  };
  const count = (e: ObjectEvent) => {
    const c = (report.counts[e.kind] ??= { created: 0, updated: 0, unchanged: 0, skipped: 0 });
    c[e.outcome]++;
    if (e.outcome === 'skipped' && report.skipped.length < LISTED) report.skipped.push({ kind: e.kind, sourceId: e.sourceId, reason: e.reason ?? '' });
    if (e.renumbered && report.renumbered.length < LISTED) report.renumbered.push({ sourceId: e.sourceId, ...e.renumbered });
    options.onObject?.(e);
  };

  const run = options.dryRun ? null : await startRun(ctx, source, options);
  const state: RunState = run?.state ?? { brand: 0, phase: 0, cursor: null };
  if (run) {
    report.runId = run.id;
    report.resumed = run.resumed;
    if (run.resumed) Object.assign(report.counts, run.counts);
  }
  const save = async () => {
    if (run) await saveRun(ctx, run.id, state, report.counts, false);
  };

  // Members are the account's, not imported: the source's are matched to the target's by email.
  const targetMembers = new Map((await members.list(ctx)).map((m) => [m.email.toLowerCase(), m.id]));
  const memberOf = new Map<string, string>();
  for (const m of (await from.page('v1/accounts/me/members', {}, null)).items) {
    const target = targetMembers.get(String(m.email ?? '').toLowerCase());
    if (target) memberOf.set(m.id, target);
  }

  const sourceBrands = await from.brands();
  if (options.onTicketTotal && !options.since) {
    let total = 0;
    for (const b of sourceBrands) total += await from.ticketCount(b.id);
    options.onTicketTotal(total);
  }
  for (; state.brand < sourceBrands.length; state.brand++, state.phase = 0, state.cursor = null) {
    const sb = sourceBrands[state.brand]!;
    const brandId = await importBrand(ctx, source, sb, options, count);
    if (!brandId) continue;
    for (; state.phase < PHASES.length; state.phase++, state.cursor = null) {
      const phase = PHASES[state.phase]!;
      await runPhase(phase);
      await save();
    }

    async function runPhase(phase: Phase): Promise<void> {
      const b = sb.id;
      const w: Writer = {
        ctx,
        source,
        options,
        count,
        brandId: brandId!,
        cache: new Map(),
        mapped: (m) => report.mapped.push(m),
        mergeLater: (m) => (state.merges ??= []).push(m),
      };
      if (phase === 'statuses') for (const s of await from.all(`v1/brands/${b}/statuses`)) await importStatus(w, s);
      if (phase === 'fields') for (const f of await from.fields(b)) await importField(w, f);
      if (phase === 'categories') for (const c of await from.all(`v1/brands/${b}/categories`)) await importSimple(w, 'category', c);
      if (phase === 'tags') for (const t of await from.all(`v1/brands/${b}/tags`)) await importSimple(w, 'tag', t);
      if (phase === 'merges' && !options.dryRun) {
        for (const m of state.merges ?? []) {
          const known = await mappingsOf(ctx, source, 'ticket', [m.ticket, m.into]);
          const [ticket, into] = [known.get(m.ticket)?.targetId, known.get(m.into)?.targetId];
          if (!ticket) continue; // skipped, and reported, with its ticket
          if (!into) count({ kind: 'merge', sourceId: m.ticket, outcome: 'skipped', targetId: ticket, reason: `the ticket it was merged into (${m.into}) was not imported` });
          else count({ kind: 'merge', sourceId: m.ticket, outcome: (await setMergedInto(ctx, brandId!, ticket, into)) ? 'created' : 'unchanged', targetId: ticket });
        }
        state.merges = [];
      }
      if (phase === 'numbers' && options.keepNumbers && !options.dryRun && typeof sb.nextTicketNumber === 'number') await nextNumberAtLeast(ctx, brandId!, sb.nextTicketNumber);
      if (phase === 'webhooks') {
        const hooks = await from.all(`v1/brands/${b}/webhooks`);
        for (const h of hooks) await importWebhook(w, h);
        if (hooks.length)
          report.notes.push(
            `${hooks.length} webhook(s) of brand ${String(sb.name)} were created disabled: the source never shows their secrets. Set a secret (rotate it) and enable each one.`,
          );
      }
      if (phase === 'companies' || phase === 'contacts' || phase === 'tickets' || phase === 'spam') {
        const path = phase === 'spam' ? 'tickets' : phase;
        const paged = (cursor: string | null) =>
          phase === 'tickets' || phase === 'spam'
            ? from.page(
                `v1/brands/${b}/tickets`,
                { ...(options.since ? { sort: 'updatedAt', order: 'desc' } : { sort: 'createdAt', order: 'asc' }), status: 'all', isSpam: phase === 'spam', limit: 100 },
                cursor,
              )
            : from.page(`v1/brands/${b}/${path}`, { sort: 'createdAt', order: 'asc', limit: 100, ...(phase === 'contacts' ? { hideBlocked: false } : {}) }, cursor);
        for (;;) {
          const page = await paged(state.cursor);
          let older = false;
          for (const item of page.items) {
            if (phase === 'companies') await importCompany(w, item);
            else if (phase === 'contacts') await importContact(w, item);
            else {
              if (options.since && String(item.updatedAt) < options.since) {
                older = true;
                break;
              }
              await importTicket(w, from, sb.id, item, memberOf);
            }
          }
          if (!page.nextCursor || older) break;
          state.cursor = page.nextCursor;
          await save();
        }
      }
    }
  }
  if (run) await saveRun(ctx, run.id, state, report.counts, true);
  return report;
}

// ---------------------------------------------------------------------------------------------
// The run's row.

/**
 * The run to go on with: the source's latest unfinished run made with the same options (its
 * cursors belong to its listing order: a delta never takes over an interrupted full run, nor the
 * other way round), else a new one.
 */
async function startRun(ctx: TenantCtx, source: string, options: DispatchImportOptions): Promise<{ id: string; state: RunState; counts: KindCounts; resumed: boolean }> {
  const asked = { keepNumbers: options.keepNumbers, since: options.since, map: options.map ?? null };
  const { rows } = (await ctx.db.raw(
    `select r.id, r.state, r.counts from import_runs r where ? and r.source = ? and r.finished_at is null and r.options = ?::jsonb order by r.started_at desc limit 1`,
    [tenantScope(ctx, 'r'), source, JSON.stringify(asked)],
  )) as { rows: { id: string; state: RunState; counts: KindCounts }[] };
  if (rows[0]) return { ...rows[0], resumed: true };
  const id = newId(ID_PREFIX.importRun);
  const state: RunState = { brand: 0, phase: 0, cursor: null };
  await ctx.db.raw(`insert into import_runs (account_id, livemode, id, source, options, state) values (?, ?, ?, ?, ?::jsonb, ?::jsonb)`, [
    ctx.accountId,
    ctx.livemode,
    id,
    source,
    JSON.stringify(asked),
    JSON.stringify(state),
  ]);
  return { id, state, counts: {}, resumed: false };
}

async function saveRun(ctx: TenantCtx, id: string, state: RunState, counts: KindCounts, finished: boolean): Promise<void> {
  await ctx.db.raw(`update import_runs r set state = ?::jsonb, counts = ?::jsonb, updated_at = now(), finished_at = case when ? then now() end where ? and r.id = ?`, [
    JSON.stringify(state),
    JSON.stringify(counts),
    finished,
    tenantScope(ctx, 'r'),
    id,
  ]);
}

// ---------------------------------------------------------------------------------------------
// Each kind.

interface Writer {
  ctx: TenantCtx;
  source: string;
  options: DispatchImportOptions;
  count: (e: ObjectEvent) => void;
  brandId: string;
  /** Mappings read once in the phase (allMappingsCached). */
  cache: Map<string, Map<string, string>>;
  mapped: (m: ImportReport['mapped'][number]) => void;
  /** A ticket to merge into another once the brand's tickets are all in. */
  mergeLater: (m: { ticket: string; into: string }) => void;
}

/** The outcome a dry run reports: what a real run would do, from the mappings alone. */
async function wouldDo(w: Pick<Writer, 'ctx' | 'source'>, kind: string, sourceId: string, version: string): Promise<{ outcome: Outcome; targetId: string | null }> {
  const known = (await mappingsOf(w.ctx, w.source, kind, [sourceId])).get(sourceId);
  if (!known) return { outcome: 'created', targetId: null };
  return { outcome: known.version === version ? 'unchanged' : 'updated', targetId: known.targetId };
}

/** One object through importObject (or counted only, in a dry run); refusals of the target are skipped and reported. */
async function one(
  w: Pick<Writer, 'ctx' | 'source' | 'options' | 'count'>,
  kind: string,
  o: SourceObject,
  write: { create(tx: TenantCtx): Promise<string>; update(tx: TenantCtx, targetId: string): Promise<void> },
): Promise<string | null> {
  const version = versionOf(o);
  try {
    const done = w.options.dryRun
      ? await wouldDo(w, kind, o.id, version)
      : await importObject(w.ctx, { source: w.source, kind, sourceId: o.id, version }, (await mappingsOf(w.ctx, w.source, kind, [o.id])).get(o.id), write);
    w.count({ kind, sourceId: o.id, outcome: done.outcome, targetId: done.targetId });
    return done.targetId;
  } catch (err) {
    if (!(err instanceof HttpError) || err.statusCode >= 500) throw err;
    w.count({ kind, sourceId: o.id, outcome: 'skipped', targetId: null, reason: `the target refused it: ${err.message}` });
    return null;
  }
}

/**
 * Not taken from a source brand: its ticket counter (numbers are kept or renumbered per ticket),
 * and its retention policy, which would start removing the imported history at once: the target's
 * operator sets one deliberately.
 */
const LEFT_ON_BRANDS = ['ticketNumberStart', 'retention'];

/** A brand: a target brand with the same slug is taken as the same brand (its settings updated). */
async function importBrand(ctx: TenantCtx, source: string, sb: SourceObject, options: DispatchImportOptions, count: (e: ObjectEvent) => void): Promise<string | null> {
  const update = async (tx: TenantCtx, id: string) => {
    await brands.update(tx, id, pick(sb, UpdateBrandBody, LEFT_ON_BRANDS) as never);
  };
  const id = await one({ ctx, source, options, count }, 'brand', sb, {
    create: async (tx) => {
      const same = (await brands.list(tx)).find((b) => b.slug === sb.slug);
      if (same) {
        await update(tx, same.id);
        return same.id;
      }
      return (await createBrand(tx, pick(sb, CreateBrandBody, LEFT_ON_BRANDS) as never)).id;
    },
    update,
  });
  // A dry run of a new brand writes nothing: its contents are counted as new without it.
  if (!id && options.dryRun) return `dry-run:${sb.id}`;
  return id;
}

/** A status: matched by key (every brand has the system ones). */
async function importStatus(w: Writer, s: SourceObject): Promise<void> {
  const to = w.options.map?.statuses?.[String(s.key)];
  if (to !== undefined) {
    // A new brand of a dry run has no statuses to check the map against yet: its system ones are known.
    const known = w.options.dryRun && w.brandId.startsWith('dry-run:') ? null : await statuses.list(w.ctx, w.brandId);
    if (known && !known.some((x) => x.key === to)) {
      w.count({ kind: 'status', sourceId: s.id, outcome: 'skipped', targetId: null, reason: `--map names ${to}, no status of the target brand` });
    } else w.mapped({ kind: 'status', from: String(s.key), to });
    return;
  }
  const byKey = async (tx: TenantCtx) => (w.options.dryRun ? undefined : (await statuses.list(tx, w.brandId)).find((x) => x.key === s.key));
  const fieldsOf = (isSystem: boolean) => pick(s, CreateStatusBody, isSystem ? ['key'] : []);
  await one(w, 'status', s, {
    create: async (tx) => {
      const same = await byKey(tx);
      if (same) {
        await statuses.update(tx, w.brandId, same.id, fieldsOf(same.isSystem) as never);
        return same.id;
      }
      return (await statuses.create(tx, w.brandId, fieldsOf(false) as never)).id;
    },
    update: async (tx, id) => {
      const same = (await statuses.list(tx, w.brandId)).find((x) => x.id === id);
      await statuses.update(tx, w.brandId, id, fieldsOf(same?.isSystem ?? false) as never);
    },
  });
}

/** A field definition: matched by entity type and key. */
async function importField(w: Writer, f: SourceObject & { entityType: string }): Promise<void> {
  const entity = f.entityType;
  const to = w.options.map?.fields?.[`${entity}.${String(f.key)}`];
  if (to !== undefined) {
    w.mapped({ kind: 'field', from: `${entity}.${String(f.key)}`, to: `${entity}.${to}` });
    return;
  }
  await one(w, 'field', f, {
    create: async (tx) => {
      const same = (await fields.list(tx, w.brandId, entity)).find((x) => x.key === f.key);
      if (same) {
        await fields.update(tx, w.brandId, entity, same.key, pick(f, UpdateFieldBody) as never);
        return same.id;
      }
      return (await fields.create(tx, w.brandId, entity, pick(f, CreateFieldBody) as never)).id;
    },
    update: async (tx, id) => {
      const same = (await fields.list(tx, w.brandId, entity)).find((x) => x.id === id);
      if (!same) throw new HttpError(404, 'not_found', 'Field not found');
      await fields.update(tx, w.brandId, entity, same.key, pick(f, UpdateFieldBody) as never);
    },
  });
}

/** A category or a tag: matched by name, any case (both are unique so within a brand). */
async function importSimple(w: Writer, kind: 'category' | 'tag', o: SourceObject): Promise<void> {
  const name = String(o.name ?? '').toLowerCase();
  const input = kind === 'category' ? pick(o, CreateCategoryBody) : { name: o.name, color: o.color };
  await one(w, kind, o, {
    create: async (tx) => {
      const list = kind === 'category' ? await categories.list(tx, w.brandId) : await tags.list(tx, w.brandId);
      const same = list.find((x) => x.name.toLowerCase() === name);
      if (same) {
        if (kind === 'category') await categories.update(tx, w.brandId, same.id, input as never);
        else await tags.update(tx, w.brandId, same.id, input as never);
        return same.id;
      }
      return kind === 'category' ? (await categories.create(tx, w.brandId, input as never)).id : (await tags.create(tx, w.brandId, input as never)).id;
    },
    update: async (tx, id) => {
      if (kind === 'category') await categories.update(tx, w.brandId, id, input as never);
      else await tags.update(tx, w.brandId, id, input as never);
    },
  });
}

/** A company: matched by domain when it has one. */
async function importCompany(w: Writer, o: SourceObject): Promise<void> {
  const input = pick(o, CreateCompanyBody);
  await one(w, 'company', o, {
    create: async (tx) => {
      const same = typeof o.domain === 'string' ? await companies.idForDomain(tx, w.brandId, o.domain) : null;
      if (same) {
        await updateCompany(tx, w.brandId, same, input as never);
        return same;
      }
      return (await createCompany(tx, w.brandId, input as never)).id;
    },
    update: async (tx, id) => {
      await updateCompany(tx, w.brandId, id, input as never);
    },
  });
}

/** A contact: matched by email (unique in a brand); its company is the import's of the source's. */
async function importContact(w: Writer, o: SourceObject): Promise<void> {
  const companyId = typeof o.companyId === 'string' ? ((await allMappingsCached(w, 'company')).get(o.companyId) ?? null) : null;
  const input = { ...pick(o, CreateContactBody, ['companyId']), companyId };
  await one(w, 'contact', o, {
    create: async (tx) => {
      const found = await findOrCreateContact(tx, w.brandId, String(o.email), str(o.name));
      await updateContact(tx, w.brandId, found.id, input as never);
      return found.id;
    },
    update: async (tx, id) => {
      await updateContact(tx, w.brandId, id, input as never);
    },
  });
}

/** A small kind's mappings, read once per brand's phase. */
async function allMappingsCached(w: Writer, kind: string): Promise<Map<string, string>> {
  let map = w.cache.get(kind);
  if (!map) w.cache.set(kind, (map = await allMappings(w.ctx, w.source, kind)));
  return map;
}

/** A webhook: created disabled, with a secret of the target's making (the source never shows its own). */
async function importWebhook(w: Writer, o: SourceObject): Promise<void> {
  const policy = { allowPrivate: w.ctx.services.config.webhookAllowPrivate };
  await one(w, 'webhook', o, {
    create: async (tx) => (await webhooks.create(tx, policy, w.brandId, { url: String(o.url), events: o.events as never, enabled: false })).id,
    update: async (tx, id) => {
      await webhooks.update(tx, policy, w.brandId, id, { url: String(o.url), events: o.events as never });
    },
  });
}

/** A ticket with its comments, attachments and watchers. */
async function importTicket(w: Writer, from: DispatchSource, sourceBrandId: string, t: SourceObject, memberOf: ReadonlyMap<string, string>): Promise<void> {
  const version = versionOf(t);
  const known = (await mappingsOf(w.ctx, w.source, 'ticket', [t.id])).get(t.id);
  // Merged ones (met again too: a run killed before its merges phase) are merged once the brand's tickets are in.
  if (typeof t.mergedIntoId === 'string' && !w.options.dryRun) w.mergeLater({ ticket: t.id, into: t.mergedIntoId });
  if (known && known.version === version) {
    w.count({ kind: 'ticket', sourceId: t.id, outcome: 'unchanged', targetId: known.targetId });
    return;
  }
  if (w.options.dryRun) {
    w.count({ kind: 'ticket', sourceId: t.id, outcome: known ? 'updated' : 'created', targetId: known?.targetId ?? null });
    return;
  }
  // Its status came with the brand's statuses, unless the target refused that one.
  let keys = w.cache.get('statusKeys');
  if (!keys) w.cache.set('statusKeys', (keys = new Map((await statuses.list(w.ctx, w.brandId)).map((s) => [s.key, s.id]))));
  const status = w.options.map?.statuses?.[String(t.status)] ?? String(t.status);
  if (!keys.has(status)) {
    w.count({ kind: 'ticket', sourceId: t.id, outcome: 'skipped', targetId: null, reason: `its status ${status} is no status of the target brand` });
    return;
  }
  const mapped = async (kind: string, id: unknown) => (typeof id === 'string' ? ((await mappingsOf(w.ctx, w.source, kind, [id])).get(id)?.targetId ?? null) : null);
  let customerId = await mapped('contact', t.customerId);
  const customer = obj(t.customer);
  if (!customerId && typeof customer.email === 'string') customerId = (await findOrCreateContact(w.ctx, w.brandId, customer.email, str(customer.name))).id;
  const assignee = typeof t.assigneeId === 'string' ? (memberOf.get(t.assigneeId) ?? null) : null;
  if (t.assigneeId && !assignee) w.options.onNote?.(`ticket ${t.id}: its assignee ${String(t.assigneeId)} is no member of the target (matched by email): left unassigned`);
  const tagList = Array.isArray(t.tags) ? (t.tags as { id: string }[]) : [];
  const tagMap = await mappingsOf(
    w.ctx,
    w.source,
    'tag',
    tagList.map((g) => g.id),
  );
  const ticket: ImportedTicket = {
    brandId: w.brandId,
    ticketNumber: typeof t.ticketNumber === 'number' ? t.ticketNumber : null,
    keepNumber: w.options.keepNumbers,
    title: String(t.title),
    body: str(t.body),
    status,
    priority: str(t.priority),
    assigneeId: assignee,
    createdBy: str(t.createdBy),
    customerId,
    categoryId: await mapped('category', t.categoryId),
    tagIds: tagList.map((g) => tagMap.get(g.id)?.targetId).filter((id): id is string => Boolean(id)),
    links: Array.isArray(t.links) ? t.links : [],
    customFields: renamedFields(t.customFields ?? null, w.options.map?.fields),
    metadata: obj(t.metadata),
    source: String(t.source ?? 'api'),
    sourceId: str(t.sourceId),
    sourceData: t.sourceData ? obj(t.sourceData) : null,
    isSpam: t.isSpam === true,
    legalHold: t.legalHold === true,
    closeReason: str(t.closeReason),
    dueAt: str(t.dueAt),
    createdAt: String(t.createdAt),
    updatedAt: String(t.updatedAt),
  };
  const sourceComments = await from.comments(sourceBrandId, t.id);
  const comments: ImportedComment[] = sourceComments.map((c) => ({
    ref: c.id,
    version: versionOf({ updatedAt: c.updatedAt }),
    parentRef: str(c.parentId),
    body: String(c.body),
    authorId: typeof c.authorId === 'string' ? (memberOf.get(c.authorId) ?? c.authorId) : null,
    authorName: str(c.authorName),
    authorType: String(c.authorType ?? 'AGENT'),
    isInternal: c.isInternal === true,
    links: Array.isArray(c.links) ? c.links : [],
    metadata: obj(c.metadata),
    source: String(c.source ?? 'api'),
    sourceId: str(c.sourceId),
    sourceData: c.sourceData ? obj(c.sourceData) : null,
    cc: Array.isArray(c.cc) ? (c.cc as string[]) : [],
    createdAt: String(c.createdAt),
    updatedAt: String(c.updatedAt),
  }));

  // Files not copied yet are read before the ticket's transaction (none is held open meanwhile).
  const sourceFiles = await from.attachments(sourceBrandId, t.id);
  // A ticket deleted in the target since is written again whole: its files too.
  const knownFiles =
    known && (await ticketExists(w.ctx, w.brandId, known.targetId))
      ? await mappingsOf(
          w.ctx,
          w.source,
          'attachment',
          sourceFiles.map((f) => f.id),
        )
      : new Map();
  const files: ImportedAttachment[] = [];
  try {
    for (const f of sourceFiles) {
      if (knownFiles.has(f.id)) continue;
      if (f.status !== 'UPLOADED') {
        w.count({ kind: 'attachment', sourceId: f.id, outcome: 'skipped', targetId: null, reason: `its upload is ${String(f.status)} in the source` });
        continue;
      }
      try {
        const staged = await from.stageAttachment(sourceBrandId, t.id, f.id, w.ctx.services.storage, w.options.maxBytes);
        if (typeof f.sha256 === 'string' && f.sha256 !== staged.sha256) {
          await staged.discard();
          w.count({ kind: 'attachment', sourceId: f.id, outcome: 'skipped', targetId: null, reason: 'its bytes did not match the checksum the source gave' });
          continue;
        }
        // Scanned as an upload is; the scanner down under scanFailure refuse stops the run (503), to be resumed.
        const scan = await scanFile(w.ctx.services, () => staged.read(), { importedAttachment: f.id }).catch(async (err: unknown) => {
          await staged.discard();
          throw err;
        });
        if ('infected' in scan) {
          await staged.discard();
          w.count({ kind: 'attachment', sourceId: f.id, outcome: 'skipped', targetId: null, reason: `it contains a virus (${scan.infected})` });
          continue;
        }
        files.push({
          ref: f.id,
          commentRef: str(f.commentId),
          filename: String(f.filename),
          contentType: String(f.contentType),
          uploadedBy: str(f.uploadedBy),
          metadata: obj(f.metadata),
          createdAt: String(f.createdAt),
          updatedAt: String(f.updatedAt),
          staged,
          scanStatus: scan.status,
        });
      } catch (err) {
        if (!(err instanceof SourceFileTooLarge)) throw err;
        w.count({ kind: 'attachment', sourceId: f.id, outcome: 'skipped', targetId: null, reason: err.message });
      }
    }
  } catch (err) {
    await Promise.all(files.map((f) => f.staged.discard()));
    throw err;
  }

  let written;
  try {
    written = await writeTicket(w.ctx, w.source, { sourceId: t.id, version }, known, ticket, comments, files);
  } catch (err) {
    if (!(err instanceof HttpError) || err.statusCode >= 500) throw err;
    w.count({ kind: 'ticket', sourceId: t.id, outcome: 'skipped', targetId: null, reason: `the target refused it: ${err.message}` });
    return;
  }
  for (const [kind, c] of [
    ['comment', written.comments],
    ['attachment', { ...written.attachments, updated: 0 }],
  ] as const) {
    const counts = { created: c.created, updated: c.updated, unchanged: c.unchanged };
    for (const outcome of ['created', 'updated', 'unchanged'] as const)
      for (let i = 0; i < counts[outcome]; i++) w.count({ kind, sourceId: t.id, outcome, targetId: written.ticketId });
  }
  const renumbered = ticket.ticketNumber !== null && ticket.ticketNumber !== written.ticketNumber ? { from: ticket.ticketNumber, to: written.ticketNumber } : undefined;
  w.count({ kind: 'ticket', sourceId: t.id, outcome: written.outcome, targetId: written.ticketId, renumbered });

  // Watchers: members of the target (matched by email) only.
  for (const wa of await from.watchers(sourceBrandId, t.id)) {
    const memberId = memberOf.get(String(wa.memberId));
    if (!memberId) {
      w.count({
        kind: 'watcher',
        sourceId: `${t.id}/${String(wa.memberId)}`,
        outcome: 'skipped',
        targetId: null,
        reason: 'the watcher is no member of the target (matched by email)',
      });
      continue;
    }
    const { created } = await watchers.add(w.ctx, w.brandId, written.ticketId, {
      memberId,
      notifyOnComment: wa.notifyOnComment !== false,
      notifyOnStatusChange: wa.notifyOnStatusChange !== false,
    });
    w.count({ kind: 'watcher', sourceId: `${t.id}/${String(wa.memberId)}`, outcome: created ? 'created' : 'unchanged', targetId: memberId });
  }
}
