import type { Knex } from 'knex';
import type { Change } from '../core/audit.js';
import { Brand } from '../core/brand.js';
import { onCitus, runInAccount } from '../core/citus.js';
import { canSeeBrand, type TenantCtx } from '../core/context.js';
import type { SqlFragment } from '../core/db.js';
import { normalizeBrandId } from '../core/ids.js';
import { accountScope, columnsToProperties, sameAccount, sameTenant, tenantScope } from '../core/model.js';
import { eventsInsert, outboxAdded, wakeDispatchersJoin } from '../core/outbox/service.js';
import { ticketUpdateParts, type TicketSet } from '../core/ticket-writes.js';
import type { Firing } from '../domains/rules/engine.js';
import { stateCopy } from '../domains/rules/engine.js';
import * as rules from '../domains/rules/service.js';
import { hasTicketSchema } from '../domains/fields/service.js';
import { MAX_TAG_NAME_LENGTH } from '../domains/tags/service.js';
import type { TicketView, UpdateTicketInput } from '../domains/tickets/schemas.js';
import * as tickets from '../domains/tickets/service.js';
import type { Clock } from '../domains/tickets/service-level.js';
import { addToPlan, inputOfRules, newPlan, planClock, planRecords, type Plan } from './ticket-update-plan.js';
import { entryParts, fireInMemory, stateChanges, stateOfView, subjectOf } from './triggers.js';

/**
 * A ticket update (PATCH) in two statements and no transaction, as a reply is (decision 0109):
 * one reads what the update is computed from (the brand, the ticket's view with its clock and a
 * version, whether the status, assignee and category named exist, the tags named), the process
 * plans it (the changes, the triggers on what this process remembers of the brand's rules, the
 * clock), and one statement writes it all: the ticket with what follows from it (counts, tag
 * copies, rating requests), its tag links, the audit entries with the rules' tallies, the webhook
 * deliveries and the dispatchers' NOTIFY, and gives back the ticket's view. The write holds only
 * while what was read holds (the ticket's row and tags, the brand's settings and rules revisions,
 * the references set); otherwise it writes nothing and the update is read and planned again, then
 * goes step by step.
 *
 * Step by step (ticket-update.ts): inside a caller's transaction (macros), a spam flag (its
 * allowance adjustment), a tag named that does not exist yet, custom fields of a brand with a
 * ticket schema, triggers that need the database (least-loaded assignment) or have side effects
 * or change tags, and every error's answer.
 */

/** How often a write that found the ticket changed is tried again before going step by step. */
const ATTEMPTS = 3;

/** The version the read and the write compare: the whole row (any change moves updated_at) and, when tags are set, the tag links. */
export const versionSql = (t: string, withTags: boolean) =>
  `md5(${t}::text${withTags ? ` || array(select tt.tag_id from ticket_tags tt where ${sameTenant('tt', t)} and tt.brand_id = ${t}.brand_id and tt.ticket_id = ${t}.id order by tt.tag_id)::text` : ''})`;

interface Seen {
  brand: Brand;
  before: TicketView;
  clock: Clock & { id: string };
  version: string;
  statusOk: boolean;
  assigneeOk: boolean;
  categoryOk: boolean;
  /** The brand's tags among those the input names, by id and lower-cased name. */
  tags: { id: string; name: string }[];
}

/** The tags an input names, split as the step by step way resolves them (ids, lower-cased names); null: a name no tag can have. */
export function tagsNamed(given: readonly string[]): { ids: string[]; names: string[] } | null {
  const ids = given.filter((t) => tickets.TAG_ID.test(t));
  const names = given.filter((t) => !tickets.TAG_ID.test(t)).map((t) => t.trim());
  if (names.some((n) => !n || n.length > MAX_TAG_NAME_LENGTH)) return null;
  return { ids, names: names.map((n) => n.toLowerCase()) };
}

/** What an input names, as a read checks it: a status key, a member, a category, and tags by id and lower-cased name. */
export interface Named {
  status?: string | null;
  assigneeId?: string | null;
  categoryId?: string | null;
  tags: { ids: string[]; names: string[] };
}

