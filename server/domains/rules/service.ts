import type { TenantCtx } from '../../core/context.js';
import { withTx } from '../../core/context.js';
import * as audit from '../../core/audit.js';
import { forgetFound, requireBrand, type Brand } from '../../core/brand.js';
import { isPgError, PG } from '../../core/db.js';
import { badRequest, conflict, notFound } from '../../core/errors.js';
import { ID_PREFIX, newId, normalizeBrandId } from '../../core/ids.js';
import { tenantScope } from '../../core/model.js';
import { part } from '../../core/services.js';
import { compile, type CompiledRule } from './engine.js';
import { Rule } from './model.js';
import { pendingOf, type Pending } from './tallies.js';
import {
  MAX_ENABLED_RULES,
  MAX_RULE_BYTES,
  type Action,
  type Conditions,
  type CreateAutomationInput,
  type CreateTriggerInput,
  type RuleKind,
  type RuleView,
  type TriggerEvent,
  type UpdateAutomationInput,
  type UpdateTriggerInput,
} from './schemas.js';

/**
 * A brand's triggers and automations: their rows, their order, and their compiled form, kept per
 * process for each brand's rules revision. What a rule names is checked against the brand by the
 * flow that saves it (flows/rules.ts); running them is the flows' that write tickets.
 */

export type RuleInput = CreateTriggerInput | CreateAutomationInput;
export type RuleChange = UpdateTriggerInput | UpdateAutomationInput;

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
const latest = (a: Date | null, b: Date | undefined) => (a && b ? (a > b ? a : b) : (a ?? b ?? null));

/** The rule as clients see it; `pending`: its firings not rolled up into its row yet. */
export function toView(row: Rule, pending?: Pending): RuleView {
  return {
    id: row.id,
    object: row.kind,
    brandId: row.brandId,
    name: row.name,
    enabled: row.enabled,
    position: row.position,
    ...(row.kind === 'trigger' ? { on: row.onEvents as TriggerEvent[] } : {}),
    conditions: { all: row.conditions.all ?? [], any: row.conditions.any ?? [] },
    actions: row.actions,
    firedCount: row.firedCount + (pending?.count ?? 0),
    lastFiredAt: iso(latest(row.lastFiredAt, pending?.lastFiredAt)),
    disabledReason: row.disabledReason,
    createdAt: new Date(row.createdAt).toISOString(),
    updatedAt: new Date(row.updatedAt).toISOString(),
  };
}

const KIND_NAME: Record<RuleKind, string> = { trigger: 'Trigger', automation: 'Automation' };
const ofBrand = (ctx: TenantCtx, brandId: string, kind: RuleKind) => Rule.scoped(ctx).where({ 'rules.brandId': brandId, 'rules.kind': kind });

/** The brand's rules as clients see them, their counts exact: the firings not rolled up yet added. */
async function viewsOf(ctx: TenantCtx, brandId: string, rows: readonly Rule[]): Promise<RuleView[]> {
  const pending = rows.length ? await pendingOf(ctx, brandId) : new Map<string, Pending>();
  return rows.map((r) => toView(r, pending.get(r.id)));
}

export async function requireRule(ctx: TenantCtx, brandId: string, kind: RuleKind, id: string, lock = false): Promise<Rule> {
  const query = ofBrand(ctx, normalizeBrandId(brandId), kind).findById(id);
  const row = await (lock ? query.forUpdate() : query);
  if (!row) throw notFound(KIND_NAME[kind]);
  return row;
}

export async function list(ctx: TenantCtx, brandId: string, kind: RuleKind): Promise<{ data: RuleView[] }> {
  const brand = await requireBrand(ctx, brandId);
  const rows = await ofBrand(ctx, brand.id, kind).orderBy([{ column: 'position' }, { column: 'id' }]);
  return { data: await viewsOf(ctx, brand.id, rows) };
}

export async function get(ctx: TenantCtx, brandId: string, kind: RuleKind, id: string): Promise<RuleView> {
  const brand = await requireBrand(ctx, brandId);
  const [view] = await viewsOf(ctx, brand.id, [await requireRule(ctx, brand.id, kind, id)]);
  return view!;
}

/** Every rule write moves the brand's rules revision: creates that remembered the old rules check it. */
async function bumpRevision(tx: TenantCtx, brandId: string): Promise<void> {
  await tx.db.raw('update brands b set rules_revision = b.rules_revision + 1 where ? and b.id = ?', [tenantScope(tx, 'b'), brandId]);
  forgetFound(tx, brandId);
}

function checkSize(conditions: Conditions, actions: readonly Action[]): void {
  if (Buffer.byteLength(JSON.stringify({ conditions, actions })) > MAX_RULE_BYTES)
    throw badRequest(
      `A rule's conditions and actions may take at most ${MAX_RULE_BYTES} bytes as JSON`,
      [{ field: 'actions', message: 'makes the rule too large' }],
      'rule_too_large',
    );
}

