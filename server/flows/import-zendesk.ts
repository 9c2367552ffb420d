import type { TenantCtx } from '../core/context.js';
import { HttpError } from '../core/errors.js';
import * as brands from '../domains/brands/service.js';
import * as fields from '../domains/fields/service.js';
import * as members from '../domains/members/service.js';
import * as statuses from '../domains/statuses/service.js';
import * as tags from '../domains/tags/service.js';
import * as companies from '../domains/companies/service.js';
import { MAX_TITLE_LENGTH, SOURCES } from '../domains/tickets/schemas.js';
import type { FieldType } from '../domains/fields/schemas.js';
import type { ZendeskObject, ZendeskSource } from '../integrations/import-zendesk-source.js';
import { createBrand } from './brands.js';
import { createCompany, findOrCreateContact, updateContact, updateCompany } from './customers.js';
import { ImportRun, versionOf, type ImportOptions, type ImportReport, type SourceFile } from './import-run.js';
import { allMappings, writeRating, type ImportedComment, type ImportedTicket } from './import-writer.js';

/**
 * `ticketd import zendesk`: copies a Zendesk Support account into a ticketd account through
 * Zendesk's REST API (decision 0124), on the shared run machinery of decision 0123. Zendesk's
 * brands become brands; in each of them its account-wide objects: the on-hold status, ticket
 * fields (groups as the options of a `group` field), organizations as companies, end-users as
 * contacts; then the tickets of the incremental export, each into its brand, with their comments
 * and attachments; then the satisfaction ratings. Agents are matched to the target's members by
 * email, never created.
 *
 * Where the run is (the phase and its page's cursor, the export's cursor too) is saved after each
 * page: a run that was killed goes on from there.
 */

interface RunState {
  phase: number;
  cursor: string | null;
}

const PHASES = ['statuses', 'fields', 'companies', 'contacts', 'tickets', 'ratings'] as const;

const NOT_COPIED = [
  "agents (matched by email to the target's members: assignees, comment authors, rating credits)",
  "Zendesk's custom ticket statuses (a ticket takes its status category)",
  'ticket forms, macros, triggers, automations, views and SLA policies',
  'user and organization fields',
  'CCs, followers and side conversations',
  'deleted tickets (reported; a copy imported before is left as it is)',
  'ratings that were offered but not given',
];

/** Zendesk's statuses as ticketd's, unless --map says otherwise; `hold` is a status of its own, created. */
const STATUS_OF: Record<string, string> = { new: 'open', open: 'open', pending: 'pending', hold: 'on_hold', solved: 'resolved', closed: 'closed' };
const ON_HOLD = { key: 'on_hold', name: 'On hold', color: '#9b59b6', description: 'Waiting on a third party (Zendesk: on-hold)' };

/** Zendesk's custom field types as ticketd's; other types (lookups) are skipped and reported. */
const FIELD_TYPE_OF: Record<string, FieldType> = {
  text: 'text',
  textarea: 'text',
  regexp: 'text',
  partialcreditcard: 'text',
  integer: 'number',
  decimal: 'number',
  checkbox: 'boolean',
  date: 'date',
  tagger: 'select',
  multiselect: 'multiselect',
};
const GROUP_FIELD = 'group';

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
const list = (v: unknown): Record<string, unknown>[] => (Array.isArray(v) ? (v as Record<string, unknown>[]) : []);

/** A Zendesk brand and the target brand it became (`dry-run:…` for one a dry run would create). */
interface Brand {
  zendeskId: number;
  brandId: string;
}

/** A custom ticket field as ticketd defines it, or why it cannot be. */
interface FieldDef {
  sourceId: string;
  key: string;
  label: string;
  type: FieldType;
  description: string | null;
  options: string[] | null;
  sortOrder: number;
  /** Option values (the tags Zendesk sets) to their names (what ticketd stores). */
  names: Map<string, string>;
}

