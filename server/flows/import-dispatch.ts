import { withTx, type TenantCtx } from '../core/context.js';
import { HttpError } from '../core/errors.js';
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
import { CreateContactBody, type CreateContactInput } from '../domains/contacts/schemas.js';
import { CreateCompanyBody } from '../domains/companies/schemas.js';
import * as companies from '../domains/companies/service.js';
import * as contacts from '../domains/contacts/service.js';
import { ExportUnavailable, type DispatchSource, type SourceObject, type SourceTicket } from '../integrations/import-dispatch-source.js';
import { createBrand } from './brands.js';
import { createCompany, createContact, findOrCreateContact, updateCompany, updateContact } from './customers.js';
import * as watchers from './ticket-watchers.js';
import pMap from 'p-map';
import { ImportRun, IN_FLIGHT, versionOf, type ImportOptions, type ImportReport, type SourceFile, type TicketToWrite } from './import-run.js';
import { allMappings, nextNumberAtLeast, rememberMany, setMergedInto, type ImportedComment, type ImportedTicket, type Mapping } from './import-writer.js';

/**
 * `ticketd import dispatch`: copies an account of a server that speaks ticketd's interface into a
 * ticketd account, through the source's public API (decision 0123). Brands first, then for each
 * brand its statuses, fields, categories, tags, companies, contacts, tickets (with their
 * comments, attachments and watchers; spam ones too) and webhooks (created disabled: their
 * secrets cannot be read).
 *
 * Where the run is lives in import_runs.state, saved after each page: a run that was killed goes
 * on from there when started again (what it wrote of that page is found in the mappings and left
 * alone). The source is never called inside a transaction; each object commits with its mapping
 * (a ticket with its comments and attachments; the contacts new to the target a page together),
 * up to IN_FLIGHT of a page side by side.
 */

/** Where a run is: the brand (by index in the source's list), the phase within it, and the page's cursor. */
interface RunState {
  brand: number;
  phase: number;
  /** Where the phase is: the list's cursor, or the last ticket written when read through the export. */
  cursor: string | null;
  /** The source has no ticket export (the hosted product): its tickets are read from the list. */
  listed?: boolean;
  /** The brand's tickets merged in the source (source ids), merged here once its tickets are in. */
  merges?: { ticket: string; into: string }[];
}

const PHASES = ['statuses', 'fields', 'categories', 'tags', 'companies', 'contacts', 'tickets', 'spam', 'merges', 'numbers', 'webhooks'] as const;
type Phase = (typeof PHASES)[number];

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

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const obj = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