async function checkEnabledRoom(tx: TenantCtx, brandId: string, exceptId: string | null): Promise<void> {
  const query = Rule.scoped(tx).where({ 'rules.brandId': brandId, 'rules.enabled': true });
  if (exceptId) query.whereNot('rules.id', exceptId);
  const { n } = (await query.count({ n: '*' }).first()) as unknown as { n: string };
  if (Number(n) >= MAX_ENABLED_RULES)
    throw badRequest(
      `A brand may have at most ${MAX_ENABLED_RULES} enabled triggers and automations`,
      [{ field: 'enabled', message: 'the brand has no room for another enabled rule' }],
      'too_many_rules',
    );
}

const nameTaken = (kind: RuleKind, name: string) => conflict(`A ${kind} named "${name}" already exists in this brand`, 'rule_name_taken');

/** Creates a rule whose references the caller checked. Its position: the one given (the others move down), else last. */
export async function create(ctx: TenantCtx, brandId: string, kind: RuleKind, input: RuleInput): Promise<RuleView> {
  checkSize(input.conditions, input.actions);
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const enabled = input.enabled ?? true;
    if (enabled) await checkEnabledRoom(tx, brand.id, null);
    const { max } = (await ofBrand(tx, brand.id, kind).max('position as max').first()) as unknown as { max: number | null };
    const last = max === null ? 0 : max + 1;
    const position = input.position === undefined ? last : Math.min(input.position, last);
    if (position < last) await ofBrand(tx, brand.id, kind).where('position', '>=', position).increment('position', 1);
    const row = (await Rule.query(tx.db)
      .insert({
        id: newId(ID_PREFIX.rule),
        accountId: tx.accountId,
        livemode: tx.livemode,
        brandId: brand.id,
        kind,
        name: input.name.trim(),
        enabled,
        position,
        onEvents: 'on' in input ? [...input.on] : [],
        conditions: { all: input.conditions.all ?? [], any: input.conditions.any ?? [] },
        actions: input.actions,
        createdBy: tx.actor.id,
        createdAt: new Date(tx.services.now()),
        updatedAt: new Date(tx.services.now()),
      })
      .returning('*')
      .catch((err: unknown) => {
        throw isPgError(err, PG.uniqueViolation) ? nameTaken(kind, input.name.trim()) : err;
      })) as unknown as Rule;
    await bumpRevision(tx, brand.id);
    await audit.record(tx, { brandId: brand.id, entityType: kind, entityId: row.id, event: `${kind}.created`, metadata: { name: row.name } });
    return toView(row);
  });
}

export async function update(ctx: TenantCtx, brandId: string, kind: RuleKind, id: string, input: RuleChange): Promise<RuleView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await requireRule(tx, brand.id, kind, id, true);
    const conditions = input.conditions ? { all: input.conditions.all ?? [], any: input.conditions.any ?? [] } : row.conditions;
    const actions = input.actions ?? row.actions;
    checkSize(conditions, actions);
    const enabled = input.enabled ?? row.enabled;
    if (enabled && !row.enabled) await checkEnabledRoom(tx, brand.id, row.id);
    const patch: Partial<Rule> = {
      name: input.name?.trim() ?? row.name,
      enabled,
      onEvents: 'on' in input && input.on ? [...input.on] : row.onEvents,
      conditions,
      actions,
      // Saved again (checked), or enabled by hand: whatever disabled it is settled.
      disabledReason: enabled ? null : row.disabledReason,
      updatedAt: new Date(tx.services.now()),
    };
    if (input.position !== undefined && input.position !== row.position) {
      const ids = (
        await ofBrand(tx, brand.id, kind)
          .orderBy([{ column: 'position' }, { column: 'id' }])
          .select('id')
      )
        .map((r) => r.id)
        .filter((r) => r !== row.id);
      ids.splice(Math.min(input.position, ids.length), 0, row.id);
      await writeOrder(tx, brand.id, kind, ids);
    }
    const [updated] = (await ofBrand(tx, brand.id, kind)
      .where('rules.id', row.id)
      .patch(patch)
      .returning('*')
      .catch((err: unknown) => {
        throw isPgError(err, PG.uniqueViolation) ? nameTaken(kind, patch.name!) : err;
      })) as unknown as Rule[];
    if (!updated) throw notFound(KIND_NAME[kind]);
    await bumpRevision(tx, brand.id);
    const changes = audit.changesBetween(toView(row), toView(updated), ['name', 'enabled', 'position', 'on', 'conditions', 'actions']);
    await audit.record(tx, { brandId: brand.id, entityType: kind, entityId: row.id, event: `${kind}.updated`, changes, metadata: { name: updated.name } });
    const [view] = await viewsOf(tx, brand.id, [updated]);
    return view!;
  });
}

export async function remove(ctx: TenantCtx, brandId: string, kind: RuleKind, id: string): Promise<RuleView> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const row = await requireRule(tx, brand.id, kind, id, true);
    await Rule.scoped(tx).where('rules.id', row.id).delete();
    await ofBrand(tx, brand.id, kind).where('position', '>', row.position).decrement('position', 1);
    await bumpRevision(tx, brand.id);
    await audit.record(tx, { brandId: brand.id, entityType: kind, entityId: row.id, event: `${kind}.deleted`, metadata: { name: row.name } });
    const [view] = await viewsOf(tx, brand.id, [row]);
    return view!;
  });
}