export async function importZendesk(base: TenantCtx, from: ZendeskSource, name: string, options: ImportOptions): Promise<ImportReport> {
  const source = `zendesk:${name}`;
  const run = await ImportRun.open<RunState>(base, source, options, { phase: 0, cursor: null }, NOT_COPIED);
  const { ctx, state } = run;
  const since = options.since ? Math.floor(Date.parse(options.since) / 1000) : 0;

  // Read every run (they are short): brands, agents, groups and field definitions.
  const sourceBrands = await from.all('api/v2/brands.json', 'brands');
  if (!sourceBrands.length) sourceBrands.push({ id: 0, name, subdomain: name, default: true });
  const targetBrands: Brand[] = [];
  for (const b of sourceBrands) {
    const brandId = await importBrand(run, b);
    if (brandId) targetBrands.push({ zendeskId: b.id, brandId });
  }
  const defaultBrand = targetBrands.find((b) => sourceBrands.find((s) => s.id === b.zendeskId)?.default === true) ?? targetBrands[0];
  const brandOf = (zendeskId: unknown) => targetBrands.find((b) => b.zendeskId === zendeskId) ?? defaultBrand;

  const targetMembers = new Map((await members.list(ctx)).map((m) => [m.email.toLowerCase(), m.id]));
  const agents = new Map<number, ZendeskObject>();
  for (const role of ['agent', 'admin']) for (const u of await from.all('api/v2/users.json', 'users', { role })) agents.set(u.id, u);
  const memberOf = new Map<number, string>();
  for (const [id, u] of agents) {
    const target = targetMembers.get(String(u.email ?? '').toLowerCase());
    if (target) memberOf.set(id, target);
  }
  const groups = new Map((await from.all('api/v2/groups.json', 'groups')).map((g) => [g.id, String(g.name)]));
  const defs = fieldDefs(run, await from.all('api/v2/ticket_fields.json', 'ticket_fields'), groups);

  const z: Zendesk = { run, from, memberOf, agents, defs, groups, cache: new Map() };
  if (options.onTicketTotal && !options.since) {
    const total = await from.ticketCount();
    if (total !== null) options.onTicketTotal(total);
  }

  for (; state.phase < PHASES.length; state.phase++, state.cursor = null) {
    const phase = PHASES[state.phase]!;
    if (phase === 'statuses') for (const b of targetBrands) await importStatuses(z, b);
    if (phase === 'fields') for (const b of targetBrands) for (const d of defs) await importField(z, b, d);
    if (phase === 'companies' || phase === 'contacts' || phase === 'tickets' || phase === 'ratings') {
      for (;;) {
        const page =
          phase === 'companies'
            ? await from.page('api/v2/organizations.json', 'organizations', state.cursor)
            : phase === 'contacts'
              ? await from.page('api/v2/users.json', 'users', state.cursor, { role: 'end-user' })
              : phase === 'tickets'
                ? await from.tickets(since, state.cursor)
                : await from.page('api/v2/satisfaction_ratings.json', 'satisfaction_ratings', state.cursor, { score: 'received', start_time: since || undefined });
        for (const item of page.items) {
          if (phase === 'companies') for (const b of targetBrands) await importCompany(z, b, item);
          else if (phase === 'contacts') for (const b of targetBrands) await importContact(z, b, item);
          else if (phase === 'tickets') await importTicket(z, brandOf(item.brand_id), item);
          else await importRating(z, item);
        }
        if (!page.next) break;
        state.cursor = page.next;
        await run.save();
      }
    }
    await run.save();
  }
  return run.finish();
}

/** What the kinds' importers share in a run. */
interface Zendesk {
  run: ImportRun<RunState>;
  from: ZendeskSource;
  /** Zendesk agents and admins (by id) that are members of the target (matched by email). */
  memberOf: ReadonlyMap<number, string>;
  agents: ReadonlyMap<number, ZendeskObject>;
  defs: readonly FieldDef[];
  groups: ReadonlyMap<number, string>;
  /** What is read once per brand in a run: the target's keys, the tags made. */
  cache: Map<string, Map<string, string>>;
}

/** A brand's object's source id: Zendesk's are the account's, ticketd's a brand's. */
const inBrand = (b: Brand, id: string | number) => `${b.zendeskId}/${id}`;
const isDryRunBrand = (b: Brand) => b.brandId.startsWith('dry-run:');