/** `pageSize`: tickets read and written together (the list's pages hold at most 100). */
export async function importDispatch(base: TenantCtx, from: DispatchSource, options: ImportOptions, pageSize = 100): Promise<ImportReport> {
  const account = await from.account();
  const source = `dispatch:${new URL(from.url).origin}/${account.id}${account.livemode ? '' : '/test'}`;
  const run = await ImportRun.open<RunState>(base, source, options, { brand: 0, phase: 0, cursor: null }, NOT_COPIED);
  const { ctx, state } = run;

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
    const brandId = await importBrand(run, sb);
    if (!brandId) continue;
    for (; state.phase < PHASES.length; state.phase++, state.cursor = null) {
      const phase = PHASES[state.phase]!;
      await runPhase(phase);
      await run.save();
    }

    async function runPhase(phase: Phase): Promise<void> {
      const b = sb.id;
      const w: Writer = { run, brandId: brandId!, cache: new Map(), mergeLater: (m) => (state.merges ??= []).push(m) };
      if (phase === 'statuses') for (const s of await from.all(`v1/brands/${b}/statuses`)) await importStatus(w, s);
      if (phase === 'fields') for (const f of await from.fields(b)) await importField(w, f);
      if (phase === 'categories') for (const c of await from.all(`v1/brands/${b}/categories`)) await importSimple(w, 'category', c);
      if (phase === 'tags') for (const t of await from.all(`v1/brands/${b}/tags`)) await importSimple(w, 'tag', t);
      if (phase === 'merges' && !options.dryRun) {
        for (const m of state.merges ?? []) {
          const known = await run.mappings('ticket', [m.ticket, m.into]);
          const [ticket, into] = [known.get(m.ticket)?.targetId, known.get(m.into)?.targetId];
          if (!ticket) continue; // skipped, and reported, with its ticket
          if (!into) run.count({ kind: 'merge', sourceId: m.ticket, outcome: 'skipped', targetId: ticket, reason: `the ticket it was merged into (${m.into}) was not imported` });
          else run.count({ kind: 'merge', sourceId: m.ticket, outcome: (await setMergedInto(ctx, brandId!, ticket, into)) ? 'created' : 'unchanged', targetId: ticket });
        }
        state.merges = [];
      }
      if (phase === 'numbers' && options.keepNumbers && !options.dryRun && typeof sb.nextTicketNumber === 'number') await nextNumberAtLeast(ctx, brandId!, sb.nextTicketNumber);
      if (phase === 'webhooks') {
        const hooks = await from.all(`v1/brands/${b}/webhooks`);
        for (const h of hooks) await importWebhook(w, h);
        if (hooks.length)
          run.report.notes.push(
            `${hooks.length} webhook(s) of brand ${String(sb.name)} were created disabled: the source never shows their secrets. Set a secret (rotate it) and enable each one.`,
          );
      }
      if ((phase === 'tickets' || phase === 'spam') && !options.since && !state.listed) {
        // A full run reads a ticketd source's tickets through its export: one request, with their comments and watchers.
        try {
          return await importExported(w, from, sb.id, memberOf, phase === 'spam', pageSize);
        } catch (err) {
          if (!(err instanceof ExportUnavailable)) throw err;
          state.listed = true;
        }
      }
      if (phase === 'companies' || phase === 'contacts' || phase === 'tickets' || phase === 'spam') {
        const path = phase === 'spam' ? 'tickets' : phase;
        const paged = (cursor: string | null) =>
          phase === 'tickets' || phase === 'spam'
            ? from.page(
                `v1/brands/${b}/tickets`,
                {
                  ...(options.since ? { sort: 'updatedAt', order: 'desc' } : { sort: 'createdAt', order: 'asc' }),
                  status: 'all',
                  isSpam: phase === 'spam',
                  limit: Math.min(pageSize, 100),
                },
                cursor,
              )
            : from.page(`v1/brands/${b}/${path}`, { sort: 'createdAt', order: 'asc', limit: 100, ...(phase === 'contacts' ? { hideBlocked: false } : {}) }, cursor);
        for (;;) {
          const page = await paged(state.cursor);
          // Sorted newest first by updatedAt with --since: the first older one ends the delta.
          const older = phase === 'tickets' || phase === 'spam' ? page.items.findIndex((item) => options.since !== null && String(item.updatedAt) < options.since) : -1;
          const items = older === -1 ? page.items : page.items.slice(0, older);
          if (phase === 'companies') await pMap(items, (item) => importCompany(w, item), { concurrency: IN_FLIGHT });
          else if (phase === 'contacts') await importContacts(w, items);
          else
            await importTickets(
              w,
              from,
              sb.id,
              items.map((ticket) => ({ ticket })),
              memberOf,
            );
          if (!page.nextCursor || older !== -1) break;
          state.cursor = page.nextCursor;
          await run.save();
        }
      }
    }
  }
  return run.finish();
}

// ---------------------------------------------------------------------------------------------
// Each kind.

interface Writer {
  run: ImportRun<RunState>;
  brandId: string;
  /** Mappings read once in the phase (allMappingsCached). */
  cache: Map<string, Map<string, string>>;
  /** A ticket to merge into another once the brand's tickets are all in. */
  mergeLater: (m: { ticket: string; into: string }) => void;
}

/** One reference object: its source id and version from what the source shows. */
function one(w: Writer, kind: string, o: SourceObject, write: Parameters<ImportRun<RunState>['one']>[3]): Promise<string | null> {
  return w.run.one(kind, o.id, versionOf(o), write);
}

/**
 * Not taken from a source brand: its ticket counter (numbers are kept or renumbered per ticket),
 * and its retention policy, which would start removing the imported history at once: the target's
 * operator sets one deliberately.
 */