async function writeOrder(tx: TenantCtx, brandId: string, kind: RuleKind, ids: readonly string[]): Promise<void> {
  await tx.db.raw(
    `update rules r set position = o.position - 1 from unnest(?::text[]) with ordinality as o (id, position)
    where ? and r.brand_id = ? and r.kind = ? and r.id = o.id`,
    [[...ids], tenantScope(tx, 'r'), brandId, kind],
  );
}

/** `ids` must be every rule of the kind, each once: they take positions 0, 1, … in that order. */
export async function reorder(ctx: TenantCtx, brandId: string, kind: RuleKind, ids: readonly string[]): Promise<{ data: RuleView[] }> {
  return withTx(ctx, async (tx) => {
    const brand = await requireBrand(tx, brandId);
    const rows = await ofBrand(tx, brand.id, kind)
      .orderBy([{ column: 'position' }, { column: 'id' }])
      .forUpdate();
    const known = new Set(rows.map((r) => r.id));
    const unknown = ids.find((i) => !known.has(i));
    if (unknown !== undefined || ids.length !== rows.length)
      throw badRequest(
        `ids must list every ${kind} of the brand once (${rows.length}), in the new order`,
        [{ field: 'ids', message: unknown !== undefined ? `${unknown} is not a ${kind} of this brand` : `must list all ${rows.length}` }],
        'invalid_order',
      );
    await writeOrder(tx, brand.id, kind, ids);
    await bumpRevision(tx, brand.id);
    await audit.record(tx, {
      brandId: brand.id,
      entityType: kind,
      entityId: brand.id,
      event: `${kind}.reordered`,
      changes: [{ field: 'order', from: rows.map((r) => r.id), to: [...ids] }],
    });
    return { data: await viewsOf(tx, brand.id, await ofBrand(tx, brand.id, kind).orderBy([{ column: 'position' }, { column: 'id' }])) };
  });
}

/** A brand's enabled rules of each kind, compiled, as of one rules revision. */
export interface BrandRules {
  revision: number;
  triggers: readonly CompiledRule[];
  automations: readonly CompiledRule[];
}

const NO_RULES: BrandRules = { revision: 0, triggers: [], automations: [] };
const MAX_BRANDS_REMEMBERED = 10_000;
const compiled = part('rules.compiled', () => new Map<string, BrandRules>());
const brandKey = (ctx: TenantCtx, brandId: string) => `${ctx.accountId}:${ctx.livemode}:${normalizeBrandId(brandId)}`;

/**
 * The brand's rules as this process last compiled them; none seen: none assumed (revision 0, a
 * brand that never had a rule). A create that runs on them checks the brand still has that revision.
 */
export function rememberedRules(ctx: TenantCtx, brandId: string): BrandRules {
  return ctx.services.get(compiled).get(brandKey(ctx, brandId)) ?? NO_RULES;
}

/** The brand's rules at the revision of its row (read in the caller's transaction): compiled once per revision. */
export async function rulesOf(ctx: TenantCtx, brand: Pick<Brand, 'id' | 'rulesRevision'>): Promise<BrandRules> {
  const known = ctx.services.get(compiled);
  const key = brandKey(ctx, brand.id);
  const seen = known.get(key);
  if (seen && seen.revision === brand.rulesRevision) return seen;
  if (brand.rulesRevision === 0) return NO_RULES;
  const rows = await Rule.scoped(ctx)
    .where({ 'rules.brandId': brand.id, 'rules.enabled': true })
    .orderBy([{ column: 'position' }, { column: 'id' }]);
  const entry: BrandRules = {
    revision: brand.rulesRevision,
    triggers: rows.filter((r) => r.kind === 'trigger').map(compile),
    automations: rows.filter((r) => r.kind === 'automation').map(compile),
  };
  if (known.size >= MAX_BRANDS_REMEMBERED) known.clear();
  known.set(key, entry);
  return entry;
}

/** Disables a rule that names something since deleted, saying why, instead of failing the tickets it runs on. */
export async function disable(ctx: TenantCtx, brandId: string, rule: { id: string; name: string }, reason: string): Promise<void> {
  await withTx(ctx, async (tx) => {
    const n = await Rule.scoped(tx)
      .where({ 'rules.brandId': brandId, 'rules.id': rule.id, 'rules.enabled': true })
      .patch({ enabled: false, disabledReason: reason, updatedAt: new Date(tx.services.now()) });
    if (!n) return;
    await bumpRevision(tx, brandId);
    await audit.record(tx, {
      brandId,
      entityType: 'rule',
      entityId: rule.id,
      event: 'rule.disabled',
      changes: [{ field: 'enabled', from: true, to: false }],
      metadata: { name: rule.name, reason },
    });
  });
}