/** A brand: a target brand whose slug is the Zendesk brand's subdomain is taken as the same. */
async function importBrand(run: ImportRun<RunState>, b: ZendeskObject): Promise<string | null> {
  const slug = String(b.subdomain ?? '').toLowerCase();
  const input = { name: String(b.name ?? slug) };
  const id = await run.one('brand', String(b.id), versionOf({ name: input.name, slug }), {
    create: async (tx) => {
      const same = (await brands.list(tx)).find((x) => x.slug === slug);
      if (same) {
        await brands.update(tx, same.id, input as never);
        return same.id;
      }
      return (await createBrand(tx, { ...input, ...(slug ? { slug } : {}) } as never)).id;
    },
    update: async (tx, id) => {
      await brands.update(tx, id, input as never);
    },
  });
  if (!id && run.options.dryRun) return `dry-run:${b.id}`;
  return id;
}

/** The target brand's status keys, or field keys of tickets (`fields`) by id, read once a run (and kept up to date by what it creates). */
async function targetKeys(z: Zendesk, b: Brand, kind: 'statuses' | 'fields'): Promise<Map<string, string>> {
  const cacheKey = `${kind}:${b.brandId}`;
  let keys = z.cache.get(cacheKey);
  if (!keys) {
    if (isDryRunBrand(b)) keys = new Map(kind === 'statuses' ? ['open', 'pending', 'resolved', 'closed'].map((k) => [k, k]) : []);
    else if (kind === 'statuses') keys = new Map((await statuses.list(z.run.ctx, b.brandId)).map((s) => [s.key, s.id]));
    else keys = new Map((await fields.list(z.run.ctx, b.brandId, 'ticket')).map((f) => [f.key, f.id]));
    z.cache.set(cacheKey, keys);
  }
  return keys;
}

const UNMAPPED = '--map does not name it, the target brand lacks it, and unmapped is skip';

/** The key a Zendesk status takes in the target: --map's, else ticketd's own (hold: on_hold). */
function statusKey(z: Zendesk, status: string): string | undefined {
  return z.run.options.map?.statuses?.[status] ?? STATUS_OF[status];
}

/** What --map says of Zendesk's statuses, checked; `hold`'s status created unless mapped (or skipped). */
async function importStatuses(z: Zendesk, b: Brand): Promise<void> {
  const { run } = z;
  const keys = await targetKeys(z, b, 'statuses');
  for (const [from, to] of Object.entries(run.options.map?.statuses ?? {})) {
    if (keys.has(to) || (to === ON_HOLD.key && from === 'hold')) run.mapped({ kind: 'status', from, to });
    else run.count({ kind: 'status', sourceId: inBrand(b, from), outcome: 'skipped', targetId: null, reason: `--map names ${to}, no status of the target brand` });
  }
  if (statusKey(z, 'hold') !== ON_HOLD.key) return;
  if (run.options.map?.unmapped === 'skip' && !keys.has(ON_HOLD.key)) {
    run.count({ kind: 'status', sourceId: inBrand(b, 'hold'), outcome: 'skipped', targetId: null, reason: UNMAPPED });
    return;
  }
  const id = await run.one('status', inBrand(b, 'hold'), versionOf(ON_HOLD), {
    create: async (tx) => {
      const same = (await statuses.list(tx, b.brandId)).find((s) => s.key === ON_HOLD.key);
      return same ? same.id : (await statuses.create(tx, b.brandId, ON_HOLD)).id;
    },
    update: async (tx, id) => {
      await statuses.update(tx, b.brandId, id, { name: ON_HOLD.name, color: ON_HOLD.color, description: ON_HOLD.description });
    },
  });
  if (id) keys.set(ON_HOLD.key, id);
}

/** A ticket field's key: its title in snake_case (what --map names as `ticket.<key>`). */
function keyOf(title: string): string {
  const key = title
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  return (/^[a-z]/.test(key) ? key : `f_${key}`).slice(0, 50).replace(/_+$/, '');
}