/**
 * The columns of a read that check what the input names: status_ok, assignee_ok and category_ok
 * (true when not named), and "tags", the brand's tags among those named (id, lower-cased name).
 */
export function namedChecks(ctx: TenantCtx, brandId: string, named: Named): SqlFragment {
  return {
    sql: `(?::text is null or exists (select 1 from statuses s where ? and s.brand_id = ? and s.key = ?::text)) as status_ok,
      (?::text is null or exists (select 1 from members m where ? and m.id = ?::text and m.status = 'active')) as assignee_ok,
      (?::text is null or exists (select 1 from categories ca where ? and ca.brand_id = ? and ca.id = ?::text)) as category_ok,
      (select coalesce(jsonb_agg(jsonb_build_object('id', g.id, 'name', lower(g.name))), '[]') from tags g
        where ? and g.brand_id = ? and (g.id = any(?::text[]) or lower(g.name) = any(?::text[]))) as "tags"`,
    bindings: [
      named.status ?? null,
      tenantScope(ctx, 's'),
      brandId,
      named.status ?? null,
      ...checked(named.assigneeId, accountScope(ctx, 'm')),
      named.categoryId ?? null,
      tenantScope(ctx, 'ca'),
      brandId,
      named.categoryId ?? null,
      tenantScope(ctx, 'g'),
      brandId,
      named.tags.ids,
      named.tags.names,
    ],
  };
}

/** The first statement: everything the write is computed from; null when the brand or the ticket is not there. */
async function read(ctx: TenantCtx, brandId: string, ticketId: string, input: UpdateTicketInput, named: { ids: string[]; names: string[] }): Promise<Seen | null> {
  const withTags = input.tags !== undefined;
  const checks = namedChecks(ctx, brandId, { ...input, tags: named });
  const [row] = await runInAccount<Record<string, unknown>>(
    ctx,
    ctx.db.raw(
      `select
      (select to_jsonb(br) from brands br where ? and br.id = ?) as brand,
      tk.*,
      ${checks.sql}
      from (select 1) one left join lateral (
        select ?, ${versionSql('tickets', withTags)} as version, tickets.id as clock_id, tickets.created_at, tickets.status, tickets.priority,
          tickets.due_at, tickets.due_at_manual, tickets.sla_paused_at, tickets.sla_paused_seconds
        from tickets where ? and tickets.brand_id = ? and tickets.id = ? and tickets.deleted_at is null
      ) tk on true`,
      [tenantScope(ctx, 'br'), brandId, ...checks.bindings, tickets.viewJson(ctx), tenantScope(ctx, 'tickets'), brandId, ticketId] as Knex.RawBinding[],
    ),
  );
  const r = row!;
  if (!r.brand || !r.view_json) return null;
  const dateOf = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string));
  return {
    brand: Brand.fromJson(columnsToProperties(r.brand as Record<string, unknown>), { skipValidation: true }),
    before: JSON.parse(r.view_json as string) as TicketView,
    clock: {
      id: r.clock_id as string,
      createdAt: dateOf(r.created_at)!,
      status: r.status as string,
      priority: r.priority as string | null,
      dueAt: dateOf(r.due_at),
      dueAtManual: Boolean(r.due_at_manual),
      slaPausedAt: dateOf(r.sla_paused_at),
      slaPausedSeconds: Number(r.sla_paused_seconds),
    } as Clock & { id: string },
    version: r.version as string,
    statusOk: Boolean(r.status_ok),
    assigneeOk: Boolean(r.assignee_ok),
    categoryOk: Boolean(r.category_ok),
    tags: r.tags as Seen['tags'],
  };
}

/** The tag ids the input names, when every one is the brand's; null: one is not (new, or unknown). */
export function tagIdsOf(found: Seen['tags'], named: { ids: string[]; names: string[] }): string[] | null {
  const byId = new Set(found.map((g) => g.id));
  const byName = new Map(found.map((g) => [g.name, g.id]));
  if (named.ids.some((id) => !byId.has(id)) || named.names.some((n) => !byName.has(n))) return null;
  return [...new Set([...named.ids, ...named.names.map((n) => byName.get(n)!)])];
}