const LEFT_ON_BRANDS = ['ticketNumberStart', 'retention'];

/** A brand: a target brand with the same slug is taken as the same brand (its settings updated). */
async function importBrand(run: ImportRun<RunState>, sb: SourceObject): Promise<string | null> {
  const update = async (tx: TenantCtx, id: string) => {
    await brands.update(tx, id, pick(sb, UpdateBrandBody, LEFT_ON_BRANDS) as never);
  };
  const id = await run.one('brand', sb.id, versionOf(sb), {
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
  if (!id && run.options.dryRun) return `dry-run:${sb.id}`;
  return id;
}

/** A status: matched by key (every brand has the system ones). */
async function importStatus(w: Writer, s: SourceObject): Promise<void> {
  const to = w.run.options.map?.statuses?.[String(s.key)];
  if (to !== undefined) {
    // A new brand of a dry run has no statuses to check the map against yet: its system ones are known.
    const known = w.run.options.dryRun && w.brandId.startsWith('dry-run:') ? null : await statuses.list(w.run.ctx, w.brandId);
    if (known && !known.some((x) => x.key === to)) {
      w.run.count({ kind: 'status', sourceId: s.id, outcome: 'skipped', targetId: null, reason: `--map names ${to}, no status of the target brand` });
    } else w.run.mapped({ kind: 'status', from: String(s.key), to });
    return;
  }
  if (w.run.options.map?.unmapped === 'skip' && !(await targetHas(w, 'status', String(s.key)))) {
    w.run.count({ kind: 'status', sourceId: s.id, outcome: 'skipped', targetId: null, reason: UNMAPPED });
    return;
  }
  const byKey = async (tx: TenantCtx) => (w.run.options.dryRun ? undefined : (await statuses.list(tx, w.brandId)).find((x) => x.key === s.key));
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
  const to = w.run.options.map?.fields?.[`${entity}.${String(f.key)}`];
  if (to !== undefined) {
    w.run.mapped({ kind: 'field', from: `${entity}.${String(f.key)}`, to: `${entity}.${to}` });
    return;
  }
  if (w.run.options.map?.unmapped === 'skip' && !(await targetHas(w, `${entity}.field`, String(f.key)))) {
    w.run.count({ kind: 'field', sourceId: f.id, outcome: 'skipped', targetId: null, reason: UNMAPPED });
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

const UNMAPPED = '--map does not name it, the target brand lacks it, and unmapped is skip';

/** Whether the target brand has a status (`status`) or a field of an entity (`<entity>.field`) of this key (read once a phase). */
async function targetHas(w: Writer, kind: string, key: string): Promise<boolean> {
  if (w.brandId.startsWith('dry-run:')) return kind === 'status' && ['open', 'pending', 'resolved', 'closed'].includes(key);
  let keys = w.cache.get(`target:${kind}`);
  if (!keys) {
    const list = kind === 'status' ? await statuses.list(w.run.ctx, w.brandId) : await fields.list(w.run.ctx, w.brandId, kind.slice(0, -'.field'.length));
    w.cache.set(`target:${kind}`, (keys = new Map(list.map((x) => [x.key, x.id]))));
  }
  return keys.has(key);
}

/**
 * A ticket's custom fields with the keys --map maps (`ticket.<key>`) renamed; with unmapped
 * skip, values of fields the target brand lacks are left out.
 */
async function ticketFields(w: Writer, values: unknown): Promise<unknown> {
  const map = w.run.options.map;
  if (!map || !values || typeof values !== 'object' || Array.isArray(values)) return values;
  const renamed = Object.entries(values).map(([k, v]) => [map.fields?.[`ticket.${k}`] ?? k, v] as const);
  const kept = [];
  for (const [k, v] of renamed) if (map.unmapped !== 'skip' || (await targetHas(w, 'ticket.field', k))) kept.push([k, v] as const);
  return Object.fromEntries(kept);
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

/**
 * A page of contacts: those new to the target (by mapping and by email) made together in one
 * transaction with their mappings; the rest (changed since, the target's own by email, or
 * refused together) one by one.
 */
async function importContacts(w: Writer, page: readonly SourceObject[]): Promise<void> {
  const { run } = w;
  const known = await run.mappings(
    'contact',
    page.map((o) => o.id),
  );
  const fresh = page.filter((o) => !known.has(o.id));
  const taken =
    run.options.dryRun || !fresh.length
      ? new Map<string, string>()
      : await contacts.idsForEmails(
          run.ctx,
          w.brandId,
          fresh.map((o) => String(o.email)),
        );
  const together = run.options.dryRun ? [] : fresh.filter((o) => !taken.has(String(o.email).trim().toLowerCase()));
  const made = new Set<string>();
  if (together.length) {
    const companyOf = await allMappingsCached(w, 'company');
    try {
      const rows = await withTx(run.ctx, async (tx) => {
        const ids = await contacts.createMany(
          tx,
          w.brandId,
          together.map((o) => ({ ...(pick(o, CreateContactBody, ['companyId']) as never as CreateContactInput), companyId: companyOf.get(String(o.companyId)) ?? null })),
        );
        const written = together.flatMap((o) => {
          const id = ids.get(String(o.email).trim().toLowerCase());
          return id ? [{ o, id }] : [];
        });
        await rememberMany(
          tx,
          run.source,
          written.map(({ o, id }) => ({ kind: 'contact', sourceId: o.id, targetId: id, version: versionOf(o) })),
        );
        return written;
      });
      for (const { o, id } of rows) {
        made.add(o.id);
        run.count({ kind: 'contact', sourceId: o.id, outcome: 'created', targetId: id });
      }
    } catch (err) {
      // A page the target refuses together (an email it does not take) goes one by one: only the refused one is skipped.
      if (!(err instanceof HttpError) || err.statusCode >= 500) throw err;
    }
  }
  await pMap(
    page.filter((o) => !made.has(o.id)),
    (o) => importContact(w, o),
    { concurrency: IN_FLIGHT },
  );
}

/** A contact: matched by email (unique in a brand); its company is the import's of the source's. */
async function importContact(w: Writer, o: SourceObject): Promise<void> {
  const companyId = typeof o.companyId === 'string' ? ((await allMappingsCached(w, 'company')).get(o.companyId) ?? null) : null;
  const input = { ...pick(o, CreateContactBody, ['companyId']), companyId };
  await one(w, 'contact', o, {
    create: async (tx) => {
      // A contact of the target with that email is taken as this one.
      const same = await contacts.idForEmail(tx, w.brandId, String(o.email));
      if (!same) return (await createContact(tx, w.brandId, input as never)).id;
      await updateContact(tx, w.brandId, same, input as never);
      return same;
    },
    update: async (tx, id) => {
      await updateContact(tx, w.brandId, id, input as never);
    },
  });
}

/** A small kind's mappings, read once per brand's phase. */
async function allMappingsCached(w: Writer, kind: string): Promise<Map<string, string>> {
  let map = w.cache.get(kind);
  if (!map) w.cache.set(kind, (map = await allMappings(w.run.ctx, w.run.source, kind)));
  return map;
}

/** A webhook: created disabled, with a secret of the target's making (the source never shows its own). */
async function importWebhook(w: Writer, o: SourceObject): Promise<void> {
  // Checked (its host resolved) before the transaction that writes it, not in it.
  let policy: webhooks.WebhookPolicy = { allowPrivate: w.run.ctx.services.config.webhookAllowPrivate };
  try {
    policy = { ...policy, checked: await webhooks.checkWebhookUrl(String(o.url), policy) };
  } catch (err) {
    if (!(err instanceof HttpError) || err.statusCode >= 500) throw err;
    w.run.count({ kind: 'webhook', sourceId: o.id, outcome: 'skipped', targetId: null, reason: `the target refused it: ${err.message}` });
    return;
  }
  await one(w, 'webhook', o, {
    create: async (tx) => (await webhooks.create(tx, policy, w.brandId, { url: String(o.url), events: o.events as never, enabled: false })).id,
    update: async (tx, id) => {
      await webhooks.update(tx, policy, w.brandId, id, { url: String(o.url), events: o.events as never });
    },
  });
}

/**
 * The brand's tickets (or its spam) through the source's export, from the ticket after the cursor
 * on, PAGES_IN_FLIGHT pages at a time: one page is written while the next is read and prepared,
 * so that the source, the importer and the database work side by side. The cursor moves past a
 * page once it and every page before it are in: a run killed meanwhile reads a page written
 * already again, and finds its tickets unchanged.
 */
async function importExported(w: Writer, from: DispatchSource, sourceBrandId: string, memberOf: ReadonlyMap<string, string>, spam: boolean, pageSize: number): Promise<void> {
  const { run } = w;
  const writing: { done: Promise<void>; last: string }[] = [];
  const settleFirst = async () => {
    const first = writing.shift()!;
    await first.done;
    run.state.cursor = first.last;
    await run.save();
  };
  try {
    for await (const page of from.exportedTickets(sourceBrandId, { status: 'all', isSpam: spam }, run.state.cursor, pageSize)) {
      const done = importTickets(w, from, sourceBrandId, page, memberOf);
      // Awaited in order by settleFirst; meanwhile a failure is no unhandled rejection.
      done.catch(() => undefined);
      writing.push({ done, last: page.at(-1)!.ticket.id });
      if (writing.length >= PAGES_IN_FLIGHT) await settleFirst();
    }
    while (writing.length) await settleFirst();
  } finally {
    // Nothing left writing behind a failure.
    await Promise.allSettled(writing.map((p) => p.done));
  }
}

/** Pages of tickets written side by side by importExported. */
const PAGES_IN_FLIGHT = 2;

/** A page of tickets with their comments, attachments and watchers: what was not exported with them read several at a time, then written. */
async function importTickets(w: Writer, from: DispatchSource, sourceBrandId: string, page: readonly SourceTicket[], memberOf: ReadonlyMap<string, string>): Promise<void> {
  const ids = (pickId: (t: SourceObject) => unknown) => [...new Set(page.flatMap(({ ticket }) => [pickId(ticket)].flat()).filter((id): id is string => typeof id === 'string'))];
  const [tickets, contacts, categories, tags] = await Promise.all([
    w.run.mappings(
      'ticket',
      ids((t) => t.id),
    ),
    w.run.mappings(
      'contact',
      ids((t) => t.customerId),
    ),
    w.run.mappings(
      'category',
      ids((t) => t.categoryId),
    ),
    w.run.mappings(
      'tag',
      ids((t) => (Array.isArray(t.tags) ? (t.tags as { id: string }[]).map((g) => g.id) : [])),
    ),
  ]);
  const mapped: PageMappings = { ticket: tickets, contact: contacts, category: categories, tag: tags };
  const read = (await pMap(page, (t) => readTicket(w, from, sourceBrandId, t, memberOf, mapped), { concurrency: IN_FLIGHT })).filter((r) => r !== null);
  const written = await w.run.writeTickets(read.map((r) => r.ticket));
  await pMap(read, (r, i) => (written[i] ? addWatchers(w, r.ticket.key.sourceId, written[i], r.watchers, memberOf) : undefined), { concurrency: IN_FLIGHT });
}

/** What earlier runs made of the objects a page of tickets names, read once for the page. */
type PageMappings = Record<'ticket' | 'contact' | 'category' | 'tag', ReadonlyMap<string, Mapping>>;

/** A ticket read whole from the source, with its watchers; null when it is not to be written (unchanged, a dry run, skipped). */
async function readTicket(
  w: Writer,
  from: DispatchSource,
  sourceBrandId: string,
  { ticket: t, comments: exportedComments, watchers: exportedWatchers }: SourceTicket,
  memberOf: ReadonlyMap<string, string>,
  page: PageMappings,
): Promise<{ ticket: TicketToWrite; watchers: SourceObject[] } | null> {
  const { run } = w;
  const version = versionOf(t);
  // Merged ones (met again too: a run killed before its merges phase) are merged once the brand's tickets are in.
  if (typeof t.mergedIntoId === 'string' && !run.options.dryRun) w.mergeLater({ ticket: t.id, into: t.mergedIntoId });
  const todo = await run.ticketToWrite(t.id, version, page.ticket);
  if (!todo.write) return null;
  // Its status came with the brand's statuses, unless the target refused that one (or --map left it out).
  let keys = w.cache.get('statusKeys');
  if (!keys) w.cache.set('statusKeys', (keys = new Map((await statuses.list(run.ctx, w.brandId)).map((s) => [s.key, s.id]))));
  const status = run.options.map?.statuses?.[String(t.status)] ?? String(t.status);
  if (!keys.has(status)) {
    run.count({ kind: 'ticket', sourceId: t.id, outcome: 'skipped', targetId: null, reason: `its status ${status} is no status of the target brand` });
    return null;
  }
  const mapped = (kind: 'contact' | 'category', id: unknown) => (typeof id === 'string' ? (page[kind].get(id)?.targetId ?? null) : null);
  let customerId = mapped('contact', t.customerId);
  const customer = obj(t.customer);
  if (!customerId && typeof customer.email === 'string') customerId = (await findOrCreateContact(run.ctx, w.brandId, customer.email, str(customer.name))).id;
  const assignee = typeof t.assigneeId === 'string' ? (memberOf.get(t.assigneeId) ?? null) : null;
  if (t.assigneeId && !assignee) run.options.onNote?.(`ticket ${t.id}: its assignee ${String(t.assigneeId)} is no member of the target (matched by email): left unassigned`);
  const tagList = Array.isArray(t.tags) ? (t.tags as { id: string }[]) : [];
  const tagMap = page.tag;
  const ticket: ImportedTicket = {
    brandId: w.brandId,
    ticketNumber: typeof t.ticketNumber === 'number' ? t.ticketNumber : null,
    keepNumber: run.options.keepNumbers,
    title: String(t.title),
    body: str(t.body),
    status,
    priority: str(t.priority),
    assigneeId: assignee,
    createdBy: str(t.createdBy),
    customerId,
    categoryId: mapped('category', t.categoryId),
    tagIds: tagList.map((g) => tagMap.get(g.id)?.targetId).filter((id): id is string => Boolean(id)),
    links: Array.isArray(t.links) ? t.links : [],
    customFields: await ticketFields(w, t.customFields ?? null),
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
  // Exported with its comments; else a ticket the source counts no comments or files of needs no request for them.
  const sourceComments = exportedComments ?? (t.commentCount === 0 ? [] : await from.comments(sourceBrandId, t.id));
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
  const files: SourceFile[] = (t.attachmentCount === 0 ? [] : await from.attachments(sourceBrandId, t.id)).map((f) => ({
    ref: f.id,
    commentRef: str(f.commentId),
    filename: String(f.filename),
    contentType: String(f.contentType),
    uploadedBy: str(f.uploadedBy),
    metadata: obj(f.metadata),
    createdAt: String(f.createdAt),
    updatedAt: String(f.updatedAt),
    sha256: str(f.sha256),
    unavailable: f.status === 'UPLOADED' ? undefined : `its upload is ${String(f.status)} in the source`,
    stage: (storage, maxBytes) => from.stageAttachment(sourceBrandId, t.id, f.id, storage, maxBytes),
  }));
  return { ticket: { key: { sourceId: t.id, version }, known: todo.known, ticket, comments, files }, watchers: exportedWatchers ?? (await from.watchers(sourceBrandId, t.id)) };
}

/** Watchers: members of the target (matched by email) only. */
async function addWatchers(w: Writer, sourceId: string, ticketId: string, list: readonly SourceObject[], memberOf: ReadonlyMap<string, string>): Promise<void> {
  for (const wa of list) {
    const memberId = memberOf.get(String(wa.memberId));
    if (!memberId) {
      w.run.count({
        kind: 'watcher',
        sourceId: `${sourceId}/${String(wa.memberId)}`,
        outcome: 'skipped',
        targetId: null,
        reason: 'the watcher is no member of the target (matched by email)',
      });
      continue;
    }
    const { created } = await watchers.add(w.run.ctx, w.brandId, ticketId, {
      memberId,
      notifyOnComment: wa.notifyOnComment !== false,
      notifyOnStatusChange: wa.notifyOnStatusChange !== false,
    });
    w.run.count({ kind: 'watcher', sourceId: `${sourceId}/${String(wa.memberId)}`, outcome: created ? 'created' : 'unchanged', targetId: memberId });
  }
}