/**
 * Zendesk's custom ticket fields as ticketd's definitions (system fields are ticketd's own
 * columns), and its groups as the options of a `group` field: ticketd has no teams. A field of a
 * type ticketd has no counterpart for is skipped and reported.
 */
function fieldDefs(run: ImportRun<RunState>, zendeskFields: readonly ZendeskObject[], groups: ReadonlyMap<number, string>): FieldDef[] {
  const defs: FieldDef[] = [];
  const taken = new Set<string>();
  const unique = (key: string, id: number | string) => {
    const k = taken.has(key) ? `${key.slice(0, 49 - String(id).length)}_${id}` : key;
    taken.add(k);
    return k;
  };
  if (groups.size) {
    taken.add(GROUP_FIELD);
    const names = [...new Set(groups.values())].sort();
    defs.push({
      sourceId: GROUP_FIELD,
      key: GROUP_FIELD,
      label: 'Group',
      type: 'select',
      description: 'The Zendesk group of the ticket',
      options: names,
      sortOrder: 0,
      names: new Map(),
    });
  }
  for (const f of [...zendeskFields].sort((a, b) => a.id - b.id)) {
    if (f.removable === false) continue;
    const type = FIELD_TYPE_OF[String(f.type)];
    if (!type) {
      run.count({ kind: 'field', sourceId: String(f.id), outcome: 'skipped', targetId: null, reason: `a Zendesk ${String(f.type)} field has no counterpart in ticketd` });
      continue;
    }
    const options = list(f.custom_field_options);
    const names = new Map(options.map((o) => [String(o.value), String(o.name).slice(0, 200)]));
    defs.push({
      sourceId: String(f.id),
      key: unique(keyOf(String(f.title ?? f.id)) || `field_${f.id}`, f.id),
      label: String(f.title ?? f.id).slice(0, 200),
      type,
      description: str(f.description)?.slice(0, 1000) ?? null,
      options: type === 'select' || type === 'multiselect' ? [...new Set(names.values())] : null,
      sortOrder: num(f.position) ?? defs.length,
      names,
    });
  }
  return defs;
}

/** A field definition: matched by key in the brand; --map and unmapped skip as for every importer. */
async function importField(z: Zendesk, b: Brand, d: FieldDef): Promise<void> {
  const { run } = z;
  const to = run.options.map?.fields?.[`ticket.${d.key}`];
  if (to !== undefined) {
    run.mapped({ kind: 'field', from: `ticket.${d.key}`, to: `ticket.${to}` });
    return;
  }
  const keys = await targetKeys(z, b, 'fields');
  if (run.options.map?.unmapped === 'skip' && !keys.has(d.key)) {
    run.count({ kind: 'field', sourceId: inBrand(b, d.sourceId), outcome: 'skipped', targetId: null, reason: UNMAPPED });
    return;
  }
  const input = { label: d.label, type: d.type, description: d.description, options: d.options, sortOrder: d.sortOrder };
  const id = await run.one('field', inBrand(b, d.sourceId), versionOf({ ...input, key: d.key }), {
    create: async (tx) => {
      const same = (await fields.list(tx, b.brandId, 'ticket')).find((x) => x.key === d.key);
      if (same) {
        await fields.update(tx, b.brandId, 'ticket', same.key, input);
        return same.id;
      }
      return (await fields.create(tx, b.brandId, 'ticket', { key: d.key, ...input })).id;
    },
    update: async (tx, id) => {
      const same = (await fields.list(tx, b.brandId, 'ticket')).find((x) => x.id === id);
      if (!same) throw new HttpError(404, 'not_found', 'Field not found');
      await fields.update(tx, b.brandId, 'ticket', same.key, input);
    },
  });
  if (id && !keys.has(d.key)) keys.set(d.key, id);
}

/**
 * The target key each Zendesk field's values go under in a brand: --map's, else the key of the
 * field the import made of it (a field renamed in Zendesk keeps its first key). None: left out.
 */