export interface UpdateResult {
  ticket: TicketView;
  /** The fields the caller's change really changed (the same list the ticket.updated audit entry records). */
  changes: Change[];
}

/**
 * The update in two statements, or null: not for this one (see the file comment), or the ticket
 * kept changing; then the caller goes step by step. `input.title` comes trimmed and not blank.
 */
export async function updateInTwoStatements(ctx: TenantCtx, givenBrandId: string, ticketId: string, input: UpdateTicketInput): Promise<UpdateResult | null> {
  if (ctx.db.isTransaction || input.isSpam !== undefined) return null;
  const brandId = normalizeBrandId(givenBrandId);
  if (!canSeeBrand(ctx.brandScope, brandId)) return null;
  const named = tagsNamed(input.tags ?? []);
  if (!named) return null;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const seen = await read(ctx, brandId, ticketId, input, named);
    if (!seen || !seen.statusOk || !seen.assigneeOk || !seen.categoryOk) return null;
    const { brand, before } = seen;
    if (input.customFields !== undefined && hasTicketSchema(brand)) return null;
    const tagIds = input.tags === undefined ? undefined : tagIdsOf(seen.tags, named);
    if (tagIds === null) return null;

    const plan = newPlan(before);
    const changes: Change[] = [];
    const { tags: _tags, ...fields } = input;
    addToPlan(plan, fields, tagIds, changes);
    const ruleChanges: Change[] = [];
    let firings: Firing[] = [];
    const known = await rules.rulesOf(ctx, brand);
    if (changes.length) {
      const state = stateOfView({ ...before, ...(plan.patch as Partial<TicketView>), tags: before.tags });
      if (plan.newTags) {
        const names = new Map(seen.tags.map((g) => [g.id, g.name]));
        state.tags = plan.newTags.map((id) => names.get(id)!);
      }
      const asChanged = stateCopy(state);
      const fired = await fireInMemory(known, state, 'ticket.updated', subjectOf(ctx, brand, stateOfView(before), null));
      if (fired === null) return null;
      firings = fired;
      if (firings.length) {
        const { tags: ruleTags, ...ruleFields } = inputOfRules(stateChanges(asChanged, state));
        if (ruleTags !== undefined) return null;
        if (ruleFields.customFields !== undefined && hasTicketSchema(brand)) return null;
        addToPlan(plan, ruleFields, undefined, ruleChanges);
      }
    }
    await planClock(ctx, brand, plan, input.dueAt, changes, seen.clock);
    if (!changes.length && !ruleChanges.length) return firings.length ? null : { ticket: before, changes };
    const ticket = await write(ctx, { seen, plan, changes, firings, rulesRevision: known.revision, withTags: input.tags !== undefined });
    if (ticket) return { ticket, changes };
  }
  return null;
}

interface Write {
  seen: Seen;
  plan: Plan;
  changes: Change[];
  firings: readonly Firing[];
  rulesRevision: number;
  withTags: boolean;
}