async function fieldKeys(z: Zendesk, b: Brand): Promise<Map<string, string>> {
  const cacheKey = `fieldKeys:${b.brandId}`;
  let out = z.cache.get(cacheKey);
  if (!out) {
    const made = await allMappingsCached(z, 'field');
    const keyById = new Map([...(await targetKeys(z, b, 'fields'))].map(([key, id]) => [id, key]));
    out = new Map();
    for (const d of z.defs) {
      const mapped = z.run.options.map?.fields?.[`ticket.${d.key}`];
      const key = mapped ?? keyById.get(made.get(inBrand(b, d.sourceId)) ?? '');
      if (key) out.set(d.sourceId, key);
    }
    z.cache.set(cacheKey, out);
  }
  return out;
}

async function allMappingsCached(z: Zendesk, kind: string): Promise<Map<string, string>> {
  let map = z.cache.get(`mappings:${kind}`);
  if (!map) z.cache.set(`mappings:${kind}`, (map = await allMappings(z.run.ctx, z.run.source, kind)));
  return map;
}

/** An organization: a company, matched by its first domain when it has one. */
async function importCompany(z: Zendesk, b: Brand, o: ZendeskObject): Promise<void> {
  const domain = str(list(o.domain_names).length ? (o.domain_names as unknown[])[0] : null)?.toLowerCase() ?? null;
  const input = { name: String(o.name ?? o.id).slice(0, 200), domain };
  await z.run.one('company', inBrand(b, o.id), String(o.updated_at), {
    create: async (tx) => {
      const same = domain ? await companies.idForDomain(tx, b.brandId, domain) : null;
      if (same) {
        await updateCompany(tx, b.brandId, same, input);
        return same;
      }
      return (await createCompany(tx, b.brandId, input)).id;
    },
    update: async (tx, id) => {
      await updateCompany(tx, b.brandId, id, input);
    },
  });
}

/** A user as a contact (by email, unique in a brand), in the company of its organization. Gives its id, or null. */
async function importContact(z: Zendesk, b: Brand, u: ZendeskObject): Promise<string | null> {
  const email = str(u.email);
  if (!email) {
    z.run.count({ kind: 'contact', sourceId: inBrand(b, u.id), outcome: 'skipped', targetId: null, reason: "no email address: ticketd's customers are known by theirs" });
    return null;
  }
  const org = num(u.organization_id);
  const companyId = org === null ? null : ((await z.run.mappings('company', [inBrand(b, org)])).get(inBrand(b, org))?.targetId ?? null);
  const input = { name: str(u.name)?.slice(0, 200) ?? null, ...(companyId ? { companyId } : {}) };
  return z.run.one('contact', inBrand(b, u.id), String(u.updated_at), {
    create: async (tx) => {
      const found = await findOrCreateContact(tx, b.brandId, email, input.name);
      await updateContact(tx, b.brandId, found.id, input);
      return found.id;
    },
    update: async (tx, id) => {
      await updateContact(tx, b.brandId, id, input);
    },
  });
}

/** The contact a requester is in the brand: imported with the users, else (met since, or an agent) now. */
async function contactOf(z: Zendesk, b: Brand, userId: number | null): Promise<string | null> {
  if (userId === null) return null;
  const known = (await z.run.mappings('contact', [inBrand(b, userId)])).get(inBrand(b, userId));
  if (known) return known.targetId;
  const user = z.agents.get(userId) ?? (await z.from.user(userId));
  return user ? importContact(z, b, user) : null;
}

/** Tags by name in the brand (any case), made when new: a Zendesk tag is a ticket's word. */
async function tagIds(z: Zendesk, b: Brand, names: readonly string[]): Promise<string[]> {
  const made = await allMappingsCached(z, 'tag');
  const ids: string[] = [];
  for (const name of new Set(names.map((n) => n.toLowerCase()))) {
    const sourceId = inBrand(b, name);
    let id = made.get(sourceId) ?? null;
    if (!id) {
      id = await z.run.one('tag', sourceId, name, {
        create: async (tx) => (await tags.list(tx, b.brandId)).find((t) => t.name.toLowerCase() === name)?.id ?? (await tags.create(tx, b.brandId, { name })).id,
        update: async () => {},
      });
      if (id) made.set(sourceId, id);
    }
    if (id) ids.push(id);
  }
  return ids;
}

/** A ticket's custom field values under the target's keys: tagger and multiselect values as their options' names; the group's name. */
async function customFields(z: Zendesk, b: Brand, t: ZendeskObject): Promise<Record<string, unknown> | null> {
  const keys = await fieldKeys(z, b);
  const out: Record<string, unknown> = {};
  const group = num(t.group_id);
  if (group !== null && keys.has(GROUP_FIELD) && z.groups.has(group)) out[keys.get(GROUP_FIELD)!] = z.groups.get(group);
  for (const v of list(t.custom_fields)) {
    const d = z.defs.find((x) => x.sourceId === String(v.id));
    const key = keys.get(String(v.id));
    if (!d || !key || v.value === null || v.value === undefined || v.value === '') continue;
    if (d.type === 'select') out[key] = d.names.get(String(v.value)) ?? String(v.value);
    else if (d.type === 'multiselect') out[key] = (Array.isArray(v.value) ? v.value : [v.value]).map((x) => d.names.get(String(x)) ?? String(x));
    else if (d.type === 'number') out[key] = Number(v.value);
    else if (d.type === 'boolean') out[key] = v.value === true || v.value === 'true';
    else out[key] = String(v.value);
  }
  return Object.keys(out).length ? out : null;
}

/** Zendesk's channel (`via.channel`) as a ticketd source; other channels are `custom`. */
function sourceOf(via: unknown): ImportedTicket['source'] {
  const channel = String((via as { channel?: unknown } | null)?.channel ?? 'api');
  const known = channel === 'native_messaging' ? 'custom' : channel;
  return (SOURCES as readonly string[]).includes(known) ? known : 'custom';
}