/** The second statement: everything, or nothing when what was read changed since. Returns the ticket's view as written. */
async function write(ctx: TenantCtx, w: Write): Promise<TicketView | null> {
  const { brand, before, version } = w.seen;
  const { plan, changes, firings } = w;
  const set = plan.patch as Record<string, unknown>;
  const guard: SqlFragment = {
    sql: `${versionSql('t', w.withTags)} = ?
      and exists (select 1 from brands br where ? and ${sameTenant('br', 't')} and br.id = t.brand_id and br.settings_revision = ? and br.rules_revision = ?)
      and (?::text is null or exists (select 1 from statuses s where ? and ${sameTenant('s', 't')} and s.brand_id = t.brand_id and s.key = ?::text))
      and (?::text is null or exists (select 1 from members m where ? and ${sameAccount('m', 't')} and m.id = ?::text and m.status = 'active'))
      and (?::text is null or exists (select 1 from categories ca where ? and ${sameTenant('ca', 't')} and ca.brand_id = t.brand_id and ca.id = ?::text))
      and (select count(*) from tags tg where ? and ${sameTenant('tg', 't')} and tg.brand_id = t.brand_id and tg.id = any(?::text[])) = ?`,
    bindings: [
      version,
      tenantScope(ctx, 'br'),
      brand.settingsRevision,
      w.rulesRevision,
      ...checked(set.status, tenantScope(ctx, 's')),
      ...checked(set.assigneeId, accountScope(ctx, 'm')),
      ...checked(set.categoryId, tenantScope(ctx, 'ca')),
      tenantScope(ctx, 'tg'),
      plan.newTags ?? [],
      (plan.newTags ?? []).length,
    ],
  };
  const ticketParts = ticketUpdateParts(
    ctx,
    brand.id,
    [before.id],
    { ...(set as TicketSet), updatedAt: ctx.db.raw('now()') },
    {
      guard,
      wholeRows: true,
      keptTagIds: plan.newTags,
    },
  )!;
  const written: SqlFragment = { sql: 'exists (select 1 from a)', bindings: [] };
  const records = planRecords(ctx, brand.id, plan, changes, firings);
  const entries = entryParts(ctx, brand.id, records.entries, firings, written);
  const announced = records.events.length ? eventsInsert(ctx, records.events, 'a') : null;
  const tagParts = plan.newTags
    ? tagLinkParts(
        ctx,
        plan.newTags,
        plan.newTags.filter((id) => !before.tags.some((g) => g.id === id)),
      )
    : [];
  const parts: SqlFragment[] = [
    ticketParts,
    ...tagParts,
    ...entries.map((p) => ({ sql: `${p.name} as (${p.sql})`, bindings: p.bindings })),
    ...(announced ? [{ sql: `announced as (${announced.sql} returning 1)`, bindings: announced.bindings }] : []),
  ];
  // On Citus the statement runs on the account's worker, where a NOTIFY reaches no dispatcher: they are woken from here after it.
  const citus = await onCitus(ctx);
  const queued = announced ? `, (select 1 from announced${wakeDispatchersJoin(!citus)} limit 1) as "announced"` : '';
  const sql = `with ${parts.map((p) => p.sql).join(', ')}
    select ?${queued} from a as tickets`;
  const bindings = [...parts.flatMap((p) => p.bindings), tickets.viewJson(ctx, '', plan.newTags)] as Knex.RawBinding[];
  const [row] = await runInAccount<Record<string, unknown>>(ctx, ctx.db.raw(sql, bindings));
  if (!row) return null;
  if (citus && row.announced !== null && row.announced !== undefined) await outboxAdded(ctx, 1);
  return JSON.parse(row.view_json as string) as TicketView;
}

/**
 * The CTEs that make the tag links of the tickets written (`a`) exactly `tagIds`: the others
 * deleted, `added` inserted with the copy of the row's new status and priority.
 */
export function tagLinkParts(ctx: TenantCtx, tagIds: readonly string[], added: readonly string[]): SqlFragment[] {
  return [
    {
      sql: `untagged as (delete from ticket_tags tt using a where ? and tt.brand_id = a.brand_id and tt.ticket_id = a.id and not (tt.tag_id = any(?::text[])))`,
      bindings: [tenantScope(ctx, 'tt'), [...tagIds]],
    },
    {
      sql: `tagged as (insert into ticket_tags (account_id, livemode, brand_id, ticket_id, tag_id, status, priority)
        select a.account_id, a.livemode, a.brand_id, a.id, g.tag_id, a.status, a.priority from a cross join unnest(?::text[]) as g (tag_id)
        on conflict do nothing)`,
      bindings: [[...added]],
    },
  ];
}

/** A reference the write sets (a status key, a member or category id), checked in the guard; undefined or null: nothing to check. */
export const checked = (value: unknown, scope: Knex.RawBinding) => {
  const v = value === undefined ? null : (value as string | null);
  return [v, scope, v];
};