/** A ticket with its comments and attachments; a deleted one is skipped and reported. */
async function importTicket(z: Zendesk, b: Brand | undefined, t: ZendeskObject): Promise<void> {
  const { run } = z;
  const sourceId = String(t.id);
  if (!b) {
    run.count({ kind: 'ticket', sourceId, outcome: 'skipped', targetId: null, reason: 'its brand was not imported' });
    return;
  }
  if (t.status === 'deleted') {
    const known = (await run.mappings('ticket', [sourceId])).get(sourceId);
    run.count({
      kind: 'ticket',
      sourceId,
      outcome: 'skipped',
      targetId: known?.targetId ?? null,
      reason: known ? 'deleted in Zendesk: the copy imported before is left in ticketd' : 'deleted in Zendesk',
    });
    return;
  }
  const version = String(t.updated_at);
  const todo = await run.ticketToWrite(sourceId, version);
  if (!todo.write) return;
  const status = statusKey(z, String(t.status));
  if (!status || !(await targetKeys(z, b, 'statuses')).has(status)) {
    run.count({ kind: 'ticket', sourceId, outcome: 'skipped', targetId: null, reason: `its status ${String(t.status)} has no status of the target brand (${status ?? 'none'})` });
    return;
  }
  const assignee = num(t.assignee_id);
  const assigneeId = assignee === null ? null : (z.memberOf.get(assignee) ?? null);
  if (assignee !== null && !assigneeId) run.options.onNote?.(`ticket ${sourceId}: its assignee ${assignee} is no member of the target (matched by email): left unassigned`);

  // The first comment is the ticket's description: the ticket's body, its files the ticket's.
  const { comments: all, users } = await z.from.comments(t.id);
  const userOf = new Map(users.map((u) => [u.id, u]));
  const [first, ...rest] = all;
  const comments: ImportedComment[] = [];
  for (const c of rest) {
    const author = num(c.author_id);
    const user = author === null ? undefined : (userOf.get(author) ?? z.agents.get(author));
    const role = author !== null && z.agents.has(author) ? 'agent' : String(user?.role ?? '');
    const authorType = role === 'agent' || role === 'admin' ? 'AGENT' : role === 'end-user' ? 'CUSTOMER' : 'SYSTEM';
    comments.push({
      ref: String(c.id),
      version: versionOf({ body: c.body, public: c.public, author: c.author_id }),
      parentRef: null,
      body: String(c.body ?? ''),
      authorId: authorType === 'AGENT' ? (z.memberOf.get(author!) ?? null) : authorType === 'CUSTOMER' ? await contactOf(z, b, author) : null,
      authorName: str(user?.name),
      authorType,
      isInternal: c.public === false,
      links: [],
      metadata: {},
      source: sourceOf(c.via),
      sourceId: null,
      sourceData: null,
      cc: [],
      createdAt: String(c.created_at),
      updatedAt: String(c.created_at),
    });
  }
  const files: SourceFile[] = all.flatMap((c, i) =>
    list(c.attachments).map((a) => ({
      ref: String(a.id),
      commentRef: i === 0 ? null : String(c.id),
      filename: String(a.file_name ?? a.id),
      contentType: str(a.content_type) ?? 'application/octet-stream',
      uploadedBy: z.memberOf.get(num(c.author_id) ?? -1) ?? null,
      metadata: {},
      createdAt: String(c.created_at),
      updatedAt: String(c.created_at),
      sha256: null,
      unavailable: a.malware_scan_result === 'malware_found' ? 'Zendesk found malware in it' : typeof a.content_url !== 'string' ? 'Zendesk gave no content_url' : undefined,
      stage: (storage, maxBytes) => z.from.stage(String(a.content_url), storage, maxBytes),
    })),
  );

  const ticket: ImportedTicket = {
    brandId: b.brandId,
    ticketNumber: t.id,
    keepNumber: run.options.keepNumbers,
    title: (str(t.subject)?.trim() || str(t.raw_subject)?.trim() || '(no subject)').slice(0, MAX_TITLE_LENGTH),
    body: str(first?.body) ?? str(t.description),
    status,
    priority: str(t.priority),
    assigneeId,
    createdBy: null,
    customerId: await contactOf(z, b, num(t.requester_id)),
    categoryId: null,
    tagIds: await tagIds(z, b, list(t.tags).map(String)),
    links: [],
    customFields: await customFields(z, b, t),
    metadata: { zendesk: { id: t.id, type: t.type ?? null, channel: (t.via as { channel?: unknown } | null)?.channel ?? null } },
    source: sourceOf(t.via),
    sourceId: null,
    sourceData: null,
    isSpam: false,
    legalHold: false,
    closeReason: null,
    dueAt: str(t.due_at),
    createdAt: String(t.created_at),
    updatedAt: String(t.updated_at),
  };
  await run.writeTicket({ sourceId, version }, todo.known, ticket, comments, files);
}

/** A rating given (good: thumbs up, bad: thumbs down), on the ticket's import, credited to its assignee's member. */
async function importRating(z: Zendesk, r: ZendeskObject): Promise<void> {
  const { run } = z;
  const sourceId = String(r.id);
  const rating = r.score === 'good' ? 1 : r.score === 'bad' ? -1 : null;
  const ticket = (await run.mappings('ticket', [String(r.ticket_id)])).get(String(r.ticket_id));
  if (rating === null || !ticket) {
    run.count({
      kind: 'rating',
      sourceId,
      outcome: 'skipped',
      targetId: null,
      reason: rating === null ? `its score is ${String(r.score)}` : `its ticket ${String(r.ticket_id)} was not imported`,
    });
    return;
  }
  const rated = {
    ticketId: ticket.targetId,
    ratingType: 'thumbs' as const,
    rating,
    comment: str(r.comment),
    resolverId: z.memberOf.get(num(r.assignee_id) ?? -1) ?? null,
    createdAt: String(r.created_at),
    submittedAt: String(r.updated_at ?? r.created_at),
  };
  await run.one('rating', sourceId, String(r.updated_at ?? r.created_at), {
    create: (tx) => writeRating(tx, rated, null),
    update: async (tx, id) => {
      await writeRating(tx, rated, id);
    },
  });
}
